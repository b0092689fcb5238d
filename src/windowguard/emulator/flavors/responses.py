"""OpenAI Responses requests: ``POST /v1/responses`` and ``/v1/responses/input_tokens``.

The create request (OpenAI API reference, Responses "Create a model response"; SDK
``responses.create``) is validated by :func:`parse_create_request` into the same
chat-form :class:`~._common.ParsedRequest` every flavour produces, so it is counted,
limited and answered exactly like a chat completion of the same conversation; the
reply is rendered by :mod:`.responses_render`. Beyond the input conversion below it
checks what the API checks before generating: ``model`` and ``input`` present,
``max_output_tokens`` at least 16, every ``function_call`` answered by a
``function_call_output`` with its ``call_id`` and every output answering a call
(anywhere in the input: the Responses API pairs by ``call_id``, not by position), and
no ``previous_response_id`` (the emulator keeps no server-side state, so it answers as
the API does for an id it does not know). A prompt over the window gets the Responses
API's own refusal (:func:`context_window_error`); so does a prompt plus
``max_output_tokens`` over the window, checked as the chat endpoint checks
``max_tokens`` (the API documents only the input limit: this is the stricter reading).
The refusal is an HTTP 400 even with ``stream=True``; the API has also been seen to
answer a streamed request with an ``error`` event inside the stream instead.

The count request (OpenAI API reference, Responses "Get input token counts"; SDK
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

from ...core import provider_errors
from ...core.provider_errors import WireError
from ..scenarios import ToolSpec
from ._common import ParsedRequest
from .openai import parse_chat_request

__all__ = ["context_window_error", "parse_create_request", "parse_input_tokens_request"]

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


# The Responses API's overflow refusal: HTTP 400, code ``context_length_exceeded``, param
# ``input``, with no token numbers (quoted verbatim in
# https://github.com/dyad-sh/dyad/issues/1672 and
# https://github.com/onyx-dot-app/onyx/issues/6051). The Chat Completions wording, with
# its numbers, is what the chat endpoint answers; ``classify_failure`` recognises both.
RESPONSES_CONTEXT_WINDOW = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)
# The Responses API's smallest ``max_output_tokens`` (API reference, "Create a model
# response"); below it the request is refused.
_MIN_OUTPUT_TOKENS = 16


def context_window_error(refusal: WireError) -> WireError:
    """The Responses API's form of an OpenAI window refusal.

    Args:
        refusal: what the chat checks answered (:func:`..limits.enforce`).

    Returns:
        The Responses overflow error when ``refusal`` is a ``context_length_exceeded``,
        otherwise ``refusal`` unchanged.
    """
    error = refusal.body.get("error")
    if not isinstance(error, Mapping) or error.get("code") != "context_length_exceeded":
        return refusal
    body = {
        "error": {
            "message": RESPONSES_CONTEXT_WINDOW,
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded",
        }
    }
    return WireError(status=400, body=body, headers=refusal.headers)


def _check_pairing(input_value: object) -> None:
    """Every function call answered and every output answering a call, by ``call_id``."""
    if not isinstance(input_value, list):
        return
    calls: dict[str, None] = {}  # ordered: the first unanswered call is named
    outputs: set[str] = set()
    for item in input_value:
        if not isinstance(item, Mapping):
            continue
        call_id = item.get("call_id")
        if not isinstance(call_id, str):
            continue
        if item.get("type") == "function_call":
            calls[call_id] = None
        elif item.get("type") == "function_call_output":
            if call_id not in calls:
                raise _Invalid(
                    f"No tool call found for function call output with call_id {call_id}.",
                    "input",
                )
            outputs.add(call_id)
    for call_id in calls:
        if call_id not in outputs:
            raise _Invalid(f"No tool output found for function call {call_id}.", "input")


def _specs(tools: list[dict[str, Any]]) -> tuple[ToolSpec, ...]:
    specs = []
    for tool in tools:
        function = tool["function"]
        parameters = function.get("parameters")
        specs.append(
            ToolSpec(
                name=function["name"],
                description=str(function.get("description") or ""),
                parameters=parameters if isinstance(parameters, Mapping) else {},
            )
        )
    return tuple(specs)


def parse_create_request(body: Any) -> ParsedRequest | WireError:
    """Validate a ``POST /v1/responses`` body and convert it to chat form.

    Args:
        body: the decoded JSON body.

    Returns:
        The parsed request (chat messages, tools, ``max_output_tokens`` as the requested
        output, ``stream``), or the 400 the API answers.
    """
    if not isinstance(body, Mapping):
        return provider_errors.invalid_request_error("openai", "The body must be a JSON object.")
    try:
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise _Invalid("Missing required parameter: 'model'.", "model")
        previous = body.get("previous_response_id")
        if previous is not None:
            raise _Invalid(
                f"Previous response with id '{previous}' not found.", "previous_response_id"
            )
        if body.get("input") is None:
            raise _Invalid("Missing required parameter: 'input'.", "input")
        requested = body.get("max_output_tokens")
        if requested is not None and (
            isinstance(requested, bool)
            or not isinstance(requested, int)
            or requested < _MIN_OUTPUT_TOKENS
        ):
            raise _Invalid(
                "Invalid 'max_output_tokens': integer below minimum value. Expected a value "
                f">= {_MIN_OUTPUT_TOKENS}, but got {requested!r} instead.",
                "max_output_tokens",
            )
        _check_pairing(body.get("input"))
        messages = _messages(body.get("input"), body.get("instructions"))
        tools = _tools(body.get("tools"))
    except _Invalid as exc:
        return provider_errors.invalid_request_error("openai", str(exc), param=exc.param)
    return ParsedRequest(
        model=model,
        messages=tuple(messages),
        tools=tuple(tools),
        tool_specs=_specs(tools),
        requested_output=requested,
        stream=bool(body.get("stream")),
    )
