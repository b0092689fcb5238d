"""Messages of any wire format as the OpenAI Chat messages a chat server renders.

The local accounting counts chat messages through a family's template
(:mod:`windowguard.accounting.templates`); a message of another wire format is first turned into
what Anthropic-compatible servers and gateways make of it (see :func:`chat_messages`).

Invariant: the conversion keeps every text a shape holds, in order, and only adds the
structure the server adds (a tool message per result, the call ids).
"""

from __future__ import annotations

from typing import Any, Final

from ..core.shapes import Shape

__all__ = ["chat_messages"]

_ROLE_OF: Final = {"system": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


def chat_messages(shape: Shape, *, reasoning_apart: bool = False) -> list[dict[str, Any]]:
    """The OpenAI Chat messages a chat server renders for the message ``shape`` was
    taken from.

    Mostly one message. An Anthropic user message holding ``tool_result`` blocks is
    what Anthropic-compatible servers and gateways make of it: one ``tool`` message per
    result, with its call id and the text of its blocks joined by newlines, then one
    user message with the message's own text blocks, if any (vLLM
    ``vllm/entrypoints/anthropic/serving.py`` ``_convert_user_tool_result``; LiteLLM
    ``litellm/llms/anthropic/messages/adapters/transformation.py``
    ``translate_anthropic_messages_to_openai``; SGLang
    ``python/sglang/srt/entrypoints/anthropic/request_conversion.py`` keeps text that
    comes before a result in front of it, which costs the same framing). Assistant
    ``tool_use`` blocks and Responses ``function_call`` items become ``tool_calls``;
    Responses ``function_call_output`` items become tool messages. A shape's several
    text segments are the parts of a list ``content``, joined as the family's server
    joins them (:mod:`windowguard.accounting.templates`).

    With ``reasoning_apart``, the model's reasoning (``reasoning_content``, an Anthropic
    ``thinking`` block, a Responses reasoning item) is the message's
    ``reasoning_content``, which a template frames apart from the content (Qwen3's
    ``<think>`` block); without, it is one more text part of the content, at least what a
    template without a place for it shows of it (it drops it).
    """
    role = _ROLE_OF.get(shape.kind, "user")
    if role == "user" and shape.answers:
        return _results_and_text(shape)
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for segment in shape.segments:
        if reasoning_apart and role == "assistant" and (segment.reasoning or shape.reasoning):
            reasoning.append(segment.text)
            continue
        cut = segment.name_length
        if cut is None or role != "assistant":
            texts.append(segment.text)
            continue
        call_id = shape.opens[len(calls)] if len(calls) < len(shape.opens) else ""
        calls.append(
            {
                "id": call_id,
                "type": "function",
                "function": {"name": segment.text[:cut], "arguments": segment.text[cut:]},
            }
        )
    message: dict[str, Any] = {"role": role, "content": _content(texts)}
    if reasoning:
        message["reasoning_content"] = "\n".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    if role == "tool":
        message["tool_call_id"] = shape.answers[0] if shape.answers else ""
    return [message]


def _results_and_text(shape: Shape) -> list[dict[str, Any]]:
    results: list[list[str]] = [[] for _ in shape.answers]
    texts: list[str] = []
    for segment in shape.segments:
        index = segment.result
        if index is not None and 0 <= index < len(results):
            results[index].append(segment.text)
        else:
            texts.append(segment.text)
    messages: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": call_id, "content": "\n".join(parts)}
        for call_id, parts in zip(shape.answers, results, strict=True)
    ]
    if texts:
        messages.append({"role": "user", "content": _content(texts)})
    return messages


def _content(texts: list[str]) -> str | list[dict[str, str]]:
    if len(texts) == 1:
        return texts[0]
    if not texts:
        return ""
    return [{"type": "text", "text": text} for text in texts]
