"""The guard's state and one guarded send, shared by the sync and async clients.

A :class:`Guard` holds what outlives one call: the options, the model limits and count
API found per (endpoint, model), and the conversations
(:class:`~windowguard.run._conversations.ConversationStore`, one per endpoint and model,
each bounded by ``max_conversations``). The (endpoint, model) pairs are bounded too
(:class:`~windowguard.run._conversations.ConversationStores`, ``max_models``, LRU): a model
name can come from a client (the proxy), and a client cycling names must not grow
memory. A guarded client, its ``with_options`` copies
and its ``conversation(key)`` views share one Guard.

One send: :meth:`Guard.request` reads the call (or says it passes through untouched),
:meth:`Guard.conversation_for` finds its conversation, :meth:`Guard.fit` /
:meth:`Guard.afit` fit it and return a :class:`Send` with the keyword arguments to send,
then :meth:`Send.received` feeds the usage back or :meth:`Send.failed` learns from the
provider's refusal. The SDK call itself is made by the client, with the SDK's own method.

Invariants:

- A send that cannot fit raises :class:`~windowguard.ContextTruncatedError` before the
  SDK is called: no HTTP request.
- Usage is fed back to the conversation only for its latest fitted send: a stream read
  after a later send of the same conversation was fitted cannot mis-measure the ledger.
- A provider overflow (``CONTEXT_OVERFLOW``) teaches the manager
  (:meth:`~windowguard.ContextWindowManager.observe_overflow`) and the SDK's own error is
  re-raised unchanged; nothing is retried behind the caller's back.
- Discovery and count-API probing happen at most once per (endpoint, model) while it is
  kept, never for a model whose limits are known already (``known_limits``), never
  against the vendors' own hosts (their count APIs are known, and used unless
  ``discover=False``), and never with ``discover=False``; their failures fall back to
  the catalog, then the fallback window, and the ``context_estimate`` events'
  ``source`` says which.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from ..accounting.catalog import ModelInfo
from ..accounting.remote import RemoteCounter
from ..accounting.usage import prompt_tokens_from_usage
from ..core.edits.config import EditStage
from ..core.events import Event, GuardPassthrough
from ..core.exceptions import ConfigurationError
from ..core.gauge import ContextGauge
from ..core.prune import PruningPolicy
from ..pipeline.manager import ContextWindowManager, Fit
from ..run._conversations import (
    DEFAULT_MAX_MODELS,
    DEFAULT_TTL_SECONDS,
    Conversation,
    ConversationStore,
    ConversationStores,
    ManagerOptions,
    head_key,
)
from ..run._retained import StateBudget
from ..run.providers._common import CounterSource, ModelInfoSource, is_default_host
from ..run.retry import REACTIVE_SAFETY_TOKENS
from ..run.sinks import Sink, as_sinks, emit, in_conversation
from ._apis import Api, Request, fitted_kwargs, parse, server_state

__all__ = ["Guard", "GuardPassthrough", "Send"]

_VENDOR_HOSTS: Final = {"openai": "api.openai.com", "anthropic": "api.anthropic.com"}


_T = TypeVar("_T")

KnownLimits = Callable[[str], "tuple[ModelInfo, RemoteCounter | None] | None"]
"""A model's window and count API known already, by model name (None: find them)."""


class _Known(Generic[_T]):
    """A value known already, read like a source that would find it (no I/O)."""

    __slots__ = ("_value",)

    def __init__(self, value: _T) -> None:
        self._value = value

    def get(self) -> _T:
        return self._value

    async def aget(self) -> _T:
        return self._value


class _Limits:
    """The window and count API of one model at one endpoint, found once."""

    __slots__ = ("counter", "info")

    def __init__(
        self,
        info: ModelInfoSource | _Known[ModelInfo],
        counter: CounterSource | _Known[RemoteCounter] | None,
    ) -> None:
        self.info = info
        self.counter = counter


@dataclass(frozen=True, slots=True)
class _ModelKey:
    """Where a model's state is kept: its endpoint and name. The key the endpoint was
    first seen with is used for its discovery and counts, but is no part of the key."""

    base_url: str
    model: str
    api_key: str | None = field(compare=False, repr=False)


