"""OpenAI Responses input, as ``POST /v1/responses/input_tokens`` takes it.

The request (OpenAI API reference, Responses "Get input token counts"; SDK
``responses.input_tokens.count``) carries ``model``, ``input`` (a string or a list of
input items), ``instructions`` and ``tools``; the answer is ``{"object":
"response.input_tokens", "input_tokens": n}``. The emulator converts the input to
OpenAI chat form and counts it with its chat template, so the count equals what its chat
endpoint counts for the same conversation:

* ``instructions`` -> a leading system message;
* a message item (``{"role", "content"}``, ``type`` optional) -> a chat message of that
  role; text parts (``input_text``, ``output_text``, ``refusal``) joined, images and
  files counted as nothing;
* ``function_call`` -> a tool call of the assistant message before it (a new assistant
  message when there is none), ``function_call_output`` -> a ``tool`` message;
* ``reasoning`` items are not re-sent to the template;
* function tools (``{"type": "function", "name", ...}``) -> ``{"type": "function",
  "function": {...}}``; built-in tools cannot be counted here and are refused.

Validation wording follows the API's (``Missing required parameter: 'input[0].role'.``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ... import provider_errors
from ...provider_errors import WireError
from ._common import ParsedRequest
from .openai import parse_chat_request

__all__ = ["parse_input_tokens_request"]

_ROLES = ("user", "assistant", "system", "developer")


class _Invalid(Exception):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = []
    for part in content:
        if isinstance(part, Mapping):
            value = part.get("text", part.get("refusal"))
            texts.append(value if isinstance(value, str) else "")
    return "".join(texts)


def _require(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise _Invalid(f"Missing required parameter: '{where}.{key}'.", f"{where}.{key}")
    return value


def _messages(input_value: object, instructions: object) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(instructions, str) and instructions:
        out.append({"role": "system", "content": instructions})
    if input_value is None:
        return out
    if isinstance(input_value, str):
        return [*out, {"role": "user", "content": input_value}]
    if not isinstance(input_value, list):
        raise _Invalid("Invalid type for 'input': expected a string or an array.", "input")
    open_turn = False
    for index, item in enumerate(input_value):
        where = f"input[{index}]"
        if not isinstance(item, Mapping):
            raise _Invalid(f"Invalid type for '{where}': expected an object.", where)
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in _ROLES:
                supported = "'assistant', 'system', 'developer', and 'user'"
                raise _Invalid(
                    f"Invalid value: {role!r}. Supported values are: {supported}.",
                    f"{where}.role",
                )
            out.append({"role": role, "content": _text(item.get("content"))})
            open_turn = role == "assistant"
        elif kind == "function_call":
            function = {
                "name": _require(item, "name", where),
                "arguments": _require(item, "arguments", where),
            }
            call_id = _require(item, "call_id", where)
            call = {"id": call_id, "type": "function", "function": function}
            if not open_turn:
                out.append({"role": "assistant", "content": None})
                open_turn = True
            out[-1].setdefault("tool_calls", []).append(call)
        elif kind == "function_call_output":
            call_id = _require(item, "call_id", where)
            output = item.get("output")
            text = output if isinstance(output, str) else _text(output)
            out.append({"role": "tool", "tool_call_id": call_id, "content": text})
            open_turn = False
        elif kind != "reasoning":
            raise _Invalid(
                f"The emulator cannot count input items of type {kind!r}.", f"{where}.type"
            )
    return out


def _tools(tools: object) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise _Invalid("Invalid type for 'tools': expected an array.", "tools")
    out = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            raise _Invalid(
                f"The emulator counts function tools only (tools[{index}]).", f"tools[{index}]"
            )
        if not isinstance(tool.get("name"), str):
            param = f"tools[{index}].name"
            raise _Invalid(f"Missing required parameter: '{param}'.", param)
        function = {key: value for key, value in tool.items() if key != "type"}
        out.append({"type": "function", "function": function})
    return out


def parse_input_tokens_request(body: Any) -> ParsedRequest | WireError:
    """Validate an ``input_tokens`` body and convert it to chat form.

    Args:
        body: the decoded JSON body.

    Returns:
        The parsed request (chat messages and tools), or the 400 the API answers.
    """
    if not isinstance(body, Mapping):
        return provider_errors.invalid_request_error("openai", "The body must be a JSON object.")
    try:
        messages = _messages(body.get("input"), body.get("instructions"))
        tools = _tools(body.get("tools"))
    except _Invalid as exc:
        return provider_errors.invalid_request_error("openai", str(exc), param=exc.param)
    if not messages:
        return ParsedRequest(model=str(body.get("model") or ""), messages=(), tools=tuple(tools))
    # The chat endpoint's own structural checks (tool results answer the calls before).
    checked = parse_chat_request("vllm", {"messages": messages, "tools": tools})
    if isinstance(checked, WireError):
        error = checked.body.get("error", {})
        message = str(error.get("message", "invalid input"))
        param = error.get("param")
        return provider_errors.invalid_request_error(
            "openai", message, param=param if isinstance(param, str) else None
        )
    return replace(checked, model=str(body.get("model") or ""))
