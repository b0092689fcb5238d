"""The chat templates of :mod:`windowguard.accounting.templates` as text: what a server renders.

Each renderer turns OpenAI Chat Completions messages and tool schemas into the pieces
of the prompt the family's server tokenizes, each piece tagged with who owns it (a
message index, the tool block, or the request's own framing), so a count can be split
per message. Control tokens are :class:`Special` pieces: one token each, and a split
point for the text around them.

Invariant: rendering is a pure function of the messages and tools; every text that
reaches the prompt is in exactly one piece, and joining the pieces' texts gives the
prompt text a server of the family renders (checked against the real Qwen3 template,
mistral-common and Meta's ChatFormat in ``tests/test_reference_templates.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.exceptions import ConfigurationError

__all__ = ["REQUEST", "TOOLS", "Piece", "Rendered", "Special", "render", "split_pieces"]

_LLAMA3_DATE = "26 Jul 2024"


@dataclass(frozen=True, slots=True)
class Special:
    """A control token of a template: one token, and a split point."""

    text: str


Piece = str | Special


def piece_text(piece: Piece) -> str:
    return piece.text if isinstance(piece, Special) else piece


def split_pieces(pieces: Sequence[Piece]) -> tuple[int, tuple[str, ...]]:
    """The control tokens among ``pieces`` and the texts between them (each text is
    tokenized on its own: control tokens split the text, as servers pre-split them)."""
    controls = 0
    texts: list[str] = []
    text: list[str] = []
    for piece in pieces:
        if isinstance(piece, Special):
            if text:
                texts.append("".join(text))
                text.clear()
            controls += 1
        else:
            text.append(piece)
    if text:
        texts.append("".join(text))
    return controls, tuple(t for t in texts if t)


def _str_content(message: Mapping[str, Any], index: int, joiner: str = "") -> str:
    """The text of a message's content; the text parts of a list are joined by ``joiner``
    (what the family's server puts between them: ``_JOIN``, ``_MISTRAL_JOIN``)."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return joiner.join(parts)
    raise ConfigurationError(
        f"message {index}: 'content' must be a string, a list of parts or null, "
        f"got {type(content).__name__}"
    )


def _role(message: object, index: int) -> str:
    if not isinstance(message, Mapping):
        raise ConfigurationError(
            f"message {index}: templates take OpenAI chat dicts, got {type(message).__name__}"
        )
    role = message.get("role")
    if role not in ("system", "developer", "user", "assistant", "tool"):
        raise ConfigurationError(f"message {index}: unknown role {role!r}")
    return "system" if role == "developer" else str(role)


def _calls(message: Mapping[str, Any]) -> list[tuple[str, str, object, str]]:
    """(id, name, parsed arguments, raw arguments) of each tool call."""
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        raw = function.get("arguments")
        raw_text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
        try:
            parsed: object = json.loads(raw_text) if raw_text else {}
        except ValueError:
            parsed = raw_text
        calls.append((str(call.get("id") or ""), str(function.get("name") or ""), parsed, raw_text))
    return calls


def _tojson(value: object, indent: int | None = None) -> str:
    # Hugging Face's `tojson` filter: json.dumps with ensure_ascii=False, default separators.
    return json.dumps(value, ensure_ascii=False, indent=indent)


def _tool_dicts(tools: Sequence[Mapping[str, Any]] | None) -> list[Mapping[str, Any]]:
    result = []
    for index, tool in enumerate(tools or ()):
        if not isinstance(tool, Mapping):
            raise ConfigurationError(f"tool {index}: expected a dict, got {type(tool).__name__}")
        result.append(tool)
    return result


def _function_of(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    function = tool.get("function")
    return function if isinstance(function, Mapping) else tool


# --------------------------------------------------------------------------- renderers

# The text parts of one message's content, as vLLM joins them before a template that
# takes string content renders them (vllm/entrypoints/chat_utils.py: "\n".join(texts));
# mistral-common joins text chunks with "\n\n" (protocol/instruct/normalize.py).
_JOIN = "\n"
_MISTRAL_JOIN = "\n\n"

# Who a piece of the rendering belongs to: a message index, the tool block or the
# request's own framing.
TOOLS = -1
REQUEST = -2
Rendered = list[tuple[int, Piece]]


def render(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    template: str,
    *,
    keep_reasoning: bool = False,
) -> Rendered:
    """The pieces of the prompt ``template``'s server renders for a request.

    ``keep_reasoning`` renders every assistant message's reasoning as the template
    renders it after the last user query (Qwen3's ``<think>`` block), wherever the
    message stands: the most it can add to any prompt, for counting a message on its own.
    """
    if template == "qwen":
        return _render_qwen(messages, tools, keep_reasoning=keep_reasoning)
    if template == "llama3":
        return _render_llama3(messages, tools)
    if template == "mistral":
        return _render_mistral(messages, tools)
    known = "openai, llama3, qwen, mistral"
    raise ConfigurationError(f"unknown chat template {template!r}; known: {known}")


# Qwen3 / Qwen2.5 (tokenizer_config.json chat_template).
_QWEN_TOOLS_HEAD = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
_QWEN_TOOLS_TAIL = (
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)
_IM_START = Special("<|im_start|>")
_IM_END = Special("<|im_end|>")


def _render_qwen(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    *,
    keep_reasoning: bool = False,
) -> Rendered:
    tool_list = _tool_dicts(tools)
    roles = [_role(m, i) for i, m in enumerate(messages)]
    last_query = _qwen_last_query(messages, roles)
    out: Rendered = []
    first_is_system = bool(roles) and roles[0] == "system"
    if tool_list:
        out += [(TOOLS, _IM_START), (TOOLS, "system\n")]
        if first_is_system:
            out.append((0, _str_content(messages[0], 0, _JOIN) + "\n\n"))
        out.append((TOOLS, _QWEN_TOOLS_HEAD))
        out += [(TOOLS, f"\n{_tojson(t)}") for t in tool_list]
        out += [(TOOLS, _QWEN_TOOLS_TAIL), (TOOLS, _IM_END), (TOOLS, "\n")]
    elif first_is_system:
        out += [(0, _IM_START), (0, "system\n" + _str_content(messages[0], 0, _JOIN)), (0, _IM_END)]
        out.append((0, "\n"))
    for index, message in enumerate(messages):
        role = roles[index]
        if index == 0 and role == "system":
            continue
        content = _str_content(message, index, _JOIN)
        if role in ("user", "system"):
            out += [(index, _IM_START), (index, f"{role}\n{content}"), (index, _IM_END)]
            out.append((index, "\n"))
        elif role == "assistant":
            content, reasoning = _qwen_reasoning(message, content)
            # After the last user query, Qwen3 writes the reasoning in a think block (an
            # empty one on a trailing message); before it, the reasoning is dropped.
            last = index == len(messages) - 1
            if (keep_reasoning or index > last_query) and (last or reasoning):
                thought = reasoning.strip("\n")
                text = f"assistant\n<think>\n{thought}\n</think>\n\n{content.lstrip(chr(10))}"
            else:
                text = f"assistant\n{content}"
            for n, (_, name, parsed, raw) in enumerate(_calls(message)):
                arguments = raw if isinstance(parsed, str) else _tojson(parsed)
                sep = "\n" if (n == 0 and content) or n > 0 else ""
                text += f'{sep}<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}'
                text += "\n</tool_call>"
            out += [(index, _IM_START), (index, text), (index, _IM_END), (index, "\n")]
        else:  # consecutive tool results share one user turn
            if index == 0 or roles[index - 1] != "tool":
                out += [(index, _IM_START), (index, "user")]
            out.append((index, f"\n<tool_response>\n{content}\n</tool_response>"))
            if index == len(messages) - 1 or roles[index + 1] != "tool":
                out += [(index, _IM_END), (index, "\n")]
    out += [(REQUEST, _IM_START), (REQUEST, "assistant\n")]
    return out


def _qwen_last_query(messages: Sequence[Mapping[str, Any]], roles: Sequence[str]) -> int:
    """The template's ``last_query_index``: the last user message that is not a tool
    response written as a user turn; the last message when there is none."""
    for index in range(len(messages) - 1, -1, -1):
        if roles[index] != "user":
            continue
        content = _str_content(messages[index], index, _JOIN)
        if not (content.startswith("<tool_response>") and content.endswith("</tool_response>")):
            return index
    return len(messages) - 1


def _qwen_reasoning(message: Mapping[str, Any], content: str) -> tuple[str, str]:
    """The content and the reasoning of an assistant message, as the template reads
    them: ``reasoning_content`` (vLLM passes a ``reasoning`` field on as it), else the
    think block the content itself holds, which is then cut from the content."""
    reasoning = message.get("reasoning_content")
    if reasoning is None:
        reasoning = message.get("reasoning")
    if reasoning is not None:
        return content, str(reasoning)
    if "</think>" in content:
        parts = content.split("</think>")
        return parts[-1].lstrip("\n"), parts[0].rstrip("\n").split("<think>")[-1].lstrip("\n")
    return content, ""


# Llama 3.1 / 3.3 Instruct (Hugging Face chat template; tools_in_user_message=true).
_BOT = Special("<|begin_of_text|>")
_SH = Special("<|start_header_id|>")
_EH = Special("<|end_header_id|>")
_EOT = Special("<|eot_id|>")
_LLAMA3_TOOLS_PREAMBLE = (
    "Given the following functions, please respond with a JSON for a function call "
    "with its proper arguments that best answers the given prompt.\n\n"
    'Respond in the format {"name": function name, "parameters": dictionary of argument '
    "name and its value}.Do not use variables.\n\n"
)


def _render_llama3(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> Rendered:
    tool_list = _tool_dicts(tools)
    roles = [_role(m, i) for i, m in enumerate(messages)]
    header = "Environment: ipython\n" if tool_list else ""
    header += f"Cutting Knowledge Date: December 2023\nToday Date: {_LLAMA3_DATE}\n\n"
    out: Rendered = [(REQUEST, _BOT), (REQUEST, _SH), (REQUEST, "system"), (REQUEST, _EH)]
    out.append((REQUEST, "\n\n" + header))
    start = 0
    if roles and roles[0] == "system":
        out.append((0, _str_content(messages[0], 0, _JOIN).strip()))
        start = 1
    out.append((REQUEST, _EOT))
    if tool_list and start < len(messages):
        out += [(start, _SH), (start, "user"), (start, _EH), (start, "\n\n")]
        out.append((TOOLS, _LLAMA3_TOOLS_PREAMBLE))
        out += [(TOOLS, _tojson(t, indent=4) + "\n\n") for t in tool_list]
        out += [(start, _str_content(messages[start], start, _JOIN).strip()), (start, _EOT)]
        start += 1
    for index in range(start, len(messages)):
        message, role = messages[index], roles[index]
        calls = _calls(message)
        if role == "tool":
            # `content is iterable` holds for strings in Jinja, so results go through tojson.
            text = _tojson(_str_content(message, index, _JOIN))
            out += [(index, _SH), (index, "ipython"), (index, _EH), (index, "\n\n" + text)]
        elif calls:
            # The real template takes one call per message; more are rendered in a row.
            text = "".join(
                f'{{"name": "{name}", "parameters": {_tojson(parsed)}}}'
                for _, name, parsed, _ in calls
            )
            out += [(index, _SH), (index, "assistant"), (index, _EH), (index, "\n\n" + text)]
        else:
            text = _str_content(message, index, _JOIN).strip()
            out += [(index, _SH), (index, role), (index, _EH), (index, "\n\n" + text)]
        out.append((index, _EOT))
    out += [(REQUEST, _SH), (REQUEST, "assistant"), (REQUEST, _EH), (REQUEST, "\n\n")]
    return out


# Mistral v3 / Tekken (mistral-common InstructTokenizerV3).
_BOS = Special("<s>")
_EOS = Special("</s>")
_INST = Special("[INST]")
_INST_END = Special("[/INST]")
_TOOLS_START = Special("[AVAILABLE_TOOLS]")
_TOOLS_END = Special("[/AVAILABLE_TOOLS]")
_TOOL_CALLS = Special("[TOOL_CALLS]")
_RESULTS_START = Special("[TOOL_RESULTS]")
_RESULTS_END = Special("[/TOOL_RESULTS]")


def _render_mistral(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> Rendered:
    tool_list = _tool_dicts(tools)
    roles = [_role(m, i) for i, m in enumerate(messages)]
    texts = [_str_content(m, i, _MISTRAL_JOIN) for i, m in enumerate(messages)]
    system = _MISTRAL_JOIN.join(t for t, r in zip(texts, roles, strict=True) if r == "system" and t)
    system_owner = roles.index("system") if "system" in roles else REQUEST
    last_user = max((i for i, r in enumerate(roles) if r == "user"), default=-1)
    out: Rendered = [(REQUEST, _BOS)]
    for index, message in enumerate(messages):
        role = roles[index]
        if role == "system":
            continue
        if role == "user":
            if index == last_user and tool_list:
                functions = [_mistral_tool(t) for t in tool_list]
                out += [(TOOLS, _TOOLS_START), (TOOLS, _tojson(functions)), (TOOLS, _TOOLS_END)]
            out.append((index, _INST))
            if index == last_user and system:
                out.append((system_owner, system + "\n\n"))
            out += [(index, texts[index]), (index, _INST_END)]
        elif role == "assistant":
            calls = _calls(message)
            if texts[index]:
                # mistral-common strips trailing spaces of a plain answer.
                out.append((index, texts[index] if calls else texts[index].rstrip(" ")))
            if calls:
                payload = [_mistral_call(call) for call in calls]
                out += [(index, _TOOL_CALLS), (index, _tojson(payload))]
            out.append((index, _EOS))
        else:
            result = {
                "content": _json_or_text(texts[index] or "{}"),
                "call_id": _mistral_id(str(message.get("tool_call_id") or "")),
            }
            out += [(index, _RESULTS_START), (index, _tojson(result)), (index, _RESULTS_END)]
    return out


def _mistral_id(call_id: str) -> str:
    # vLLM keeps the last 9 characters of a longer id, the length mistral-common
    # requires (vllm/tokenizers/mistral.py, truncate_tool_call_ids).
    return call_id[-9:]


def _mistral_call(call: tuple[str, str, object, str]) -> dict[str, Any]:
    call_id, name, parsed, _ = call
    payload: dict[str, Any] = {"name": name, "arguments": parsed}
    if call_id and call_id != "null":  # InstructTokenizerV3._prepare_function_call
        payload["id"] = _mistral_id(call_id)
    return payload


def _mistral_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    # mistral-common's Tool model, dumped: every Function field, in its order.
    function = _function_of(tool)
    return {
        "type": "function",
        "function": {
            "name": function.get("name", ""),
            "description": function.get("description") or "",
            "parameters": function.get("parameters") or {},
        },
    }


def _json_or_text(text: str) -> object:
    """A tool result as mistral-common writes it: parsed when it is JSON, else the text
    (InstructRequestNormalizer._normalize_json_content, then _parse_tool_content)."""
    try:
        return json.loads(text)
    except ValueError:
        return text
