"""windowguard.integrations._sent: which counted dict each sent message stands for."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import windowguard as wg
from windowguard.core.edits.summary import summary_message
from windowguard.integrations._sent import align, call_arguments


def _call(i: int) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
        ],
    }


def _dicts() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "task"},
    ]
    for i in range(4):
        out += [_call(i), {"role": "tool", "tool_call_id": f"c{i}", "content": f"r{i}"}]
    out.append({"role": "assistant", "content": "done"})
    return out


def test_identity_copies_equal_dicts_and_a_summary_are_told_apart() -> None:
    dicts = _dicts()
    cleared = {**dicts[5], "content": "[tool result cleared]"}  # an edited copy of c1's result
    args = {
        **dicts[6],
        "tool_calls": [{**dicts[6]["tool_calls"][0], "function": {"name": "f", "arguments": "{}"}}],
    }
    summary = summary_message("openai_chat", "what happened")
    sent = [
        dicts[0],
        dicts[1],
        summary,  # after the head
        copy.deepcopy(dicts[4]),  # an equal dict of an earlier send
        cleared,
        args,
        dicts[7],
        dicts[8],
        dicts[9],
        copy.deepcopy(dicts[10]),  # an assistant message without calls, equal
    ]
    assert align(dicts, sent) == [0, 1, None, 4, 5, 6, 7, 8, 9, 10]
    assert call_arguments(args) == {"c2": "{}"}


def test_a_copy_is_matched_after_a_dropped_stretch_not_inside_it() -> None:
    dicts = _dicts()
    # turns 0 and 1 dropped; the kept assistant without calls must not match anything
    # earlier, and the edited result of c2 matches c2's result, not an earlier tool dict
    sent = [
        dicts[0],
        dicts[1],
        dicts[6],
        {**dicts[7], "content": "cut"},
        dicts[8],
        dicts[9],
        dicts[10],
    ]
    assert align(dicts, sent) == [0, 1, 6, 7, 8, 9, 10]


def test_a_message_that_stands_for_nothing_is_a_bug_not_a_guess() -> None:
    dicts = _dicts()
    with pytest.raises(wg.WindowGuardError, match="matches no message"):
        align(dicts, [dicts[0], {"role": "assistant", "content": "never sent"}])
    with pytest.raises(wg.WindowGuardError, match="not one of the counted messages"):
        align(dicts, [object()])
