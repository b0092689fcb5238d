"""Segmentation into head and turns, and pairing validation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from windowguard.core.adapters import shape_messages
from windowguard.core.shapes import Shape
from windowguard.core.turns import TurnIndex, segment

from .transcripts import FORMATS, Plan, plans, render, render_labelled


def _shapes(*kinds: tuple[str, tuple[str, ...], tuple[str, ...]]) -> list[Shape]:
    return [Shape(kind=k, opens=o, answers=a) for k, o, a in kinds]  # type: ignore[arg-type]


def test_head_runs_to_first_assistant_and_includes_demonstrations() -> None:
    shapes = _shapes(
        ("system", (), ()),
        ("system", (), ()),
        ("user", (), ()),
        ("user", (), ()),
        ("assistant", ("a",), ()),
        ("tool", (), ("a",)),
    )
    seg = segment(shapes)
    assert seg.head_stop == 4
    assert seg.turns == (range(4, 6),)
    assert not seg.problems


def test_transcript_without_assistant_is_all_head() -> None:
    seg = segment(_shapes(("system", (), ()), ("user", (), ())))
    assert seg.head_stop == 2
    assert seg.turns == ()


def test_consecutive_assistant_items_are_one_response() -> None:
    # Responses: reasoning, message, two function calls, then both outputs.
    shapes = _shapes(
        ("user", (), ()),
        ("assistant", (), ()),
        ("other", (), ()),
        ("assistant", ("c1",), ()),
        ("assistant", ("c2",), ()),
        ("tool", (), ("c2",)),
        ("tool", (), ("c1",)),
        ("user", (), ()),
        ("assistant", (), ()),
    )
    seg = segment(shapes)
    assert seg.turn_starts == (1, 8)
    assert not seg.problems


def test_ids_pair_within_their_turn_not_globally() -> None:
    shapes = _shapes(
        ("user", (), ()),
        ("assistant", ("call_0",), ()),
        ("tool", (), ("call_0",)),
        ("assistant", ("call_0",), ()),
        ("tool", (), ("call_0",)),
    )
    assert not segment(shapes).problems


def test_result_answering_a_call_of_an_earlier_turn_is_damage() -> None:
    shapes = _shapes(
        ("user", (), ()),
        ("assistant", ("a",), ()),
        ("tool", (), ("a",)),
        ("assistant", ("b",), ()),
        ("tool", (), ("b",)),
        ("tool", (), ("a",)),
    )
    (problem,) = segment(shapes).problems
    assert problem.index == 5
    assert "'a'" in problem.problem


def test_unanswered_call_and_result_before_any_call_are_damage() -> None:
    shapes = _shapes(
        ("user", (), ()),
        ("tool", (), ("x",)),
        ("assistant", ("a", "b"), ()),
        ("tool", (), ("a",)),
    )
    problems = segment(shapes).problems
    assert [p.index for p in problems] == [1, 2]
    assert "never answered" in problems[1].problem


def test_repeated_call_ids_in_one_turn_pair_by_position() -> None:
    shapes = _shapes(
        ("user", (), ()),
        ("assistant", ("a", "a"), ()),
        ("tool", (), ("a",)),
        ("tool", (), ("a",)),
    )
    assert not segment(shapes).problems
    (problem,) = segment([*shapes, Shape(kind="tool", answers=("a",))]).problems
    assert (problem.index, "answered twice" in problem.problem) == (4, True)


def test_calls_and_results_without_ids_pair_by_position() -> None:
    shapes = _shapes(
        ("user", (), ()),
        ("assistant", ("", "b", ""), ()),
        ("tool", (), ("",)),
        ("tool", (), ("b",)),
        ("tool", (), ("",)),
    )
    assert not segment(shapes).problems
    (problem,) = segment(shapes[:-1]).problems
    assert (problem.index, problem.problem) == (
        1,
        "a tool call without an id is never answered in its turn",
    )


def test_head_runs_through_the_first_user_message_past_a_greeting() -> None:
    shapes = _shapes(
        ("system", (), ()),
        ("assistant", ("g",), ()),
        ("tool", (), ("g",)),
        ("assistant", (), ()),
        ("user", (), ()),
        ("user", (), ()),
        ("assistant", ("a",), ()),
        ("tool", (), ("a",)),
    )
    seg = segment(shapes)
    assert (seg.head_stop, seg.turn_starts, seg.problems) == (6, (6,), ())
    assert segment(shapes[:6]).head_stop == 6


def test_a_user_message_of_tool_results_only_is_not_the_task() -> None:
    shapes = [
        Shape(kind="assistant", opens=("g",)),
        Shape(kind="user", answers=("g",), results_only=True),
        Shape(kind="assistant"),
        Shape(kind="user"),
        Shape(kind="assistant"),
    ]
    assert segment(shapes).turn_starts == (4,)


def test_a_call_item_stays_with_the_reasoning_item_of_its_turn() -> None:
    def call(call_id: str) -> Shape:
        return Shape(kind="assistant", opens=(call_id,), call_item=True)

    def output(call_id: str) -> Shape:
        return Shape(kind="tool", answers=(call_id,))

    reasoning = Shape(kind="assistant", reasoning=True)
    message = Shape(kind="assistant")
    shapes = [
        Shape(kind="user"),
        reasoning, call("a"), output("a"), call("b"), output("b"),  # one response
        Shape(kind="user"), call("c"), output("c"),  # still merged: the turn has reasoning
        message, call("d"), output("d"), call("e"), output("e"),  # no reasoning: may split
        reasoning, call("f"), output("f"),
    ]  # fmt: skip
    seg = segment(shapes)
    assert (seg.turn_starts, seg.problems) == ((1, 9, 12, 14), ())


def test_adapter_problems_are_reported_with_their_index() -> None:
    shapes = [Shape(kind="user"), Shape(kind="other", problem="unknown role 'robot'")]
    (problem,) = segment(shapes).problems
    assert (problem.index, problem.problem) == (1, "unknown role 'robot'")


@settings(deadline=None, max_examples=150)
@given(plan=plans(), fmt=st.sampled_from(FORMATS), cut=st.integers(0, 200))
def test_incremental_segmentation_equals_one_pass(plan: object, fmt: str, cut: int) -> None:
    messages, system = render(plan, fmt)  # type: ignore[arg-type]
    shapes = shape_messages(messages, format=fmt, system=system).shapes
    cut = min(cut, len(shapes))
    index = TurnIndex()
    index.extend(shapes[:cut])
    index.segmentation()
    index.extend(shapes[cut:])
    assert index.segmentation() == segment(shapes)


_ASSISTANT_PARTS = frozenset({"greeting", "assistant", "reasoning", "text", "call"})


@settings(deadline=None, max_examples=300)
@given(plan=plans(), fmt=st.sampled_from(FORMATS))
def test_generated_transcripts_segment_as_planned(plan: Plan, fmt: str) -> None:
    """Undamaged; the head holds the task and ends where the first response begins; a
    turn starts at every response that follows input, and elsewhere only at a call of
    a Responses response without reasoning whose outputs were interleaved; and a
    response with a reasoning item is never split."""
    rendered = render_labelled(plan, fmt)
    seg = segment(shape_messages(rendered.messages, format=fmt, system=rendered.system).shapes)
    assert not seg.problems
    labels = rendered.labels
    assert rendered.task < seg.head_stop
    firsts = [rendered.turn_first(n) for n in range(len(plan.turns))]
    assert seg.head_stop == (firsts[0] if firsts else len(labels))
    starts = set(seg.turn_starts)
    turn_of = {i: t for t, span in enumerate(seg.turns) for i in span}
    for n, first in enumerate(firsts):
        if labels[first - 1].part in _ASSISTANT_PARTS:
            continue  # runs on from the response before it
        # A Responses response that begins with a call, after results, stays in a turn
        # that holds a reasoning item (when in doubt, merge).
        before = seg.turns[turn_of[first - 1]] if n else range(0)
        merged = labels[first].part == "call" and any(labels[i].part == "reasoning" for i in before)
        assert (first in starts) != merged, f"response {n}: start {first in starts}"
    for start in starts - set(firsts):
        turn = plan.turns[labels[start].turn]  # type: ignore[index]
        assert fmt == "responses" and labels[start].part == "call"
        assert turn.interleaved and not turn.reasoning
    for n, turn in enumerate(plan.turns):
        if turn.reasoning:
            assert len({turn_of[i] for i in rendered.of_turn(n)}) == 1


@settings(deadline=None, max_examples=150)
@given(plan=plans(), fmt=st.sampled_from(FORMATS), data=st.data())
def test_dropping_whole_turns_leaves_the_same_head_and_remaining_turns(
    plan: Plan, fmt: str, data: st.DataObject
) -> None:
    """What pruning sends segments like what it kept: the manager's pairing guard
    re-segments the pruned transcript and must find the same turns, undamaged."""
    messages, system = render(plan, fmt)
    shapes = shape_messages(messages, format=fmt, system=system).shapes
    seg = segment(shapes)
    if not seg.turn_starts:
        return
    drop = data.draw(st.integers(0, len(seg.turn_starts) - 1))
    cut = seg.turn_starts[drop]
    kept = segment([*shapes[: seg.head_stop], *shapes[cut:]])
    assert kept.head_stop == seg.head_stop
    assert kept.turn_starts == tuple(s - cut + seg.head_stop for s in seg.turn_starts[drop:])
    assert not kept.problems
