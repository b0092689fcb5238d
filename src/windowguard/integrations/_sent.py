"""Which counted message each sent message stands for, for integrations that count a
framework's messages as OpenAI Chat dicts (LangChain, pydantic-ai).

Those integrations read each framework message as one or more dicts, fit the dicts, and
send the framework's own messages that the kept dicts came from. With edit stages a fit
also sends messages that are not the dicts given:

- an *edited copy* of a dict (a clamped or cleared tool result, a call whose arguments
  were cleared), made on this send or an earlier one (edits are sent again, byte for
  byte), which stands in the same place, with the same role and the same tool call ids;
- a *summary*, a user message after the head that stands for the turns it folds;
- an unedited message the manager kept from an earlier send: equal to the dict given,
  but not the same object.

:func:`align` says which: for each sent message the index of the dict it stands for, or
None for a summary. The integration then sends the framework message of that dict, or a
copy of it with the edited content (a tool result's ``content``, a call's arguments:
:func:`call_arguments`), or a new user message for a summary.

Invariants: the sent messages are in the dicts' order (the manager keeps order), so a
copy is matched to the first dict at or after the previous match with its role and ids;
every sent message is matched or is a user message; anything else raises
:class:`~windowguard.core.exceptions.WindowGuardError` rather than sending a message in the
wrong place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.exceptions import WindowGuardError

__all__ = ["align", "call_arguments"]


def align(dicts: Sequence[Mapping[str, Any]], sent: Sequence[object]) -> list[int | None]:
    """For each sent message, the index in ``dicts`` of the dict it is or stands for
    (None: a summary windowguard added).

    A sent message is matched by identity, else (a tool result, or a call message) as
    the first dict at or after the previous match with its role and tool call ids (an
    edited copy, or an equal dict of an earlier send), else as the first equal dict
    there; a user message matching none is a summary.

    Raises:
        WindowGuardError: a sent message that is neither a dict given, a copy of one, nor
            a user message (a mismatch between the manager and this mapping).
    """
    by_identity = {id(d): i for i, d in enumerate(dicts)}
    out: list[int | None] = []
    cursor = 0
    for message in sent:
        index = by_identity.get(id(message))
        if index is None:
            if not isinstance(message, Mapping):
                raise WindowGuardError(
                    f"a fitted {type(message).__name__} is not one of the counted messages; "
                    "please report this as a windowguard bug"
                )
            index = _copy_of(dicts, cursor, message)
            if index is None:
                index = next((i for i in range(cursor, len(dicts)) if dicts[i] == message), None)
            if index is None and message.get("role") != "user":
                raise WindowGuardError(
                    f"a fitted {message.get('role')!r} message matches no message of the "
                    "transcript it was fitted from; please report this as a windowguard bug"
                )
        if index is not None:
            cursor = index + 1
        out.append(index)
    return out


def _copy_of(
    dicts: Sequence[Mapping[str, Any]], start: int, message: Mapping[str, Any]
) -> int | None:
    """The first dict at or after ``start`` with ``message``'s role and tool call ids,
    for a tool result or a message with calls (their ids name them); else None."""
    role = message.get("role")
    if role == "tool":
        key: object = message.get("tool_call_id")
    elif role == "assistant" and message.get("tool_calls"):
        key = _call_ids(message)
    else:
        return None
    if key is None:
        return None
    for index in range(start, len(dicts)):
        candidate = dicts[index]
        if candidate.get("role") != role:
            continue
        if (candidate.get("tool_call_id") if role == "tool" else _call_ids(candidate)) == key:
            return index
    return None


def _call_ids(message: Mapping[str, Any]) -> tuple[object, ...]:
    calls = message.get("tool_calls") or ()
    return tuple(call.get("id") if isinstance(call, Mapping) else None for call in calls)


def call_arguments(message: Mapping[str, Any]) -> dict[object, str]:
    """An assistant dict's call arguments (JSON text) by call id."""
    out: dict[object, str] = {}
    for call in message.get("tool_calls") or ():
        if isinstance(call, Mapping):
            function = call.get("function")
            if isinstance(function, Mapping):
                out[call.get("id")] = str(function.get("arguments") or "")
    return out
