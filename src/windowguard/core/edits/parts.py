"""Finding tool calls and tool results in any wire format: :func:`tool_results`, :func:`tool_calls`.

The edit stages work on *parts* of the caller's messages: a tool result (an OpenAI
``tool`` message, one Anthropic ``tool_result`` block of a user message, a Responses
``*_call_output`` item) or a tool call (one entry of an OpenAI assistant's
``tool_calls``, an Anthropic ``tool_use`` block, a Responses ``*_call`` item). A
:class:`ResultRef` / :class:`CallRef` names where the part is and what it holds; it never
copies the message.

Invariants:
    * Calls and results pair exactly as :mod:`windowguard.core.turns` pairs them: by id
      *within one unit* (the head, or one turn), and by position among the calls that
      share an id or carry none (``""``). The order of calls and results within a
      message is the order of the adapters' ``Shape.opens`` / ``Shape.answers``, and
      Responses MCP approvals take their place in that order without being tool calls.
    * A result's ``text`` is its text parts only, joined by newlines; images, documents
      and other non-text parts are not text (``media_items`` counts them): a clamp
      leaves them, a clear replaces them with the text (where
      :func:`~windowguard.core.edits.rewrite.media_droppable` allows it).
    * ``part`` is the index of the block in an Anthropic message's ``content`` (a user
      message may hold several ``tool_result`` blocks, an assistant message several
      ``tool_use`` blocks); the index in ``tool_calls`` for an OpenAI Chat call (``-1``
      for the legacy ``function_call``); ``0`` where the whole message is the part.
    * ``turn`` is ``-1`` for the head, else the turn's number (0 is the oldest turn).

What may be cleared next to provider reasoning (``CallRef.clearable``):
    * Anthropic: an assistant message that carries ``thinking`` / ``redacted_thinking``
      blocks is sent back exactly as the API returned it ("Pass thinking blocks back
      complete and unmodified ... Echo the assistant message exactly as received",
      https://platform.claude.com/docs/build-with-claude/thinking-tool-workflows), and on
      models with preserved thinking a change to anything before a thinking block --
      including a ``tool_use`` input earlier in the same message -- invalidates that
      block and every later one (a 400 error or the blocks dropped,
      https://platform.claude.com/docs/build-with-claude/preserved-thinking/prefix-checks).
      Calls in such a message are therefore never cleared. Their *results* live in the
      next user message: clearing those leaves the signed message byte for byte, as
      Anthropic's own server-side ``clear_tool_uses_20250919`` does.
    * OpenAI Responses: a turn that holds a ``reasoning`` item keeps its calls' inputs
      (the reasoning item is carried verbatim with the calls it led to; the API refuses
      a call sent without it). Their outputs are separate items and may be cleared.
    * A built-in Responses call (``computer_call``, ``shell_call`` ...) carries a typed
      action, and an Anthropic toolset ``tool_use`` a typed input: neither is cleared.
"""

from __future__ import annotations

import itertools
import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from ..adapters._common import call_id_of, field, getter, json_text
from ..exceptions import InvalidTranscriptError
from ..shapes import Format

__all__ = [
    "HEAD_TURN",
    "CallRef",
    "ResultRef",
    "looks_failed",
    "scan_refs",
    "tool_calls",
    "tool_results",
]

HEAD_TURN = -1
"""The ``turn`` of a part in the head."""

_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
_RESPONSES_CALLS = {
    "function_call": "arguments",
    "custom_tool_call": "input",
    "computer_call": "action",
    "local_shell_call": "action",
    "shell_call": "action",
    "apply_patch_call": "operation",
}
_RESPONSES_OUTPUTS = frozenset(f"{t}_output" for t in _RESPONSES_CALLS)
_CLEARABLE_RESPONSES = frozenset({"function_call", "custom_tool_call"})

# The first line of a result that says it failed: "Error: ...", "ValueError: ...",
# "Traceback (most recent call last):", "fatal: ...", '{"error": ...}', "npm ERR! ...".
_FAILED = re.compile(
    r"""^\s*(?:
        \[?(?:error|err|fatal|panic|exception|failed|failure)\b
      | [\w.]*(?:error|exception)\s*:
      | traceback\ \(most\ recent\ call\ last\)
      | command\ failed
      | npm\ err!
      | \{\s*"error"
    )""",
    re.IGNORECASE | re.VERBOSE,
)


