"""Per-conversation fitting state for callers that keep their own loop.

``wg.guard``, the framework integrations and the proxy see one request at a time: the
caller keeps the full transcript and re-sends it whole on every call. Calibration,
the usage ledger and the low-water cut are per run, so each conversation needs its
own :class:`~windowguard.ContextWindowManager`, and the usage of its previous send.

A :class:`ConversationStore` finds that state by a key: by default a digest of the
conversation's head (the system prompt through the first user message) and the model,
so a caller that re-sends the same transcript gets the same state back with no extra
code. ``guarded.conversation(key)`` pins a key explicitly.

A :class:`ManagerOptions` is what such a caller was configured with (``manager=`` or
``model_info`` / ``safety`` / ``pruning`` / ``strict`` / ``edits``, and the store's bounds),
checked once where the caller is made; :meth:`ManagerOptions.make` makes each
conversation's manager.

Invariants:

- The store is bounded: at most ``max_conversations`` entries, least recently used
  evicted first, and entries idle longer than ``ttl_seconds`` forgotten. Forgetting
  is harmless: the next send starts a new run (``new_run=True``), which only costs
  the ledger's measurements and the calibration, never correctness.
- Bounded in bytes too, when given a :class:`~windowguard.run._retained.StateBudget`
  (the proxy's ``--max-state-mb``): each conversation's kept bytes are estimated after
  every fit and the least recently used conversations of every store sharing the
  budget are forgotten while the total exceeds it (see :mod:`windowguard.run._retained`).
- Per-model state is bounded too: a caller that keeps a store (and its model's limits)
  per model name keeps them in a :class:`ConversationStores`, at most ``max_keys``
  entries, least recently used evicted first. Model names can come from a client (the
  proxy), so a client cycling names cannot grow memory without bound.
- A :class:`~windowguard.run._conversation.Conversation` (one conversation's manager, its
  fits taken in turn, and the attribution of each usage report to the send it
  answers) is described in :mod:`windowguard.run._conversation`.
- :class:`ManagerOptions` are valid once made: a bad option raises
  :class:`~windowguard.ConfigurationError` naming the option, the value and the caller,
  before any conversation exists. ``manager=`` excludes ``model_info``, ``safety``,
  ``pruning``, ``strict`` and ``edits``, since the manager carries its own; an option left
  at the :class:`~windowguard.ContextWindowManager` default (None, or ``safety=500``,
  ``pruning="low_water"``, ``strict=False``, ``edits=None``) says nothing and does not
  clash, so callers whose signatures default to those values take ``manager=`` too.
- Edit stages are configuration, shared by every conversation's manager: a stage holds
  no per-run state (what was clamped or cleared is each manager's own), and a
  :class:`~windowguard.SpillStore` is keyed by content, so conversations sharing one
  only ever share identical outputs.
- Every conversation gets its own manager: a copy of ``manager=`` (same
  configuration, fresh per-run state), else a new one with the options.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from ..accounting.catalog import ModelInfo
from ..core.edits.config import EditStage, check_edits
from ..core.exceptions import ConfigurationError
from ..core.prune import POLICIES, PruningPolicy
from ..core.shrink import DEFAULT_SAFETY_BUFFER
from ..pipeline.manager import ContextWindowManager
from ._conversation import Conversation as Conversation
from ._conversation import Fitted as Fitted
from ._retained import PER_CONVERSATION_BYTES, StateBudget

DEFAULT_MAX_CONVERSATIONS: Final = 1024
DEFAULT_TTL_SECONDS: Final = 3600.0
DEFAULT_MAX_MODELS: Final = 256
DEFAULT_MAX_STATE_MB: Final = 256
"""The proxy's ``--max-state-mb``: a quarter of a 1 GiB host (docs/proxy.md says why)."""

_K = TypeVar("_K")
_V = TypeVar("_V")


