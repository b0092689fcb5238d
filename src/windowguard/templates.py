"""Exact prompt accounting per chat-template family, for OpenAI-chat-format messages.

A server never tokenizes bare message text: it renders the messages and tool schemas
through its chat template and counts that. This module reproduces the templates so
the emulator and the tests count what a real server counts:

* ``"openai"`` -- OpenAI's published accounting (the tiktoken cookbook,
  "How to count tokens with tiktoken"): 3 tokens per message, 1 more per ``name``,
  3 for the reply priming; tool schemas are rendered the way OpenAI shows functions
  to its models (a TypeScript ``namespace functions``), plus its fixed framing.
  OpenAI does not publish its template, so this is an accounting, not a text:
  :func:`render_prompt` refuses it.
* ``"llama3"`` -- the Llama 3.1/3.3 Instruct Hugging Face chat template (tools in
  the first user message, ``tojson(indent=4)`` schemas, ``ipython`` tool results).
* ``"qwen"`` -- the Qwen3 / Qwen2.5 ChatML template (``<tools>`` in the system
  message, ``<tool_call>`` / ``<tool_response>`` blocks).
* ``"mistral"`` -- mistral-common's v3 (Tekken) instruct format: ``[AVAILABLE_TOOLS]``
  before the last user message, the system prompt folded into it, ``[TOOL_CALLS]`` and
  ``[TOOL_RESULTS]`` blocks.

Invariants: control tokens (``<|im_start|>``, ``<|eot_id|>``, ``[INST]`` ...) count
as one token each and split the text around them, exactly as servers pre-split
special tokens; the text between them is counted by the caller's counter as one
piece. Tool-call arguments are re-serialised the way vLLM does before rendering
(parsed JSON, ``json.dumps`` with ``ensure_ascii=False``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from .counters import TokenCounter
from .exceptions import ConfigurationError

__all__ = [
    "TEMPLATES",
    "TEXT_TEMPLATES",
    "PromptCount",
    "Template",
    "count_message",
    "count_prompt",
    "count_prompt_parts",
    "count_request_framing",
    "render_prompt",
]

Template = Literal["openai", "llama3", "qwen", "mistral"]
TEMPLATES: tuple[str, ...] = get_args(Template)
TEXT_TEMPLATES: tuple[str, ...] = ("llama3", "qwen", "mistral")
"""Templates with a text form (:func:`render_prompt`); OpenAI's is an accounting only."""

# OpenAI cookbook (gpt-4o / gpt-4 family): per message, per name, reply priming.
_OPENAI_PER_MESSAGE = 3
_OPENAI_PER_NAME = 1
_OPENAI_REPLY_PRIMING = 3
# Framing of the functions block around its TypeScript text (openai-chat-tokens /
# cookbook measurements), and of each assistant tool call.
_OPENAI_TOOLS_FRAMING = 9
_OPENAI_PER_TOOL_CALL = 7

_LLAMA3_DATE = "26 Jul 2024"


@dataclass(frozen=True, slots=True)
class _Special:
    """A control token of a template: one token, and a split point."""

    text: str


_Piece = str | _Special


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptCount:
    """The exact tokens of one rendered request, split by where they come from.

    Attributes:
        total_tokens: the whole prompt.
        message_tokens: per message, the tokens its rendering contributes (content and
            framing; text a template moves elsewhere is charged to its message).
        tools_tokens: the tool-schema block and its framing.
        request_tokens: fixed per-request framing (BOS, default system header, reply
            priming).
    """

    total_tokens: int
    message_tokens: tuple[int, ...]
    tools_tokens: int
    request_tokens: int


def count_prompt(
    counter: TokenCounter,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    template: str,
) -> int:
    """Count the prompt tokens a server of ``template``'s family counts for a request.

    Args:
        counter: the family's exact tokenizer.
        messages: OpenAI Chat Completions messages (dicts).
        tools: OpenAI-format tool schemas (``{"type": "function", "function": {...}}``).
        template: ``"openai"``, ``"llama3"``, ``"qwen"`` or ``"mistral"``.

    Returns:
        The prompt's token count, generation prompt included.

    Raises:
        ConfigurationError: unknown template or malformed messages.
    """
    return count_prompt_parts(counter, messages, tools, template=template).total_tokens


def count_prompt_parts(
    counter: TokenCounter,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    template: str,
) -> PromptCount:
    """Like :func:`count_prompt`, with the tokens split per message, tools and framing."""
    if template == "openai":
        return _openai_count(counter, messages, tools)
    return _count_rendered(counter, _render(messages, tools, template), len(messages))


