"""Governed summaries: the message a summary stands in, and what a summarizer is given.

A summary replaces whole old turns with one **user** message placed right after the head
(:func:`summary_message`). Why a user message:

* Every format takes two user messages in a row. OpenAI Chat and Responses accept any
  order; Anthropic combines consecutive same-role messages into one turn ("consecutive
  user or assistant turns in your request will be combined into a single turn",
  https://docs.anthropic.com/en/api/messages); mistral-common allows user after user
  (``_validate_message_order``: "user by assistant/system/user"); the Llama 3.1 and
  Qwen3 templates do not check the order. LangChain's ``SummarizationMiddleware`` uses a
  ``HumanMessage`` the same way.
* A system message mid-conversation is refused by Qwen3's official template ("System
  message must be at the beginning.").
* An assistant message is worse on Anthropic: it would be combined with the next kept
  assistant message, which with extended thinking must start with its thinking block
  ("a final assistant message must start with a thinking block").

Only the old strict-alternation templates (Llama 2, Mistral 7B v0.1: "Conversation roles
must alternate user/assistant/...") refuse two user messages; they have no tool role and
cannot run a tool loop at all.

The summarizer's contract is ``summarizer(turns, previous_summary) -> str``: ``turns`` are
whole turns as they were sent (the caller's own message objects, and windowguard's edited
copy, of the caller's type, where an earlier edit clamped or cleared a result: a
summarizer is never handed more than the requests held, where the originals of a hundred
cleared results could be many windows long), ``previous_summary`` the summary they extend
(incremental: a summary is updated, never summarized again). A summarizer built on a
model renders them with :func:`render_turns` and asks with :func:`summary_prompt`.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..adapters._common import field, json_text
from ..exceptions import ConfigurationError
from ..shapes import Format
from .parts import tool_results

if TYPE_CHECKING:
    from .config import Summarize

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "SUMMARY_PREFIX",
    "arun_summarizer",
    "render_turns",
    "run_summarizer",
    "summary_message",
    "summary_prompt",
]

SUMMARY_PREFIX = (
    "[Summary of the earlier part of this conversation. The turns it stands for were "
    "removed to save context; tool results in them can be fetched again if needed.]\n\n"
)
"""What a summary message starts with, so the model reads it as a summary, not a task."""

DEFAULT_INSTRUCTIONS = """\
You are compressing the earlier part of an agent's working session so it can go on with \
less context. The summary replaces those turns: whatever it leaves out is gone, except \
tool output that can be fetched again.

Keep, as exact text (names, paths, numbers, identifiers, error messages):
- the user's requests, constraints and preferences stated in these turns;
- facts the agent learned that it will still need, and where they came from;
- decisions and conclusions the agent reached, with their reasons, and options it \
rejected and why;
- what has been done already (files changed, commands run and their outcome), so it is \
not done again;
- what is still open, and the next step the agent had planned.

