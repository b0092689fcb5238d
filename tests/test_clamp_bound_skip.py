"""The clamp reads no message whose guaranteed bound is within its limit.

With a byte-level BPE counting (every local family), a tool result of at most ``limit``
UTF-8 bytes is at most ``limit`` tokens, and a message's bound holds every byte of its
results. So when no message that arrived has a bound over the limit, the clamp has
nothing to read (a cold fit of 1,000 turns spent a fifth of its time reading them, and
every warm send read its new turn). These tests hold the bound to that, in every format,
and the fits to what reading every message gives.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import windowguard as wg
from tests.edit_fixtures import anthropic_transcript, chat_transcript, responses_transcript
from tests.exact_tokenizers import require
from tests.transcripts import FORMATS, plans, render
from windowguard.accounting.estimate import Estimator
from windowguard.core.edits.parts import scan_refs
from windowguard.pipeline import _editing
from windowguard.pipeline._transcript import update_transcript

FAMILIES = ("o200k", "cl100k", "llama3", "qwen", "mistral")

_PARTS = st.text(
    alphabet=st.sampled_from('ab \n\t"\\{}[]:,0123456789éü中文🙂\x00\x1f'), max_size=120
)


def _results_bounded(messages: list[Any], fmt: str, family: str, system: Any = None) -> int:
    """Assert every tool result's bytes are within its message's bound; the results."""
    run = update_transcript(None, messages, fmt, system, Estimator(family))  # type: ignore[arg-type]
    seg = run.index.segmentation()
    _, results = scan_refs(run.effective, fmt, seg.head_stop, seg.turn_starts)  # type: ignore[arg-type]
    for ref in results:
        shown = len(ref.text.encode("utf-8", "surrogatepass"))
        assert shown <= run.ledger.entries[ref.index].bound, (ref.index, ref.text[:80])
    return len(results)


def _list_results(fmt: str, texts: list[str]) -> list[Any]:
    """One turn whose result is a list of text parts (joined with newlines when read)."""
    parts = [{"type": "text", "text": t} for t in texts]
    if fmt == "openai_chat":
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        return [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": parts},
        ]
    if fmt == "anthropic":
        image = {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}
        return [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": [*parts, image]},
                    {"type": "tool_result", "tool_use_id": "t1", "content": texts[0]},
                ],
            },
        ]
    output = [{"type": "input_text", "text": t} for t in texts]
    return [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "f1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "f1", "output": output},
    ]


@settings(max_examples=60, deadline=None)
@given(plan=plans(max_turns=6), fmt=st.sampled_from(FORMATS), family=st.sampled_from(FAMILIES))
def test_a_message_bound_holds_the_bytes_of_its_results(plan: Any, fmt: str, family: str) -> None:
    messages, system = render(plan, fmt)
    _results_bounded(messages, fmt, family, system)


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(_PARTS, min_size=1, max_size=5),
    fmt=st.sampled_from(FORMATS),
    family=st.sampled_from(FAMILIES),
)
def test_a_bound_holds_results_made_of_parts(texts: list[str], fmt: str, family: str) -> None:
    # parts are read joined with newlines: the bound holds those too
    assert _results_bounded(_list_results(fmt, texts), fmt, family) >= 1


@pytest.mark.parametrize("family", FAMILIES)
def test_a_bound_holds_the_sdk_objects_results(family: str) -> None:
    assert _results_bounded(chat_transcript(), "openai_chat", family) > 0
    assert _results_bounded(anthropic_transcript(), "anthropic", family) > 0
    for reasoning in (False, True):
        assert _results_bounded(responses_transcript(reasoning=reasoning), "responses", family) > 0


def _turn(i: int, lines: int) -> list[dict[str, Any]]:
    call = {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    body = "\n".join(f"{i:03d}:{n:04d} value = compute({n}, {i})" for n in range(lines))
    return [
        {"role": "assistant", "content": f"Step {i}", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": body},
    ]


def _run(sizes: list[int], clamp: int) -> tuple[list[wg.Fit], list[int]]:
    """A loop in a 32k window with o200k counting: the fits, and how many messages the
    edit stages read on each send."""
    mgr = wg.ContextWindowManager(
        model_info=wg.ModelInfo(32_768, tokenizer="o200k"),
        edits=[wg.ClampToolResults(max_tokens=clamp), wg.ClearToolResults(keep=2)],
    )
    messages: list[Any] = [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "Fix it."},
    ]
    fits, reads = [], []
    real = _editing.scan_refs
    read: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        read.append(len(args[0]))
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_editing, "scan_refs", counted)
        for i, lines in enumerate(sizes):
            messages += _turn(i, lines)
            read.clear()
            fits.append(mgr.fit(messages, max_tokens=1_024, last_usage=wg.NO_USAGE))
            reads.append(sum(read))
    return fits, reads


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=30),
    clamp=st.integers(min_value=100, max_value=3_000),
)
def test_skipping_the_reading_never_changes_a_fit(sizes: list[int], clamp: int) -> None:
    require("o200k")
    kept, _ = _run(sizes, clamp)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_editing, "_shown_within", lambda ctx, start, limit: False)
        again, _ = _run(sizes, clamp)
    assert [f.messages for f in kept] == [f.messages for f in again]
    assert [f.edits for f in kept] == [f.edits for f in again]
    assert [f.estimated_tokens for f in kept] == [f.estimated_tokens for f in again]


def test_a_send_whose_new_turn_is_small_reads_nothing() -> None:
    require("o200k")
    # 20 lines a result (about 300 tokens) under a clamp of 1,000 tokens; the 6th
    # result is 400 lines (about 6,000 tokens): only that send reads, and clamps it.
    fits, reads = _run([20] * 5 + [400] + [20] * 3, 1_000)
    assert reads[1:5] == [0, 0, 0, 0]
    assert reads[5] > 0
    assert [e.kind for e in fits[5].edits] == ["clamp"]
    assert reads[6:] == [0, 0, 0]
    assert not any(f.edits for f in fits[6:])
