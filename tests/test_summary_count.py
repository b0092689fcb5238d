"""A summary sent after the head is counted like any other part of the request.

The fit's count (``estimated_tokens``, the upper count decisions rest on) and its
``max_tokens`` must hold the summary message too; the provider here counts exactly
(o200k under OpenAI's accounting) and reports what it counted.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

import windowguard as wg
from windowguard.accounting.templates import count_prompt
from windowguard.core.events import UsageMismatch

from .exact_tokenizers import MemoCounter, require

WINDOW = 16_384
HEAD = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]


@pytest.fixture(scope="module")
def o200k() -> Any:
    return MemoCounter(require("o200k"))


def _turn(i: int, lines: int = 60) -> list[dict[str, Any]]:
    call = {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/m{i}.py"})},
    }
    output = "\n".join(
        f"{n:05d} value_{(n * 7919 + i) % 10**6} = compute({n})" for n in range(lines)
    )
    return [
        {"role": "assistant", "content": f"Step {i}", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": output},
    ]


def _summarizer(facts: int) -> Any:
    def summarize(turns: Any, previous: Any) -> str:
        return "\n".join(
            f"- {k}: src/module_{k}.py defines handler_{k}; error code E{k * 7919 % 10007}"
            for k in range(facts)
        )

    return summarize


@pytest.mark.parametrize("facts", [150, 400])
def test_the_summary_is_counted_in_the_fit(o200k: Any, facts: int) -> None:
    # Before: the summary was sent but never counted: estimated 9.3k for a request of
    # 13.1k exact tokens, and max_tokens sized into the difference.
    info = wg.ModelInfo(context_window=WINDOW, max_output_tokens=1_024, tokenizer="o200k")
    mgr = wg.ContextWindowManager(
        model_info=info, edits=[wg.Summarize(_summarizer(facts), keep_turns=2)]
    )
    messages = list(HEAD)
    usage: object = None
    summarized = 0
    logging.disable(logging.WARNING)
    try:
        for i in range(30):
            messages += _turn(i)
            fit = mgr.fit(messages, last_usage=usage)
            exact = count_prompt(o200k, fit.messages, None, template="openai")
            summarized += any(e.kind == "summarize" for e in fit.edits)
            assert (fit.upper_tokens or fit.estimated_tokens) >= exact
            if fit.exact:
                assert fit.estimated_tokens == exact
            assert exact + fit.max_tokens <= WINDOW
            # the local exact count of the request (the report's cross-check) holds it too
            assert not any(isinstance(e, UsageMismatch) for e in fit.events)
            usage = {"prompt_tokens": exact, "completion_tokens": 10, "total_tokens": exact + 10}
    finally:
        logging.disable(logging.NOTSET)
    assert summarized, "the summary stage never ran: the test checks nothing"


def test_the_summary_is_in_the_estimate_without_an_exact_source() -> None:
    # With the heuristic alone the best estimate decides (ADR-107): it must hold the
    # summary. Before: fit.estimated_tokens 9,499 for a request the estimator sized at
    # 21,498, over the 16k window.
    info = wg.ModelInfo(context_window=WINDOW, max_output_tokens=1_024)
    mgr = wg.ContextWindowManager(
        model_info=info,
        counter="heuristic",
        edits=[wg.Summarize(_summarizer(60), keep_turns=1)],
    )
    estimator = wg.Estimator()
    messages = list(HEAD)
    summarized = 0
    logging.disable(logging.WARNING)
    try:
        for i in range(30):
            messages += _turn(i)
            fit = mgr.fit(messages, last_usage=wg.NO_USAGE if i else None)
            summarized += any(e.kind == "summarize" for e in fit.edits)
            assert fit.estimated_tokens >= estimator.count(fit.messages)
            assert fit.estimated_tokens <= fit.budget
    finally:
        logging.disable(logging.NOTSET)
    assert summarized, "the summary stage never ran: the test checks nothing"
