"""pydantic-ai messages read as OpenAI Chat dicts for counting, and the messages a fit
of those dicts sends (see :mod:`windowguard.integrations.pydantic_ai`).

Invariants:

- Reading never changes a message: each ``ModelRequest`` part that is sent as a message
  becomes one dict (an index map remembers its message and part), a ``ModelResponse``
  one assistant dict; bookkeeping parts become none.
- `sent_messages` sends the caller's own messages for the kept dicts, in order, except
  where a dict was edited: then a copy (``dataclasses.replace``) with only the edited
  part replaced (a ``ToolReturnPart``'s content; a tool ``RetryPromptPart`` becomes a
  ``ToolReturnPart`` with the edited text, because pydantic-ai sends a retry prompt with
  a suffix of its own and the model must be sent exactly what was counted; a response's
  cleared call arguments), and a summary as a new ``ModelRequest`` with one
  ``UserPromptPart`` before the first message after the head. It says which copy stands
  for which message, for a caller whose copies come back (``ProcessHistory``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from pydantic_ai import messages as _messages
from pydantic_ai.tools import ToolDefinition

from ..core.exceptions import ConfigurationError
from ..pipeline.manager import Fit
from ._sent import align, call_arguments

__all__ = ["ModelMessage", "read", "sent_messages", "to_openai_chat", "tool_dicts"]

ModelMessage = _messages.ModelRequest | _messages.ModelResponse


def to_openai_chat(
    messages: Sequence[ModelMessage], *, instructions: str | None = None
) -> tuple[list[dict[str, Any]], list[int | None]]:
    """Read pydantic-ai messages as OpenAI Chat Completions dicts, for counting.

    Args:
        messages: the run's messages.
        instructions: the request's instructions, read as a leading system message.

    Returns:
        ``(dicts, owners)``: the dicts, and for each the index in ``messages`` of the
        message it was read from (None for the instructions). A message that holds
        nothing sent as a message (only bookkeeping parts) owns no dict.

    Raises:
        ConfigurationError: an item that is neither a ``ModelRequest`` nor a
            ``ModelResponse``.
    """
    dicts, owners, _ = read(messages, instructions)
    return dicts, owners


def read(
    messages: Sequence[ModelMessage], instructions: str | None
) -> tuple[list[dict[str, Any]], list[int | None], list[int | None]]:
    """:func:`to_openai_chat`, with each dict's part index in its request (None for a
    response's one dict and the instructions)."""
    dicts: list[dict[str, Any]] = []
    owners: list[int | None] = []
    parts: list[int | None] = []
    if instructions:
        dicts.append({"role": "system", "content": instructions})
        owners.append(None)
        parts.append(None)
    for index, message in enumerate(messages):
        if isinstance(message, _messages.ModelResponse):
            read: list[tuple[int | None, dict[str, Any]]] = [(None, _response_dict(message))]
        elif isinstance(message, _messages.ModelRequest):
            read = list(_request_dicts(message))
        else:
            raise ConfigurationError(
                f"message {index} is a {type(message).__name__}, not a pydantic-ai "
                "ModelRequest or ModelResponse"
            )
        dicts.extend(d for _, d in read)
        owners.extend([index] * len(read))
        parts.extend(p for p, _ in read)
    return dicts, owners, parts


def _request_dicts(request: _messages.ModelRequest) -> list[tuple[int | None, dict[str, Any]]]:
    """The dicts a request is read as, each with the index of its part."""
    out: list[tuple[int | None, dict[str, Any]]] = []
    for number, part in enumerate(request.parts):
        read: dict[str, Any] | None = None
        if isinstance(part, _messages.SystemPromptPart):
            read = {"role": "system", "content": part.content}
        elif isinstance(part, _messages.UserPromptPart):
            read = {"role": "user", "content": _user_content(part.content)}
        elif isinstance(part, _messages.NativeToolReturnPart):
            read = {"role": "user", "content": _text(part.content)}
        elif isinstance(part, _messages.BaseToolReturnPart):
            read = {"role": "tool", "tool_call_id": part.tool_call_id, "content": _tool_text(part)}
        elif isinstance(part, _messages.RetryPromptPart):  # pyright: ignore[reportDeprecated]
            text = _retry_text(part)
            if part.tool_name is not None:
                read = {"role": "tool", "tool_call_id": part.tool_call_id, "content": text}
            else:
                read = {"role": "user", "content": text}
        elif isinstance(part, _messages.RetryFeedbackPart):
            read = {"role": "user", "content": _retry_text(part)}
        if read is not None:
            out.append((number, read))
        # Delta and bookkeeping parts are not sent as messages.
    return out


def _response_dict(response: _messages.ModelResponse) -> dict[str, Any]:
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in response.parts:
        if isinstance(part, _messages.TextPart):
            text.append(part.content)
        elif isinstance(part, _messages.ThinkingPart):
            reasoning.append(part.content)
        elif isinstance(part, _messages.NativeToolCallPart):
            # Server-side tool calls travel inside their response, with their returns.
            text.append(part.args_as_json_str())
        elif isinstance(part, _messages.BaseToolCallPart):
            calls.append(
                {
                    "id": part.tool_call_id,
                    "type": "function",
                    "function": {"name": part.tool_name, "arguments": part.args_as_json_str()},
                }
            )
        elif isinstance(part, _messages.NativeToolReturnPart):
            text.append(_text(part.content))
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if reasoning:
        message["reasoning_content"] = "\n".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    return message


