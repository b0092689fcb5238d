"""Gemini ``models.countTokens``, as ``POST /v1beta/models/{model}:countTokens`` takes it.

The request (ai.google.dev/api/tokens) carries either ``contents`` or a whole
``generateContentRequest`` (``model``, ``contents``, ``systemInstruction``, ``tools``);
when the latter is set the former is ignored, and only the latter counts the system
instruction and the function declarations. The answer is ``{"totalTokens",
"promptTokensDetails": [{"modality": "TEXT", "tokenCount"}]}``. Errors follow Google's
API error model, ``{"error": {"code", "message", "status"}}``
(ai.google.dev/gemini-api/docs/troubleshooting).

The emulator converts the request to OpenAI chat form and counts it with its chat
template, so the count equals what its chat endpoint counts for the same conversation:

* ``systemInstruction`` text -> a leading system message;
* a ``user`` turn -> ``tool`` messages for its ``functionResponse`` parts (their
  ``response`` object; ``{"content": text}`` counts as the text), then a user message
  for its text;
* a ``model`` turn -> an assistant message: its text, and a tool call per
  ``functionCall`` (``args`` serialised with ``json.dumps``, ``ensure_ascii=False``;
  the call's ``id``, or its name when it has none);
* ``functionDeclarations`` -> ``{"type": "function", "function": declaration}``; other
  parts (inline data, files) and built-in tools count as nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...core.provider_errors import WireError
from ._common import ParsedRequest

__all__ = ["gemini_error", "parse_count_tokens_request"]


def gemini_error(status: int, message: str, code: str = "INVALID_ARGUMENT") -> WireError:
    """An error in Google's API error model (``code``, ``message``, ``status``)."""
    error = {"code": status, "message": message, "status": code}
    return WireError(status=status, body={"error": error})


class _Invalid(Exception):
    pass


def _parts(content: Mapping[str, Any], where: str) -> list[Mapping[str, Any]]:
    parts = content.get("parts")
    if not isinstance(parts, list) or not all(isinstance(p, Mapping) for p in parts):
        raise _Invalid(f"{where}.parts: a list of Part objects is required")
    return parts


def _texts(parts: list[Mapping[str, Any]]) -> str:
    return "".join(str(p["text"]) for p in parts if isinstance(p.get("text"), str))


def _messages(contents: object, system: object) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(system, Mapping):
        text = _texts(_parts(system, "systemInstruction"))
        if text:
            out.append({"role": "system", "content": text})
    if not isinstance(contents, list) or not contents:
        raise _Invalid("contents: contents is not specified")
    for index, content in enumerate(contents):
        where = f"contents[{index}]"
        if not isinstance(content, Mapping):
            raise _Invalid(f"{where}: a Content object is required")
        parts = _parts(content, where)
        role = content.get("role", "user")
        if role == "model":
            message: dict[str, Any] = {"role": "assistant", "content": _texts(parts) or None}
            calls = []
            for part in parts:
                call = part.get("functionCall")
                if isinstance(call, Mapping):
                    name = str(call.get("name", ""))
                    arguments = json.dumps(call.get("args", {}), ensure_ascii=False)
                    function = {"name": name, "arguments": arguments}
                    call_id = str(call.get("id") or name)
                    calls.append({"id": call_id, "type": "function", "function": function})
            if calls:
                message["tool_calls"] = calls
            out.append(message)
        elif role in ("user", "function"):
            for part in parts:
                response = part.get("functionResponse")
                if isinstance(response, Mapping):
                    value = response.get("response", {})
                    single = isinstance(value, Mapping) and list(value) == ["content"]
                    wrapped = value["content"] if single else None
                    call_id = str(response.get("id") or response.get("name", ""))
                    result = json.dumps(value, ensure_ascii=False)
                    body = wrapped if isinstance(wrapped, str) else result
                    out.append({"role": "tool", "tool_call_id": call_id, "content": body})
            text = _texts(parts)
            if text or not any("functionResponse" in p for p in parts):
                out.append({"role": "user", "content": text})
        else:
            raise _Invalid(f"{where}.role: Please use a valid role: user, model.")
    return out


def _tools(tools: object) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in tools if isinstance(tools, list) else ():
        declarations = tool.get("functionDeclarations") if isinstance(tool, Mapping) else None
        for declaration in declarations if isinstance(declarations, list) else ():
            if isinstance(declaration, Mapping) and isinstance(declaration.get("name"), str):
                out.append({"type": "function", "function": dict(declaration)})
    return out


def parse_count_tokens_request(body: Any, *, model: str) -> ParsedRequest | WireError:
    """Validate a ``countTokens`` body and convert it to chat form.

    Args:
        body: the decoded JSON body.
        model: the model named in the path.

    Returns:
        The parsed request (chat messages and tools), or the error the API answers.
    """
    if not isinstance(body, Mapping):
        return gemini_error(400, "Invalid JSON payload received. Expected an object.")
    request = body.get("generateContentRequest")
    try:
        if isinstance(request, Mapping):
            if not isinstance(request.get("model"), str):
                raise _Invalid("model: model is required")
            messages = _messages(request.get("contents"), request.get("systemInstruction"))
            tools = _tools(request.get("tools"))
        else:
            messages, tools = _messages(body.get("contents"), None), []
    except _Invalid as exc:
        return gemini_error(400, f"* GenerateContentRequest.{exc}")
    return ParsedRequest(model=model, messages=tuple(messages), tools=tuple(tools))
