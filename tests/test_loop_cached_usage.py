"""A ToolLoop against a server whose ``prompt_tokens`` leave out the cached tokens it
reports beside them (issue 18: "Usage that excludes cached tokens is trusted as exact").

The loop hands its manager both numbers, as the provider reported them; the manager
notices the report is short of what it already measured or counted (a
``usage_excludes_cached`` event) and adds them from then on. Without that, each report
under-measured the appended turns and the loop overflowed once the window was full.
Through the official openai SDK against the emulator, which counts every prompt exactly.
"""

from __future__ import annotations

from typing import Any

import pytest

import windowguard as wg
from windowguard.core.events import UsageExcludesCached
from windowguard.emulator import Emulator, EmulatorRequest, Reply, ToolCall, UsagePlan

from .exact_tokenizers import require, vocabulary

WINDOW = 16_384
PAGE = " ".join(f"The release notes say item {n} changed in module {n % 13}." for n in range(60))


@pytest.fixture(autouse=True)
def _o200k() -> None:
    require("o200k")


@wg.tool
def fetch(page: int) -> str:
    """Fetch one page of the release notes.

    Args:
        page: the page number.
    """
    return f"page {page}: {PAGE}"


def _reader(request: EmulatorRequest) -> Reply:
    n = request.call_number
    return Reply(
        text=f"Reading page {n}.",
        tool_calls=(ToolCall(name="fetch", arguments={"page": n}),),
    )


@pytest.mark.parametrize("edits", [None, ()], ids=["default-edits", "drop-only"])
def test_a_loop_whose_usage_leaves_out_cached_tokens_never_overflows(edits: Any) -> None:
    with Emulator(
        flavor="vllm",
        context_window=WINDOW,
        tokenizer=str(vocabulary("o200k")),
        scenario=_reader,
        usage=UsagePlan(cache="excluded"),
    ) as emu:
        provider = wg.OpenAIChatProvider("emulated", base_url=emu.base_url, api_key="k")
        try:
            manager = wg.ContextWindowManager(
                model_info=wg.ModelInfo(WINDOW, tokenizer="o200k"), edits=edits
            )
            loop = wg.ToolLoop(
                provider, tools=[fetch], manager=manager, max_iterations=60, max_tokens=1_024
            )
            messages = [
                {"role": "system", "content": "You read release notes."},
                {"role": "user", "content": "Read every page and summarise the changes."},
            ]
            result = loop.run(messages)
        finally:
            provider.close()
        records = emu.records
    assert result.termination is wg.TerminationReason.MAX_ITERATIONS, result.termination
    assert [r.status for r in records] == [200] * len(records)
    assert max(r.prompt_tokens for r in records) + 1_024 <= WINDOW
    # the window filled (with the default edits, to where they clear old results: 55 %
    # of the budget by the manager's estimate, which errs high), and the server did
    # leave cached tokens out of its reports
    filled = 0.7 if edits == () else 0.45
    assert max(r.prompt_tokens for r in records) > filled * (WINDOW - 1_024)
    if edits is None:
        assert any(e.edit == "clear" for e in result.events if isinstance(e, wg.ContextEdited))
    noticed = [e for e in result.events if isinstance(e, UsageExcludesCached)]
    assert len(noticed) == 1, noticed
    assert noticed[0].cached_tokens > 0 and noticed[0].reported_tokens > 0