def count_message(counter: TokenCounter, message: Mapping[str, Any], *, template: str) -> int:
    """The tokens one message adds to a prompt of ``template``'s family, on its own.

    The message is rendered in the smallest context that gives it its ordinary form (a
    tool result after a call, a message followed by a user turn so no template treats it
    as a final, continued assistant message, Mistral's system prompt folded into a
    user message) and the pieces it owns are counted. Grouping a template does across
    messages (Qwen writes one user turn around consecutive tool results) is charged to
    every message, so a sum over messages stays at or above the whole prompt's count.

    Args:
        counter: the family's exact tokenizer.
        message: an OpenAI Chat Completions message (dict).
        template: ``"openai"``, ``"llama3"``, ``"qwen"`` or ``"mistral"``.

    Raises:
        ConfigurationError: unknown template or a malformed message.
    """
    if template == "openai":
        return _openai_count(counter, [message], None).message_tokens[0]
    role = _role(message, 0)
    context: list[Mapping[str, Any]] = [message]
    index = 0
    if role == "tool":
        call = {"id": str(message.get("tool_call_id") or ""), "function": {"name": "f"}}
        context = [{"role": "assistant", "content": "", "tool_calls": [call]}, message]
        index = 1
    elif role in ("assistant", "system"):
        context = [message, {"role": "user", "content": ""}]
    pieces = [piece for owner, piece in _render(context, None, template) if owner == index]
    return _count_pieces(counter, pieces)


def count_request_framing(
    counter: TokenCounter,
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    template: str,
) -> int:
    """The tokens a request of ``template``'s family holds besides its messages.

    That is the per-request framing (BOS, default system header, the generation prompt)
    plus the tool-schema block and its framing, measured against a one-message request
    (Llama 3 writes the tools into the first user message, Mistral before the last one).

    Raises:
        ConfigurationError: unknown template or malformed tools.
    """
    probe = [{"role": "user", "content": "x"}]
    parts = count_prompt_parts(counter, probe, tools, template=template)
    return parts.total_tokens - parts.message_tokens[0]


def render_prompt(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    template: str,
) -> str:
    """Render the prompt text a server of ``template``'s family tokenizes.

    Args:
        messages: OpenAI Chat Completions messages (dicts).
        tools: OpenAI-format tool schemas.
        template: ``"llama3"``, ``"qwen"`` or ``"mistral"``.

    Returns:
        The rendered prompt, control tokens written out.

    Raises:
        ConfigurationError: ``"openai"`` (OpenAI publishes an accounting, not a text),
            an unknown template, or malformed messages.
    """
    if template == "openai":
        raise ConfigurationError(
            "the 'openai' template is a token accounting, not a text; use count_prompt"
        )
    return "".join(_piece_text(piece) for _, piece in _render(messages, tools, template))


# --------------------------------------------------------------------------- helpers


def _piece_text(piece: _Piece) -> str:
    return piece.text if isinstance(piece, _Special) else piece


def _count_pieces(counter: TokenCounter, pieces: Sequence[_Piece]) -> int:
    total = 0
    text: list[str] = []
    for piece in pieces:
        if isinstance(piece, _Special):
            if text:
                total += counter.count("".join(text))
                text.clear()
            total += 1
        else:
            text.append(piece)
    if text:
        total += counter.count("".join(text))
    return total


def _str_content(message: Mapping[str, Any], index: int) -> str:
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
        return "".join(parts)
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


# --------------------------------------------------------------------------- openai


def _openai_count(
    counter: TokenCounter,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
) -> PromptCount:
    per_message = []
    for index, message in enumerate(messages):
        role = _role(message, index)
        tokens = (
            _OPENAI_PER_MESSAGE + counter.count(role) + counter.count(_str_content(message, index))
        )
        name = message.get("name")
        if isinstance(name, str) and role != "tool":
            tokens += _OPENAI_PER_NAME + counter.count(name)
        for _, call_name, _, raw in _calls(message):
            tokens += _OPENAI_PER_TOOL_CALL + counter.count(call_name) + counter.count(raw)
        per_message.append(tokens)
    tool_list = _tool_dicts(tools)
    tools_tokens = 0
    if tool_list:
        tools_tokens = counter.count(_typescript_functions(tool_list)) + _OPENAI_TOOLS_FRAMING
    return PromptCount(
        total_tokens=sum(per_message) + tools_tokens + _OPENAI_REPLY_PRIMING,
        message_tokens=tuple(per_message),
        tools_tokens=tools_tokens,
        request_tokens=_OPENAI_REPLY_PRIMING,
    )


def _typescript_functions(tools: Sequence[Mapping[str, Any]]) -> str:
    """OpenAI's rendering of function schemas: ``namespace functions { type f = ... }``."""
    lines = ["# Tools", "", "## functions", "", "namespace functions {", ""]
    for tool in tools:
        function = _function_of(tool)
        description = function.get("description")
        if description:
            lines.extend(f"// {line}" for line in str(description).splitlines())
        parameters = function.get("parameters") or {}
        properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
        name = function.get("name", "")
        if properties:
            lines.append(f"type {name} = (_: {{")
            required = set(parameters.get("required") or ())
            lines.extend(_typescript_properties(properties, required, indent=""))
            lines.append("}) => any;")
        else:
            lines.append(f"type {name} = () => any;")
        lines.append("")
    lines.append("} // namespace functions")
    return "\n".join(lines)