class ConversationStore:
    """Conversations by key, bounded by count (LRU) and idle time (TTL).

    Args:
        factory: makes the manager of a new conversation (fresh per-run state).
        max_conversations: entries kept; the least recently used goes first.
        ttl_seconds: an entry idle this long is forgotten (None: never).
        budget: a byte budget shared with other stores (None: bounded by count only).
    """

    def __init__(
        self,
        factory: Callable[[], ContextWindowManager],
        *,
        max_conversations: int = DEFAULT_MAX_CONVERSATIONS,
        ttl_seconds: float | None = DEFAULT_TTL_SECONDS,
        budget: StateBudget | None = None,
    ) -> None:
        problem = _bounds_problem(max_conversations, ttl_seconds)
        if problem is not None:
            raise ConfigurationError(problem)
        self._factory = factory
        self.max_conversations = max_conversations
        self.ttl_seconds = None if ttl_seconds is None else float(ttl_seconds)
        self.budget = budget
        self._entries: OrderedDict[str, Conversation] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: str) -> Conversation:
        """The conversation under ``key``, made on first use."""
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"a conversation key must be a non-empty str, got {key!r}")
        now = time.monotonic()
        dropped: list[Conversation] = []
        with self._lock:
            self._expire(now, dropped)
            entry = self._entries.get(key)
            new = entry is None
            if entry is None:
                entry = Conversation(key, self._factory())
                self._entries[key] = entry
                while len(self._entries) > self.max_conversations:
                    dropped.append(self._entries.popitem(last=False)[1])
                if self.budget is not None:
                    entry.measure_with(self._measured)
            else:
                self._entries.move_to_end(key)
            entry.touched = now
        budget = self.budget
        if budget is not None:  # outside the lock: the budget may evict from this store
            budget.release(dropped)
            if new:
                # A fit another thread began on it meanwhile may have sized it already.
                size = max(PER_CONVERSATION_BYTES, entry.retained_bytes)
                budget.put(entry, self, size, new=True)
            else:
                budget.touch(entry)
        return entry

    def _measured(self, conversation: Conversation) -> None:
        if self.budget is not None:
            self.budget.put(conversation, self, conversation.retained_bytes)

    def discard(self, conversation: Conversation) -> None:
        """Forget ``conversation`` (its budget evicted it), if it is still the one kept
        under its key."""
        with self._lock:
            if self._entries.get(conversation.key) is conversation:
                del self._entries[conversation.key]

    def clear(self) -> None:
        """Forget every conversation (the store itself is being forgotten)."""
        with self._lock:
            dropped = list(self._entries.values())
            self._entries.clear()
        if self.budget is not None:
            self.budget.release(dropped)

    def _expire(self, now: float, dropped: list[Conversation]) -> None:
        ttl = self.ttl_seconds
        if ttl is None:
            return
        while self._entries:
            oldest = next(iter(self._entries.values()))
            if now - oldest.touched <= ttl:
                return
            dropped.append(self._entries.popitem(last=False)[1])


