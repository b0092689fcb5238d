"""pydantic-ai: fit every model request of an ``Agent`` run into the context window.

Two hooks, both over pydantic-ai's own message objects:

- :class:`ContextWindowCapability`, a capability
  (``Agent(..., capabilities=[ContextWindowCapability(...)])``; ``WindowGuard`` is its
  old name, kept as an alias).
  Its ``prepare_model_request`` hook runs before every attempt at the model, once the
  serving model is known; it fits the request's messages, counts the request's tool
  definitions and instructions, and writes the fitted ``max_tokens`` into the request's
  ``model_settings``. What it drops is dropped from that request only: the run's
  history (``result.all_messages()``) stays whole. ``after_model_request`` feeds the
  response's usage back to calibration and the ledger.
- :func:`history_processor`, for ``ProcessHistory(history_processor(...))``
  (pydantic-ai 2 removed ``Agent(history_processors=...)``; ``ProcessHistory`` is its
  replacement). A history processor can neither see the request's tool definitions
  nor change its ``model_settings``, and ``ProcessHistory`` writes what it returns back
  into the run's history; prefer :class:`ContextWindowCapability`.

Invariants:

- Messages are never rewritten in place: each :class:`~pydantic_ai.messages.ModelMessage`
  is read as one or more OpenAI chat dicts (an index map remembers whose, and which
  part), the dicts are fitted turn-atomically, and the kept messages are returned as
  the caller's own objects, in order. With ``edits=`` the exceptions are copies
  (``dataclasses.replace``): a request whose tool return was clamped or cleared carries
  a ``ToolReturnPart`` with the edited text (a tool ``RetryPromptPart`` becomes one, so
  the model is sent exactly the text counted), a response whose call arguments were
  cleared carries ``args={}``, and a summary is a new ``ModelRequest`` with one
  ``UserPromptPart`` after the head (a summarizer is given the OpenAI Chat dicts). The
  capability's copies reach that one request only; ``ProcessHistory`` writes a
  processor's result, copies included, back into the run's history, and the processor
  reads each such copy as the message it stands for, so an edit is made again byte for
  byte, never on an edited text (a placeholder is never cleared again).
  A ``ModelResponse`` starts a turn; the ``ModelRequest`` holding its
  ``ToolReturnPart`` / ``RetryPromptPart`` answers (paired by ``tool_call_id``) and any
  user prompt after them belong to the same turn, so a request is never split.
- The system prompt parts and the first user prompt (the head) and the newest turn are
  always kept; a request that cannot fit raises
  :class:`~windowguard.ContextTruncatedError` before any HTTP request.
- Fits of one conversation run one at a time (awaited, never blocking the event loop),
  and usage is fed back only for the request it answers, while that request is the
  one this conversation fitted last: the capability records the response of each
  attempt against the attempt's own send (or nothing, when the attempt failed); the
  processor takes the usage of the ``ModelResponse`` that directly follows the last
  message of the conversation's latest send, and ``NO_USAGE`` otherwise.
- Per-conversation state lives in a :class:`~windowguard.run._conversations.ConversationStore`
  per model name, keyed by the head, the model name and pydantic-ai's
  ``conversation_id``. The model names are bounded too (a
  :class:`~windowguard.run._conversations.ConversationStores` of 256, as ``wg.guard``, least
  recently used forgotten first): a caller cycling model names cannot grow memory.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

try:
    from pydantic_ai import messages as _messages
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.tools import RunContext
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "windowguard.integrations.pydantic_ai needs pydantic-ai: "
        'pip install "windowguard[pydantic-ai]"'
    ) from exc

from ..accounting.catalog import ModelInfo
from ..core.edits.config import EditStage
from ..core.exceptions import ConfigurationError
from ..core.prune import PruningPolicy
from ..core.shrink import DEFAULT_SAFETY_BUFFER
from ..pipeline.manager import ContextWindowManager, Fit
from ..run._conversations import (
    DEFAULT_MAX_CONVERSATIONS,
    DEFAULT_TTL_SECONDS,
    Conversation,
    ConversationStore,
    ConversationStores,
    Fitted,
    ManagerOptions,
    head_key,
)
from ..run.sinks import Sink, as_sinks, emit
from ._pydantic_messages import ModelMessage, read, sent_messages, tool_dicts
from ._pydantic_messages import to_openai_chat as to_openai_chat

__all__ = ["ContextWindowCapability", "WindowGuard", "history_processor", "to_openai_chat"]

# -- per-conversation fitting -----------------------------------------------------------


@dataclass
class _Fitter:
    """What both hooks share: configuration and the conversations."""

    options: ManagerOptions
    sinks: tuple[Sink, ...]
    _stores: ConversationStores[str, ConversationStore] = field(init=False)

    def __post_init__(self) -> None:
        options = self.options
        self._stores = ConversationStores(
            lambda model_name: options.store(lambda: options.make(model_name))
        )

    def conversation(
        self, model_name: str, dicts: Sequence[Mapping[str, Any]], conversation_id: str | None
    ) -> Conversation:
        key = head_key(dicts, model=model_name, extra=[conversation_id])
        return self._stores.get(model_name).get(key)

    async def fit(
        self,
        conversation: Conversation,
        messages: Sequence[ModelMessage],
        dicts: list[dict[str, Any]],
        owners: Sequence[int | None],
        parts: Sequence[int | None],
        *,
        tools: list[dict[str, Any]] | None,
        max_tokens: int | None,
    ) -> tuple[list[ModelMessage], list[tuple[ModelMessage, ModelMessage]], Fitted]:
        """Fit in the conversation's turn (awaited, never blocking the loop).

        Returns:
            The messages to send, ``(copy, original)`` of the edited copies among them,
            and the fit.
        """
        fitted = await conversation.aprepare(
            dicts, tools=tools, max_tokens=max_tokens, format="openai_chat"
        )
        for event in fitted.fit.events:
            emit(event, self.sinks)
        sent, copies = sent_messages(messages, owners, fitted.fit, dicts, parts)
        return sent, copies, fitted


def _model_name(model: object) -> str:
    name = getattr(model, "model_name", None)
    return name if isinstance(name, str) else ""


def _max_tokens(settings: Mapping[str, Any] | None) -> int | None:
    value = None if settings is None else settings.get("max_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _instructions(parts: Sequence[_messages.InstructionPart] | None) -> str | None:
    text = "\n\n".join(part.content for part in parts or () if part.content)
    return text or None


def _usage(response: _messages.ModelResponse) -> int | None:
    tokens = response.usage.input_tokens
    return tokens if isinstance(tokens, int) and tokens > 0 else None


# -- the capability ---------------------------------------------------------------------


class ContextWindowCapability(AbstractCapability[Any]):
    """A pydantic-ai capability that fits every model request into the context window.

    ``WindowGuard`` is its old name, kept as an alias.

    Examples:
        >>> agent = Agent(model, tools=[...], capabilities=[ContextWindowCapability()])

    Args:
        model_info: the model's limits; else the catalog's for the request's model name
            (an unknown model gets the conservative fallback window).
        safety: tokens kept free below the window.
        pruning: ``"low_water"`` (default, cache-friendly) or ``"minimal"``.
        strict: raise :class:`~windowguard.InvalidTranscriptError` on damaged history.
        sinks: callables given every event (``context_estimate``, ``transcript_pruned``,
            ``max_tokens_shrunk``, ``usage_measured`` ...).
        edits: edit stages run before whole turns are dropped
            (``[wg.ClampToolResults(...), wg.ClearToolResults(...), wg.Summarize(...)]``;
            ``docs/edits.md``); None (default): :data:`~windowguard.DEFAULT_EDITS`;
            ``()``: drop only. The edited messages are copies sent with that request
            only.
        manager: a configured manager to copy for each conversation (then leave the
            options above at their defaults: the manager carries its own).
        max_conversations: conversations remembered (least recently used forgotten).
        ttl_seconds: a conversation idle this long is forgotten (None: never).
        discover: accepted for the same options everywhere; this surface sees no
            endpoint to ask, so None (default) and False do no discovery and True is
            refused (give ``model_info`` for a server the catalog does not know).

    Raises:
        ConfigurationError: an unusable option.
    """

    def __init__(
        self,
        *,
        model_info: ModelInfo | None = None,
        safety: int = DEFAULT_SAFETY_BUFFER,
        pruning: PruningPolicy = "low_water",
        edits: Sequence[EditStage] | None = None,
        strict: bool = False,
        ttl_seconds: float | None = DEFAULT_TTL_SECONDS,
        max_conversations: int = DEFAULT_MAX_CONVERSATIONS,
        discover: bool | None = None,
        sinks: Sink | Iterable[Sink] | None = None,
        manager: ContextWindowManager | None = None,
    ) -> None:
        super().__init__()
        options = ManagerOptions(
            caller="ContextWindowCapability()",
            manager=manager,
            model_info=model_info,
            safety=safety,
            pruning=pruning,
            strict=strict,
            edits=edits,
            max_conversations=max_conversations,
            ttl_seconds=ttl_seconds,
            discover=discover,
        )
        options.no_discovery()
        self._fitter = _Fitter(options, as_sinks(sinks))
        # The conversation and number of this run's send in flight.
        self._sent: tuple[Conversation, int] | None = None
        self.last_fit: Fit | None = None
        """The most recent fit this instance made (per run: see :meth:`for_run`)."""

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds live state: not spec-serializable

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        """A per-run instance sharing the conversations, so concurrent runs never record
        each other's usage."""
        run = object.__new__(type(self))
        run.__dict__.update(self.__dict__)
        run._sent = None
        run.last_fit = None
        return run

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Fit the request's messages and ``max_tokens``; count its tools.

        Raises:
            ContextTruncatedError: even the head and the newest turn cannot fit.
        """
        parameters = request_context.model_request_parameters
        messages = list(request_context.messages)
        dicts, owners, parts = read(messages, _instructions(parameters.instruction_parts))
        tool_defs = [*parameters.function_tools, *parameters.output_tools]
        model_name = _model_name(request_context.model)
        conversation = self._fitter.conversation(model_name, dicts, ctx.conversation_id)
        settings = request_context.model_settings
        kept, _, fitted = await self._fitter.fit(
            conversation,
            messages,
            dicts,
            owners,
            parts,
            tools=tool_dicts(tool_defs) or None,
            max_tokens=_max_tokens(cast("Mapping[str, Any] | None", settings)),
        )
        fit = fitted.fit
        self._sent = (conversation, fitted.send)
        self.last_fit = fit
        request_context.messages = kept
        new_settings = dict(settings or {})
        new_settings["max_tokens"] = fit.max_tokens
        request_context.model_settings = cast(Any, new_settings)
        return request_context

    async def after_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: _messages.ModelResponse,
    ) -> _messages.ModelResponse:
        """Feed the response's reported prompt tokens back to the conversation."""
        sent, self._sent = self._sent, None
        if sent is not None:
            conversation, send = sent
            conversation.record(_usage(response), send=send)  # dropped if no longer latest
        return response

    async def on_model_request_error(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        error: Exception,
    ) -> _messages.ModelResponse:
        """Record that no usage came back; learn from an overflow refusal; re-raise."""
        sent, self._sent = self._sent, None
        if sent is not None:
            conversation, send = sent
            conversation.failed(error, send=send)
        raise error


