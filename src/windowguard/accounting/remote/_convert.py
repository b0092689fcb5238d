"""Converting a query to what a count API takes.

The open servers take OpenAI Chat Completions messages and ``{"type": "function",
"function": ...}`` tools; OpenAI takes Responses items; Anthropic its Messages; Gemini
``contents``. Everything goes through chat form (the hub), except that a transcript
already in the endpoint's own format is sent as it is. SDK objects are dumped with
``model_dump(exclude_none=True)`` first. What a conversion cannot carry (reasoning
items) counts as nothing, and media would too: a request holding images, files or audio
is refused before it is converted (``Counter.media_formats``). What a conversion cannot
express at all (a message that is not an object, an unknown role, a built-in tool call
for a chat template) raises :class:`Unconvertible`, which the counters turn into
``RemoteCountError``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._types import CountQuery, Json

__all__ = [
    "Unconvertible",
    "anthropic_tools",
    "arguments_object",
    "chat_messages",
    "chat_to_anthropic",
    "chat_to_gemini",
    "chat_to_items",
    "chat_tools",
    "function_of",
    "mapping",
    "plain",
    "responses_tools",
    "text_of",
]


def plain(value: object) -> Any:
    """Plain JSON data: SDK objects dumped (``model_dump(exclude_none=True)``)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        value = dump(exclude_none=True)
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def text_of(content: object) -> str:
    """The text of a string or a list of text parts/blocks (other parts count nothing)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping):
                text = part.get("text", part.get("refusal"))
                texts.append(text if isinstance(text, str) else "")
        return "".join(texts)
    return ""


class Unconvertible(Exception):
    """A message or tool that cannot be expressed in the endpoint's format."""


def mapping(value: object, what: str) -> Json:
    if not isinstance(value, dict):
        raise Unconvertible(f"{what} is a {type(value).__name__}, not an object")
    return value


def arguments_object(raw: object, what: str) -> Json:
    """Tool-call arguments as an object (Anthropic ``input``, Gemini ``args``)."""
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        raise Unconvertible(f"{what}: arguments are not JSON") from None
    if value is None or value == "":
        return {}
    if not isinstance(value, dict):
        raise Unconvertible(f"{what}: arguments are not a JSON object")
    return value


# --------------------------------------------------------------------------- tools


def function_of(tool: Json) -> Json | None:
    """The function definition of a function tool in any format: the chat form's
    ``function``, a Responses tool without its ``type`` (``strict`` kept, so a round
    trip through Responses renders the same), or Anthropic's ``name``, ``description``
    and ``input_schema`` (as ``parameters``)."""
    if isinstance(tool.get("function"), dict):
        function = dict(tool["function"])
    elif "input_schema" in tool:
        function = {key: tool[key] for key in ("name", "description") if key in tool}
        function["parameters"] = tool["input_schema"]
    elif tool.get("type") == "function":
        function = {key: value for key, value in tool.items() if key != "type"}
    else:
        return None
    return function if isinstance(function.get("name"), str) else None


def chat_tools(tools: Sequence[object]) -> list[Json]:
    """Tools as OpenAI chat ``{"type": "function", "function": {...}}`` dicts."""
    out = []
    for index, raw in enumerate(tools):
        tool = mapping(plain(raw), f"tool {index}")
        if isinstance(tool.get("function"), dict):
            out.append(tool)  # already chat form: passed on exactly as the caller sends it
            continue
        function = function_of(tool)
        if function is None:
            raise Unconvertible(f"tool {index} ({tool.get('type')!r}) is not a function tool")
        out.append({"type": "function", "function": function})
    return out


def anthropic_tools(tools: Sequence[object]) -> list[Json]:
    out = []
    for index, raw in enumerate(tools):
        tool = mapping(plain(raw), f"tool {index}")
        is_chat = isinstance(tool.get("function"), dict) or tool.get("type") == "function"
        if not is_chat and isinstance(tool.get("name"), str):
            out.append(tool)  # Anthropic form, server tools included
            continue
        function = function_of(tool)
        if function is None:
            raise Unconvertible(f"tool {index} is not a function tool")
        converted = {"name": function["name"]}
        if "description" in function:
            converted["description"] = function["description"]
        converted["input_schema"] = function.get("parameters") or {"type": "object"}
        out.append(converted)
    return out


