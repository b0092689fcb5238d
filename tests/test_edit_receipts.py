"""Receipts (``Fit.edits``, ``context_edited``) name only what a send changed and sent.

* An edit a send makes to a message it then drops was never sent: there is no receipt
  for it, and the drop's receipt counts what the message was before the edit.
* Clearing a call's arguments that are already empty changes nothing: no receipt.
"""

from __future__ import annotations

import json
from typing import Any

import windowguard as wg

WORDS = " ".join(f"word{n}" for n in range(120))


def _transcript(turns: int, *, arguments: str = '{"path": "src/app.py"}') -> list[Any]:
    messages: list[Any] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test."},
    ]
    for n in range(turns):
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {n}: my notes so far. {WORDS}",
                "tool_calls": [
                    {
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": arguments},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": WORDS * 2})
    return messages


def _manager(**options: Any) -> wg.ContextWindowManager:
    return wg.ContextWindowManager(
        model_info=wg.ModelInfo(6_000, tokenizer="o200k"), counter="heuristic", **options
    )


def test_no_receipt_for_an_edit_of_a_message_the_same_send_drops() -> None:
    messages = _transcript(24)
    fit = _manager().fit(messages, max_tokens=500)
    kinds = [r.kind for r in fit.edits]
    assert "drop" in kinds and "clear" in kinds, kinds  # both stages ran on this send
    (drop,) = [r for r in fit.edits if r.kind == "drop"]
    gone = set(drop.messages)
    clears = [r for r in fit.edits if r.kind == "clear"]
    for record in fit.edits:
        if record.kind != "drop":
            assert not gone & set(record.messages), record  # only what is sent
    for record in clears:  # each clear that has a receipt was sent as its placeholder
        (index,) = record.messages
        sent = [m for m in fit.messages if m.get("tool_call_id") == f"call_{(index - 3) // 2}"]
        assert sent and sent[0]["content"].startswith("[cleared to save context")
    # the drop counts the dropped results as they were, not as this send cleared them:
    # every dropped turn holds a result as large as each cleared one was
    dropped_turns = len(drop.messages) // 2
    assert dropped_turns == fit.dropped_turns
    assert drop.tokens_before >= dropped_turns * clears[0].tokens_before
    # the events say the same as Fit.edits
    events = [e for e in fit.events if isinstance(e, wg.ContextEdited)]
    assert [e.edit for e in events] == kinds


def test_clearing_empty_arguments_is_no_edit() -> None:
    messages = _transcript(24, arguments="{}")
    fit = _manager().fit(messages, max_tokens=500)
    assert any(r.kind == "clear" for r in fit.edits)
    assert not [r for r in fit.edits if r.kind == "clear_inputs"]
    for message in fit.messages:
        for call in message.get("tool_calls") or []:
            assert json.loads(call["function"]["arguments"]) == {}