def _typescript_properties(
    properties: Mapping[str, Any], required: set[str], *, indent: str
) -> list[str]:
    lines: list[str] = []
    for key, schema in properties.items():
        schema = schema if isinstance(schema, Mapping) else {}
        description = schema.get("description")
        if description:
            lines.extend(f"{indent}// {line}" for line in str(description).splitlines())
        optional = "" if key in required else "?"
        lines.append(f"{indent}{key}{optional}: {_typescript_type(schema, indent)},")
    return lines


def _typescript_type(schema: Mapping[str, Any], indent: str) -> str:
    if "enum" in schema:
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items")
        inner = _typescript_type(items, indent) if isinstance(items, Mapping) else "any"
        return f"{inner}[]"
    if kind == "object":
        properties = schema.get("properties")
        if isinstance(properties, Mapping) and properties:
            required = set(schema.get("required") or ())
            fields = _typescript_properties(properties, required, indent=indent + "  ")
            return "{\n" + "\n".join(fields) + f"\n{indent}}}"
        return "object"
    if kind == "integer":
        return "number"
    if isinstance(kind, str):
        return kind
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    return "any"


# --------------------------------------------------------------------------- renderers

# Who a piece of the rendering belongs to: a message index, the tool block or the
# request's own framing.
_TOOLS = -1
_REQUEST = -2
_Rendered = list[tuple[int, _Piece]]


def _render(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    template: str,
) -> _Rendered:
    if template == "qwen":
        return _render_qwen(messages, tools)
    if template == "llama3":
        return _render_llama3(messages, tools)
    if template == "mistral":
        return _render_mistral(messages, tools)
    raise ConfigurationError(f"unknown chat template {template!r}; known: {', '.join(TEMPLATES)}")


def _count_rendered(counter: TokenCounter, rendered: _Rendered, messages: int) -> PromptCount:
    total = _count_pieces(counter, [piece for _, piece in rendered])
    message_tokens = tuple(
        _count_pieces(counter, [piece for owner, piece in rendered if owner == index])
        for index in range(messages)
    )
    tools_tokens = _count_pieces(counter, [piece for owner, piece in rendered if owner == _TOOLS])
    # Merges across an owner boundary are charged to the request framing.
    return PromptCount(
        total_tokens=total,
        message_tokens=message_tokens,
        tools_tokens=tools_tokens,
        request_tokens=total - sum(message_tokens) - tools_tokens,
    )


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
_IM_START = _Special("<|im_start|>")
_IM_END = _Special("<|im_end|>")