# -- the history processor --------------------------------------------------------------


def history_processor(
    *,
    model: str | None = None,
    model_info: ModelInfo | None = None,
    safety: int = DEFAULT_SAFETY_BUFFER,
    pruning: PruningPolicy = "low_water",
    edits: Sequence[EditStage] | None = None,
    strict: bool = False,
    ttl_seconds: float | None = DEFAULT_TTL_SECONDS,
    max_conversations: int = DEFAULT_MAX_CONVERSATIONS,
    discover: bool | None = None,
    sinks: Sink | Iterable[Sink] | None = None,
    manager: ContextWindowManager | None = None,
) -> Callable[[RunContext[Any], list[ModelMessage]], Any]:
    """A history processor for ``ProcessHistory`` that fits the history into the window.

    Examples:
        >>> from pydantic_ai.capabilities import ProcessHistory
        >>> agent = Agent(model, capabilities=[ProcessHistory(history_processor(safety=500))])

    A processor sees the messages and the run context only: it fits against the run's
    ``model_settings["max_tokens"]`` (the reply reserve) but cannot change it, and it
    cannot see the request's tool definitions (give ``safety`` room for them). The
    :class:`ContextWindowCapability` does both. ``ProcessHistory`` writes the kept
    messages back into the run's history.

    ``safety``, ``pruning``, ``strict``, ``sinks``, ``edits``, ``manager``,
    ``max_conversations``, ``ttl_seconds`` and ``discover`` are as for
    :class:`ContextWindowCapability`; with
    ``edits=`` the edited copies (a clamped or cleared result) stay in the run's history
    for the rest of the run, since ``ProcessHistory`` writes back what the processor
    returns.

    Args:
        model: the model name for catalog limits; else the run's model name.
        model_info: the model's limits (wins over the catalog).

    Returns:
        An async ``(ctx, messages) -> messages`` processor.

    Raises:
        ConfigurationError: an unusable option.
    """
    options = ManagerOptions(
        caller="history_processor()",
        manager=manager,
        model_info=model_info,
        safety=safety,
        pruning=pruning,
        strict=strict,
        edits=edits,
        max_conversations=max_conversations,
        ttl_seconds=ttl_seconds,
        discover=discover,
    )
    options.no_discovery()
    fitter = _Fitter(options, as_sinks(sinks))
    if model is not None and not isinstance(model, str):
        raise ConfigurationError(f"model must be a model name string, got {model!r}")
    # Per conversation: the last message of its latest send, and that send's number.
    last_sent: OrderedDict[str, tuple[ModelMessage, int]] = OrderedDict()
    originals = _Originals()

    async def process(ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        instructions = next(
            (
                m.instructions
                for m in reversed(messages)
                if isinstance(m, _messages.ModelRequest) and m.instructions
            ),
            None,
        )
        given = messages
        # ProcessHistory wrote the edited copies of the previous call into the history:
        # each is read as the caller's message it stands for, so the manager finds its
        # own edits again (byte for byte) instead of editing an edited text.
        messages = originals.restore(messages)
        dicts, owners, parts = read(messages, instructions)
        model_name = model or _model_name(ctx.model)
        conversation = fitter.conversation(model_name, dicts, ctx.conversation_id)
        with conversation.lock:
            previous = last_sent.get(conversation.key)
        if previous is not None:
            # The usage of the reply to the latest send, if it is in this history; kept
            # only while that send is still the conversation's latest fit.
            conversation.record(_usage_after(given, previous[0]), send=previous[1])
        kept, copies, fitted = await fitter.fit(
            conversation,
            messages,
            dicts,
            owners,
            parts,
            tools=None,
            max_tokens=_max_tokens(cast("Mapping[str, Any] | None", ctx.model_settings)),
        )
        originals.note(copies)
        with conversation.lock:
            if kept and conversation.is_latest(fitted.send):
                last_sent[conversation.key] = (kept[-1], fitted.send)
                last_sent.move_to_end(conversation.key)
                while len(last_sent) > fitter.options.max_conversations:
                    last_sent.popitem(last=False)
        return kept

    # pydantic-ai passes the RunContext only to a processor whose first parameter is
    # annotated with it, and resolves the annotation at runtime.
    process.__annotations__ = {
        "ctx": RunContext[Any],
        "messages": list[ModelMessage],
        "return": list[ModelMessage],
    }
    return process


class _Originals:
    """The caller's message each edited copy a processor returned stands for, while the
    copy lives (``ProcessHistory`` keeps it in the run's history; an entry goes with its
    copy, so this holds nothing the history does not)."""

    def __init__(self) -> None:
        # Reentrant: a copy's finalizer may run (garbage collection) while it is held.
        self._lock = threading.RLock()
        self._by_copy: dict[int, tuple[weakref.ref[ModelMessage], ModelMessage]] = {}

    def note(self, copies: Iterable[tuple[ModelMessage, ModelMessage]]) -> None:
        """Remember each ``(copy, original)``."""
        for copy, original in copies:
            original = self.restore([original])[0]  # a copy of a copy stands for the first
            with self._lock:
                self._by_copy[id(copy)] = (weakref.ref(copy), original)
            weakref.finalize(copy, self._forget, id(copy))

    def restore(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """``messages`` with each noted copy replaced by the message it stands for."""
        with self._lock:
            if not self._by_copy:
                return list(messages)
            out: list[ModelMessage] = []
            for message in messages:
                entry = self._by_copy.get(id(message))
                out.append(entry[1] if entry is not None and entry[0]() is message else message)
            return out

    def _forget(self, key: int) -> None:
        with self._lock:
            self._by_copy.pop(key, None)


def _usage_after(messages: Sequence[ModelMessage], sent_last: ModelMessage | None) -> int | None:
    """The usage of the response to the request that ended with ``sent_last``."""
    if sent_last is None:
        return None
    for index in range(len(messages) - 1, -1, -1):
        if messages[index] is sent_last:
            after = messages[index + 1] if index + 1 < len(messages) else None
            if isinstance(after, _messages.ModelResponse):
                return _usage(after)
            return None
    return None


WindowGuard = ContextWindowCapability
"""The old name of :class:`ContextWindowCapability` (an alias, the same class)."""
