"""Shapes: what windowguard needs to know about one message, in any wire format.

A :class:`Shape` is a small frozen value extracted from one message (or one
Responses item) by an adapter. It never copies the message: its text segments
refer to the caller's own strings. Everything above the adapters (segmentation,
pruning, estimation) works on shapes only, so the three wire formats share one
implementation of the rules.

Invariants:
    * ``kind`` says what the message is for segmentation: ``"system"`` (system or
      developer instructions), ``"user"`` (human input, which may also carry tool
      results, as Anthropic's user messages do), ``"assistant"`` (anything the model
      produced: text, reasoning/thinking, tool calls), ``"tool"`` (a tool result
      message) or ``"other"`` (an item of a type we do not know, carried along with
      its neighbours).
    * ``opens`` lists the tool-call ids the message opens, in order; ``answers``
      the ids it answers, in order.  Ids pair *within one turn*, never globally, and
      by position among the calls that share an id.  A call or result that carries no
      id (some servers and local models emit none) is the empty string ``""``: results
      without an id answer the calls without one, in order.
    * ``results_only`` marks a user message that carries nothing but tool results
      (Anthropic ``tool_result`` blocks): a result, not the user's task.
    * ``reasoning`` marks a separate reasoning item (OpenAI Responses) and
      ``call_item`` a separate call item (a Responses ``*_call``): where a turn holds a
      reasoning item, its response's calls stay with it even when the caller appends
      each call's output right after the call (:mod:`windowguard.core.turns`).
    * ``segments`` hold the text the provider will tokenize, each tagged with a
      content class: ``"prose"`` (natural-language text) or ``"dense"`` (tool-call
      arguments, tool results and other machine text, which tokenizes more densely).
      A tool call is one segment, its name followed by its arguments, with
      ``name_length`` saying where the name ends; a segment of a tool result inside a
      user message says which of the shape's ``answers`` it belongs to (``result``).
    * ``media_items`` counts images, audio and documents, which cost a fixed amount
      each in the provider's own terms, never their base64 length.
    * ``problem`` is set when the message itself is damaged (unknown role, content
      of a wrong type); pairing damage is found later, by :mod:`windowguard.core.turns`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ContentClass", "Format", "Kind", "Segment", "Shape"]

ContentClass = Literal["prose", "dense"]
Kind = Literal["system", "user", "assistant", "tool", "other"]
Format = Literal["openai_chat", "anthropic", "responses"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Segment:
    """A piece of text the provider will tokenize, with its content class."""

    content_class: ContentClass
    text: str
    name_length: int | None = None
    """For a tool call's segment (``name`` followed by its arguments): the length of
    the name, so exact accounting can render the call the way a chat template does;
    None for any other segment."""
    result: int | None = None
    """For a segment of a tool result carried inside another message (an Anthropic
    ``tool_result`` block in a user message): the index, in the shape's ``answers``, of
    the result it belongs to, so exact accounting can render each result as the tool
    message its server makes of it; None for any other segment."""
    reasoning: bool = False
    """For the model's reasoning carried in an assistant message (``reasoning_content``,
    an Anthropic ``thinking`` block): chat templates frame it apart from the content
    (Qwen3's ``<think>`` block), so exact accounting renders it there."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Shape:
    """The segmentation- and estimation-relevant facts of one message."""

    kind: Kind
    opens: tuple[str, ...] = ()
    answers: tuple[str, ...] = ()
    segments: tuple[Segment, ...] = ()
    media_items: int = 0
    problem: str | None = None
    results_only: bool = False
    """A user message that holds only tool results: not the user's task, so the head
    runs past it (Anthropic's ``tool_result``-only user messages)."""
    reasoning: bool = False
    """A separate reasoning item (Responses ``reasoning``): the calls after it are its
    response's, and must never be sent without it."""
    call_item: bool = False
    """A separate call item (a Responses ``*_call``, built-in or MCP approval request),
    rather than an assistant message or reasoning item."""

    @property
    def chars(self) -> int:
        """Characters of text in all segments."""
        return sum(len(s.text) for s in self.segments)
