"""The Anthropic Messages wire format: validation, conversion, replies, streams.

``POST /v1/messages`` bodies are validated the way the Messages API does (required
``model``, ``max_tokens`` and ``messages``; roles ``user``/``assistant`` only, with its
special wording for a ``system`` role; every ``tool_result`` must answer a ``tool_use``
of the assistant message right before it, and every ``tool_use`` must be answered in the
next message) and converted to OpenAI Chat Completions form for counting and for
policies: ``system`` becomes a leading system message, ``tool_use`` blocks become
``tool_calls`` and ``tool_result`` blocks become ``tool`` messages.

Streams follow the documented event order: ``message_start`` (usage with the input
count), ``ping``, then per content block ``content_block_start`` /
``content_block_delta`` (``text_delta`` or ``input_json_delta``) /
``content_block_stop``, then ``message_delta`` with ``stop_reason`` and the usage, and
``message_stop``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from ...core import provider_errors
from ...core.provider_errors import WireError
from ..scenarios import ToolSpec
from ._common import Answer, ParsedRequest, pieces, sse

__all__ = [
    "WINDOW_EXCEEDED_BETA",
    "discovery",
    "parse_messages_request",
    "render_message",
    "render_stream",
]

#: the beta under which a full window ends the reply instead of rejecting the request
WINDOW_EXCEEDED_BETA = "model-context-window-exceeded-2025-08-26"


def _invalid(message: str) -> WireError:
    return provider_errors.invalid_request_error("anthropic", message)


def parse_messages_request(body: Any, *, beta_header: str = "") -> ParsedRequest | WireError:
    """Validate a Messages API body and convert it to OpenAI chat form.

    Args:
        body: the decoded JSON body.
        beta_header: the ``anthropic-beta`` request header ("" when absent).

    Returns:
        The parsed request, or the 400 the API answers.
    """
    if not isinstance(body, Mapping):
        return _invalid("Input should be a valid dictionary")
    for field in ("model", "max_tokens", "messages"):
        if field not in body:
            return _invalid(f"{field}: Field required")
    model, max_tokens, messages = body["model"], body["max_tokens"], body["messages"]
    if not isinstance(model, str):
        return _invalid("model: Input should be a valid string")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        return _invalid("max_tokens: Input should be a valid integer")
    if max_tokens < 1:
        return _invalid("max_tokens: Input should be greater than or equal to 1")
    if not isinstance(messages, list):
        return _invalid("messages: Input should be a valid list")
    converted = _convert(messages)
    if isinstance(converted, str):
        return _invalid(converted)
    system = body.get("system")
    if system:
        converted.insert(0, {"role": "system", "content": _text(system)})
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        return _invalid("tools: Input should be a valid list")
    if not tools and any(m.get("role") == "tool" or m.get("tool_calls") for m in converted):
        # The Messages API refuses a history with tool blocks but no tool definitions.
        return _invalid(
            "Requests which include `tool_use` or `tool_result` blocks must define tools."
        )
    chat_tools: list[Mapping[str, Any]] = []
    specs: list[ToolSpec] = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
            return _invalid(f"tools.{index}.name: Field required")
        schema = tool.get("input_schema")
        if not isinstance(schema, Mapping):
            if tool.get("type") in (None, "custom"):
                return _invalid(f"tools.{index}.custom.input_schema: Field required")
            continue  # a server tool (web_search ...): rendered by the server, not here
        description = str(tool.get("description") or "")
        specs.append(ToolSpec(name=tool["name"], description=description, parameters=schema))
        function = {"name": tool["name"], "description": description, "parameters": schema}
        chat_tools.append({"type": "function", "function": function})
    return ParsedRequest(
        model=model,
        messages=tuple(converted),
        tools=tuple(chat_tools),
        tool_specs=tuple(specs),
        requested_output=max_tokens,
        stream=bool(body.get("stream")),
        window_exceeded_beta=WINDOW_EXCEEDED_BETA in beta_header,
    )


def _convert(messages: list[Any]) -> list[dict[str, Any]] | str:
    """OpenAI-form messages, or the API's error text for the first problem."""
    if not messages:
        return "messages: at least one message is required"
    result: list[dict[str, Any]] = []
    pending: tuple[int, set[str]] | None = None  # (index, tool_use ids to answer)
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            return f"messages.{index}: Input should be a valid dictionary"
        role = message.get("role")
        if role == "system":
            return (
                'messages: Unexpected role "system". The Messages API accepts a top-level '
                '`system` parameter, not "system" as an input message role.'
            )
        if role not in ("user", "assistant"):
            return f"messages.{index}.role: Input should be 'user' or 'assistant'"
        if "content" not in message:
            return f"messages.{index}.content: Field required"
        blocks = _blocks(message["content"])
        if isinstance(blocks, str):
            return f"messages.{index}.content: {blocks}"
        answered: set[str] = set()
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for position, block in enumerate(blocks):
            kind = block.get("type")
            if kind == "tool_result":
                use_id = str(block.get("tool_use_id"))
                if role != "user" or pending is None or use_id not in pending[1]:
                    return (
                        f"messages.{index}.content.{position}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {use_id}. Each `tool_result` block must have a "
                        "corresponding `tool_use` block in the previous message."
                    )
                answered.add(use_id)
                result.append(
                    {"role": "tool", "tool_call_id": use_id, "content": _text(block.get("content"))}
                )
            elif kind == "tool_use":
                arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
                calls.append(
                    {
                        "id": str(block.get("id")),
                        "type": "function",
                        "function": {"name": str(block.get("name")), "arguments": arguments},
                    }
                )
            elif kind in ("text", "thinking"):
                texts.append(str(block.get("text", block.get("thinking", ""))))
        if pending is not None and pending[1] - answered:
            missing = ", ".join(sorted(pending[1] - answered))
            return (
                f"messages.{pending[0]}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {missing}. Each `tool_use` block must have a corresponding "
                "`tool_result` block in the next message."
            )
        pending = None
        if role == "user":
            if texts or not answered:
                result.append({"role": "user", "content": "".join(texts)})
            continue
        entry: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
        if calls:
            entry["tool_calls"] = calls
            pending = (index, {call["id"] for call in calls})
        result.append(entry)
    return result


