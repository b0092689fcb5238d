"""What the proxy's live page shows: a bounded, in-memory record of the conversations it
guards, fed by the proxy's own events.

:class:`ConversationRecorder` is an event sink (``Callable[[Event], None]``). It tells
conversations apart by the key the guard emits their events under
(:func:`~windowguard.run.sinks.in_conversation`); the proxy tells it each fitted send's API
and model (:meth:`ConversationRecorder.note`). Per conversation it keeps the pressure the
upstream's reported prompt tokens put on the window (``context_pressure``), with the time
each was recorded, and counts of its edits, drops, shrinks, refusals and upstream errors
(edits and shrinks once a request, told by the proxy as ``/metrics`` counts them: an
edit event comes per edited result, and a refit emits events of its own);
for the proxy as a whole, the last upstream errors and the refusals by code.

Invariants:

- Bounded whatever the traffic: at most ``max_conversations`` conversations (the least
  recently active forgotten first), each with its last ``max_points`` pressure points,
  and the last ``max_errors`` upstream errors. A conversation forgotten here is only
  forgotten by the page: fitting does not read this record.
- Nothing of a message and no secret: a conversation is shown by a short id (the first
  12 hex digits of its key, itself a digest of the conversation's head), its API, its
  model name (as the client gave it, cut to 120 characters), numbers and times. Event
  texts (an upstream's error message, a refusal's message) are not kept at all: they can
  quote a request's content.
- Times are the recorder's own clock (wall-clock seconds by default): events carry none.
- Thread-safe: events come from the event loop and from the worker threads large fits
  run on.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from ..core.events import (
    ContextEstimate,
    ContextPressure,
    Event,
    ProviderErrorEvent,
    ProxyRefused,
    TranscriptPruned,
)
from ..core.exceptions import ConfigurationError
from ..run.sinks import current_conversation

__all__ = ["ConversationRecorder"]

ID_DIGITS: Final = 12
"""Hex digits of a conversation's key shown as its id (48 bits: no collisions in practice)."""
MODEL_CHARS: Final = 120
"""The longest model name kept (the name comes from the client)."""


@dataclass(slots=True)
class _Conversation:
    """What the page shows of one conversation."""

    id: str
    first_seen: float
    last_seen: float
    points: deque[tuple[float, float, int]]  # (time, pressure, prompt tokens)
    api: str = ""
    model: str = ""
    window: int | None = None
    sends: int = 0
    estimated_pressure: float | None = None
    peak_pressure: float = 0.0
    edits: int = 0
    prunes: int = 0
    dropped_turns: int = 0
    shrinks: int = 0
    refusals: int = 0
    errors: int = 0

    def to_dict(self, *, with_points: bool) -> dict[str, Any]:
        last = self.points[-1] if self.points else None
        return {
            "id": self.id,
            "api": self.api,
            "model": self.model,
            "window": self.window,
            "sends": self.sends,
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "pressure": last[1] if last is not None else None,
            "tokens": last[2] if last is not None else None,
            "peak_pressure": self.peak_pressure if self.points else None,
            "estimated_pressure": self.estimated_pressure,
            "edits": self.edits,
            "prunes": self.prunes,
            "dropped_turns": self.dropped_turns,
            "shrinks": self.shrinks,
            "refusals": self.refusals,
            "errors": self.errors,
            "points": [[t, p] for t, p, _ in self.points] if with_points else [],
        }


@dataclass(slots=True)
class _Totals:
    conversations_seen: int = 0
    conversations_forgotten: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    errors: int = 0


