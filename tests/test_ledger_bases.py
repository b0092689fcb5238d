"""A base's measurement belongs to that base alone.

A request's base (framing, system argument, tools, the head and a summary after it) is
named by a key; what a report measured of it is kept under that key. A different base
must never be counted with that measurement: not a head that merely took a freed head's
place in memory. The provider here counts exactly (o200k under OpenAI's accounting).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

import windowguard as wg
from windowguard.accounting.ledger import BaseCosts, BaseKey, BaseValue, Entry, Factors, Ledger
from windowguard.accounting.templates import count_prompt
from windowguard.core.shapes import Segment, Shape

from .exact_tokenizers import MemoCounter, require


@pytest.fixture(scope="module")
def o200k() -> Any:
    return MemoCounter(require("o200k"))


def _exact(counter: Any, messages: Sequence[Any], tools: Any = None) -> int:
    return count_prompt(counter, list(messages), tools, template="openai")


def _check(fit: wg.Fit, exact: int, window: int) -> None:
    assert (fit.upper_tokens or fit.estimated_tokens) >= exact, "a decision count fell short"
    if fit.exact:
        assert fit.estimated_tokens == exact, "a count called exact was not"
    assert exact + fit.max_tokens <= window, "the request and its reply overflow the window"


def test_a_new_head_never_inherits_a_freed_heads_measurement(o200k: Any) -> None:
    # Each send builds its system prompt anew (a fresh dict), so the transcript is rebuilt
    # and the previous head's entry is freed. Keyed by id(), the next head's entry often
    # took the freed one's address and inherited its measured tokens as exact: a 12k
    # system prompt counted at 30 tokens, max_tokens sized into the whole window.
    window = 32_768
    info = wg.ModelInfo(context_window=window, max_output_tokens=window, tokenizer="o200k")
    mgr = wg.ContextWindowManager(model_info=info, edits=())
    task = {"role": "user", "content": "Summarise the notes."}
    usage: object = None
    for send in range(40):
        notes = "note " * (12_000 if send % 3 == 2 else 10)
        messages = [{"role": "system", "content": f"v{send} {notes}"}, task]
        fit = mgr.fit(messages, max_tokens=None, last_usage=usage)
        exact = _exact(o200k, fit.messages)
        _check(fit, exact, window)
        usage = exact


def _entry(text: str, kind: Any = "user", bound: int | None = None) -> Entry:
    """An entry whose heuristic estimate is its length (and its bound, unless given)."""
    shape = Shape(kind=kind, segments=(Segment(content_class="prose", text=text),))
    return Entry({"role": kind, "content": text}, shape, len(text), bound or len(text))


def test_a_rebuild_keeps_only_the_bases_its_head_can_hold() -> None:
    head, other = _entry("system prompt", "system"), _entry("another system prompt", "system")
    turns = [_entry("task"), _entry("answer", "assistant")]
    old = Ledger()
    old.append([head, *turns])
    kept = BaseKey("tools", (head,))
    gone = BaseKey("tools", (other,))
    old.bases[kept] = BaseValue(40)
    old.bases[gone] = BaseValue(50)
    same_head = Ledger()
    same_head.adopt([head, *turns, _entry("more")], old)
    assert list(same_head.bases) == [kept]
    new_head = Ledger()
    new_head.adopt([other, *turns], old)
    assert list(new_head.bases) == [gone]  # the old head's base can never be held again


# -- a span measured together with a base ------------------------------------------------

TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
}
LIST = {
    "type": "function",
    "function": {"name": "ls", "description": "List.", "parameters": {"type": "object"}},
}


def _history() -> list[dict[str, Any]]:
    """A run that starts with history: a long prose system prompt, then six dense tool
    results. Its first report measures the base and every turn together, split between
    them by the heuristic's weights, which over-count the prose against the hex."""
    words = ["the", "house", "river", "quickly", "between", "system", "under"]
    system = " ".join(words[(i * 7 + i // 3) % len(words)] for i in range(6_000))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "task"},
    ]
    for i in range(6):
        hex_digits = "".join("0123456789abcdef"[(i * 131 + n * n * 7) % 16] for n in range(3_000))
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "a"}'},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": hex_digits})
    return messages


@pytest.mark.parametrize("change", ["tools", "head"])
def test_a_span_measured_with_its_base_is_exact_only_beside_that_base(
    o200k: Any, change: str
) -> None:
    # Before: the span kept the report minus the base's *proportional* share; with other
    # tools (ToolLoop's synthesis send drops them) or another head, it was still counted
    # whole and exact: upper 12,864 for a request of 16,472 exact tokens, max_tokens
    # sized into the window past it.
    window = 131_072
    info = wg.ModelInfo(context_window=window, max_output_tokens=window, tokenizer="o200k")
    mgr = wg.ContextWindowManager(model_info=info, edits=())
    messages = _history()
    fit = mgr.fit(messages, tools=[TOOL], max_tokens=100)
    exact = _exact(o200k, fit.messages, [TOOL])
    _check(fit, exact, window)
    later = [*messages, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    tools = [TOOL]
    if change == "tools":
        tools = [TOOL, LIST]
    else:
        later[0] = {"role": "system", "content": "You read files."}
    fit = mgr.fit(later, tools=tools, max_tokens=120_000, last_usage=exact)
    _check(fit, _exact(o200k, fit.messages, tools), window)


def test_a_bases_share_is_exact_only_while_its_whole_span_is_known() -> None:
    # Measured together, a base and its span add up only as a pair. A report that
    # measures the span's messages again (an edit made a gap before them, and a turn
    # was appended) must not take the base's share as exact: the span goes, and the next
    # count would take the base at its estimate beside a remainder made from the share.
    # Truth: the head costs 100 tokens, [1, 3) 40, [3, 5) 200, [5, 6) 30, the tools
    # nothing; the estimates (the lengths) weigh the head far above [3, 5).
    head = _entry("h" * 100, "system", bound=120)
    first, second = _entry("a" * 20, bound=30), _entry("b" * 20, "assistant", bound=30)
    third, fourth = _entry("c" * 10, bound=150), _entry("d" * 10, "assistant", bound=150)
    ledger = Ledger()
    ledger.append([head, first, second, third, fourth, _entry("e" * 10, bound=50)])
    factors = Factors(heuristic=1.0, local=1.0)
    costs = BaseCosts(fixed_raw=0, fixed_bound=0)
    key, other = BaseKey("tools", (head,)), BaseKey("more tools", (head,))

    def observe(key: BaseKey, end: int, total: int) -> None:
        ledger.observe(
            total=total,
            key=key,
            head_stop=1,
            kept_from=1,
            end=end,
            costs=costs,
            factors=factors,
            rewrites_history=False,
        )

    def upper(key: BaseKey, end: int) -> int:
        found = ledger.count(
            key=key, head_stop=1, kept_from=1, end=end, costs=costs, factors=factors
        )
        return found.best if found.exact else found.upper

    observe(key, 1, 100)  # the head alone: measured exactly
    observe(key, 3, 140)  # then the first turn
    observe(other, 5, 340)  # other tools: that base with [3, 5), split by weight
    ledger.replaced([1])  # an edit: [1, 3) is unmeasured again
    assert upper(other, 6) >= 370
    observe(other, 6, 370)
    assert upper(other, 6) >= 370
