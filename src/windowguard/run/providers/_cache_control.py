"""Anthropic prompt-cache breakpoints placed where the prompt's prefix is stable.

Anthropic caches the prompt prefix (tools, then system, then messages) up to each block
marked ``cache_control: {"type": "ephemeral"}``; at most four blocks per request may be
marked (https://docs.claude.com/en/docs/build-with-claude/prompt-caching). In a tool
loop the stable prefixes are:

1. the system prompt (with the tool schemas before it) — never changes in a run;
2. the head: the user messages before the first assistant message — kept by every
   pruning, so the prefix up to it survives even when older turns are dropped;
3. the whole request, up to its last message — the next send appends to it.

:func:`place_breakpoints` marks the last cacheable block of each, most valuable first
(the last message, the head, the system), within the four-breakpoint limit counting
the marks the caller already placed.

Invariants: the caller's objects are never mutated — marked messages and blocks are
copies, unmarked ones are passed through as they are; placement is a pure function of
the request (same input, same marks), so a request that extends the previous one
carries the same marks on the shared prefix; text blocks that are empty, and
``thinking``/``redacted_thinking`` blocks, are never marked (the API rejects both).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ._common import as_dict

__all__ = ["MAX_BREAKPOINTS", "place_breakpoints"]

MAX_BREAKPOINTS: Final = 4
EPHEMERAL: Final = {"type": "ephemeral"}
_UNMARKABLE: Final = frozenset({"thinking", "redacted_thinking"})


def place_breakpoints(
    system: object, messages: Sequence[object], tools: Sequence[Mapping[str, Any]] = ()
) -> tuple[object, list[object]]:
    """Mark the stable prefixes of one Messages request for prompt caching.

    Args:
        system: the ``system`` argument (None, a string or a list of text blocks).
        messages: the request's messages (dicts or SDK objects), not modified.
        tools: the tool definitions, only read to count marks already present.

    Returns:
        ``(system, messages)`` to send: copies where a mark was added, the caller's
        objects elsewhere.
    """
    budget = MAX_BREAKPOINTS - _count_marks(system) - _count_marks(list(messages))
    budget -= _count_marks(list(tools))
    out = list(messages)
    targets: list[int] = []
    if out:
        targets.append(len(out) - 1)
        head_end = _head_end(out)
        if head_end is not None and head_end != len(out) - 1:
            targets.append(head_end)
    for index in targets:
        if budget <= 0:
            return system, out
        marked = _mark_message(out[index])
        if marked is not None:
            out[index] = marked
            budget -= 1
    if budget > 0:
        marked_system = _mark_system(system)
        if marked_system is not None:
            system = marked_system
    return system, out


def _head_end(messages: Sequence[object]) -> int | None:
    """Index of the last message before the first assistant message, if any."""
    for index, message in enumerate(messages):
        if _role(message) == "assistant":
            return index - 1 if index > 0 else None
    return None


def _role(message: object) -> object:
    if isinstance(message, Mapping):
        return message.get("role")
    return getattr(message, "role", None)


def _markable(block: Mapping[str, Any]) -> bool:
    kind = block.get("type")
    if kind in _UNMARKABLE:
        return False
    return not (kind == "text" and not block.get("text"))


def _mark_blocks(content: object) -> list[Any] | None:
    """A copy of ``content`` (str or block list) with its last markable block marked."""
    if isinstance(content, str):
        if not content:
            return None
        return [{"type": "text", "text": content, "cache_control": dict(EPHEMERAL)}]
    if not isinstance(content, Sequence) or not content:
        return None
    blocks = list(content)
    for position in range(len(blocks) - 1, -1, -1):
        block = as_dict(blocks[position])
        if _markable(block):
            if block.get("cache_control"):
                return None  # the caller's own mark (and its ttl) stays as it is
            block["cache_control"] = dict(EPHEMERAL)
            blocks[position] = block
            return blocks
    return None


def _mark_message(message: object) -> dict[str, Any] | None:
    copy = as_dict(message)
    content = _mark_blocks(copy.get("content"))
    if content is None:
        return None
    copy["content"] = content
    return copy


def _mark_system(system: object) -> list[Any] | None:
    if system is None:
        return None
    return _mark_blocks(system)


def _count_marks(value: object) -> int:
    """How many ``cache_control`` marks ``value`` (a nested request part) carries."""
    if isinstance(value, Mapping):
        own = 1 if value.get("cache_control") else 0
        return own + sum(_count_marks(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_count_marks(item) for item in value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return _count_marks(dump(exclude_none=True))
    return 0
