"""Issue 11, items 1-3: the head holds the task, a Responses reasoning item keeps its
calls, and repeated or missing call ids pair by position instead of freezing pruning.

Each case runs in every wire format it applies to, first on segmentation and then
through a manager whose window forces pruning, which is where the losses showed: the
task pruned after a greeting, a ``function_call`` sent without its reasoning item, a
transcript sent unchanged far over budget.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import windowguard as wg
from windowguard.core.adapters import shape_messages
from windowguard.core.turns import Segmentation, segment

from .transcripts import FORMATS, Plan, Rendered, TurnPlan, plans, render_labelled

BIG = "x" * 2_000


def _seg(messages: list[Any], fmt: str, system: Any = None) -> Segmentation:
    return segment(shape_messages(messages, format=fmt, system=system).shapes)


def _fit(
    messages: list[Any],
    fmt: str,
    system: Any = None,
    window: int = 3_000,
    edits: tuple[Any, ...] | None = (),
) -> wg.Fit:
    """Fit through a manager; drop only unless told (these cases are about which whole
    turns pruning may drop; ``edits=None`` runs the default edits first)."""
    info = wg.ModelInfo(window, max_output_tokens=None, tokenizer="o200k")
    mgr = wg.ContextWindowManager(model_info=info, safety=50, counter="heuristic", edits=edits)
    return mgr.fit(messages, system=system, format=fmt, max_tokens=100)


def _exercised(fit: wg.Fit) -> bool:
    """The window was exercised: whole turns dropped, or tool results edited."""
    return fit.dropped_turns > 0 or any(e.kind != "drop" for e in fit.edits)


def _kept(fit: wg.Fit, message: Any) -> bool:
    return any(m is message for m in fit.messages)


def _turn(
    *,
    calls: int = 1,
    ids: str = "distinct",
    reasoning: str = "",
    interleaved: bool = False,
    text: str = "",
) -> TurnPlan:
    return TurnPlan(
        text=text,
        calls=tuple(f'{{"path":"f{i}.py"}}' for i in range(calls)),
        results=(BIG,) * calls,
        reasoning=reasoning,
        follow_up=None,
        ids=ids,  # type: ignore[arg-type]
        interleaved=interleaved,
    )


def _plan(*turns: TurnPlan, greeting: str | None = None, demos: tuple[str, ...] = ()) -> Plan:
    return Plan(system="sys", task="TASK", demos=demos, turns=turns, greeting=greeting)


# --- 1. the head runs through the first user message ------------------------------------


@pytest.mark.parametrize("edits", [(), None], ids=["drop only", "default edits"])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("demos", [(), ("an example first",)])
def test_a_task_after_an_assistant_greeting_is_head(
    fmt: str, demos: tuple[str, ...], edits: tuple[Any, ...] | None
) -> None:
    rendered = render_labelled(
        _plan(*[_turn()] * 6, greeting="Hi! What can I do?", demos=demos), fmt
    )
    seg = _seg(rendered.messages, fmt, rendered.system)
    assert seg.head_stop == rendered.turn_first(0) > rendered.task
    assert len(seg.turns) == 6 and not seg.problems
    fit = _fit(rendered.messages, fmt, rendered.system, edits=edits)
    assert not fit.deferred and fit.estimated_tokens <= fit.budget
    assert fit.dropped_turns > 0 if edits == () else _exercised(fit)
    assert _kept(fit, rendered.messages[rendered.task])
    assert all(a is b for a, b in zip(fit.messages, rendered.messages[: seg.head_stop]))
    assert not _seg(fit.messages, fmt, rendered.system).problems


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_assistant_response_after_the_task_is_all_head(fmt: str) -> None:
    rendered = render_labelled(_plan(greeting="Hi! What can I do?"), fmt)
    seg = _seg(rendered.messages, fmt, rendered.system)
    assert seg.head_stop == len(rendered.messages)
    assert seg.turns == ()


def test_anthropic_user_message_of_tool_results_only_is_not_the_task() -> None:
    messages = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t0", "name": "env"}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t0", "content": "ok"}],
        },
        {"role": "assistant", "content": "Hi! What can I do?"},
        {"role": "user", "content": "TASK"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
    ]
    seg = _seg(messages, "anthropic", "sys")
    assert (seg.head_stop, seg.turn_starts, seg.problems) == (4, (4,), ())


def test_responses_call_output_is_not_the_task() -> None:
    items = [
        {"type": "message", "role": "developer", "content": "sys"},
        {"type": "function_call", "call_id": "c0", "name": "env", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c0", "output": "ok"},
        {"type": "message", "role": "assistant", "content": "Hi! What can I do?"},
        {"type": "message", "role": "user", "content": "TASK"},
        {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "x"},
    ]
    seg = _seg(items, "responses")
    assert (seg.head_stop, seg.turn_starts, seg.problems) == (5, (5,), ())


def test_reasoning_in_the_head_does_not_hold_the_calls_after_the_task() -> None:
    items = [
        {"type": "message", "role": "developer", "content": "sys"},
        {"type": "reasoning", "id": "rs_0", "summary": []},
        {"type": "message", "role": "assistant", "content": "Hi! What can I do?"},
        {"type": "message", "role": "user", "content": "TASK"},
        {"type": "function_call", "call_id": "a", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "x"},
        {"type": "function_call", "call_id": "b", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "b", "output": "x"},
    ]
    seg = _seg(items, "responses")
    assert (seg.head_stop, seg.turn_starts, seg.problems) == (4, (4, 6), ())


# --- 2. Responses: a reasoning item keeps its calls -------------------------------------


def test_interleaved_outputs_do_not_split_a_response_from_its_reasoning_item() -> None:
    rendered = render_labelled(
        _plan(*[_turn(calls=2, reasoning="think", interleaved=True)] * 5), "responses"
    )
    seg = _seg(rendered.messages, "responses")
    assert seg.turn_starts == tuple(rendered.turn_first(n) for n in range(5))
    assert not seg.problems
    fit = _fit(rendered.messages, "responses", window=4_000)
    assert fit.dropped_turns > 0 and not fit.deferred
    for n in range(5):
        kept = {_kept(fit, rendered.messages[i]) for i in rendered.of_turn(n)}
        assert len(kept) == 1, f"response {n} was split by pruning"


def test_default_edits_never_touch_reasoning_items_or_their_calls() -> None:
    """Under the default edits the outputs may be clamped or cleared, but a reasoning
    item and the calls of its response are the caller's own objects, sent together or
    not at all, and every output sent still answers its call."""
    items = render_labelled(
        _plan(*[_turn(calls=2, reasoning="think", interleaved=True)] * 5), "responses"
    )
    fit = _fit(items.messages, "responses", window=4_000, edits=None)
    assert not fit.deferred and fit.estimated_tokens <= fit.budget and _exercised(fit)
    assert not _seg(fit.messages, "responses").problems
    for n in range(5):
        turn = [items.messages[i] for i in items.of_turn(n)]
        untouched = [m for m in turn if m["type"] != "function_call_output"]
        kept = {_kept(fit, m) for m in untouched}
        assert len(kept) == 1, f"response {n} was split, or its reasoning or calls edited"
    newest = [items.messages[i] for i in items.of_turn(4)]
    assert [m["type"] for m in fit.messages[-len(newest) :]] == [m["type"] for m in newest]
    edited = [m for m in fit.messages if not any(m is o for o in items.messages)]
    assert edited and all(m["type"] == "function_call_output" for m in edited)


def test_without_reasoning_items_an_answered_call_may_start_a_turn() -> None:
    items = [
        {"type": "message", "role": "user", "content": "TASK"},
        {"type": "function_call", "call_id": "a", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "x"},
        {"type": "function_call", "call_id": "b", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "b", "output": "x"},
    ]
    seg = _seg(items, "responses")
    assert (seg.turn_starts, seg.problems) == ((1, 3), ())


def test_a_call_while_calls_of_the_turn_wait_for_results_stays_in_the_turn() -> None:
    items = [
        {"type": "message", "role": "user", "content": "TASK"},
        {"type": "function_call", "call_id": "a", "name": "read", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "x"},
        {"type": "function_call", "call_id": "c", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "b", "output": "x"},
        {"type": "function_call_output", "call_id": "c", "output": "x"},
    ]
    seg = _seg(items, "responses")
    assert (seg.turn_starts, seg.problems) == ((1,), ())


# --- 3. repeated or missing call ids pair by position -----------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("ids", ["repeated", "missing"])
@pytest.mark.parametrize("edits", [(), None], ids=["drop only", "default edits"])
def test_repeated_or_missing_ids_pair_by_position_and_pruning_proceeds(
    fmt: str, ids: str, edits: tuple[Any, ...] | None
) -> None:
    rendered = render_labelled(_plan(*[_turn(calls=2, ids=ids)] * 6), fmt)
    seg = _seg(rendered.messages, fmt, rendered.system)
    assert not seg.problems
    assert len(seg.turns) == 6
    fit = _fit(rendered.messages, fmt, rendered.system, window=6_000, edits=edits)
    assert not fit.deferred
    assert fit.dropped_turns > 0 if edits == () else _exercised(fit)
    assert fit.estimated_tokens <= fit.budget
    assert not _seg(fit.messages, fmt, rendered.system).problems


def _chat_turn(calls: list[str | None], results: list[str | None]) -> list[dict[str, Any]]:
    def call(call_id: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "function", "function": {"name": "f", "arguments": "{}"}}
        if call_id is not None:
            out["id"] = call_id
        return out

    def result(call_id: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {"role": "tool", "content": "r"}
        if call_id is not None:
            out["tool_call_id"] = call_id
        return out

    return [
        {"role": "assistant", "content": None, "tool_calls": [call(c) for c in calls]},
        *[result(r) for r in results],
    ]


@pytest.mark.parametrize(
    ("calls", "results", "needle"),
    [
        (["call_0", "call_0"], ["call_0", "call_0", "call_0"], "answers no call"),
        (["call_0", "call_0"], ["call_0"], "'call_0' is never answered"),
        ([None, None], [None], "without an id is never answered"),
        (["a"], [None], "without an id answers no call"),
        ([None], ["a"], "for 'a' answers no call"),
    ],
)
def test_genuine_damage_with_repeated_or_missing_ids_stays_damage(
    calls: list[str | None], results: list[str | None], needle: str
) -> None:
    messages = [{"role": "user", "content": "TASK"}, *_chat_turn(calls, results)]
    problems = _seg(messages, "openai_chat").problems
    assert any(needle in p.problem for p in problems), problems


def test_repeated_ids_across_turns_still_pair_within_their_turn() -> None:
    messages = [
        {"role": "user", "content": "TASK"},
        *_chat_turn(["call_0", "call_0"], ["call_0"]),
        *_chat_turn(["call_0"], ["call_0", "call_0"]),
    ]
    problems = _seg(messages, "openai_chat").problems
    assert [p.index for p in problems] == [1, 5]


# --- properties ----------------------------------------------------------------------


@settings(deadline=None, max_examples=200)
@given(plan=plans(), fmt=st.sampled_from(FORMATS), window=st.integers(300, 6_000))
def test_pruning_keeps_the_task_and_whole_reasoning_responses(
    plan: Plan, fmt: str, window: int
) -> None:
    rendered: Rendered = render_labelled(plan, fmt)
    messages, system = rendered.messages, rendered.system
    seg = _seg(messages, fmt, system)
    assert rendered.task < seg.head_stop
    try:
        fit = _fit(messages, fmt, system, window=window)
    except wg.ContextTruncatedError as exc:
        assert exc.estimated_tokens > exc.budget
        return
    assert not fit.deferred
    assert fit.estimated_tokens <= fit.budget
    it = iter(messages)
    assert all(any(m is n for n in it) for m in fit.messages), "not a subsequence"
    assert all(a is b for a, b in zip(fit.messages, messages[: seg.head_stop]))
    assert _kept(fit, messages[rendered.task])
    assert not _seg(fit.messages, fmt, system).problems
    for n, turn in enumerate(plan.turns):
        if fmt == "responses" and turn.reasoning:
            kept = {_kept(fit, messages[i]) for i in rendered.of_turn(n)}
            assert len(kept) == 1, f"response {n} was split from its reasoning item"
