"""Pieces every flavour shares: the fitted reply, stable ids, stream chunking.

A policy's :class:`~windowguard.emulator.scenarios.Reply` is *fitted* to the reply
budget before any flavour renders it: its text, then each tool call (name plus JSON
arguments), is counted with the emulator's tokenizer; a reply over budget keeps its text
cut to the budget and loses the tool calls that do not fit whole, and is reported as
stopped for length — what a real server does when generation hits ``max_tokens``,
minus the broken JSON.

Ids are derived from the seed and the request, never from a clock or a global counter,
so the same seed replays the same conversation byte for byte (apart from ``created``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...accounting.counters import TokenCounter
from ..scenarios import Reply, ToolCall, ToolSpec

__all__ = [
    "Answer",
    "FittedReply",
    "ParsedRequest",
    "fit_reply",
    "pieces",
    "sse",
    "stable_id",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class FittedReply:
    """A reply cut to the budget, with its exact size.

    Attributes:
        text: the assistant text.
        tool_calls: ``(id, call)`` pairs, each with its assigned id.
        completion_tokens: the reply's token count.
        truncated: True when the budget cut the reply.
    """

    text: str
    tool_calls: tuple[tuple[str, ToolCall], ...]
    completion_tokens: int
    truncated: bool


def stable_id(*parts: object, length: int = 24) -> str:
    """A hex id determined by ``parts`` alone."""
    digest = hashlib.sha256(json.dumps(parts, default=str, sort_keys=True).encode()).hexdigest()
    return digest[:length]


def fit_reply(
    reply: Reply,
    *,
    counter: TokenCounter,
    budget: int,
    id_prefix: str,
    id_seed: Sequence[object],
) -> FittedReply:
    """Cut ``reply`` to ``budget`` tokens and give its tool calls ids.

    Args:
        reply: what the policy answered.
        counter: the emulator's tokenizer.
        budget: the most tokens the reply may have.
        id_prefix: ``"call_"`` (OpenAI style) or ``"toolu_"`` (Anthropic style).
        id_seed: values that make the ids of this reply stable and distinct.

    Returns:
        The fitted reply.
    """
    text = reply.text
    used = counter.count(text) if text else 0
    truncated = False
    if used > budget:
        text = _prefix_within(text, budget, counter)
        used = counter.count(text)
        truncated = True
    calls: list[tuple[str, ToolCall]] = []
    for index, call in enumerate(reply.tool_calls):
        cost = counter.count(call.name) + counter.count(call.arguments_json())
        if truncated or used + cost > budget:
            truncated = True
            break
        call_id = call.id or f"{id_prefix}{stable_id(*id_seed, index, call.name)}"
        calls.append((call_id, call))
        used += cost
    return FittedReply(
        text=text, tool_calls=tuple(calls), completion_tokens=used, truncated=truncated
    )


def _prefix_within(text: str, budget: int, counter: TokenCounter) -> str:
    """The longest prefix of ``text`` that counts at most ``budget`` tokens."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if counter.count(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def pieces(text: str, size: int = 12) -> Iterator[str]:
    """Split ``text`` into stream deltas of about ``size`` characters, on word ends."""
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        space = text.find(" ", end)
        end = len(text) if space < 0 or space - end > size else space + 1
        yield text[start:end]
        start = end


def sse(data: Mapping[str, Any] | str, *, event: str | None = None) -> bytes:
    """One server-sent event (``event:`` line only when named)."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedRequest:
    """A validated model call, in flavour-neutral form.

    Attributes:
        model: the model the client named ("" when the flavour lets it be omitted).
        messages: the transcript in OpenAI Chat Completions form, system first.
        tools: the tools as OpenAI ``{"type": "function", "function": ...}`` dicts, the
            form the chat templates render.
        tool_specs: the same tools for policies.
        requested_output: ``max_tokens`` (or its flavour's equivalent), None if absent.
        stream: whether to answer with server-sent events.
        include_usage: OpenAI ``stream_options.include_usage``.
        window_exceeded_beta: Anthropic ``model-context-window-exceeded`` beta sent.
    """

    model: str
    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[Mapping[str, Any], ...] = ()
    tool_specs: tuple[ToolSpec, ...] = ()
    requested_output: int | None = None
    stream: bool = False
    include_usage: bool = False
    window_exceeded_beta: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """Everything a flavour needs to render one successful reply.

    Attributes:
        flavor: the flavour rendering it.
        model: the model name to report.
        response_id: the stable response id (without its flavour prefix).
        created: the ``created`` timestamp to report.
        prompt_tokens: the exact prompt count.
        reply: the fitted reply.
        window_bound: the window (not max_tokens) bounded the reply.
        usage_omitted: the answer carries no usage (:class:`..usage.UsagePlan`).
        cached_tokens: the cached part of the prompt to report beside its count; None
            when no prompt cache is emulated (the flavour's own default details).
        cached_excluded: the reported prompt count leaves the cached part out.
    """

    flavor: str
    model: str
    response_id: str
    created: int
    prompt_tokens: int
    reply: FittedReply
    window_bound: bool = False
    usage_omitted: bool = False
    cached_tokens: int | None = None
    cached_excluded: bool = False

    @property
    def reported_prompt_tokens(self) -> int:
        """The prompt count the usage reports (the cached part left out, if so)."""
        if self.cached_excluded and self.cached_tokens:
            return self.prompt_tokens - self.cached_tokens
        return self.prompt_tokens