def looks_failed(text: str) -> bool:
    """Whether a tool result's first non-blank line says it failed (a heuristic for
    formats without an error flag: OpenAI Chat and Responses)."""
    # ``^\s*`` skips blank lines; only the start is looked at, so a huge output costs
    # nothing more than a small one.
    return _FAILED.match(text[:400]) is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRef:
    """Where one tool call is, and what it was called with.

    Attributes:
        index: the message's index in the caller's transcript.
        part: the call's place in its message (see the module docstring).
        call_id: the call's id (``""`` when it has none).
        tool_name: the tool's name (a built-in Responses call: its type without
            ``_call``).
        arguments: the call's arguments as text (JSON for function calls).
        turn: the call's turn (``-1``: the head).
        clearable: whether its input may be replaced (see the module docstring).
        reason: why not, when it may not.
    """

    index: int
    part: int
    call_id: str
    tool_name: str
    arguments: str
    turn: int
    clearable: bool = True
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultRef:
    """Where one tool result is, what it says, and the call it answers.

    Attributes:
        index: the message's index in the caller's transcript.
        part: the result's place in its message (see the module docstring).
        call_id: the id it answers (``""`` when it has none).
        tool_name: the answered call's tool (or the result's own ``name``; ``""`` when
            neither is known).
        arguments: the answered call's arguments as text (``""`` when unpaired).
        text: the result's text parts, joined by newlines.
        is_error: the result says the call failed (Anthropic ``is_error``, or a first
            line that says so).
        turn: the result's turn (``-1``: the head).
        call_index: the message index of the call it answers (None: unpaired, damage).
        call_part: the answered call's ``part`` (None: unpaired).
        media_items: images, documents and other non-text parts (never clamped).
    """

    index: int
    part: int
    call_id: str
    tool_name: str
    arguments: str
    text: str
    is_error: bool
    turn: int
    call_index: int | None = None
    call_part: int | None = None
    media_items: int = 0


@dataclass(frozen=True, slots=True)
class _Call:
    part: int
    call_id: str
    name: str
    arguments: str
    tool: bool  # False for an MCP approval request: it pairs, but is no tool call
    reason: str | None  # why its input may not be cleared, whatever its turn holds


@dataclass(frozen=True, slots=True)
class _Result:
    part: int
    call_id: str
    name: str
    text: str
    flagged: bool
    media: int
    tool: bool


@dataclass(frozen=True, slots=True)
class _Read:
    calls: tuple[_Call, ...] = ()
    results: tuple[_Result, ...] = ()
    reasoning_item: bool = False


_NOTHING = _Read()


def tool_results(
    messages: Sequence[object], fmt: Format, head_stop: int, turn_starts: Sequence[int]
) -> list[ResultRef]:
    """Every tool result of a transcript, in transcript order, paired with its call.

    Args:
        messages: the caller's transcript (dicts or SDK objects), not copied.
        fmt: its wire format.
        head_stop: ``messages[:head_stop]`` is the head (``Segmentation.head_stop``).
        turn_starts: the first message of each turn (``Segmentation.turn_starts``).

    Raises:
        InvalidTranscriptError: ``head_stop`` / ``turn_starts`` do not segment
            ``messages``.
    """
    return _scan(messages, fmt, head_stop, turn_starts)[1]


def tool_calls(
    messages: Sequence[object], fmt: Format, head_stop: int, turn_starts: Sequence[int]
) -> list[CallRef]:
    """Every tool call of a transcript, in transcript order; takes :func:`tool_results`'
    arguments. ``clearable`` says whether its input may be replaced."""
    return _scan(messages, fmt, head_stop, turn_starts)[0]


def scan_refs(
    messages: Sequence[object],
    fmt: Format,
    head_stop: int,
    turn_starts: Sequence[int],
    *,
    offset: int = 0,
    turn_offset: int = 0,
) -> tuple[list[CallRef], list[ResultRef]]:
    """:func:`tool_calls` and :func:`tool_results` of one reading of the transcript.

    ``messages`` may be a later stretch of it, from a turn's first message on: its
    refs then carry the transcript's indices (``offset`` added) and turn numbers
    (``turn_offset`` added to every turn but the head's)."""
    return _scan(messages, fmt, head_stop, turn_starts, offset, turn_offset)