def responses_tools(tools: Sequence[object]) -> list[Json]:
    out = []
    for index, raw in enumerate(tools):
        tool = mapping(plain(raw), f"tool {index}")
        if tool.get("type") not in (None, "function") or (
            tool.get("type") == "function" and "function" not in tool
        ):
            out.append(tool)  # Responses form, built-in tools included
            continue
        function = function_of(tool)
        if function is None:
            raise Unconvertible(f"tool {index} is not a function tool")
        out.append({"type": "function", **function})
    return out


# --------------------------------------------------------------------------- messages


def chat_messages(query: CountQuery) -> list[Json]:
    """The query as OpenAI Chat Completions messages (the open servers' form)."""
    messages = [plain(m) for m in query.messages]
    system = plain(query.system)
    if query.format == "openai_chat":
        out = [mapping(m, f"message {i}") for i, m in enumerate(messages)]
        return ([{"role": "system", "content": text_of(system)}] if system else []) + out
    if query.format == "anthropic":
        return anthropic_to_chat(messages, system)
    if query.format == "responses":
        return items_to_chat(messages, system)
    raise Unconvertible(f"unknown format {query.format!r}")


def anthropic_to_chat(messages: list[Any], system: object) -> list[Json]:
    """Anthropic Messages -> chat, as the emulator's Anthropic flavour converts them:
    ``tool_use`` -> ``tool_calls``, ``tool_result`` -> ``tool`` messages (first), text
    and thinking joined, media counted as nothing."""
    out: list[Json] = [{"role": "system", "content": text_of(system)}] if system else []
    for index, raw in enumerate(messages):
        message = mapping(raw, f"message {index}")
        role, content = message.get("role"), message.get("content")
        if role not in ("user", "assistant"):
            raise Unconvertible(f"message {index}: role {role!r} is not user or assistant")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise Unconvertible(f"message {index}: content is neither text nor blocks")
        texts: list[str] = []
        calls: list[Json] = []
        results: list[Json] = []
        for position, raw_block in enumerate(blocks):
            block = mapping(raw_block, f"message {index} block {position}")
            kind = block.get("type")
            if kind in ("text", "thinking"):
                texts.append(str(block.get("text", block.get("thinking", ""))))
            elif kind == "tool_use":
                arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
                function = {"name": str(block.get("name")), "arguments": arguments}
                calls.append({"id": str(block.get("id")), "type": "function", "function": function})
            elif kind == "tool_result":
                results.append(
                    {
                        "role": "tool",
                        "tool_call_id": str(block.get("tool_use_id")),
                        "content": text_of(block.get("content")),
                    }
                )
        if role == "user":
            out += results
            if texts or not results:
                out.append({"role": "user", "content": "".join(texts)})
            continue
        entry: Json = {"role": "assistant", "content": "".join(texts) or None}
        if calls:
            entry["tool_calls"] = calls
        out.append(entry)
    return out


def items_to_chat(items: list[Any], instructions: object) -> list[Json]:
    """Responses input items -> chat: messages, ``function_call`` (merged into the
    assistant turn before it), ``function_call_output``; reasoning is not re-sent."""
    out: list[Json] = [{"role": "system", "content": text_of(instructions)}] if instructions else []
    open_turn = False  # the last chat message is an assistant turn calls may join
    for index, raw in enumerate(items):
        if isinstance(raw, str):
            raw = {"role": "user", "content": raw}
        item = mapping(raw, f"item {index}")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise Unconvertible(f"item {index}: message role {role!r}")
            out.append({"role": role, "content": text_of(item.get("content"))})
            open_turn = role == "assistant"
        elif kind == "function_call":
            function = {"name": str(item.get("name")), "arguments": str(item.get("arguments"))}
            call = {"id": str(item.get("call_id")), "type": "function", "function": function}
            if not open_turn:
                out.append({"role": "assistant", "content": None})
                open_turn = True
            out[-1].setdefault("tool_calls", []).append(call)
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else text_of(output)
            out.append({"role": "tool", "tool_call_id": str(item.get("call_id")), "content": text})
            open_turn = False
        elif kind != "reasoning":
            raise Unconvertible(f"item {index}: a {kind!r} item has no chat-message form")
    return out


