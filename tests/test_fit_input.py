"""Bad input to fit() gets a clear, typed error that names the problem (issue 11, 6-7)."""

from __future__ import annotations

import collections
from typing import Any

import pytest

import windowguard as wg

CHAT = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the failing test."},
]


def _manager(window: int = 8_000, **kw: Any) -> wg.ContextWindowManager:
    return wg.ContextWindowManager(model_info=wg.ModelInfo(window, tokenizer="o200k"), **kw)


def test_an_empty_transcript_is_refused() -> None:
    with pytest.raises(wg.InvalidTranscriptError, match="empty"):
        _manager().fit([])


@pytest.mark.parametrize("bad", [["hello"], [1, 2, 3], [None], [CHAT[0], b"bytes"]])
def test_things_that_are_not_messages_are_refused_by_position(bad: list[Any]) -> None:
    with pytest.raises(wg.InvalidTranscriptError, match="expected a message") as caught:
        _manager().fit(bad)
    assert caught.value.index == next(i for i, m in enumerate(bad) if not isinstance(m, dict))


@pytest.mark.parametrize("edits", [(), None], ids=["drop only", "default edits"])
def test_any_sequence_works_deque_and_tuple_included(edits: tuple[Any, ...] | None) -> None:
    turns: list[dict[str, Any]] = []
    for i in range(40):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        turns += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "result " * 200},
        ]
    mine = {id(m) for m in CHAT + turns}

    def own(fit: wg.Fit) -> list[int | None]:
        """The caller's objects by identity; an edited copy (new each fit) as None."""
        return [id(m) if id(m) in mine else None for m in fit.messages]

    listed = _manager(4_000, edits=edits).fit(CHAT + turns, max_tokens=200)
    # pruning (or editing) is needed, which slices (or indexes) the input
    if edits == ():
        assert listed.dropped_turns > 0 and None not in own(listed)
    else:
        assert listed.dropped_turns > 0 or any(e.kind != "drop" for e in listed.edits)
        assert None in own(listed)
    for shape in (tuple, collections.deque):
        fit = _manager(4_000, edits=edits).fit(shape(CHAT + turns), max_tokens=200)
        assert fit.messages == listed.messages
        assert own(fit) == own(listed)


def test_circular_or_too_deep_content_is_a_windowguard_error() -> None:
    circular: dict[str, Any] = {"type": "custom_part", "data": "x"}
    circular["self"] = circular
    message = {"role": "user", "content": [circular]}
    with pytest.raises(wg.InvalidTranscriptError) as caught:
        _manager().fit([CHAT[0], message])
    assert caught.value.index == 1
    deep: Any = "leaf"
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(wg.WindowGuardError):
        _manager().fit([CHAT[0], {"role": "user", "content": [{"type": "json", "v": deep}]}])


@pytest.mark.parametrize(
    "system",
    [{"type": "text", "text": "Be terse."}, ["Be terse."], [1, 2], b"Be terse.", 42],
)
def test_a_mistyped_anthropic_system_is_named(system: Any) -> None:
    mgr = wg.ContextWindowManager(model_info=wg.ModelInfo(8_000, tokenizer="claude"))
    for strict in (False, True):
        mgr.strict = strict
        with pytest.raises(wg.InvalidTranscriptError, match="system"):
            mgr.fit([{"role": "user", "content": "hi"}], system=system, format="anthropic")


def test_a_well_typed_system_is_counted() -> None:
    mgr = wg.ContextWindowManager(model_info=wg.ModelInfo(8_000, tokenizer="claude"))
    plain = mgr.fit([{"role": "user", "content": "hi"}], format="anthropic").estimated_tokens
    fit = mgr.fit(
        [{"role": "user", "content": "hi"}],
        system=[{"type": "text", "text": "You are a careful reviewer. " * 50}],
        format="anthropic",
    )
    assert fit.estimated_tokens > plain + 200


@pytest.mark.parametrize(
    ("option", "value"),
    [("floor", 0), ("floor", -5), ("floor", 1.5), ("strict", "yes"), ("tokenizer", 3)],
)
def test_bad_constructor_arguments_are_refused_at_once(option: str, value: Any) -> None:
    with pytest.raises(wg.ConfigurationError, match=option):
        _manager(**{option: value})


class _Uncomparable(dict):  # type: ignore[type-arg]
    """A message whose == raises, as content holding arrays does."""

    def __eq__(self, other: object) -> bool:
        raise ValueError("The truth value of an array with more than one element is ambiguous")

    __hash__ = None  # type: ignore[assignment]


def test_a_replaced_message_whose_equality_raises_is_sized_again() -> None:
    mgr = wg.ContextWindowManager(model_info=wg.ModelInfo(50_000, tokenizer="o200k"))
    messages = [
        _Uncomparable(role="system", content="s"),
        {"role": "user", "content": "task"},
    ]
    mgr.fit(messages, max_tokens=100)
    messages[0] = _Uncomparable(role="system", content="s " * 500)
    grown = mgr.fit(messages, max_tokens=100, last_usage=wg.NO_USAGE)
    fresh = wg.ContextWindowManager(model_info=wg.ModelInfo(50_000, tokenizer="o200k"))
    assert grown.estimated_tokens == fresh.fit(messages, max_tokens=100).estimated_tokens
