"""A damaged send keeps the run's summary: the damaged stretch is sent whole and whole
turns around it are pruned, but the turns the summary stands for are never sent again
and the summary stays after the head (it was silently left out, and with it everything
the folded turns held)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

import windowguard as wg
from windowguard.core.edits.summary import SUMMARY_PREFIX

HEAD = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]


def _turn(i: int) -> list[dict[str, Any]]:
    rng = random.Random(i)
    body = "\n".join(f"{n:05d} value_{rng.randrange(10**6)} = compute({n})" for n in range(40))
    call = {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/m{i}.py"})},
    }
    return [
        {"role": "assistant", "content": f"Step {i}", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": body},
    ]


def _damage_newest(messages: list[Any]) -> list[Any]:
    call = {"id": "call_A", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return [
        *messages,
        {"role": "assistant", "content": "x", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_B", "content": "oops"},
    ]


def _damage_head(messages: list[Any]) -> list[Any]:
    damaged = list(messages)
    damaged[1] = {"role": "user", "content": 12345}
    return damaged


def _is_summary(message: Any) -> bool:
    return str(message.get("content", "")).startswith(SUMMARY_PREFIX)


@pytest.mark.parametrize("damage", [_damage_newest, _damage_head])
def test_a_damaged_send_sends_the_summary_and_never_the_turns_it_stands_for(damage: Any) -> None:
    mgr = wg.ContextWindowManager(
        model_info=wg.ModelInfo(context_window=16_384, max_output_tokens=1_024),
        counter="heuristic",
        edits=[wg.Summarize(lambda turns, previous: "SUMMARY: m0.py line 3", keep_turns=2)],
    )
    messages = list(HEAD)
    usage: object = None
    for i in range(12):
        messages += _turn(i)
        fit = mgr.fit(messages, last_usage=usage)
        usage = wg.NO_USAGE
    assert _is_summary(fit.messages[2])
    folded = fit.dropped_turns
    assert folded > 0
    first_kept = fit.messages[3]

    messages = damage(messages)
    fit = mgr.fit(messages, last_usage=usage)
    assert fit.deferred
    sent = fit.messages
    assert _is_summary(sent[2])
    assert sum(_is_summary(m) for m in sent) == 1
    # none of the folded turns is sent again; they count as dropped
    ids = {id(m) for m in sent}
    position = next(i for i, m in enumerate(messages) if m is first_kept)
    assert all(id(m) not in ids for m in messages[2:position])
    assert fit.dropped_turns >= folded
    left_out = sum(1 for m in messages if id(m) not in ids)
    assert fit.dropped_messages == left_out