class _Model:
    """One model's limits and conversations."""

    __slots__ = ("limits", "store")

    def __init__(self, limits: _Limits, store: ConversationStore) -> None:
        self.limits = limits
        self.store = store


class Guard:
    """State shared by a guarded client and its copies and views.

    Args:
        vendor: ``"openai"`` or ``"anthropic"``.
        model_info: explicit limits for every model.
        safety: tokens kept free below the window.
        pruning: the manager's pruning policy.
        sinks: where events go.
        strict: raise on damaged transcripts instead of passing them on.
        manager: a template manager, copied per conversation (excludes ``model_info``,
            ``safety``, ``pruning``, ``strict`` and ``edits``: see
            :class:`~windowguard.run._conversations.ManagerOptions`).
        max_conversations: conversations kept per endpoint and model (LRU).
        discover: ask the endpoint for its window and count API (None: unless it is the
            vendor's own host).
        discovery_timeout: seconds for each discovery.
        ttl_seconds: a conversation idle this long is forgotten (None: never).
        max_models: (endpoint, model) pairs whose limits and conversations are kept
            (LRU): model names may come from a client.
        known_limits: limits known already for a model name, used instead of
            discovering (the proxy's startup discovery, for names its upstream did not
            list); None from it, or no function: discover as usual.
        edits: the edit stages of every conversation's manager (``()``: drop only).
        caller: what errors name the options as given to (``"guard()"``).
        state_budget: a byte budget over the conversations of every model (and of other
            guards sharing it: the proxy's ``--max-state-mb``); None: bounded by count.
    """

    def __init__(
        self,
        *,
        vendor: str,
        model_info: ModelInfo | None,
        safety: int | None,
        pruning: PruningPolicy | None,
        sinks: Sink | Iterable[Sink] | None,
        strict: bool | None,
        manager: ContextWindowManager | None,
        max_conversations: int,
        discover: bool | None,
        discovery_timeout: float,
        ttl_seconds: float | None = DEFAULT_TTL_SECONDS,
        max_models: int = DEFAULT_MAX_MODELS,
        known_limits: KnownLimits | None = None,
        edits: Sequence[EditStage] | None = None,
        caller: str = "guard()",
        state_budget: StateBudget | None = None,
    ) -> None:
        self.options = ManagerOptions(
            caller=caller,
            manager=manager,
            model_info=model_info,
            safety=safety,
            pruning=pruning,
            strict=strict,
            edits=edits,
            max_conversations=max_conversations,
            ttl_seconds=ttl_seconds,
        )
        if discover is not None and not isinstance(discover, bool):
            raise ConfigurationError(f"discover must be True, False or None, got {discover!r}")
        self.vendor = vendor
        self.sinks: tuple[Sink, ...] = as_sinks(sinks)
        self.discover = discover
        self.discovery_timeout = discovery_timeout
        self.known_limits = known_limits
        self.state_budget = state_budget
        self._models: ConversationStores[_ModelKey, _Model] = ConversationStores(
            self._new_model, max_keys=max_models, on_evict=_forget_model
        )

    # -- reading a call -----------------------------------------------------------------

    def request(
        self, api: Api, kwargs: Mapping[str, Any], *, helper: bool = False
    ) -> Request | None:
        """The call read, or None when it passes through unchanged (an event says why).

        ``helper`` says the call is an SDK stream helper (``.stream(...)``): a stream.
        """
        state = server_state(api, kwargs)
        if state is not None:
            model = kwargs.get("model")
            self.emit(
                GuardPassthrough(
                    api=api.name,
                    model=model if isinstance(model, str) else "",
                    reason=(
                        f"{state}= makes the server prepend context the guard cannot see "
                        "or drop; the request was sent unchanged"
                    ),
                )
            )
            return None
        return parse(api, kwargs, helper=helper)

    # -- conversations ------------------------------------------------------------------

    def conversation_for(
        self, request: Request, client: Any, key: str | None
    ) -> tuple[Conversation, _Limits]:
        """The conversation a request belongs to (made, with discovery, on first use)."""
        model = self._model(*_endpoint(client, request.model))
        if key is None:
            key = head_key(request.messages, system=request.system, model=request.model)
        return model.store.get(key), model.limits

    async def aconversation_for(
        self, request: Request, client: Any, key: str | None
    ) -> tuple[Conversation, _Limits]:
        """:meth:`conversation_for` with discovery that never blocks the event loop."""
        limits = self._model(*_endpoint(client, request.model)).limits
        # A template manager carries its own window, but a count API's probe reads the
        # tokenizer family from the model's limits: found here, never by a sync read.
        if self.options.manager is None or limits.counter is not None:
            await limits.info.aget()
        if limits.counter is not None:
            await limits.counter.aget()
        return self.conversation_for(request, client, key)

    def _model(self, base_url: str, model: str, api_key: str | None) -> _Model:
        return self._models.get(_ModelKey(base_url, model, api_key))

    def _new_model(self, key: _ModelKey) -> _Model:
        # Runs under the models' lock: it only builds sources, it never discovers.
        limits = self._known(key.model)
        if limits is None:
            limits = self._new_limits(key)
        store = self.options.store(
            lambda: self._new_manager(key.model, limits), budget=self.state_budget
        )
        return _Model(limits, store)

    def _known(self, model: str) -> _Limits | None:
        found = self.known_limits(model) if self.known_limits is not None else None
        if found is None:
            return None
        info, counter = found
        return _Limits(_Known(info), None if counter is None else _Known(counter))

    def _new_limits(self, key: _ModelKey) -> _Limits:
        base_url, model, api_key = key.base_url, key.model, key.api_key
        vendor_host = is_default_host(base_url, _VENDOR_HOSTS[self.vendor])
        info = ModelInfoSource(
            model,
            explicit=self.options.model_info,
            discover=not vendor_host and self.discover is not False,
            base_url=base_url,
            api_key=api_key,
            timeout=self.discovery_timeout,
        )
        counter = None
        # A vendor's own host has a known count API: no probe, only what the docs name.
        if self.discover is not False:
            counter = CounterSource(
                model,
                base_url=base_url,
                api_key=api_key,
                vendor=self.vendor if vendor_host else None,
                family=lambda: info.get().tokenizer,
                timeout=self.discovery_timeout,
            )
        return _Limits(info, counter)

    def _new_manager(self, model: str, limits: _Limits) -> ContextWindowManager:
        # A template carries its own window: no discovery for it.
        info = None if self.options.manager is not None else limits.info.get()
        manager = self.options.make(model, info)
        if limits.counter is not None and manager.wants_remote_counter:
            manager.use_remote_counter(limits.counter.get(), model=model)
        return manager

    # -- fitting ------------------------------------------------------------------------

    def fit(self, request: Request, conversation: Conversation) -> Send:
        """Fit a request in its conversation (a remote count, if any, is made here).

        Fits of one conversation run one at a time (see
        :meth:`~windowguard.run._conversations.Conversation.prepare`).

        Raises:
            ContextTruncatedError: it cannot fit; nothing may be sent.
        """
        fitted = conversation.prepare(request.messages, **request.fit_options())
        return self._fitted(request, conversation, fitted.fit, fitted.send)

    async def afit(
        self, request: Request, conversation: Conversation, *, offload: bool = False
    ) -> Send:
        """:meth:`fit` whose remote count is awaited, never blocking the event loop; a
        concurrent fit of the same conversation (another task's, another loop's or
        thread's) waits for this one, and this one for it. With ``offload`` the fit's
        own work runs on a worker thread (a large request: see
        :meth:`~windowguard.run._conversation.Conversation.aprepare`)."""
        fitted = await conversation.aprepare(
            request.messages, offload=offload, **request.fit_options()
        )
        return self._fitted(request, conversation, fitted.fit, fitted.send)

    def _fitted(self, request: Request, conversation: Conversation, fit: Fit, number: int) -> Send:
        with in_conversation(conversation.key):
            for event in fit.events:
                self.emit(event)
        return Send(
            guard=self,
            request=request,
            conversation=conversation,
            fit=fit,
            number=number,
            kwargs=fitted_kwargs(request, fit),
        )

    def refit(self, send: Send) -> None:
        """Fit ``send``'s request again, after the provider refused it as too long.

        ``send.failed`` must have been given the refusal first (the manager observed
        the overflow: a smaller window it stated, an exact count it gave). The refit
        uses the reactive safety margin (:data:`~windowguard.run.retry.REACTIVE_SAFETY_TOKENS`);
        ``send.fit`` and ``send.kwargs`` become the refit's, and the usage that comes back
        is still fed to the same send (the refit keeps its number).

        Raises:
            ContextTruncatedError: the request cannot fit even so; nothing may be sent.
        """
        request = send.request
        fitted = send.conversation.prepare(
            request.messages,
            send=send.number,
            safety=REACTIVE_SAFETY_TOKENS,
            **request.fit_options(),
        )
        self._adopt(send, fitted.fit)

    async def arefit(self, send: Send, *, offload: bool = False) -> None:
        """:meth:`refit` on the event loop: the conversation's turn and a remote count
        are awaited.

        Raises:
            ContextTruncatedError: the request cannot fit even so; nothing may be sent.
        """
        request = send.request
        fitted = await send.conversation.aprepare(
            request.messages,
            send=send.number,
            offload=offload,
            safety=REACTIVE_SAFETY_TOKENS,
            **request.fit_options(),
        )
        self._adopt(send, fitted.fit)

    def _adopt(self, send: Send, fit: Fit) -> None:
        """A refit becomes ``send``'s: its events go out, its arguments are sent."""
        with in_conversation(send.conversation.key):
            for event in fit.events:
                self.emit(event)
        send.fit = fit
        send.kwargs = fitted_kwargs(send.request, fit)

    def emit(self, event: Event) -> None:
        """Give an event to the sinks."""
        if self.sinks:
            emit(event, self.sinks)