class ConversationRecorder:
    """A bounded record of the conversations a proxy guards, for its live page.

    Args:
        max_conversations: conversations kept (least recently active forgotten first).
        max_points: pressure points kept per conversation (oldest forgotten first).
        max_errors: upstream errors kept (oldest forgotten first).
        clock: the time recorded with each point and error (seconds).

    Raises:
        ConfigurationError: a bound below 1.
    """

    def __init__(
        self,
        *,
        max_conversations: int = 200,
        max_points: int = 120,
        max_errors: int = 50,
        clock: Callable[[], float] = time.time,
    ) -> None:
        for name, value in (
            ("max_conversations", max_conversations),
            ("max_points", max_points),
            ("max_errors", max_errors),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be an int >= 1, got {value!r}")
        self.max_conversations = max_conversations
        self.max_points = max_points
        self.max_errors = max_errors
        self._clock = clock
        self._lock = threading.Lock()
        self._conversations: OrderedDict[str, _Conversation] = OrderedDict()
        self._errors: deque[dict[str, Any]] = deque(maxlen=max_errors)
        self._totals = _Totals()
        self.started = clock()

    # -- what the proxy tells it ------------------------------------------------------

    def note(self, key: str, *, api: str, model: str) -> None:
        """A fitted send of conversation ``key``: its API (``chat``, ``responses``,
        ``messages``) and the model it names."""
        with self._lock:
            conversation = self._touch(key)
            conversation.api = api
            conversation.model = model[:MODEL_CHARS]
            conversation.sends += 1

    def counted(self, key: str, *, edited: bool, shrunk: bool) -> None:
        """A fitted request of conversation ``key``, as ``/metrics`` counts it: whether
        it was edited (other than by dropping turns) and whether its ``max_tokens`` was
        shrunk. Counted here once a request, not from events: an edit event comes per
        edited result, and a reactive refit emits edit and shrink events of its own."""
        with self._lock:
            conversation = self._touch(key)
            conversation.edits += edited
            conversation.shrinks += shrunk

    def __call__(self, event: Event) -> None:
        """Record an event (the sink protocol)."""
        key = current_conversation()
        if isinstance(event, ProviderErrorEvent):
            self._error(event, key or event.run_id or None)
            return
        if isinstance(event, ProxyRefused):
            with self._lock:
                self._totals.refused[event.code] += 1
                if key is not None:
                    self._touch(key).refusals += 1
            return
        if key is None:
            return
        with self._lock:
            self._conversation_event(self._touch(key), event)

    def _conversation_event(self, conversation: _Conversation, event: Event) -> None:
        if isinstance(event, ContextPressure):
            conversation.points.append((conversation.last_seen, event.pressure, event.tokens))
            conversation.window = event.window
            conversation.peak_pressure = max(conversation.peak_pressure, event.pressure)
        elif isinstance(event, ContextEstimate):
            conversation.estimated_pressure = event.pressure
            conversation.window = event.window
        elif isinstance(event, TranscriptPruned):
            conversation.dropped_turns = event.dropped_turns
            if event.new_cut:
                conversation.prunes += 1

    def _error(self, event: ProviderErrorEvent, key: str | None) -> None:
        with self._lock:
            now = self._clock()
            if key is not None:
                self._touch(key, now).errors += 1
            self._totals.errors += 1
            self._errors.append(
                {
                    "time": now,
                    "conversation": key[:ID_DIGITS] if key is not None else None,
                    "site": event.site,
                    "kind": event.failure_kind,
                    "status": event.status,
                    "retryable": event.retryable,
                    "decision": event.decision,
                }
            )

    def _touch(self, key: str, now: float | None = None) -> _Conversation:
        """The conversation ``key``, made the most recently active (created if new, the
        least recently active forgotten when that passes the bound). Holds the lock."""
        now = self._clock() if now is None else now
        conversation = self._conversations.get(key)
        if conversation is None:
            conversation = _Conversation(
                id=key[:ID_DIGITS],
                first_seen=now,
                last_seen=now,
                points=deque(maxlen=self.max_points),
            )
            self._conversations[key] = conversation
            self._totals.conversations_seen += 1
            while len(self._conversations) > self.max_conversations:
                self._conversations.popitem(last=False)
                self._totals.conversations_forgotten += 1
        else:
            conversation.last_seen = now
            self._conversations.move_to_end(key)
        return conversation

    # -- what the page reads ----------------------------------------------------------

    def snapshot(self, *, charted: int = 12) -> dict[str, Any]:
        """The record as a JSON-ready dict: the conversations, most recently active
        first (the first ``charted`` with their pressure points), the last upstream
        errors (newest first) and the totals."""
        with self._lock:
            newest_first = list(reversed(self._conversations.values()))
            totals = self._totals
            return {
                "now": self._clock(),
                "started": self.started,
                "conversations": [
                    c.to_dict(with_points=i < charted) for i, c in enumerate(newest_first)
                ],
                "conversations_seen": totals.conversations_seen,
                "conversations_forgotten": totals.conversations_forgotten,
                "max_conversations": self.max_conversations,
                "max_points": self.max_points,
                "errors": list(reversed(self._errors)),
                "errors_total": totals.errors,
                "refused": dict(sorted(totals.refused.items())),
            }

    def __len__(self) -> int:
        with self._lock:
            return len(self._conversations)

    def __repr__(self) -> str:
        return (
            f"ConversationRecorder(conversations={len(self)}/{self.max_conversations}, "
            f"max_points={self.max_points}, max_errors={self.max_errors})"
        )
