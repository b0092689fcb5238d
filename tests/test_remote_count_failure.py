"""When the count API is the only exact source and it fails for a send, the ledger and the
estimates decide (decision 0004), as with no exact source: a refusal does not rest on
the UTF-8 byte bound alone.

Before (review of the accounting, item 8): a Claude model whose ``count_tokens`` timed
out refused an 800-word tool result at ~8,058 tokens (the bound) in an 8k window, which
the heuristic alone sends (~5,966): one transient timeout ended a run
CONTEXT_TRUNCATED.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

import windowguard as wg
from windowguard.accounting.remote import CountQuery
from windowguard.core.events import RemoteCountFailed

WINDOW = 8_192


class _Down:
    """A count API that times out."""

    name = "anthropic"

    def count(self, query: CountQuery) -> int:
        raise TimeoutError("count endpoint timed out")

    async def acount(self, query: CountQuery) -> int:
        raise TimeoutError("count endpoint timed out")


def _read(words: int) -> list[dict[str, Any]]:
    rng = random.Random(1)
    vocabulary = ["information", "understanding", "considerable", "development", "the", "of"]
    text = " ".join(rng.choice(vocabulary) for _ in range(words))
    return [
        {"role": "user", "content": [{"type": "text", "text": "read it"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": text}],
        },
    ]


def _manager(counter: Any) -> wg.ContextWindowManager:
    info = wg.ModelInfo(context_window=WINDOW, max_output_tokens=1_024, tokenizer="claude")
    return wg.ContextWindowManager(model_info=info, counter=counter, edits=())


def test_a_failed_count_leaves_the_refusal_to_the_estimates() -> None:
    messages = _read(850)
    fit = _manager(_Down()).fit(messages, max_tokens=1_024)
    assert any(isinstance(e, RemoteCountFailed) for e in fit.events)
    heuristic = _manager("heuristic").fit(messages, max_tokens=1_024)
    assert not fit.exact
    assert fit.estimated_tokens == heuristic.estimated_tokens
    assert fit.max_tokens == heuristic.max_tokens == 1_024


def test_what_the_estimates_refuse_is_still_refused() -> None:
    messages = _read(1_300)
    with pytest.raises(wg.ContextTruncatedError):
        _manager("heuristic").fit(messages, max_tokens=1_024)
    with pytest.raises(wg.ContextTruncatedError) as refused:
        _manager(_Down()).fit(messages, max_tokens=1_024)
    assert not refused.value.exact


def test_a_send_the_bound_keeps_is_still_shrunk_by_the_bound() -> None:
    """Only a refusal falls back: a send the bound keeps has its max_tokens from it."""
    fit = _manager(_Down()).fit(_read(700), max_tokens=1_024)
    assert fit.upper_tokens > fit.estimated_tokens
    assert fit.max_tokens is not None
    assert fit.upper_tokens + fit.max_tokens <= WINDOW