def _units(n: int, head_stop: int, turn_starts: Sequence[int]) -> list[tuple[int, range]]:
    starts = list(turn_starts)
    ok = 0 <= head_stop <= n and all(a < b for a, b in itertools.pairwise(starts))
    if starts:
        ok = ok and starts[0] == head_stop and starts[-1] < n
    else:
        ok = ok and head_stop == n
    if not ok:
        raise InvalidTranscriptError(
            f"head_stop={head_stop} and turn_starts={starts[:8]} do not segment a "
            f"transcript of {n} messages (pass a Segmentation's head_stop and turn_starts)"
        )
    bounds = [*starts, n]
    units = [(HEAD_TURN, range(head_stop))]
    units.extend((t, range(bounds[t], bounds[t + 1])) for t in range(len(starts)))
    return units


def _scan(
    messages: Sequence[object],
    fmt: Format,
    head_stop: int,
    turn_starts: Sequence[int],
    offset: int = 0,
    turn_offset: int = 0,
) -> tuple[list[CallRef], list[ResultRef]]:
    read = _READERS[fmt]
    calls: list[CallRef] = []
    results: list[ResultRef] = []
    for unit, span in _units(len(messages), head_stop, turn_starts):
        turn = unit if unit == HEAD_TURN else unit + turn_offset
        reads = [(i + offset, read(messages[i])) for i in span]
        unit_reasoning = fmt == "responses" and any(r.reasoning_item for _, r in reads)
        pending: dict[str, deque[tuple[int, _Call]]] = {}
        for index, found in reads:
            for call in found.calls:
                pending.setdefault(call.call_id, deque()).append((index, call))
                if not call.tool:
                    continue
                reason = call.reason
                if reason is None and unit_reasoning:
                    reason = (
                        "its turn holds a Responses reasoning item, which is carried "
                        "verbatim with the calls it led to"
                    )
                calls.append(
                    CallRef(
                        index=index,
                        part=call.part,
                        call_id=call.call_id,
                        tool_name=call.name,
                        arguments=call.arguments,
                        turn=turn,
                        clearable=reason is None,
                        reason=reason,
                    )
                )
            for result in found.results:
                waiting = pending.get(result.call_id)
                opened = waiting.popleft() if waiting else None
                if not result.tool:
                    continue
                at, call_found = opened if opened is not None else (None, None)
                results.append(
                    ResultRef(
                        index=index,
                        part=result.part,
                        call_id=result.call_id,
                        tool_name=call_found.name if call_found is not None else result.name,
                        arguments=call_found.arguments if call_found is not None else "",
                        text=result.text,
                        is_error=result.flagged or looks_failed(result.text),
                        turn=turn,
                        call_index=at,
                        call_part=call_found.part if call_found is not None else None,
                        media_items=result.media,
                    )
                )
    return calls, results


# -- per-format readers ------------------------------------------------------------------


def _text_parts(content: object) -> tuple[str, int]:
    """The text of a content field (a string, or a list of parts) and its media count."""
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, (list, tuple)):
        return "", 0
    texts: list[str] = []
    media = 0
    for part in content:
        if isinstance(part, str):
            texts.append(part)
            continue
        text = field(part, "text")
        if field(part, "type") in _TEXT_PARTS and isinstance(text, str):
            texts.append(text)
        else:
            media += 1
    if len(texts) == 1:
        return texts[0], media
    return "\n".join(texts), media