class Send:
    """One fitted send: the keyword arguments to send, and what to do with the answer.

    Attributes:
        request: the call as the caller made it.
        conversation: its conversation.
        fit: the manager's fit.
        kwargs: the keyword arguments to send.
    """

    __slots__ = ("_guard", "_number", "conversation", "fit", "kwargs", "request")

    def __init__(
        self,
        *,
        guard: Guard,
        request: Request,
        conversation: Conversation,
        fit: Fit,
        number: int,
        kwargs: dict[str, Any],
    ) -> None:
        self._guard = guard
        self._number = number
        self.request = request
        self.conversation = conversation
        self.fit = fit
        self.kwargs = kwargs

    @property
    def number(self) -> int:
        """This send's number in its conversation (its usage is recorded against it)."""
        return self._number

    def received(self, response: object) -> None:
        """A whole response came back: feed its usage (None when it has none)."""
        self.usage(getattr(response, "usage", None))

    def usage(self, usage: object) -> None:
        """Feed a reported usage back to the conversation, and measure the pressure.

        The report is kept only while this send is the conversation's latest fit (see
        :meth:`~windowguard.run._conversations.Conversation.record`): a concurrent branch's
        or a late stream's usage never measures another request.
        """
        try:
            reported = prompt_tokens_from_usage(usage) or None  # 0: a missing usage
        except ConfigurationError:
            reported = None
        conversation = self.conversation
        kept = conversation.record(None if reported is None else usage, send=self._number)
        if kept and reported is not None:
            with in_conversation(conversation.key):
                gauge = ContextGauge(conversation.manager.context_window)
                self._guard.emit(gauge.measure(reported))

    def failed(self, error: BaseException) -> None:
        """The send raised: learn from an overflow refusal; no usage came back."""
        self.conversation.failed(error, send=self._number)


def _forget_model(model: _Model) -> None:
    """A model's state was evicted: its conversations leave the byte budget too."""
    model.store.clear()


def _endpoint(client: Any, model: str) -> tuple[str, str, str | None]:
    base_url = str(getattr(client, "base_url", "") or "")
    api_key = getattr(client, "api_key", None)
    return base_url, model, api_key if isinstance(api_key, str) and api_key else None