def chat_to_items(chat: list[Json]) -> list[Json]:
    """Chat messages -> Responses items (messages, ``function_call``,
    ``function_call_output``)."""
    items: list[Json] = []
    for index, message in enumerate(chat):
        role = message.get("role")
        if role == "tool":
            output = text_of(message.get("content"))
            call_id = str(message.get("tool_call_id"))
            items.append({"type": "function_call_output", "call_id": call_id, "output": output})
            continue
        if role not in ("system", "developer", "user", "assistant"):
            raise Unconvertible(f"message {index}: role {role!r}")
        text = text_of(message.get("content"))
        if role != "assistant" or text or not message.get("tool_calls"):
            items.append({"role": role, "content": text})
        for call in message.get("tool_calls") or ():
            function = mapping(call, f"message {index} tool call").get("function") or {}
            items.append(
                {
                    "type": "function_call",
                    "call_id": str(call.get("id")),
                    "name": str(function.get("name")),
                    "arguments": str(function.get("arguments") or ""),
                }
            )
    return items


def chat_to_anthropic(chat: list[Json]) -> tuple[str | None, list[Json]]:
    """Chat messages -> (system, Anthropic messages): consecutive turns of one role
    merged, tool results as ``tool_result`` blocks of a user message."""
    systems = [text_of(m.get("content")) for m in chat if m.get("role") in ("system", "developer")]
    out: list[Json] = []
    for index, message in enumerate(chat):
        role = message.get("role")
        if role in ("system", "developer"):
            continue
        blocks: list[Json] = []
        text = text_of(message.get("content"))
        if role == "tool":
            content = text_of(message.get("content"))
            use_id = str(message.get("tool_call_id"))
            blocks.append({"type": "tool_result", "tool_use_id": use_id, "content": content})
            role = "user"
        elif role == "assistant":
            if text:
                blocks.append({"type": "text", "text": text})
            for call in message.get("tool_calls") or ():
                function = mapping(call, f"message {index} tool call").get("function") or {}
                what = f"message {index} tool call"
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": str(call.get("id")),
                        "name": str(function.get("name")),
                        "input": arguments_object(function.get("arguments"), what),
                    }
                )
        elif role == "user":
            blocks.append({"type": "text", "text": text})
        else:
            raise Unconvertible(f"message {index}: role {role!r}")
        if out and out[-1]["role"] == role:
            out[-1]["content"] += blocks
        else:
            out.append({"role": role, "content": blocks})
    return ("\n\n".join(systems) if systems else None), out


def chat_to_gemini(chat: list[Json]) -> tuple[Json | None, list[Json]]:
    """Chat messages -> (``systemInstruction``, ``contents``): assistant turns are role
    ``model`` with ``functionCall`` parts; tool results are ``functionResponse`` parts
    of a user turn, their text wrapped as ``{"content": text}`` (a response must be a
    JSON object: ai.google.dev/gemini-api/docs/function-calling)."""
    system: list[Json] = []
    contents: list[Json] = []
    names: dict[str, str] = {}
    for index, message in enumerate(chat):
        role = message.get("role")
        text = text_of(message.get("content"))
        if role in ("system", "developer"):
            system.append({"text": text})
            continue
        parts: list[Json] = []
        if role == "assistant":
            gemini_role = "model"
            if text:
                parts.append({"text": text})
            for call in message.get("tool_calls") or ():
                function = mapping(call, f"message {index} tool call").get("function") or {}
                call_id, name = str(call.get("id")), str(function.get("name"))
                names[call_id] = name
                args = arguments_object(function.get("arguments"), f"message {index} tool call")
                parts.append({"functionCall": {"id": call_id, "name": name, "args": args}})
        elif role == "tool":
            gemini_role = "user"
            call_id = str(message.get("tool_call_id"))
            response = {
                "id": call_id,
                "name": names.get(call_id, ""),
                "response": {"content": text},
            }
            parts.append({"functionResponse": response})
        elif role == "user":
            gemini_role = "user"
            parts.append({"text": text})
        else:
            raise Unconvertible(f"message {index}: role {role!r}")
        merge = role == "tool" and contents and contents[-1].get("_tool")
        if merge:
            contents[-1]["parts"] += parts
        elif parts:
            contents.append({"role": gemini_role, "parts": parts, "_tool": role == "tool"})
    for content in contents:
        del content["_tool"]
    return ({"parts": system} if system else None), contents
