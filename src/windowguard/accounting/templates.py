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
  message, ``<tool_call>`` / ``<tool_response>`` blocks; an assistant message's
  ``reasoning_content``, or a think block in its content, in a ``<think>`` block after
  the last user query and dropped before it).
* ``"mistral"`` -- mistral-common's v3 (Tekken) instruct format: ``[AVAILABLE_TOOLS]``
  before the last user message, the system prompt folded into it, ``[TOOL_CALLS]`` and
  ``[TOOL_RESULTS]`` blocks; a result that is JSON is written as parsed JSON, as
  mistral-common normalises it, and call ids are cut to their last 9 characters, as
  vLLM does for mistral-common.

The text parts of a list ``content`` are joined the way the family's server joins them
(``"\n"`` by vLLM before a string-content template, ``"\n\n"`` by mistral-common).
The renderers themselves live in :mod:`windowguard.accounting._chat_render`.

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

from ..core.exceptions import ConfigurationError
from ._chat_render import (
    TOOLS,
    Piece,
    Rendered,
    _calls,
    _function_of,
    _role,
    _str_content,
    _tool_dicts,
    piece_text,
    render,
    split_pieces,
)
from .counters import TokenCounter

__all__ = [
    "TEMPLATES",
    "TEXT_TEMPLATES",
    "PromptCount",
    "Template",
    "count_message",
    "count_messages",
    "count_prompt",
    "count_prompt_parts",
    "count_request_framing",
    "message_pieces",
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
    return _count_rendered(counter, render(messages, tools, template), len(messages))


def count_message(counter: TokenCounter, message: Mapping[str, Any], *, template: str) -> int:
    """The tokens one message adds to a prompt of ``template``'s family, on its own.

    The message is rendered in the smallest context that gives it its ordinary form (a
    tool result after a call, a message followed by a user turn so no template treats it
    as a final, continued assistant message, Mistral's system prompt folded into a
    user message) and the pieces it owns are counted. Grouping a template does across
    messages (Qwen writes one user turn around consecutive tool results) is charged to
    every message, so a sum over messages stays at or above the whole prompt's count.
    For the same reason an assistant message's reasoning is counted in the think block
    Qwen3 writes it in after the last user query, wherever the message stands (before
    that query the template drops it).

    Args:
        counter: the family's exact tokenizer.
        message: an OpenAI Chat Completions message (dict).
        template: ``"openai"``, ``"llama3"``, ``"qwen"`` or ``"mistral"``.

    Raises:
        ConfigurationError: unknown template or a malformed message.
    """
    return count_messages(counter, [message], template=template)


def count_messages(
    counter: TokenCounter, messages: Sequence[Mapping[str, Any]], *, template: str
) -> int:
    """The tokens a run of consecutive messages adds to a prompt, on their own.

    Like :func:`count_message` for several messages rendered together: grouping inside
    the run (consecutive tool results in one Qwen user turn) is counted once. This is
    how one message of another wire format is counted when its server converts it to
    several chat messages (an Anthropic user message of ``tool_result`` blocks becomes a
    tool message per result and a user message for its text).

    Raises:
        ConfigurationError: unknown template or a malformed message.
    """
    controls, texts = message_pieces(messages, template=template)
    return controls + sum(counter.count(text) for text in texts)


def message_pieces(
    messages: Sequence[Mapping[str, Any]], *, template: str
) -> tuple[int, tuple[str, ...]]:
    """What a run of consecutive messages adds to a prompt, before tokenizing.

    Returns:
        The tokens that need no tokenizer (control tokens; OpenAI's fixed per-message
        framing) and the texts to tokenize, each counted on its own. Their sum through
        a counter is :func:`count_messages`; a caller counting many messages at once can
        tokenize all their texts in one batch.

    Raises:
        ConfigurationError: unknown template or a malformed message.
    """
    if not messages:
        return 0, ()
    if template == "openai":
        return _openai_pieces(messages)
    roles = [_role(m, i) for i, m in enumerate(messages)]
    context: list[Mapping[str, Any]] = list(messages)
    offset = 0
    if roles[0] == "tool":
        # A result renders after the call it answers (its id, as the template shows it).
        leading = []
        for message, role in zip(messages, roles, strict=True):
            if role != "tool":
                break
            leading.append(
                {"id": str(message.get("tool_call_id") or ""), "function": {"name": "f"}}
            )
        context.insert(0, {"role": "assistant", "content": "", "tool_calls": leading})
        offset = 1
    if roles[-1] in ("assistant", "system"):
        context.append({"role": "user", "content": ""})
    owned = range(offset, offset + len(messages))
    rendered = render(context, None, template, keep_reasoning=True)
    pieces = [piece for owner, piece in rendered if owner in owned]
    return split_pieces(pieces)


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
    return "".join(piece_text(piece) for _, piece in render(messages, tools, template))


# --------------------------------------------------------------------------- helpers


def _count_pieces(counter: TokenCounter, pieces: Sequence[Piece]) -> int:
    controls, texts = split_pieces(pieces)
    return controls + sum(counter.count(text) for text in texts)


# --------------------------------------------------------------------------- openai


def _openai_pieces(messages: Sequence[Mapping[str, Any]]) -> tuple[int, tuple[str, ...]]:
    """OpenAI's per-message accounting as fixed tokens and texts to count."""
    fixed = 0
    texts: list[str] = []
    for index, message in enumerate(messages):
        role = _role(message, index)
        fixed += _OPENAI_PER_MESSAGE
        texts += [role, _str_content(message, index)]
        name = message.get("name")
        if isinstance(name, str) and role != "tool":
            fixed += _OPENAI_PER_NAME
            texts.append(name)
        for _, call_name, _, raw in _calls(message):
            fixed += _OPENAI_PER_TOOL_CALL
            texts += [call_name, raw]
    return fixed, tuple(texts)


def _openai_count(
    counter: TokenCounter,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
) -> PromptCount:
    per_message = []
    for message in messages:
        fixed, texts = _openai_pieces([message])
        per_message.append(fixed + sum(counter.count(text) for text in texts))
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


def _count_rendered(counter: TokenCounter, rendered: Rendered, messages: int) -> PromptCount:
    total = _count_pieces(counter, [piece for _, piece in rendered])
    message_tokens = tuple(
        _count_pieces(counter, [piece for owner, piece in rendered if owner == index])
        for index in range(messages)
    )
    tools_tokens = _count_pieces(counter, [piece for owner, piece in rendered if owner == TOOLS])
    # Merges across an owner boundary are charged to the request framing.
    return PromptCount(
        total_tokens=total,
        message_tokens=message_tokens,
        tools_tokens=tools_tokens,
        request_tokens=total - sum(message_tokens) - tools_tokens,
    )
