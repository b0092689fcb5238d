"""``wg.guard(client)``: an OpenAI or Anthropic client that never overflows the window.

::

    import openai
    import windowguard as wg

    client = wg.guard(openai.OpenAI())
    reply = client.chat.completions.create(model="gpt-4o", messages=transcript)

The guarded client is used exactly like the client it wraps. Its model calls
(``chat.completions.create``, ``responses.create``, ``messages.create``,
``messages.stream``, streamed or not) are fitted first: with ``edits=``, oversized tool
results are clamped and old ones cleared first; then the oldest whole turns are
dropped until the request fits (head and newest turn always kept, a tool call never
separated from its result), the reply budget is fitted, the tools are counted; then the
call is made with the SDK's own method on the wrapped client, and the SDK's own response
or stream comes back. Its usage is fed back to the conversation's manager (calibration,
ledger), from the response or, for a stream, from the event that reports it.

Invariants:

- Everything else is the wrapped client's own: attribute access, resources, raw and
  streaming-response wrappers pass through unchanged; ``with_options`` / ``copy``
  return a guarded client sharing this one's conversations.
- A stream is the one the caller would get without the guard: where the guard asks a
  Chat Completions stream for ``include_usage`` (the caller left it unset), the
  usage-only last chunk is read for its usage and never reaches the caller; an
  ``include_usage`` the caller set, True or False, is sent as set (``docs/integrations.md``,
  "Streams").
- The caller keeps its whole transcript and sends it whole every time. Per-conversation
  state is found by the conversation's head (system prompt through the first user
  message) and model, in an LRU of ``max_conversations`` per endpoint and model;
  :meth:`GuardedClient.conversation` pins an explicit key.
- A call that cannot fit raises :class:`~windowguard.ContextTruncatedError` before any
  HTTP request. An overflow the provider reports anyway is learned from and re-raised
  as the SDK's own error.
- Importing this module imports no SDK: a client is recognised by its class, whose SDK
  the caller has imported already.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..accounting.catalog import ModelInfo
from ..core.edits.config import EditStage
from ..core.exceptions import ConfigurationError
from ..core.prune import PruningPolicy
from ..core.shrink import DEFAULT_SAFETY_BUFFER
from ..pipeline.manager import ContextWindowManager
from ..run._conversations import DEFAULT_MAX_CONVERSATIONS, DEFAULT_TTL_SECONDS
from ..run.providers._common import DEFAULT_DISCOVERY_TIMEOUT
from ..run.sinks import Sink
from ._apis import ANTHROPIC_MESSAGES, CHAT, RESPONSES, Api
from ._core import Guard, GuardPassthrough, Send
from ._streams import tap, tap_async

if TYPE_CHECKING:
    # Only for the type checker (a missing SDK is then Any to it): importing this module
    # imports no SDK.
    from anthropic import Anthropic, AsyncAnthropic
    from openai import AsyncOpenAI, OpenAI

__all__ = ["AsyncGuardedClient", "GuardPassthrough", "GuardedClient", "guard"]

Client = TypeVar("Client", bound="OpenAI | AsyncOpenAI | Anthropic | AsyncAnthropic")
"""A client ``guard`` takes, and the type it returns: the client's own, so a type checker
sees the SDK's resources, methods and return types (Azure clients are ``OpenAI``'s)."""


def guard(
    client: Client,
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
    discovery_timeout: float = DEFAULT_DISCOVERY_TIMEOUT,
) -> Client:
    """Wrap an ``openai`` or ``anthropic`` client (sync or async) so no call overflows.

    Examples:
        >>> import openai, windowguard as wg  # doctest: +SKIP
        >>> client = wg.guard(openai.OpenAI(base_url="http://127.0.0.1:8000/v1"))  # doctest: +SKIP

    Args:
        client: an ``openai.OpenAI`` / ``openai.AsyncOpenAI`` (Azure ones too) or
            ``anthropic.Anthropic`` / ``anthropic.AsyncAnthropic``.
        model_info: the limits of every model used through this client (they win over
            discovery and the catalog).
        safety: tokens kept free below the window (default 500).
        pruning: ``"low_water"`` (default, cache-friendly) or ``"minimal"``.
        edits: edit stages run before whole turns are dropped
            (``[wg.ClampToolResults(...), wg.ClearToolResults(...), wg.Summarize(...)]``;
            ``docs/edits.md``); None (default): :data:`~windowguard.DEFAULT_EDITS`;
            ``()``: drop only. Edited messages are sent as new objects of the caller's
            type; the caller's transcript is never changed.
        strict: raise :class:`~windowguard.InvalidTranscriptError` on a damaged
            transcript instead of passing it on.
        ttl_seconds: a conversation idle this long is forgotten (None: never; default
            an hour).
        max_conversations: conversations remembered per endpoint and model (LRU; at
            most 256 endpoint and model pairs are remembered, least recently used
            forgotten first).
        discover: ask the client's endpoint for the window it serves and its count API
            (cached per endpoint and model); None: yes, unless it is
            ``api.openai.com`` / ``api.anthropic.com``, whose windows the catalog has
            and whose count APIs (Anthropic ``count_tokens``, OpenAI
            ``responses/input_tokens``) are known and used without a probe; False: no
            request but the caller's own (no count API either).
        sinks: event sinks (one callable, several, or None): each fit's events
            (``context_estimate``, ``transcript_pruned``, ``max_tokens_shrunk``,
            ``usage_measured`` ...), a ``context_pressure`` event for each send whose
            usage came back, and ``guard_passthrough`` for a call sent unchanged.
        manager: a configured :class:`~windowguard.ContextWindowManager`, copied for each
            conversation (instead of ``model_info``, ``safety``, ``pruning``, ``strict``,
            ``edits``, left at their defaults).
        discovery_timeout: seconds for each discovery.

    Returns:
        A :class:`GuardedClient` (or :class:`AsyncGuardedClient` for an async client),
        typed as the client's own type: it is used exactly like it, and a type checker
        checks the calls against the SDK (``client.chat.completions.create`` keeps its
        overloads and return types).

    Raises:
        ConfigurationError: ``client`` is not a supported SDK client, or an option is
            unusable.
    """
    vendor, is_async = _kind_of(client)
    state = Guard(
        vendor=vendor,
        model_info=model_info,
        safety=safety,
        pruning=pruning,
        sinks=sinks,
        strict=strict,
        edits=edits,
        manager=manager,
        max_conversations=max_conversations,
        discover=discover,
        discovery_timeout=discovery_timeout,
        ttl_seconds=ttl_seconds,
    )
    cls = AsyncGuardedClient if is_async else GuardedClient
    # Not an instance of the client's class, but used exactly like one (see the module).
    return cast(Client, cls(state, client))


_CLIENTS = {
    ("openai", "OpenAI"): ("openai", False),
    ("openai", "AsyncOpenAI"): ("openai", True),
    ("anthropic", "Anthropic"): ("anthropic", False),
    ("anthropic", "AsyncAnthropic"): ("anthropic", True),
}


def _kind_of(client: object) -> tuple[str, bool]:
    if isinstance(client, (GuardedClient, AsyncGuardedClient)):
        raise ConfigurationError("this client is guarded already; guard the original once")
    for (module, name), kind in _CLIENTS.items():
        sdk = sys.modules.get(module)
        cls = getattr(sdk, name, None) if sdk is not None else None
        if isinstance(cls, type) and isinstance(client, cls):
            return kind
    raise ConfigurationError(
        "wg.guard() takes an openai.OpenAI, openai.AsyncOpenAI, anthropic.Anthropic or "
        f"anthropic.AsyncAnthropic client, got {type(client).__module__}."
        f"{type(client).__qualname__}"
    )


# -- the clients ----------------------------------------------------------------------


class _Base:
    """What the sync and async guarded clients share: delegation and views."""

    __slots__ = ("_client", "_guard", "_key")

    def __init__(self, state: Guard, client: Any, key: str | None = None) -> None:
        self._guard = state
        self._client = client
        self._key = key

    @property
    def wrapped_client(self) -> Any:
        """The SDK client this one guards."""
        return self._client

    def conversation(self, key: str) -> Any:
        """A view of this client whose calls all belong to the conversation ``key``.

        Args:
            key: any non-empty string naming the conversation.

        Raises:
            ConfigurationError: ``key`` is not a non-empty str.
        """
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"a conversation key must be a non-empty str, got {key!r}")
        return type(self)(self._guard, self._client, key)

    def with_options(self, **options: Any) -> Any:
        """The wrapped client's ``with_options``, guarded with the same conversations."""
        return type(self)(self._guard, self._client.with_options(**options), self._key)

    def copy(self, **options: Any) -> Any:
        """The wrapped client's ``copy``, guarded with the same conversations."""
        return type(self)(self._guard, self._client.copy(**options), self._key)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._client, name)
        guarded = _RESOURCES.get((self._guard.vendor, name))
        if guarded is None:
            return value
        return _Resource(self, value, guarded)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._client)) | set(object.__dir__(self)))

    def __repr__(self) -> str:
        pinned = f", conversation={self._key!r}" if self._key else ""
        return f"<{type(self).__name__} of {self._client!r}{pinned}>"