def _str_or_json(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json_text(value)


def _read_chat(message: object) -> _Read:
    get = getter(message)
    role = get("role")
    if role == "assistant":
        calls: list[_Call] = []
        tool_calls = get("tool_calls")
        if isinstance(tool_calls, (list, tuple)):
            for position, call in enumerate(tool_calls):
                call_id = call_id_of(field(call, "id"), "")[0]
                function = field(call, "function")
                custom = field(call, "custom")
                if function is not None:
                    name = str(field(function, "name") or "")
                    args = _str_or_json(field(function, "arguments"))
                    reason = None
                elif custom is not None:
                    name = str(field(custom, "name") or "")
                    args = _str_or_json(field(custom, "input"))
                    reason = None
                else:
                    name, args, reason = "", json_text(call), "a tool call of an unknown type"
                calls.append(_Call(position, call_id, name, args, True, reason))
        function_call = get("function_call")
        if function_call is not None:
            name = field(function_call, "name")
            args = _str_or_json(field(function_call, "arguments"))
            calls.append(_Call(-1, f"function:{name}", str(name or ""), args, True, None))
        return _Read(calls=tuple(calls)) if calls else _NOTHING
    if role == "tool":
        call_id = call_id_of(get("tool_call_id"), "")[0]
        text, media = _text_parts(get("content"))
        name = get("name")
        name = name if isinstance(name, str) else ""
        return _Read(results=(_Result(0, call_id, name, text, False, media, True),))
    if role == "function":
        name = get("name")
        text, media = _text_parts(get("content"))
        result = _Result(0, f"function:{name}", str(name or ""), text, False, media, True)
        return _Read(results=(result,))
    return _NOTHING


def _read_anthropic(message: object) -> _Read:
    if field(message, "role") not in ("user", "assistant"):
        return _NOTHING
    content = field(message, "content")
    if not isinstance(content, (list, tuple)):
        return _NOTHING
    thinking = any(field(b, "type") in ("thinking", "redacted_thinking") for b in content)
    calls: list[_Call] = []
    results: list[_Result] = []
    for position, block in enumerate(content):
        kind = field(block, "type")
        if kind == "tool_use":
            call_id = call_id_of(field(block, "id"), "")[0]
            name = str(field(block, "name") or "")
            tool_input = field(block, "input")
            reason: str | None = None
            if thinking:
                reason = (
                    "its assistant message carries signed thinking blocks, which Anthropic "
                    "requires back exactly as returned"
                )
            elif tool_input is not None and not isinstance(tool_input, dict):
                reason = "its input is a typed object (an Anthropic toolset call)"
            calls.append(_Call(position, call_id, name, json_text(tool_input or {}), True, reason))
        elif kind == "tool_result":
            call_id = call_id_of(field(block, "tool_use_id"), "")[0]
            text, media = _text_parts(field(block, "content") or "")
            flagged = field(block, "is_error") is True
            results.append(_Result(position, call_id, "", text, flagged, media, True))
    if not calls and not results:
        return _NOTHING
    return _Read(calls=tuple(calls), results=tuple(results))


def _read_responses(item: object) -> _Read:
    kind = field(item, "type")
    if kind == "reasoning":
        return _Read(reasoning_item=True)
    key = _RESPONSES_CALLS.get(kind) if isinstance(kind, str) else None
    if key is not None:
        call_id = call_id_of(field(item, "call_id"), "")[0]
        name = field(item, "name")
        name = name if isinstance(name, str) and name else str(kind).removesuffix("_call")
        reason = None if kind in _CLEARABLE_RESPONSES else f"a built-in {kind} has a typed {key}"
        call = _Call(0, call_id, name, _str_or_json(field(item, key)), True, reason)
        return _Read(calls=(call,))
    if kind in _RESPONSES_OUTPUTS:
        call_id = call_id_of(field(item, "call_id"), "")[0]
        output = field(item, "output")
        if isinstance(output, (str, list, tuple)):
            text, media = _text_parts(output)
        else:
            text, media = "", 0 if output is None else 1
        name = field(item, "name")
        name = name if isinstance(name, str) else ""
        return _Read(results=(_Result(0, call_id, name, text, False, media, True),))
    if kind == "mcp_approval_request":
        request_id = field(item, "id")
        if isinstance(request_id, str) and request_id:
            return _Read(calls=(_Call(0, request_id, "", "", False, None),))
    if kind == "mcp_approval_response":
        request_id = field(item, "approval_request_id")
        if isinstance(request_id, str) and request_id:
            return _Read(results=(_Result(0, request_id, "", "", False, 0, False),))
    return _NOTHING


_READERS = {"openai_chat": _read_chat, "anthropic": _read_anthropic, "responses": _read_responses}
