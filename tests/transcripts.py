"""Hypothesis strategies: agent transcripts in all three wire formats.

A transcript is generated as an abstract plan (head texts, then turns of parallel
calls with their results) and rendered into OpenAI Chat, Anthropic Messages or
OpenAI Responses items. Call ids are reused from turn to turn (``call_0``...), as
real servers do, so pairing must be per turn.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

FORMATS = ("openai_chat", "anthropic", "responses")

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


@dataclass(frozen=True)
class Plan:
    system: str
    task: str
    demos: tuple[str, ...]
    turns: tuple[TurnPlan, ...]


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
    )


@st.composite
def plans(draw: st.DrawFn, *, max_turns: int = 12) -> Plan:
    return Plan(
        system=draw(_text),
        task=draw(_text.filter(bool)),
        demos=tuple(draw(st.lists(_text.filter(bool), max_size=2))),
        turns=tuple(draw(st.lists(turn_plans(), min_size=0, max_size=max_turns))),
    )


def render(plan: Plan, fmt: str) -> tuple[list[Any], Any]:
    """Render a plan as (messages, system argument) in ``fmt``."""
    if fmt == "openai_chat":
        return _chat(plan), None
    if fmt == "anthropic":
        return _anthropic(plan), (plan.system or None)
    return _responses(plan), None


def _chat(plan: Plan) -> list[Any]:
    out: list[Any] = [{"role": "system", "content": plan.system}]
    out += [{"role": "user", "content": d} for d in plan.demos]
    out.append({"role": "user", "content": plan.task})
    for turn in plan.turns:
        msg: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if turn.reasoning:
            msg["reasoning_content"] = turn.reasoning
        if turn.calls:
            msg["tool_calls"] = [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": "read", "arguments": a},
                }
                for i, a in enumerate(turn.calls)
            ]
        out.append(msg)
        out += [
            {"role": "tool", "tool_call_id": f"call_{i}", "content": r}
            for i, r in enumerate(turn.results)
        ]
        if turn.follow_up:
            out.append({"role": "user", "content": turn.follow_up})
    return out


def _anthropic(plan: Plan) -> list[Any]:
    out: list[Any] = [{"role": "user", "content": d} for d in plan.demos]
    out.append({"role": "user", "content": plan.task})
    for turn in plan.turns:
        blocks: list[dict[str, Any]] = []
        if turn.reasoning:
            blocks.append({"type": "thinking", "thinking": turn.reasoning, "signature": "sig"})
        if turn.text:
            blocks.append({"type": "text", "text": turn.text})
        blocks += [
            {"type": "tool_use", "id": f"call_{i}", "name": "read", "input": json.loads(a)}
            for i, a in enumerate(turn.calls)
        ]
        out.append({"role": "assistant", "content": blocks or "ok"})
        user: list[dict[str, Any]] = [
            {"type": "tool_result", "tool_use_id": f"call_{i}", "content": r}
            for i, r in enumerate(turn.results)
        ]
        if turn.follow_up:
            user.append({"type": "text", "text": turn.follow_up})
        if user:
            out.append({"role": "user", "content": user})
    return out


def _responses(plan: Plan) -> list[Any]:
    out: list[Any] = [{"type": "message", "role": "developer", "content": plan.system}]
    out += [{"role": "user", "content": d} for d in plan.demos]
    out.append(
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": plan.task}]}
    )
    for turn in plan.turns:
        if turn.reasoning:
            out.append(
                {
                    "type": "reasoning",
                    "id": "rs",
                    "summary": [{"type": "summary_text", "text": turn.reasoning}],
                }
            )
        if turn.text:
            out.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": turn.text}],
                }
            )
        out += [
            {"type": "function_call", "call_id": f"call_{i}", "name": "read", "arguments": a}
            for i, a in enumerate(turn.calls)
        ]
        if not turn.reasoning and not turn.text and not turn.calls:
            out.append({"type": "message", "role": "assistant", "content": "ok"})
        out += [
            {"type": "function_call_output", "call_id": f"call_{i}", "output": r}
            for i, r in enumerate(turn.results)
        ]
        if turn.follow_up:
            out.append({"role": "user", "content": turn.follow_up})
    return out
