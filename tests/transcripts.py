"""Hypothesis strategies: agent transcripts in all three wire formats.

A transcript is generated as an abstract plan (an optional assistant greeting, head
texts, then turns of parallel calls with their results) and rendered into OpenAI Chat,
Anthropic Messages or OpenAI Responses items. Call ids are reused from turn to turn
(``call_0``...), as real servers do, so pairing must be per turn; within a turn they may
also repeat (every call ``call_0``) or be missing, as some servers and local models emit
them, and then pair by position. Responses turns may interleave each call's output right
after the call (``rs, fc_0, out_0, fc_1, out_1``), as many Responses loops append them.

:func:`render_labelled` also says what each rendered message is (which plan turn it
belongs to, and which part of it), so properties can check segmentation and pruning
against the plan.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from hypothesis import strategies as st

FORMATS = ("openai_chat", "anthropic", "responses")

IdScheme = Literal["distinct", "repeated", "missing"]
Part = Literal[
    "system",
    "greeting",
    "demo",
    "task",
    "assistant",  # a whole assistant message (Chat, Anthropic)
    "reasoning",  # a Responses reasoning item
    "text",  # a Responses assistant message
    "call",  # a Responses function_call
    "result",
    "follow_up",
]

_text = st.text(
    alphabet=st.sampled_from('abcdefghij klmnop\nqrstuv{}":,0123456789éü中文🙂'),
    min_size=0,
    max_size=400,
)


@dataclass(frozen=True)
class TurnPlan:
    text: str
    calls: tuple[str, ...]  # arguments JSON of each parallel call
    results: tuple[str, ...]
    reasoning: str
    follow_up: str | None  # a user message after the results
    ids: IdScheme = "distinct"  # call ids: call_<i>, all call_0, or none at all
    interleaved: bool = False  # Responses: each call's output right after the call


@dataclass(frozen=True)
class Plan:
    system: str
    task: str
    demos: tuple[str, ...]
    turns: tuple[TurnPlan, ...]
    greeting: str | None = None  # an assistant greeting before the demos and the task


@dataclass(frozen=True)
class Label:
    """What one rendered message is: its part, and the plan turn it renders (None in
    the head)."""

    part: Part
    turn: int | None = None


@dataclass(frozen=True)
class Rendered:
    messages: list[Any]
    system: Any  # Anthropic's separate system argument, else None
    labels: tuple[Label, ...]  # one per message

    @property
    def task(self) -> int:
        """Index of the user's task."""
        return next(i for i, label in enumerate(self.labels) if label.part == "task")

    def turn_first(self, turn: int) -> int:
        """Index of the first message of plan turn ``turn`` (its response's first item)."""
        return next(i for i, label in enumerate(self.labels) if label.turn == turn)

    def of_turn(self, turn: int) -> list[int]:
        """Indices of every message of plan turn ``turn``."""
        return [i for i, label in enumerate(self.labels) if label.turn == turn]


@st.composite
def turn_plans(draw: st.DrawFn) -> TurnPlan:
    n = draw(st.integers(0, 3))
    calls = tuple(json.dumps({"path": draw(_text)}) for _ in range(n))
    results = tuple(draw(_text) for _ in range(n))
    return TurnPlan(
        text=draw(_text),
        calls=calls,
        results=results,
        reasoning=draw(st.one_of(st.just(""), _text)),
        follow_up=draw(st.one_of(st.none(), _text.filter(bool))),
        ids=draw(st.sampled_from(("distinct", "distinct", "repeated", "missing"))),
        interleaved=draw(st.booleans()),
    )


@st.composite
def plans(draw: st.DrawFn, *, max_turns: int = 12) -> Plan:
    return Plan(
        system=draw(_text),
        task=draw(_text.filter(bool)),
        demos=tuple(draw(st.lists(_text.filter(bool), max_size=2))),
        turns=tuple(draw(st.lists(turn_plans(), min_size=0, max_size=max_turns))),
        greeting=draw(st.one_of(st.none(), st.none(), _text.filter(bool))),
    )


def render(plan: Plan, fmt: str) -> tuple[list[Any], Any]:
    """Render a plan as (messages, system argument) in ``fmt``."""
    rendered = render_labelled(plan, fmt)
    return rendered.messages, rendered.system


def render_labelled(plan: Plan, fmt: str) -> Rendered:
    """Render a plan in ``fmt``, saying what each message is."""
    out = _Out()
    if fmt == "openai_chat":
        _chat(plan, out)
        return Rendered(out.messages, None, tuple(out.labels))
    if fmt == "anthropic":
        _anthropic(plan, out)
        return Rendered(out.messages, plan.system or None, tuple(out.labels))
    _responses(plan, out)
    return Rendered(out.messages, None, tuple(out.labels))


