"""A request that ends before the transcript does is counted from what it holds.

The ledger's spans may reach past a request's end: the transcript grew after it was
fitted, and a later fit measured the new messages (a remote count near the edge). The
request's count must take nothing from beyond its end, and read a span it holds only
part of as a cut span (its share, never more than its members' bounds), not whole.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

import windowguard as wg
from windowguard.accounting.ledger import BaseCosts, Entry, Factors, Ledger
from windowguard.accounting.remote import CountQuery
from windowguard.accounting.templates import count_prompt
from windowguard.core.shapes import Segment, Shape

from .exact_tokenizers import MemoCounter, require

FACTORS = Factors(heuristic=1.0, local=1.0)
COSTS = BaseCosts(fixed_raw=0, fixed_bound=0)
KEY = ("tools", ())


def _ledger(*lengths: int) -> Ledger:
    """A ledger of a head of 10 and messages of these estimates (bounds twice that)."""
    ledger = Ledger()
    entries = []
    for length in (10, *lengths):
        shape = Shape(kind="user", segments=(Segment(content_class="prose", text="x" * length),))
        entries.append(Entry({"content": "x" * length}, shape, length, 2 * length))
    ledger.append(entries)
    return ledger


def _observe(ledger: Ledger, end: int, total: int) -> None:
    ledger.observe(
        total=total,
        key=KEY,
        head_stop=1,
        kept_from=1,
        end=end,
        costs=COSTS,
        factors=FACTORS,
        rewrites_history=False,
    )


def _count(ledger: Ledger, end: int) -> Any:
    return ledger.count(key=KEY, head_stop=1, kept_from=1, end=end, costs=COSTS, factors=FACTORS)


def test_spans_after_the_end_are_not_counted() -> None:
    ledger = _ledger(20, 20, 30, 30)
    _observe(ledger, 1, 10)  # the head
    _observe(ledger, 3, 50)  # [1, 3): 40
    _observe(ledger, 5, 110)  # [3, 5): 60
    found = _count(ledger, 3)  # the request before [3, 5) arrived
    assert found.exact
    assert found.best == 50


def test_a_span_reaching_past_the_end_is_read_in_part() -> None:
    ledger = _ledger(20, 20, 30, 30)
    _observe(ledger, 1, 10)
    _observe(ledger, 5, 110)  # [1, 5) measured as one: 100
    found = _count(ledger, 3)
    assert not found.exact
    assert found.best == 10 + 40  # its share: 100 x 40 / 100 of the estimates
    assert found.upper == 10 + 2 * 40  # its members' bounds


class _Exact:
    """A count API that counts exactly (o200k under OpenAI's accounting)."""

    name = "exact"

    def __init__(self, counter: Any) -> None:
        self._counter = counter

    def count(self, query: CountQuery) -> int:
        tools = list(query.tools) or None
        return count_prompt(self._counter, list(query.messages), tools, template="openai")

    async def acount(self, query: CountQuery) -> int:
        return self.count(query)


@pytest.fixture(scope="module")
def o200k() -> Any:
    return MemoCounter(require("o200k"))


def test_a_refusal_without_numbers_assumes_a_window_the_refused_request_needed(
    o200k: Any,
) -> None:
    # The refit counts the refused request again, after its own remote count measured a
    # span reaching past that request's end. Before: that span was counted whole and the
    # spans after the end too, the refused request at 11,348 tokens for 12,053 exact, and
    # the window assumed below what the refused request needed.
    info = wg.ModelInfo(context_window=32_768, max_output_tokens=4_096)
    mgr = wg.ContextWindowManager(model="acme", model_info=info, counter=_Exact(o200k), edits=())
    messages: list[Any] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
    ]
    for _ in range(4):
        messages.append({"role": "assistant", "content": "a " * 1_500})
        messages.append({"role": "user", "content": "u " * 1_500})
    fit = mgr.fit(messages, max_tokens=4_096)
    needed = count_prompt(o200k, fit.messages, None, template="openai") + fit.max_tokens
    mgr.observe_overflow()  # refused, without numbers
    messages.append({"role": "assistant", "content": "b " * 3_000})
    messages.append({"role": "user", "content": "v " * 3_000})
    logging.disable(logging.WARNING)
    try:
        mgr.fit(messages, max_tokens=4_096, last_usage=wg.NO_USAGE)
    finally:
        logging.disable(logging.NOTSET)
    assert mgr.context_window >= needed - 1
