"""Segmentation into head and turns, and pairing validation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from windowguard.adapters import shape_messages
from windowguard.shapes import Shape
from windowguard.turns import TurnIndex, segment

from .transcripts import FORMATS, plans, render


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


@settings(deadline=None, max_examples=150)
@given(plan=plans(), fmt=st.sampled_from(FORMATS))
def test_generated_transcripts_are_undamaged_with_one_turn_per_response(
    plan: object, fmt: str
) -> None:
    messages, system = render(plan, fmt)  # type: ignore[arg-type]
    seg = segment(shape_messages(messages, format=fmt, system=system).shapes)
    assert not seg.problems
    turns = plan.turns  # type: ignore[attr-defined]
    # A response with no calls and no user message after it runs on into the next
    # response: consecutive assistant messages are one turn. In Responses, a response
    # that begins with a call item stays in a turn that holds a reasoning item.
    expected, reasoning = 0, False
    for i, turn in enumerate(turns):
        follows_input = i == 0 or turns[i - 1].calls or turns[i - 1].follow_up
        call_first = fmt == "responses" and turn.calls and not (turn.reasoning or turn.text)
        if follows_input and not (i and call_first and reasoning):
            expected, reasoning = expected + 1, False
        reasoning = reasoning or bool(turn.reasoning)
    assert len(seg.turns) == expected