class ConversationStores(Generic[_K, _V]):
    """Per-model state (a :class:`ConversationStore`, with whatever else a caller keeps
    beside it, such as the model's limits), made on first use, bounded by count (LRU).

    Thread-safe: two threads asking for a new key at once get the same entry (the
    factory runs under the lock, so it must be quick and do no I/O).

    Examples:
        >>> options = ManagerOptions(caller="guard()")
        >>> stores = ConversationStores(lambda model: options.store(lambda: options.make(model)))
        >>> stores.get("gpt-4o") is stores.get("gpt-4o")
        True

    Args:
        factory: makes the entry of a new key.
        max_keys: entries kept; the least recently used goes first (its conversations
            are forgotten: their next sends start new runs).
        on_evict: told each entry evicted (to release what it accounted in a budget).

    Raises:
        ConfigurationError: ``max_keys`` is not a positive int.
    """

    def __init__(
        self,
        factory: Callable[[_K], _V],
        *,
        max_keys: int = DEFAULT_MAX_MODELS,
        on_evict: Callable[[_V], None] | None = None,
    ) -> None:
        if not isinstance(max_keys, int) or isinstance(max_keys, bool) or max_keys < 1:
            raise ConfigurationError(f"max_keys must be a positive int, got {max_keys!r}")
        self._factory = factory
        self._on_evict = on_evict
        self.max_keys = max_keys
        self._entries: OrderedDict[_K, _V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: _K) -> _V:
        """The entry under ``key``, made on first use (and now the most recently used)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = self._factory(key)
                while len(self._entries) > self.max_keys:
                    evicted = self._entries.popitem(last=False)[1]
                    if self._on_evict is not None:
                        self._on_evict(evicted)
            else:
                self._entries.move_to_end(key)
            return entry

    def values(self) -> list[_V]:
        """The entries kept now, least recently used first."""
        with self._lock:
            return list(self._entries.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class ManagerOptions:
    """How a caller with its own loop makes and keeps its conversations' managers.

    Made once, where ``wg.guard`` or an integration is configured; checked on creation.
    None means "the :class:`~windowguard.ContextWindowManager` default".

    Examples:
        >>> options = ManagerOptions(caller="guard()", safety=1_000)
        >>> store = options.store(lambda: options.make("gpt-4o"))

    Attributes:
        caller: what the options were given to, as errors name it (``"guard()"``).
        manager: a template manager, copied for each conversation; excludes the
            five options below unless they are left at the manager's defaults.
        model_info: the limits of every model (else the catalog's for its name).
        safety: tokens kept free below the window.
        pruning: the pruning policy.
        strict: raise on damaged transcripts instead of passing them on.
        edits: the edit stages each manager runs before dropping whole turns
            (:class:`~windowguard.ClampToolResults`, :class:`~windowguard.ClearToolResults`,
            :class:`~windowguard.Summarize`); None: the manager's default
            (:data:`~windowguard.DEFAULT_EDITS`); ``()``: drop only. Kept as a tuple.
        max_conversations: conversations a store keeps (least recently used first out).
        ttl_seconds: a conversation idle this long is forgotten (None: never).
        discover: ask the model's endpoint for its window and count API (None: where the
            surface sees an endpoint other than the vendors' own APIs; False: never;
            True: always). A surface that cannot see an endpoint refuses True.

    Raises:
        ConfigurationError: an option of the wrong type or out of range, or one given
            with ``manager=`` as well.
    """

    caller: str
    manager: ContextWindowManager | None = None
    model_info: ModelInfo | None = None
    safety: int | None = None
    pruning: PruningPolicy | None = None
    strict: bool | None = None
    edits: Sequence[EditStage] | None = None
    max_conversations: int = DEFAULT_MAX_CONVERSATIONS
    ttl_seconds: float | None = DEFAULT_TTL_SECONDS
    discover: bool | None = None

    def __post_init__(self) -> None:
        problem = self._problem()
        if problem is not None:
            raise ConfigurationError(f"{self.caller}: {problem}")
        if self.edits is not None:  # None: the manager's default (wg.DEFAULT_EDITS)
            try:
                edits = check_edits(self.edits)
            except ConfigurationError as exc:
                raise ConfigurationError(f"{self.caller}: {exc}") from exc
            object.__setattr__(self, "edits", edits)
        if self.manager is None:
            return
        clash = [
            name
            for name, value, default in (
                ("model_info", self.model_info, None),
                ("safety", self.safety, DEFAULT_SAFETY_BUFFER),
                ("pruning", self.pruning, "low_water"),
                ("strict", self.strict, False),
                ("edits", self.edits, None),
            )
            if value is not None and value != default
        ]
        if clash:
            raise ConfigurationError(
                f"pass {' and '.join(clash)} to the ContextWindowManager given as manager=, "
                f"not to {self.caller} as well"
            )

    def _problem(self) -> str | None:
        manager, info, safety = self.manager, self.model_info, self.safety
        if manager is not None and not isinstance(manager, ContextWindowManager):
            return f"manager must be a windowguard.ContextWindowManager, got {manager!r}"
        if info is not None and not isinstance(info, ModelInfo):
            return f"model_info must be a windowguard.ModelInfo, got {info!r}"
        if safety is not None and (
            not isinstance(safety, int) or isinstance(safety, bool) or safety < 0
        ):
            return f"safety must be a non-negative int, got {safety!r}"
        if self.pruning is not None and self.pruning not in POLICIES:
            return f"pruning must be one of {POLICIES}, got {self.pruning!r}"
        if self.strict is not None and not isinstance(self.strict, bool):
            return f"strict must be True or False, got {self.strict!r}"
        if self.discover is not None and not isinstance(self.discover, bool):
            return f"discover must be True, False or None, got {self.discover!r}"
        return _bounds_problem(self.max_conversations, self.ttl_seconds)

    def no_discovery(self) -> None:
        """Refuse ``discover=True`` on a surface that cannot see the model's endpoint.

        Raises:
            ConfigurationError: ``discover`` is True.
        """
        if self.discover is True:
            raise ConfigurationError(
                f"{self.caller}: discover=True needs an endpoint to ask, and this surface "
                "does not see one; pass model_info=wg.ModelInfo(context_window=...) instead"
            )

    def keywords(self, model_info: ModelInfo | None = None) -> dict[str, Any]:
        """The :class:`~windowguard.ContextWindowManager` keyword arguments of a new
        manager (``model_info`` wins over the options')."""
        return {
            "model_info": self.model_info if model_info is None else model_info,
            "safety": DEFAULT_SAFETY_BUFFER if self.safety is None else self.safety,
            "pruning": "low_water" if self.pruning is None else self.pruning,
            "strict": bool(self.strict),
            "edits": self.edits,
        }

    def make(
        self,
        model: str | None,
        model_info: ModelInfo | None = None,
        edits: Sequence[EditStage] | None = None,
    ) -> ContextWindowManager:
        """A new conversation's manager: a copy of ``manager=``, else a new one.

        Args:
            model: the model name (its catalog entry gives the window when no
                ``model_info`` does); None or ``""``: no name.
            model_info: this model's limits, winning over the options' (ignored with
                ``manager=``, which carries its own).
            edits: this conversation's edit stages, winning over the options' (ignored
                with ``manager=``, which carries its own).

        Returns:
            A manager with fresh per-run state.
        """
        if self.manager is not None:
            return self.manager.copy()
        keywords = self.keywords(model_info)
        if edits is not None:
            keywords["edits"] = edits
        return ContextWindowManager(model or None, **keywords)

    def store(
        self, factory: Callable[[], ContextWindowManager], budget: StateBudget | None = None
    ) -> ConversationStore:
        """A conversation store with these bounds, making managers with ``factory``
        (and sharing ``budget``'s bytes with other stores, when given)."""
        return ConversationStore(
            factory,
            max_conversations=self.max_conversations,
            ttl_seconds=self.ttl_seconds,
            budget=budget,
        )


def _bounds_problem(max_conversations: object, ttl_seconds: object) -> str | None:
    if (
        not isinstance(max_conversations, int)
        or isinstance(max_conversations, bool)
        or max_conversations < 1
    ):
        return f"max_conversations must be a positive int, got {max_conversations!r}"
    if ttl_seconds is not None and (
        not isinstance(ttl_seconds, (int, float))
        or isinstance(ttl_seconds, bool)
        or ttl_seconds <= 0
    ):
        return f"ttl_seconds must be a positive number or None, got {ttl_seconds!r}"
    return None


def head_key(
    messages: Sequence[object],
    *,
    system: object = None,
    model: object = None,
    extra: Iterable[object] = (),
) -> str:
    """A digest of a conversation's identity: the model, the system prompt and the
    messages up to and including the first user message.

    Messages may be dicts or SDK/pydantic objects. A transcript with no user message
    is keyed by its first message alone.
    """
    head: list[object] = []
    for message in messages:
        head.append(message)
        if _role(message) == "user":
            break
    else:  # no user message: the first alone, or every send would be a new conversation
        head = list(messages[:1])
    material = {
        "model": _plain(model),
        "system": _plain(system),
        "head": [_plain(message) for message in head],
        "extra": [_plain(item) for item in extra],
    }
    text = json.dumps(material, sort_keys=True, default=repr, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _role(message: object) -> object:
    if isinstance(message, Mapping):
        return message.get("role")
    return getattr(message, "role", None)


def _plain(value: object) -> object:
    """A JSON-able rendering of a message or a part of one (dicts, lists, pydantic
    models, SDK objects); anything else by ``repr``."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return _plain(dump(mode="json"))
        except Exception:  # a model that cannot dump itself is keyed by repr
            return repr(value)
    return repr(value)