Leave out tool output that can simply be fetched again, pleasantries and repetition. \
When a previous summary is given, update it: keep every fact of it that still holds, \
correct what changed, and add what the new turns add. Write plain text under the \
headings Task, Facts, Decisions, Done, Open. Answer with the summary only."""
"""What a summary must keep (``Summarize(instructions=...)`` overrides it)."""


def summary_message(fmt: Format, text: str, *, like: object = None) -> dict[str, Any]:
    """The message a summary stands in: a user message in ``fmt``.

    Args:
        fmt: the transcript's wire format.
        text: the summary.
        like: a message of the caller's transcript to take the form from (a list of
            content parts rather than a string; a Responses item with or without
            ``"type": "message"``).

    Returns:
        A new dict (user messages are plain dicts in every SDK's request types), its text
        :data:`SUMMARY_PREFIX` followed by ``text``.

    Raises:
        ConfigurationError: ``text`` is empty.
    """
    if not isinstance(text, str) or not text.strip():
        raise ConfigurationError(f"a summary must be non-empty text, got {text!r:.40}")
    body = SUMMARY_PREFIX + text
    as_parts = isinstance(field(like, "content"), (list, tuple)) if like is not None else False
    if fmt == "responses":
        content: Any = [{"type": "input_text", "text": body}] if as_parts else body
        if like is not None and field(like, "type") is None:
            return {"role": "user", "content": content}
        return {"type": "message", "role": "user", "content": content}
    if fmt == "anthropic":
        return {"role": "user", "content": [{"type": "text", "text": body}] if as_parts else body}
    return {"role": "user", "content": [{"type": "text", "text": body}] if as_parts else body}


def summary_prompt(
    rendered_turns: str, previous_summary: str | None, instructions: str = DEFAULT_INSTRUCTIONS
) -> str:
    """The prompt a model-backed summarizer sends: the instructions, the previous
    summary (if any) and the turns to fold in (from :func:`render_turns`)."""
    parts = [instructions.strip(), ""]
    if previous_summary:
        parts += ["<previous_summary>", previous_summary.strip(), "</previous_summary>", ""]
    parts += ["<turns>", rendered_turns.strip(), "</turns>"]
    return "\n".join(parts)


def render_turns(messages: Sequence[object], fmt: Format) -> str:
    """Whole turns as plain text for a summarizer: each message under a bracketed label
    (``[user]``, ``[assistant]``, ``[assistant calls read_file (call_1)]``,
    ``[read_file (call_1) result]``), calls with their arguments, results with the tool
    that made them, images and documents as ``[image]`` / ``[document]``. Encrypted or
    redacted reasoning is named, never included. Deterministic."""
    names = {(r.index, r.part): r.tool_name for r in tool_results(messages, fmt, len(messages), ())}
    blocks: list[str] = []
    for index, message in enumerate(messages):
        blocks.extend(_RENDERERS[fmt](message, lambda part, i=index: names.get((i, part), "")))
    return "\n\n".join(b for b in blocks if b)


def run_summarizer(config: Summarize, turns: list[Any], previous_summary: str | None) -> str:
    """Call a sync summarizer; its text, checked.

    Raises:
        ConfigurationError: the summarizer is async (use :func:`arun_summarizer`), or it
            returned something other than non-empty text.
    """
    result = config.summarizer(turns, previous_summary)
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if callable(close):
            close()  # never awaited: close it so no "never awaited" warning follows
        raise ConfigurationError(
            "this summarizer is async; it can only run where windowguard awaits (the async "
            "loop, an async integration)"
        )
    return _checked(result)


async def arun_summarizer(config: Summarize, turns: list[Any], previous_summary: str | None) -> str:
    """Call a summarizer (sync or async) and await its text, checked.

    Raises:
        ConfigurationError: it returned something other than non-empty text.
    """
    result = config.summarizer(turns, previous_summary)
    if inspect.isawaitable(result):
        result = await result
    return _checked(result)


def _checked(result: object) -> str:
    if not isinstance(result, str) or not result.strip():
        raise ConfigurationError(
            f"a summarizer must return the summary as non-empty text, got {result!r:.60}"
        )
    return result.strip()


# -- rendering ---------------------------------------------------------------------------

_MEDIA = frozenset(
    {"image", "image_url", "input_image", "input_audio", "input_file", "file", "document"}
)


def _content_text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, (list, tuple)):
        return json_text(content)
    out: list[str] = []
    for part in content:
        if isinstance(part, str):
            out.append(part)
            continue
        kind = field(part, "type")
        text = field(part, "text")
        if isinstance(text, str) and kind in ("text", "input_text", "output_text"):
            out.append(text)
        elif kind == "refusal":
            out.append(str(field(part, "refusal") or ""))
        elif kind in _MEDIA:
            out.append("[document]" if kind in ("document", "input_file", "file") else "[image]")
        elif kind is not None:
            out.append(f"[{kind}]")
    return "\n".join(o for o in out if o)


def _block(label: str, text: str) -> str:
    return f"[{label}]\n{text}" if text else f"[{label}]"


def _call_label(name: object, call_id: object) -> str:
    return f"assistant calls {name or 'a tool'}" + (f" ({call_id})" if call_id else "")


def _result_label(name: str, call_id: object, error: bool = False) -> str:
    label = f"{name or 'tool'}" + (f" ({call_id})" if call_id else "") + " result"
    return label + (", an error" if error else "")


def _render_chat(message: object, name_of: Any) -> list[str]:
    role = field(message, "role")
    if role in ("tool", "function"):
        call_id = field(message, "tool_call_id") or ""
        return [
            _block(_result_label(name_of(0), call_id), _content_text(field(message, "content")))
        ]
    out = [_block(str(role or "message"), _content_text(field(message, "content")))]
    reasoning = field(message, "reasoning_content") or field(message, "reasoning")
    if isinstance(reasoning, str) and reasoning:
        out.insert(0, _block("assistant reasoning", reasoning))
    calls = field(message, "tool_calls")
    for call in calls if isinstance(calls, (list, tuple)) else ():
        body = field(call, "function") or field(call, "custom")
        args = (
            field(body, "arguments")
            if field(body, "arguments") is not None
            else field(body, "input")
        )
        label = _call_label(field(body, "name"), field(call, "id"))
        out.append(_block(label, args if isinstance(args, str) else json_text(args or {})))
    function_call = field(message, "function_call")
    if function_call is not None:
        args = field(function_call, "arguments")
        out.append(_block(_call_label(field(function_call, "name"), ""), str(args or "")))
    if role == "assistant" and len(out) > 1 and out[0] == "[assistant]":
        out.pop(0)  # no empty text block before the calls
    return out


def _render_anthropic(message: object, name_of: Any) -> list[str]:
    role = str(field(message, "role") or "message")
    content = field(message, "content")
    if not isinstance(content, (list, tuple)):
        return [_block(role, _content_text(content))]
    out: list[str] = []
    for position, block in enumerate(content):
        kind = field(block, "type")
        if kind == "text":
            out.append(_block(role, str(field(block, "text") or "")))
        elif kind == "thinking":
            out.append(_block("assistant thinking", str(field(block, "thinking") or "")))
        elif kind == "redacted_thinking":
            out.append("[assistant thinking, redacted]")
        elif kind == "tool_use":
            label = _call_label(field(block, "name"), field(block, "id"))
            out.append(_block(label, json_text(field(block, "input") or {})))
        elif kind == "tool_result":
            label = _result_label(name_of(position), field(block, "tool_use_id"))
            label += ", an error" if field(block, "is_error") is True else ""
            out.append(_block(label, _content_text(field(block, "content"))))
        elif kind in _MEDIA:
            out.append("[document]" if kind == "document" else "[image]")
        else:
            out.append(_block(str(kind), json_text(block)))
    return out


def _render_responses(item: object, name_of: Any) -> list[str]:
    kind = field(item, "type") or ("message" if field(item, "role") else None)
    if kind == "message":
        return [
            _block(str(field(item, "role") or "message"), _content_text(field(item, "content")))
        ]
    if kind == "reasoning":
        texts = [
            str(field(p, "text") or "")
            for key in ("summary", "content")
            for p in (field(item, key) or ())
        ]
        text = "\n".join(t for t in texts if t)
        return [_block("assistant reasoning", text) if text else "[assistant reasoning, encrypted]"]
    if isinstance(kind, str) and kind.endswith("_call_output"):
        output = field(item, "output")
        text = (
            _content_text(output) if isinstance(output, (str, list, tuple)) else json_text(output)
        )
        return [_block(_result_label(name_of(0), field(item, "call_id")), text)]
    if isinstance(kind, str) and kind.endswith("_call"):
        name = field(item, "name") or kind.removesuffix("_call")
        for key in ("arguments", "input", "action", "operation"):
            value = field(item, key)
            if value is not None:
                body = value if isinstance(value, str) else json_text(value)
                return [_block(_call_label(name, field(item, "call_id")), body)]
        return [_block(_call_label(name, field(item, "call_id")), "")]
    return [_block(str(kind or "item"), json_text(item))]


_RENDERERS = {
    "openai_chat": _render_chat,
    "anthropic": _render_anthropic,
    "responses": _render_responses,
}