def _blocks(content: Any) -> list[Mapping[str, Any]] | str:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return "Input should be a valid list"
    for block in content:
        if not isinstance(block, Mapping) or "type" not in block:
            return "Input tag not found: each content block needs a 'type'"
    return content


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(block.get("text", "")) for block in content if isinstance(block, Mapping)
        )
    return ""


def _stop_reason(answer: Answer) -> str:
    if answer.reply.truncated:
        return "model_context_window_exceeded" if answer.window_bound else "max_tokens"
    return "tool_use" if answer.reply.tool_calls else "end_turn"


def _usage(answer: Answer) -> dict[str, Any]:
    return {
        "input_tokens": answer.prompt_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": answer.reply.completion_tokens,
        "service_tier": "standard",
    }


def _content(answer: Answer) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if answer.reply.text:
        blocks.append({"type": "text", "text": answer.reply.text})
    for call_id, call in answer.reply.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call_id, "name": call.name, "input": call.arguments_object()}
        )
    return blocks


def render_message(answer: Answer) -> dict[str, Any]:
    """The ``message`` object for a fitted reply."""
    return {
        "id": f"msg_{answer.response_id}",
        "type": "message",
        "role": "assistant",
        "model": answer.model,
        "content": _content(answer),
        "stop_reason": _stop_reason(answer),
        "stop_sequence": None,
        "usage": _usage(answer),
    }


def render_stream(answer: Answer) -> Iterator[bytes]:
    """The Messages streaming events for a fitted reply."""
    start = render_message(answer) | {"content": [], "stop_reason": None}
    start["usage"] = _usage(answer) | {"output_tokens": 1}
    yield sse({"type": "message_start", "message": start}, event="message_start")
    yield sse({"type": "ping"}, event="ping")
    for index, block in enumerate(_content(answer)):
        if block["type"] == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in pieces(block["text"])]
        else:
            opening = block | {"input": {}}
            arguments = json.dumps(block["input"], ensure_ascii=False)
            deltas = [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in pieces(arguments, size=16)
            ]
        yield sse(
            {"type": "content_block_start", "index": index, "content_block": opening},
            event="content_block_start",
        )
        for delta in deltas:
            yield sse(
                {"type": "content_block_delta", "index": index, "delta": delta},
                event="content_block_delta",
            )
        yield sse({"type": "content_block_stop", "index": index}, event="content_block_stop")
    yield sse(
        {
            "type": "message_delta",
            "delta": {"stop_reason": _stop_reason(answer), "stop_sequence": None},
            "usage": _usage(answer),
        },
        event="message_delta",
    )
    yield sse({"type": "message_stop"}, event="message_stop")


def discovery(
    path: str, *, model: str, context_window: int, max_output_tokens: int | None
) -> dict[str, Any] | None:
    """The JSON the Models API answers for ``path``, or None for an unknown path."""
    entry: dict[str, Any] = {
        "type": "model",
        "id": model,
        "display_name": model,
        "created_at": "2025-01-01T00:00:00Z",
        "max_input_tokens": context_window,
        "max_tokens": max_output_tokens,
    }
    if path == "/v1/models":
        return {"data": [entry], "has_more": False, "first_id": model, "last_id": model}
    if path == f"/v1/models/{model}":
        return entry
    return None