class _Out:
    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.labels: list[Label] = []

    def add(self, message: Any, part: Part, turn: int | None = None) -> None:
        self.messages.append(message)
        self.labels.append(Label(part, turn))


def _ids(turn: TurnPlan) -> list[str | None]:
    if turn.ids == "repeated":
        return ["call_0"] * len(turn.calls)
    if turn.ids == "missing":
        return [None] * len(turn.calls)
    return [f"call_{i}" for i in range(len(turn.calls))]


def _with_id(item: dict[str, Any], key: str, call_id: str | None) -> dict[str, Any]:
    if call_id is not None:
        item[key] = call_id
    return item


def _chat(plan: Plan, out: _Out) -> None:
    out.add({"role": "system", "content": plan.system}, "system")
    if plan.greeting:
        out.add({"role": "assistant", "content": plan.greeting}, "greeting")
    for demo in plan.demos:
        out.add({"role": "user", "content": demo}, "demo")
    out.add({"role": "user", "content": plan.task}, "task")
    for n, turn in enumerate(plan.turns):
        ids = _ids(turn)
        msg: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if turn.reasoning:
            msg["reasoning_content"] = turn.reasoning
        if turn.calls:
            msg["tool_calls"] = [
                _with_id(
                    {"type": "function", "function": {"name": "read", "arguments": a}}, "id", i
                )
                for i, a in zip(ids, turn.calls)
            ]
        out.add(msg, "assistant", n)
        for i, r in zip(ids, turn.results):
            out.add(_with_id({"role": "tool", "content": r}, "tool_call_id", i), "result", n)
        if turn.follow_up:
            out.add({"role": "user", "content": turn.follow_up}, "follow_up", n)


def _anthropic(plan: Plan, out: _Out) -> None:
    if plan.greeting:
        out.add({"role": "assistant", "content": plan.greeting}, "greeting")
    for demo in plan.demos:
        out.add({"role": "user", "content": demo}, "demo")
    out.add({"role": "user", "content": plan.task}, "task")
    for n, turn in enumerate(plan.turns):
        ids = _ids(turn)
        blocks: list[dict[str, Any]] = []
        if turn.reasoning:
            blocks.append({"type": "thinking", "thinking": turn.reasoning, "signature": "sig"})
        if turn.text:
            blocks.append({"type": "text", "text": turn.text})
        blocks += [
            _with_id({"type": "tool_use", "name": "read", "input": json.loads(a)}, "id", i)
            for i, a in zip(ids, turn.calls)
        ]
        out.add({"role": "assistant", "content": blocks or "ok"}, "assistant", n)
        user: list[dict[str, Any]] = [
            _with_id({"type": "tool_result", "content": r}, "tool_use_id", i)
            for i, r in zip(ids, turn.results)
        ]
        if turn.follow_up:
            user.append({"type": "text", "text": turn.follow_up})
        if user:
            out.add(
                {"role": "user", "content": user}, "follow_up" if turn.follow_up else "result", n
            )


def _responses(plan: Plan, out: _Out) -> None:
    out.add({"type": "message", "role": "developer", "content": plan.system}, "system")
    if plan.greeting:
        out.add(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": plan.greeting}],
            },
            "greeting",
        )
    for demo in plan.demos:
        out.add({"role": "user", "content": demo}, "demo")
    out.add(
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": plan.task}]},
        "task",
    )
    for n, turn in enumerate(plan.turns):
        ids = _ids(turn)
        if turn.reasoning:
            out.add(
                {
                    "type": "reasoning",
                    "id": f"rs_{n}",
                    "summary": [{"type": "summary_text", "text": turn.reasoning}],
                },
                "reasoning",
                n,
            )
        if turn.text:
            out.add(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": turn.text}],
                },
                "text",
                n,
            )
        calls = [
            _with_id({"type": "function_call", "name": "read", "arguments": a}, "call_id", i)
            for i, a in zip(ids, turn.calls)
        ]
        outputs = [
            _with_id({"type": "function_call_output", "output": r}, "call_id", i)
            for i, r in zip(ids, turn.results)
        ]
        if turn.interleaved:
            for call, output in zip(calls, outputs):
                out.add(call, "call", n)
                out.add(output, "result", n)
        else:
            for call in calls:
                out.add(call, "call", n)
            for output in outputs:
                out.add(output, "result", n)
        if not turn.reasoning and not turn.text and not turn.calls:
            out.add({"type": "message", "role": "assistant", "content": "ok"}, "text", n)
        if turn.follow_up:
            out.add({"role": "user", "content": turn.follow_up}, "follow_up", n)