def _render_qwen(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> _Rendered:
    tool_list = _tool_dicts(tools)
    roles = [_role(m, i) for i, m in enumerate(messages)]
    out: _Rendered = []
    first_is_system = bool(roles) and roles[0] == "system"
    if tool_list:
        out += [(_TOOLS, _IM_START), (_TOOLS, "system\n")]
        if first_is_system:
            out.append((0, _str_content(messages[0], 0) + "\n\n"))
        out.append((_TOOLS, _QWEN_TOOLS_HEAD))
        out += [(_TOOLS, f"\n{_tojson(t)}") for t in tool_list]
        out += [(_TOOLS, _QWEN_TOOLS_TAIL), (_TOOLS, _IM_END), (_TOOLS, "\n")]
    elif first_is_system:
        out += [(0, _IM_START), (0, "system\n" + _str_content(messages[0], 0)), (0, _IM_END)]
        out.append((0, "\n"))
    for index, message in enumerate(messages):
        role = roles[index]
        if index == 0 and role == "system":
            continue
        content = _str_content(message, index)
        if role in ("user", "system"):
            out += [(index, _IM_START), (index, f"{role}\n{content}"), (index, _IM_END)]
            out.append((index, "\n"))
        elif role == "assistant":
            text = f"assistant\n{content}"
            if index == len(messages) - 1:
                # Qwen3 opens an (empty) think block on a trailing assistant message.
                text = f"assistant\n<think>\n\n</think>\n\n{content.lstrip(chr(10))}"
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
    out += [(_REQUEST, _IM_START), (_REQUEST, "assistant\n")]
    return out


# Llama 3.1 / 3.3 Instruct (Hugging Face chat template; tools_in_user_message=true).
_BOT = _Special("<|begin_of_text|>")
_SH = _Special("<|start_header_id|>")
_EH = _Special("<|end_header_id|>")
_EOT = _Special("<|eot_id|>")
_LLAMA3_TOOLS_PREAMBLE = (
    "Given the following functions, please respond with a JSON for a function call "
    "with its proper arguments that best answers the given prompt.\n\n"
    'Respond in the format {"name": function name, "parameters": dictionary of argument '
    "name and its value}.Do not use variables.\n\n"
)


def _render_llama3(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> _Rendered:
    tool_list = _tool_dicts(tools)
    roles = [_role(m, i) for i, m in enumerate(messages)]
    header = "Environment: ipython\n" if tool_list else ""
    header += f"Cutting Knowledge Date: December 2023\nToday Date: {_LLAMA3_DATE}\n\n"
    out: _Rendered = [(_REQUEST, _BOT), (_REQUEST, _SH), (_REQUEST, "system"), (_REQUEST, _EH)]
    out.append((_REQUEST, "\n\n" + header))
    start = 0
    if roles and roles[0] == "system":
        out.append((0, _str_content(messages[0], 0).strip()))
        start = 1
    out.append((_REQUEST, _EOT))
    if tool_list and start < len(messages):
        out += [(start, _SH), (start, "user"), (start, _EH), (start, "\n\n")]
        out.append((_TOOLS, _LLAMA3_TOOLS_PREAMBLE))
        out += [(_TOOLS, _tojson(t, indent=4) + "\n\n") for t in tool_list]
        out += [(start, _str_content(messages[start], start).strip()), (start, _EOT)]
        start += 1
    for index in range(start, len(messages)):
        message, role = messages[index], roles[index]
        calls = _calls(message)
        if role == "tool":
            content: object = message.get("content")
            # `content is iterable` holds for strings in Jinja, so results go through tojson.
            text = _tojson(content if content is not None else "")
            out += [(index, _SH), (index, "ipython"), (index, _EH), (index, "\n\n" + text)]
        elif calls:
            # The real template takes one call per message; more are rendered in a row.
            text = "".join(
                f'{{"name": "{name}", "parameters": {_tojson(parsed)}}}'
                for _, name, parsed, _ in calls
            )
            out += [(index, _SH), (index, "assistant"), (index, _EH), (index, "\n\n" + text)]
        else:
            text = _str_content(message, index).strip()
            out += [(index, _SH), (index, role), (index, _EH), (index, "\n\n" + text)]
        out.append((index, _EOT))
    out += [(_REQUEST, _SH), (_REQUEST, "assistant"), (_REQUEST, _EH), (_REQUEST, "\n\n")]
    return out


# Mistral v3 / Tekken (mistral-common InstructTokenizerV3).
_BOS = _Special("<s>")
_EOS = _Special("</s>")
_INST = _Special("[INST]")
_INST_END = _Special("[/INST]")
_TOOLS_START = _Special("[AVAILABLE_TOOLS]")
_TOOLS_END = _Special("[/AVAILABLE_TOOLS]")
_TOOL_CALLS = _Special("[TOOL_CALLS]")
_RESULTS_START = _Special("[TOOL_RESULTS]")
_RESULTS_END = _Special("[/TOOL_RESULTS]")


def _render_mistral(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> _Rendered:
    tool_list = _tool_dicts(tools)
    roles = [_role(m, i) for i, m in enumerate(messages)]
    system = "\n\n".join(_str_content(m, i) for i, m in enumerate(messages) if roles[i] == "system")
    system_owner = roles.index("system") if "system" in roles else _REQUEST
    last_user = max((i for i, r in enumerate(roles) if r == "user"), default=-1)
    out: _Rendered = [(_REQUEST, _BOS)]
    for index, message in enumerate(messages):
        role = roles[index]
        if role == "system":
            continue
        if role == "user":
            if index == last_user and tool_list:
                functions = [{"type": "function", "function": _function_of(t)} for t in tool_list]
                out += [(_TOOLS, _TOOLS_START), (_TOOLS, _tojson(functions)), (_TOOLS, _TOOLS_END)]
            out.append((index, _INST))
            if index == last_user and system:
                out.append((system_owner, system + "\n\n"))
            out += [(index, _str_content(message, index)), (index, _INST_END)]
        elif role == "assistant":
            content = _str_content(message, index)
            if content:
                out.append((index, content))
            calls = _calls(message)
            if calls:
                payload = [
                    {"name": name, "arguments": parsed, "id": call_id}
                    for call_id, name, parsed, _ in calls
                ]
                out += [(index, _TOOL_CALLS), (index, _tojson(payload))]
            out.append((index, _EOS))
        else:
            payload_result = {
                "content": _str_content(message, index),
                "call_id": str(message.get("tool_call_id") or ""),
            }
            out += [(index, _RESULTS_START), (index, _tojson(payload_result))]
            out.append((index, _RESULTS_END))
    return out