def _user_content(content: object) -> object:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for item in content if isinstance(content, Iterable) else [content]:
        if isinstance(item, str):
            parts.append({"type": "text", "text": item})
        elif isinstance(item, (_messages.ImageUrl, _messages.BinaryImage)) or (
            isinstance(item, _messages.BinaryContent) and item.is_image
        ):
            # Media counts as a fixed per-item cost, never by its bytes.
            parts.append({"type": "image_url", "image_url": {"url": "image"}})
        elif isinstance(item, (_messages.FileUrl, _messages.BinaryContent, _messages.UploadedFile)):
            parts.append({"type": "file", "file": {"filename": "file"}})
        elif isinstance(item, _messages.CachePoint):
            continue
        else:
            parts.append({"type": "text", "text": _text(getattr(item, "content", item))})
    return parts


def _tool_text(part: _messages.BaseToolReturnPart[Any]) -> str:
    try:
        return part.model_response_str()
    except Exception:  # an unusual content type: count what it prints as
        return _text(part.content)


def _retry_text(part: object) -> str:
    try:
        return str(cast(Any, part).model_response())
    except Exception:
        return _text(getattr(part, "content", ""))


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def tool_dicts(definitions: Iterable[ToolDefinition]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description or "",
                "parameters": tool.parameters_json_schema,
            },
        }
        for tool in definitions
    ]


def sent_messages(
    messages: Sequence[ModelMessage],
    owners: Sequence[int | None],
    fit: Fit,
    dicts: list[Any],
    parts: Sequence[int | None],
) -> tuple[list[ModelMessage], list[tuple[ModelMessage, ModelMessage]]]:
    """The messages owning a kept dict, in order, each a copy carrying its edited dicts
    when it has any, with a summary's ``ModelRequest`` before the first message after
    it; a message owning no dict goes with the next message that owns one (or the
    previous, at the end).

    Returns:
        The messages to send, and ``(copy, original)`` for each edited copy among them.
    """
    keep: dict[int, dict[int, Mapping[str, Any]]] = {}  # owner -> {dict index: edited}
    before: dict[int, list[ModelMessage]] = {}  # summaries, by the owner they precede
    waiting: list[ModelMessage] = []
    for index, sent in zip(align(dicts, fit.messages), fit.messages, strict=True):
        if index is None:
            waiting.append(_summary_request(cast("Mapping[str, Any]", sent)))
            continue
        owner = owners[index]
        if owner is None:
            continue  # the instructions: counted, not a message
        if waiting:
            before.setdefault(owner, []).extend(waiting)
            waiting = []
        edits = keep.setdefault(owner, {})
        # An equal dict of an earlier send is the same message, not an edit of it.
        if sent is not dicts[index] and sent != dicts[index]:
            edits[index] = cast("Mapping[str, Any]", sent)
    out: list[ModelMessage] = []
    copies: list[tuple[ModelMessage, ModelMessage]] = []
    owned = set(owners)
    pending: list[ModelMessage] = []
    last_kept = False
    for index, message in enumerate(messages):
        if index not in owned:
            pending.append(message)
            continue
        last_kept = index in keep
        if last_kept:
            out.extend(before.get(index, ()))
            out.extend(pending)
            edited = keep[index]
            if edited:
                copy = _edited(message, edited, parts)
                copies.append((copy, message))
                out.append(copy)
            else:
                out.append(message)
        pending = []
    if pending and last_kept:
        out.extend(pending)
    out.extend(waiting)
    return out, copies


def _summary_request(sent: Mapping[str, Any]) -> _messages.ModelRequest:
    return _messages.ModelRequest(parts=[_messages.UserPromptPart(content=sent["content"])])


def _edited(
    message: ModelMessage, edited: Mapping[int, Mapping[str, Any]], parts: Sequence[int | None]
) -> ModelMessage:
    """A copy of ``message`` with its edited dicts' content: a request's tool returns
    (the edited text, as a ``ToolReturnPart``), a response's cleared call arguments."""
    if isinstance(message, _messages.ModelResponse):
        arguments: dict[object, str] = {}
        for sent in edited.values():
            arguments.update(call_arguments(sent))
        new_parts: list[Any] = [
            dataclasses.replace(
                cast(Any, part), args=_arguments(part, arguments[part.tool_call_id])
            )
            if isinstance(part, _messages.BaseToolCallPart)
            and not isinstance(part, _messages.NativeToolCallPart)
            and part.tool_call_id in arguments
            else part
            for part in message.parts
        ]
        return dataclasses.replace(message, parts=new_parts)
    texts = {parts[index]: sent.get("content") for index, sent in edited.items()}
    request_parts: list[Any] = list(message.parts)
    for number, text in texts.items():
        if number is None:
            continue
        part = request_parts[number]
        if isinstance(part, _messages.BaseToolReturnPart):
            request_parts[number] = dataclasses.replace(part, content=text)
        elif isinstance(part, _messages.RetryPromptPart):  # pyright: ignore[reportDeprecated]
            # A retry prompt is sent with a suffix of pydantic-ai's own: as a tool return
            # the model is sent exactly the edited text that was counted.
            request_parts[number] = _messages.ToolReturnPart(
                tool_name=part.tool_name or "",
                content=text,
                tool_call_id=part.tool_call_id,
                timestamp=part.timestamp,
            )
    return dataclasses.replace(message, parts=request_parts)


def _arguments(part: _messages.BaseToolCallPart[Any], text: str) -> str | dict[str, Any]:
    """Cleared arguments in the form the part holds them (JSON text or a dict)."""
    if isinstance(part.args, str):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
