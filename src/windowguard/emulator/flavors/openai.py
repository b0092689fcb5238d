"""The OpenAI Chat Completions wire format, as OpenAI, vLLM and llama.cpp serve it.

Three jobs: validate a ``POST /v1/chat/completions`` body into a
:class:`~._common.ParsedRequest` (or the 400 the server answers), render a fitted reply
as a ``chat.completion`` object or as ``chat.completion.chunk`` server-sent events, and
answer the flavour's discovery endpoints.

Validation follows OpenAI's own checks and wording (its API reference and the errors it
returns): a missing ``messages``, an unknown role, a ``tool`` message that answers no
call of the assistant message right before it, and an assistant ``tool_calls`` message
whose calls are not all answered are rejected. The error *shape* is the flavour's (via
:func:`windowguard.core.provider_errors.invalid_request_error`).

Streaming: the first chunk carries the role, then text deltas, then each tool call (id
and name first, then argument pieces), then a chunk with ``finish_reason``; with
``stream_options.include_usage`` every chunk has ``"usage": null`` and one last chunk
with no choices carries the usage; the stream ends with ``data: [DONE]``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ...core import provider_errors
from ...core.provider_errors import Flavor, WireError
from ..scenarios import ToolSpec
from ._common import Answer, ParsedRequest, pieces, sse

__all__ = ["discovery", "parse_chat_request", "render_chat", "render_chat_stream"]

_ROLES = ("system", "assistant", "user", "function", "tool", "developer")


def _invalid(flavor: Flavor, message: str, param: str | None = None) -> WireError:
    return provider_errors.invalid_request_error(flavor, message, param=param)


def parse_chat_request(flavor: Flavor, body: Any) -> ParsedRequest | WireError:
    """Validate a chat completions body.

    Args:
        flavor: ``"openai"``, ``"vllm"`` or ``"llamacpp"``.
        body: the decoded JSON body.

    Returns:
        The parsed request, or the 400 the server answers.
    """
    if not isinstance(body, Mapping):
        return _invalid(flavor, "The request body must be a JSON object.")
    model = body.get("model")
    if model is None and flavor == "openai":
        return _invalid(flavor, "you must provide a model parameter")
    if model is not None and not isinstance(model, str):
        return _invalid(
            flavor, f"Invalid type for 'model': expected a string, got {model!r}.", "model"
        )
    messages = body.get("messages")
    if messages is None:
        return _invalid(flavor, "Missing required parameter: 'messages'.", "messages")
    if not isinstance(messages, list) or not messages:
        return _invalid(flavor, f"{messages!r} is too short - 'messages'", "messages")
    problem = _check_messages(messages)
    if problem is not None:
        return _invalid(flavor, *problem)
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        return _invalid(flavor, "Invalid type for 'tools': expected an array.", "tools")
    specs: list[ToolSpec] = []
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            param = f"tools[{index}].function.name"
            return _invalid(flavor, f"Missing required parameter: '{param}'.", param)
        parameters = function.get("parameters")
        specs.append(
            ToolSpec(
                name=function["name"],
                description=str(function.get("description") or ""),
                parameters=parameters if isinstance(parameters, Mapping) else {},
            )
        )
    requested = body.get("max_completion_tokens")
    name = "max_completion_tokens"
    if requested is None:
        requested, name = body.get("max_tokens"), "max_tokens"
    if requested is not None and (
        isinstance(requested, bool) or not isinstance(requested, int) or requested < 1
    ):
        return _invalid(
            flavor,
            f"Invalid '{name}': integer below minimum value. Expected a value >= 1, "
            f"but got {requested!r} instead.",
            name,
        )
    options = body.get("stream_options")
    return ParsedRequest(
        model=model or "",
        messages=tuple(messages),
        tools=tuple(tools),
        tool_specs=tuple(specs),
        requested_output=requested,
        stream=bool(body.get("stream")),
        include_usage=isinstance(options, Mapping) and bool(options.get("include_usage")),
    )


def _check_messages(messages: list[Any]) -> tuple[str, str] | None:
    """The first structural problem as ``(message, param)``, or None."""
    open_calls: set[str] = set()
    open_since = -1
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            return (
                f"Invalid type for 'messages[{index}]': expected an object.",
                f"messages[{index}]",
            )
        role = message.get("role")
        if role is None:
            param = f"messages[{index}].role"
            return (f"Missing required parameter: '{param}'.", param)
        if role not in _ROLES:
            supported = ", ".join(f"'{r}'" for r in _ROLES[:-1]) + f", and '{_ROLES[-1]}'"
            return (
                f"Invalid value: {role!r}. Supported values are: {supported}.",
                f"messages[{index}].role",
            )
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str):
                param = f"messages[{index}].tool_call_id"
                return (f"Missing required parameter: '{param}'.", param)
            if open_since < 0:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    f"messages.[{index}].role",
                )
            if call_id not in open_calls:
                return (
                    f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in "
                    "'tool_calls' of previous message.",
                    f"messages.[{index}].tool_call_id",
                )
            open_calls.discard(call_id)
            continue
        if open_calls:
            return _unanswered(open_calls, open_since)
        open_since = -1
        if role in ("user", "system", "developer") and "content" not in message:
            param = f"messages[{index}].content"
            return (f"Missing required parameter: '{param}'.", param)
        if role == "assistant" and message.get("tool_calls"):
            calls = message["tool_calls"]
            if not isinstance(calls, list):
                param = f"messages[{index}].tool_calls"
                return (f"Invalid type for '{param}': expected an array.", param)
            for call in calls:
                call_id = call.get("id") if isinstance(call, Mapping) else None
                if not isinstance(call_id, str):
                    param = f"messages[{index}].tool_calls[{calls.index(call)}].id"
                    return (f"Missing required parameter: '{param}'.", param)
                open_calls.add(call_id)
            open_since = index
    if open_calls:
        return _unanswered(open_calls, open_since)
    return None


def _unanswered(open_calls: set[str], index: int) -> tuple[str, str]:
    return (
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(sorted(open_calls)),
        f"messages.[{index}].role",
    )


def _usage(answer: Answer) -> dict[str, Any] | None:
    if answer.usage_omitted:
        return None
    prompt = answer.reported_prompt_tokens
    completion = answer.reply.completion_tokens
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if answer.flavor == "openai":
        usage["prompt_tokens_details"] = {
            "cached_tokens": answer.cached_tokens or 0,
            "audio_tokens": 0,
        }
        usage["completion_tokens_details"] = {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        }
    elif answer.cached_tokens is not None:  # an emulated prompt cache (usage.UsagePlan)
        usage["prompt_tokens_details"] = {"cached_tokens": answer.cached_tokens}
    elif answer.flavor == "vllm":
        usage["prompt_tokens_details"] = None
    return usage


def _finish_reason(answer: Answer) -> str:
    if answer.reply.truncated:
        return "length"
    return "tool_calls" if answer.reply.tool_calls else "stop"


def _tool_calls(answer: Answer) -> list[dict[str, Any]]:
    return [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments_json()},
        }
        for call_id, call in answer.reply.tool_calls
    ]


def render_chat(answer: Answer) -> dict[str, Any]:
    """The ``chat.completion`` object for a fitted reply."""
    message: dict[str, Any] = {"role": "assistant", "content": answer.reply.text or None}
    if answer.reply.tool_calls:
        message["tool_calls"] = _tool_calls(answer)
    if answer.flavor == "openai":
        message["refusal"] = None
        message["annotations"] = []
    result: dict[str, Any] = {
        "id": f"chatcmpl-{answer.response_id}",
        "object": "chat.completion",
        "created": answer.created,
        "model": answer.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _finish_reason(answer),
            }
        ],
        "usage": _usage(answer),
    }
    if answer.flavor == "openai":
        result["system_fingerprint"] = "fp_windowguard"
        result["service_tier"] = "default"
    return result


def render_chat_stream(answer: Answer, *, include_usage: bool) -> Iterator[bytes]:
    """The ``chat.completion.chunk`` server-sent events for a fitted reply."""
    base: dict[str, Any] = {
        "id": f"chatcmpl-{answer.response_id}",
        "object": "chat.completion.chunk",
        "created": answer.created,
        "model": answer.model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data = dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}])
        if include_usage:
            data["usage"] = None
        return sse(data)

    yield chunk({"role": "assistant", "content": ""})
    for piece in pieces(answer.reply.text):
        yield chunk({"content": piece})
    for index, call in enumerate(_tool_calls(answer)):
        head = {"index": index, "id": call["id"], "type": "function"}
        yield chunk(
            {
                "tool_calls": [
                    head | {"function": {"name": call["function"]["name"], "arguments": ""}}
                ]
            }
        )
        for piece in pieces(call["function"]["arguments"], size=16):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, _finish_reason(answer))
    if include_usage and not answer.usage_omitted:
        yield sse(dict(base, choices=[], usage=_usage(answer)))
    yield sse("[DONE]")


def discovery(flavor: str, path: str, *, model: str, context_window: int) -> dict[str, Any] | None:
    """The JSON a discovery ``GET`` answers, or None for an unknown path.

    vLLM reports ``max_model_len`` on each ``/v1/models`` entry; llama.cpp reports the
    running context size as ``/props`` ``default_generation_settings.n_ctx`` and as
    ``meta.n_ctx`` on ``/v1/models`` (alongside the training size ``n_ctx_train``).
    """
    entry: dict[str, Any] = {"id": model, "object": "model", "created": 0, "owned_by": flavor}
    if flavor == "vllm":
        entry |= {
            "owned_by": "vllm",
            "root": model,
            "parent": None,
            "max_model_len": context_window,
        }
    if flavor == "llamacpp":
        entry |= {
            "owned_by": "llamacpp",
            "meta": {"n_ctx": context_window, "n_ctx_train": context_window, "n_vocab": 0},
        }
    if path == "/v1/models":
        return {"object": "list", "data": [entry]}
    if path == f"/v1/models/{model}":
        return entry
    if flavor == "llamacpp" and path == "/props":
        return {
            "default_generation_settings": {"n_ctx": context_window, "n_predict": -1},
            "total_slots": 1,
            "model_path": model,
            "chat_template": "",
        }
    if flavor in ("vllm", "llamacpp") and path == "/health":
        return {"status": "ok"}
    if flavor == "vllm" and path == "/version":
        return {"version": "emulated"}
    return None
