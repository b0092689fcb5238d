"""What a remembered conversation keeps in memory, and a byte budget over many of them.

A surface that follows conversations (the proxy, ``wg.guard``) keeps, per conversation,
its manager's view of the transcript it fitted last: every message of it (the caller's
own objects, parsed from JSON by the proxy), an edited copy where an edit stage replaced
one, and per message an :class:`~windowguard.accounting.ledger.Entry` with its shape, its
costs and the ledger's sums. Measured with ``tracemalloc`` behind the proxy, that is the
whole of it: about 1.3 bytes per byte of the JSON the messages came in (Python's ``str``
and ``dict`` headers), plus ~900 bytes per message of bookkeeping and ~10 KiB per
conversation (its manager, estimator, locks and store entry).

:class:`RetainedSizer` estimates those bytes after each fit, incrementally: a send that
extends the previous one sizes only the appended messages; a rebuilt view is sized
again. A message's size is the ``sys.getsizeof`` of its values and containers (dict
keys are left out: the JSON decoder and the interpreter share them), plus the texts its
shape made rather than referred to (a tool call's name and arguments joined, a block
rendered as JSON), plus its edited copy.

:class:`StateBudget` bounds the sum over every conversation of every store that shares
it, least recently used evicted first.

Invariants:

- After any :meth:`StateBudget.put`, the total is at most ``max_bytes``, or the
  conversation just put is the only one kept (a conversation larger than the whole
  budget is kept alone, so the send that made it so is still accounted and its next
  send extends it; the next other conversation evicts it).
- Eviction only forgets: the conversation's next send starts a new run, which costs the
  ledger's measurements and the calibration, never correctness.
- The budget never holds a store's lock while it holds its own: victims are chosen under
  the budget's lock and forgotten by their stores after it is released, so a store may
  call the budget while it holds its own lock.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, Protocol

from ..accounting.ledger import Entry
from ..core.exceptions import ConfigurationError

if TYPE_CHECKING:
    from ._conversation import Conversation

__all__ = [
    "PER_CONVERSATION_BYTES",
    "PER_MESSAGE_BYTES",
    "RetainedSizer",
    "StateBudget",
    "entry_bytes",
    "value_bytes",
]

PER_CONVERSATION_BYTES: Final = 10 * 1024
"""A conversation's own objects, whatever its transcript: its manager (estimator,
calibration, edit state), its locks and gate, its store entry and key (measured with
``tracemalloc``: 10.8 KiB with a two-message transcript)."""

PER_MESSAGE_BYTES: Final = 900
"""A message's bookkeeping beside the message itself: its ledger entry, shape and
segments, the ledger's prefix sums, the turn index and the view's cache slot (measured:
~900 bytes a message on agent transcripts)."""

_SCALARS: Final = (str, bytes, int, float, bool, type(None))
_getsizeof: Final = sys.getsizeof


def value_bytes(value: object, strings: set[int] | None = None) -> int:
    """The bytes of ``value`` and everything it holds: dict values (not keys), list and
    tuple items, and an object's ``__dict__`` values (SDK and pydantic messages); each
    container once (a cycle ends there).

    Args:
        value: a message, or a part of one.
        strings: where to note the id of every ``str`` met (to tell a shape's own texts
            from the message's).
    """
    total = 0
    stack = [value]
    visited: set[int] = set()
    while stack:
        item = stack.pop()
        total += _getsizeof(item)
        if isinstance(item, str):
            if strings is not None:
                strings.add(id(item))
            continue
        if isinstance(item, _SCALARS):
            continue
        key = id(item)
        if key in visited:
            continue
        visited.add(key)
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            attributes = getattr(item, "__dict__", None)
            if isinstance(attributes, dict):
                total += _getsizeof(attributes)
                stack.extend(attributes.values())
    return total


def entry_bytes(entry: Entry) -> int:
    """One message of the view: the caller's message, its edited copy if any, the texts
    its shape made itself, and :data:`PER_MESSAGE_BYTES` of bookkeeping."""
    strings: set[int] = set()
    total = value_bytes(entry.origin, strings)
    if entry.message is not entry.origin:
        total += value_bytes(entry.message, strings)
    for segment in entry.shape.segments:
        if id(segment.text) not in strings:
            total += _getsizeof(segment.text)
    return total + PER_MESSAGE_BYTES


class RetainedSizer:
    """The estimated bytes one conversation's manager keeps, updated after each fit.

    Holds a reference to the manager's list of entries (which the manager holds anyway)
    so that a send which extended the view is sized by its new messages alone.
    """

    __slots__ = ("_count", "_entries", "_total")

    def __init__(self) -> None:
        self._entries: Sequence[Entry] = ()
        self._count = 0
        self._total = 0

    def update(self, entries: Sequence[Entry], edited: Mapping[int, object]) -> int:
        """The bytes kept now.

        Args:
            entries: the view's entries (``ContextWindowManager.retained``).
            edited: the edited copies sent in place of some of them, by index.
        """
        count = self._count
        if entries is self._entries and len(entries) >= count:
            self._total += sum(map(entry_bytes, entries[count:]))
        else:  # a new view: sized again
            self._total = sum(map(entry_bytes, entries))
        self._entries, self._count = entries, len(entries)
        # Edited copies replace entries in place (an appended entry was sized before its
        # clamp): sized afresh each time; they are few and small.
        copies = sum(value_bytes(copy) for copy in edited.values())
        return PER_CONVERSATION_BYTES + self._total + copies


class _Store(Protocol):
    def discard(self, conversation: Conversation) -> None: ...


class StateBudget:
    """A byte budget over the conversations of every store that shares it.

    Thread-safe. Stores :meth:`put` a conversation when they make it and after each of
    its fits (with its size, most recently used), and :meth:`release` the ones they
    forget themselves (their count bound, their idle time).

    Examples:
        >>> budget = StateBudget(64 * 1024 * 1024)
        >>> budget.total, budget.evictions
        (0, 0)

    Args:
        max_bytes: the most the conversations may hold together (see the module's
            invariants for one larger than it).
        on_evict: told the number of conversations each put evicted (metrics, a log line).

    Raises:
        ConfigurationError: ``max_bytes`` is not a positive int.
    """

    def __init__(self, max_bytes: int, *, on_evict: Callable[[int], None] | None = None) -> None:
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 1:
            raise ConfigurationError(f"max_bytes must be a positive int, got {max_bytes!r}")
        self.max_bytes = max_bytes
        self._on_evict = on_evict
        self._lock = threading.Lock()
        self._order: OrderedDict[Conversation, tuple[_Store, int]] = OrderedDict()
        self._total = 0
        self._evictions = 0

    @property
    def total(self) -> int:
        """The estimated bytes kept now."""
        return self._total

    @property
    def evictions(self) -> int:
        """Conversations evicted to stay within the budget, since it was made."""
        return self._evictions

    def __len__(self) -> int:
        return len(self._order)

    def sizes(self) -> list[int]:
        """The sizes kept, least recently used first (for tests and the page)."""
        with self._lock:
            return [size for _, size in self._order.values()]

    def put(
        self, conversation: Conversation, store: _Store, size: int, *, new: bool = False
    ) -> None:
        """Account ``conversation`` at ``size`` bytes, as the most recently used, and
        evict the least recently used others while the total exceeds the budget.

        A conversation the budget does not hold is added only when ``new`` (its store
        just made it): one evicted while a fit ran stays forgotten.
        """
        victims: list[tuple[Conversation, _Store]] = []
        with self._lock:
            old = self._order.get(conversation)
            if old is None and not new:
                return
            self._total += size - (old[1] if old is not None else 0)
            self._order[conversation] = (store, size)
            self._order.move_to_end(conversation)
            while self._total > self.max_bytes and len(self._order) > 1:
                victim, (owner, victim_size) = self._order.popitem(last=False)
                self._total -= victim_size
                victims.append((victim, owner))
            self._evictions += len(victims)
        for victim, owner in victims:  # no lock of ours held: the store takes its own
            owner.discard(victim)
        if victims and self._on_evict is not None:
            self._on_evict(len(victims))

    def touch(self, conversation: Conversation) -> None:
        """``conversation`` was used: it is now the most recently used."""
        with self._lock:
            if conversation in self._order:
                self._order.move_to_end(conversation)

    def release(self, conversations: Sequence[Conversation]) -> None:
        """Stop accounting conversations their store forgot."""
        with self._lock:
            for conversation in conversations:
                entry = self._order.pop(conversation, None)
                if entry is not None:
                    self._total -= entry[1]