class GuardedClient(_Base):
    """A sync OpenAI or Anthropic client whose model calls are fitted (see :func:`guard`)."""

    __slots__ = ()

    def __enter__(self) -> GuardedClient:
        self._client.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._client.__exit__(exc_type, exc, tb)

    def _send(self, api: Api, call: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        send = self._prepare(api, kwargs)
        if send is None:
            return call(**kwargs)
        try:
            result = call(**send.kwargs)
        except BaseException as exc:
            send.failed(exc)
            raise
        if send.request.stream:
            tap(result, send.usage, hide_usage_chunk=send.request.usage_added)
        else:
            send.received(result)
        return result

    def _prepare(self, api: Api, kwargs: dict[str, Any], *, helper: bool = False) -> Send | None:
        request = self._guard.request(api, kwargs, helper=helper)
        if request is None:
            return None
        conversation, _ = self._guard.conversation_for(request, self._client, self._key)
        return self._guard.fit(request, conversation)

    def _stream(self, api: Api, call: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        return _StreamManager(self, api, call, kwargs)


class AsyncGuardedClient(_Base):
    """An async OpenAI or Anthropic client whose model calls are fitted (see :func:`guard`)."""

    __slots__ = ()

    async def __aenter__(self) -> AsyncGuardedClient:
        await self._client.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._client.__aexit__(exc_type, exc, tb)

    async def _send(self, api: Api, call: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        send = await self._prepare(api, kwargs)
        if send is None:
            return await call(**kwargs)
        try:
            result = await call(**send.kwargs)
        except BaseException as exc:
            send.failed(exc)
            raise
        if send.request.stream:
            tap_async(result, send.usage, hide_usage_chunk=send.request.usage_added)
        else:
            send.received(result)
        return result

    async def _prepare(
        self, api: Api, kwargs: dict[str, Any], *, helper: bool = False
    ) -> Send | None:
        request = self._guard.request(api, kwargs, helper=helper)
        if request is None:
            return None
        conversation, _ = await self._guard.aconversation_for(request, self._client, self._key)
        return await self._guard.afit(request, conversation)

    def _stream(self, api: Api, call: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        return _AsyncStreamManager(self, api, call, kwargs)


# -- resources ------------------------------------------------------------------------

# (vendor, attribute) -> {method: (api, how)}; nested resources map to a further dict.
_Methods = dict[str, Any]
_RESOURCES: dict[tuple[str, str], _Methods] = {
    ("openai", "chat"): {
        "completions": {
            "create": (CHAT, "send"),
            "parse": (CHAT, "send"),
            "stream": (CHAT, "stream"),
        }
    },
    ("openai", "responses"): {
        "create": (RESPONSES, "send"),
        "parse": (RESPONSES, "send"),
        "stream": (RESPONSES, "stream"),
    },
    ("anthropic", "messages"): {
        "create": (ANTHROPIC_MESSAGES, "send"),
        "stream": (ANTHROPIC_MESSAGES, "stream"),
    },
}


class _Resource:
    """An SDK resource (``client.chat``, ``client.messages`` ...) whose model calls are
    guarded; everything else is the resource's own."""

    __slots__ = ("_client", "_methods", "_target")

    def __init__(self, client: _Base, target: Any, methods: _Methods) -> None:
        self._client = client
        self._target = target
        self._methods = methods

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        entry = self._methods.get(name)
        if entry is None:
            return value
        if isinstance(entry, dict):
            return _Resource(self._client, value, entry)
        api, how = entry
        client = self._client

        def guarded(**kwargs: Any) -> Any:
            if how == "stream":
                return client._stream(api, value, kwargs)
            return client._send(api, value, kwargs)

        guarded.__name__ = name
        guarded.__doc__ = getattr(value, "__doc__", None)
        return guarded

    def __repr__(self) -> str:
        return f"<guarded {self._target!r}>"


class _StreamManager:
    """A stream helper (``messages.stream``, ``chat.completions.stream``,
    ``responses.stream``): fits on entry, then enters the SDK's own stream manager and
    returns the SDK's own stream object, tapped for its usage."""

    __slots__ = ("_api", "_call", "_client", "_kwargs", "_manager")

    def __init__(
        self, client: GuardedClient, api: Api, call: Callable[..., Any], kwargs: dict[str, Any]
    ) -> None:
        self._client = client
        self._api = api
        self._call = call
        self._kwargs = kwargs
        self._manager: Any = None

    def __enter__(self) -> Any:
        send = self._client._prepare(self._api, self._kwargs, helper=True)
        self._manager = self._call(**(self._kwargs if send is None else send.kwargs))
        try:
            stream = self._manager.__enter__()
        except BaseException as exc:
            if send is not None:
                send.failed(exc)
            raise
        if send is not None:
            tap(stream, send.usage, hide_usage_chunk=send.request.usage_added)
        return stream

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Any:
        if self._manager is not None:
            return self._manager.__exit__(exc_type, exc, tb)
        return None


class _AsyncStreamManager:
    """The async twin of :class:`_StreamManager` (``async with``)."""

    __slots__ = ("_api", "_call", "_client", "_kwargs", "_manager")

    def __init__(
        self,
        client: AsyncGuardedClient,
        api: Api,
        call: Callable[..., Any],
        kwargs: dict[str, Any],
    ) -> None:
        self._client = client
        self._api = api
        self._call = call
        self._kwargs = kwargs
        self._manager: Any = None

    async def __aenter__(self) -> Any:
        send = await self._client._prepare(self._api, self._kwargs, helper=True)
        self._manager = self._call(**(self._kwargs if send is None else send.kwargs))
        try:
            stream = await self._manager.__aenter__()
        except BaseException as exc:
            if send is not None:
                send.failed(exc)
            raise
        if send is not None:
            tap_async(stream, send.usage, hide_usage_chunk=send.request.usage_added)
        return stream

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Any:
        if self._manager is not None:
            return await self._manager.__aexit__(exc_type, exc, tb)
        return None
