"""LiteLLM: fit every chat completion into the model's context window.

Two hooks, both over OpenAI-format chat messages (dicts or LiteLLM ``Message`` objects):

- :func:`completion` / :func:`acompletion`, drop-in for ``litellm.completion`` /
  ``litellm.acompletion`` (same arguments; a :class:`ContextWindowGuard` carries
  options).
  Each call fits ``messages`` turn-atomically, counts ``tools`` (or legacy
  ``functions``), fits ``max_tokens`` / ``max_completion_tokens``, calls LiteLLM and
  returns LiteLLM's own response, then feeds the response's usage back. A stream is
  LiteLLM's own stream, passed through chunk by chunk; ``stream_options.include_usage``
  is added when the caller did not set it, and the usage-only last chunk that brings is
  read for its usage and withheld, so the caller gets the chunks it would get without
  windowguard (an ``include_usage`` the caller set, True or False, is sent as set).
- :class:`ContextWindowLogger`, a ``CustomLogger`` for the LiteLLM proxy: its
  ``async_pre_call_hook`` fits ``data["messages"]`` and ``max_tokens`` in place before
  the proxy routes the request, and its success / failure callbacks feed the usage back.
  It never adds ``stream_options.include_usage`` (the proxy would pass the usage-only
  last chunk, with empty ``choices``, on to a client that did not ask for it): a proxy
  stream whose client did not ask for usage feeds none back, and the next fit says
  ``NO_USAGE``. The proxy calls ``async_pre_call_hook`` only for proxy requests, never
  for SDK calls; SDK users take :func:`completion` / :func:`acompletion`.

Invariants:

- Messages are never rewritten in place: the list sent is a subsequence of the
  caller's own objects, except the messages an edit stage (``edits=``) changed, which
  are new objects of the caller's type (a dict, LiteLLM's ``Message``) with only their
  content replaced, sent byte for byte again on later calls. The head (system messages
  through the first user message) and the newest turn are always kept, an assistant's
  tool calls travel with their results, and a request that cannot fit raises
  :class:`~windowguard.ContextTruncatedError` before LiteLLM is called.
- Fits of one conversation run one at a time (:func:`acompletion` and the logger
  await their turn, never blocking the event loop), and usage is fed back only to the
  request it answers: each fitted send gets a number unique in the process
  (:meth:`~windowguard.run._conversations.Conversation.prepare`), and a
  report (from the response, the stream's last chunk or a logger callback, which
  LiteLLM may run after the next send began) is recorded only while its send is still
  the conversation's latest. A send that failed or reported no
  usage is followed by ``NO_USAGE``; an overflow refusal teaches the manager the
  provider's numbers.
- The window comes from ``model_info=`` (a :class:`~windowguard.ModelInfo`), else the
  windowguard catalog for the model name (a provider prefix like ``openai/`` is
  looked through), else LiteLLM's bundled model map, else the conservative fallback.
- Per-conversation state lives in a :class:`~windowguard.run._conversations.ConversationStore`
  per model (and ``model_info``), keyed by the model and the head. The models are
  bounded too (a :class:`~windowguard.run._conversations.ConversationStores` of 256, as
  ``wg.guard``, least recently used forgotten first): a caller cycling model names
  cannot grow memory.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Final

try:
    import litellm
    from litellm.integrations.custom_logger import CustomLogger
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'windowguard.integrations.litellm needs LiteLLM: pip install "windowguard[litellm]"'
    ) from exc

from ..accounting.catalog import ModelInfo
from ..core.edits.config import EditStage, check_edits
from ..core.exceptions import ConfigurationError
from ..core.prune import PruningPolicy
from ..core.shrink import DEFAULT_SAFETY_BUFFER
from ..guard._apis import adds_usage, asking_for_usage
from ..guard._streams import is_usage_only_chunk
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
from ._litellm_types import GuardOptions, typed_acompletion, typed_completion

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "ContextWindowGuard",
    "ContextWindowLogger",
    "LiteLLMGuard",
    "WindowGuardLogger",
    "acompletion",
    "completion",
]

SEND_TAG: Final = "windowguard_send"
"""The metadata key a logger-fitted request carries: ``"<conversation key>:<send>"``."""
UNREPORTED_TAG: Final = "windowguard_stream_unreported"
"""Set (True) beside :data:`SEND_TAG` on a proxy stream whose client did not ask for
usage: the usage LiteLLM assembles for it is its own estimate, never fed back."""

_CHAT_CALL_TYPES: Final = frozenset({"completion", "acompletion"})


class _Send:
    """One fitted request: its conversation and its number there."""

    __slots__ = ("conversation", "number")

    def __init__(self, conversation: Conversation, number: int) -> None:
        self.conversation = conversation
        self.number = number

    @property
    def tag(self) -> str:
        return f"{self.conversation.key}:{self.number}"


class ContextWindowGuard:
    """Fits LiteLLM chat requests; one per configuration (the module functions share one).

    ``LiteLLMGuard`` is its old name, kept as an alias.

    Examples:
        >>> guard = ContextWindowGuard(model_info=wg.ModelInfo(context_window=16_384))
        >>> response = guard.completion(model="openai/my-model", messages=messages)

    Args:
        model_info: the limits of every model called through this guard; else each
            call's ``model_info=`` or the catalog's for the model name.
        safety: tokens kept free below the window.
        pruning: ``"low_water"`` (default, cache-friendly) or ``"minimal"``.
        strict: raise :class:`~windowguard.InvalidTranscriptError` on damaged input.
        sinks: callables given every event.
        edits: edit stages run before whole turns are dropped
            (``[wg.ClampToolResults(...), wg.ClearToolResults(...)]``; ``docs/edits.md``);
            None (default): :data:`~windowguard.DEFAULT_EDITS`; ``()``: drop only. The
            caller's ``messages`` are never changed.
        manager: a configured manager to copy for each conversation (then leave the
            options above at their defaults: the manager carries its own).
        max_conversations: conversations remembered (least recently used forgotten).
        ttl_seconds: a conversation idle this long is forgotten (None: never).
        discover: accepted for the same options everywhere; LiteLLM routes the call, so
            there is no endpoint to ask before it: None (default) and False do no
            discovery and True is refused (LiteLLM's model map fills in what the catalog
            does not know).

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
        self.options = ManagerOptions(
            caller="ContextWindowGuard()",
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
        self.options.no_discovery()
        self.sinks = as_sinks(sinks)
        self._stores: ConversationStores[_StoreKey, ConversationStore] = ConversationStores(
            lambda key: self.options.store(lambda: self.options.make(*key))
        )
        self.last_fit: Fit | None = None
        """The most recent fit this guard made."""

    # -- fitting -------------------------------------------------------------------------

    def _conversation(
        self,
        model: str,
        info: ModelInfo | None,
        edits: tuple[EditStage, ...] | None,
        messages: Sequence[object],
    ) -> Conversation:
        # A call's own edits make conversations of their own: one manager runs one set.
        stages = tuple(self.options.edits or ()) if edits is None else edits
        store = self._stores.get((model, info or self.options.model_info, stages))
        return store.get(head_key(messages, model=model))

    def fit_request(
        self,
        request: MutableMapping[str, Any],
        *,
        model_info: ModelInfo | None = None,
        edits: Sequence[EditStage] | None = None,
        include_usage: bool = True,
    ) -> _Send:
        """Fit a LiteLLM chat request in place: ``messages``, the reply budget and, for a
        stream, ``stream_options.include_usage`` (unless ``include_usage=False``).

        Args:
            request: LiteLLM keyword arguments (``model``, ``messages``, ``tools``,
                ``max_tokens`` ...), or the proxy's request body.
            model_info: this request's limits (else the guard's, else the catalog's).
            edits: this request's edit stages (None: the guard's ``edits``).
            include_usage: ask a stream for usage when the caller did not. The
                usage-only last chunk that brings reaches whoever reads the stream:
                :meth:`completion` / :meth:`acompletion` withhold it; the proxy logger
                passes False, since it would reach its client.

        Returns:
            The send, to hand its usage to :meth:`record`.

        Raises:
            ContextTruncatedError: even the head and the newest turn cannot fit.
            ConfigurationError: no model name, or messages that are not a list.
        """
        conversation, messages, options = self._read(request, model_info, edits)
        fitted = conversation.prepare(messages, **options)
        return self._apply(request, conversation, fitted, include_usage)

    async def afit_request(
        self,
        request: MutableMapping[str, Any],
        *,
        model_info: ModelInfo | None = None,
        edits: Sequence[EditStage] | None = None,
        include_usage: bool = True,
    ) -> _Send:
        """:meth:`fit_request` on an event loop: a concurrent fit of the same
        conversation is awaited, never waited for with the loop blocked.

        Raises:
            ContextTruncatedError: even the head and the newest turn cannot fit.
            ConfigurationError: no model name, or messages that are not a list.
        """
        conversation, messages, options = self._read(request, model_info, edits)
        fitted = await conversation.aprepare(messages, **options)
        return self._apply(request, conversation, fitted, include_usage)

    def _read(
        self,
        request: Mapping[str, Any],
        model_info: ModelInfo | None,
        edits: Sequence[EditStage] | None,
    ) -> tuple[Conversation, list[object], dict[str, Any]]:
        """The request's conversation, transcript and fit options (checked)."""
        _check_model_info(model_info)
        stages = _check_edits(edits, self.options.manager)
        model = request.get("model")
        if not isinstance(model, str) or not model:
            raise ConfigurationError(f"a LiteLLM request needs a model name, got {model!r}")
        messages = request.get("messages")
        if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
            raise ConfigurationError(
                f"messages must be a list of chat messages, got {type(messages).__name__}"
            )
        options = {
            "tools": _tools(request) or None,
            "max_tokens": request.get(_budget_key(request)),
            "format": "openai_chat",
        }
        conversation = self._conversation(model, model_info, stages, messages)
        return conversation, list(messages), options

    def _apply(
        self,
        request: MutableMapping[str, Any],
        conversation: Conversation,
        fitted: Fitted,
        include_usage: bool,
    ) -> _Send:
        """Write a fit into the request; the send to record its usage against."""
        fit = fitted.fit
        for event in fit.events:
            emit(event, self.sinks)
        request["messages"] = fit.messages
        request[_budget_key(request)] = fit.max_tokens
        if include_usage and request.get("stream"):
            request["stream_options"] = asking_for_usage(request.get("stream_options"))
        self.last_fit = fit
        return _Send(conversation, fitted.send)

    def record(self, send: _Send, usage: object) -> bool:
        """Feed a send's reported usage back (None: none came), if it is still its
        conversation's latest send.

        Returns:
            Whether the report was taken.
        """
        # Dropped when a later send was fitted already: the report would mis-measure it.
        return send.conversation.record(_prompt_tokens(usage), send=send.number)

    def failed(self, send: _Send, error: BaseException) -> None:
        """A send failed: no usage came back; an overflow teaches the manager."""
        send.conversation.failed(error, send=send.number)

    def send_of(self, tag: object) -> _Send | None:
        """The send a ``SEND_TAG`` value names, while its conversation is remembered."""
        if not isinstance(tag, str) or ":" not in tag:
            return None
        key, _, number = tag.rpartition(":")
        if not number.isdigit():
            return None
        for store in self._stores.values():
            if key in store:
                return _Send(store.get(key), int(number))
        return None

    # -- calls ---------------------------------------------------------------------------

    @typed_completion
    def completion(self, *args: Any, **kwargs: Any) -> Any:
        """``litellm.completion`` with the request fitted first; same arguments.

        Returns:
            LiteLLM's ``ModelResponse``, or its stream (passed through) for ``stream=True``.

        Raises:
            ContextTruncatedError: even the head and the newest turn cannot fit; LiteLLM
                was not called.
        """
        request, info, edits = _request(args, kwargs)
        hide = _adds_usage_chunk(request)  # read before the fit asks for it
        send = self.fit_request(request, model_info=info, edits=edits)
        try:
            response = litellm.completion(**request)
        except Exception as exc:
            self.failed(send, exc)
            raise
        return self._received(request, send, response, hide_usage_chunk=hide)

    @typed_acompletion
    async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
        """``litellm.acompletion`` with the request fitted first; same arguments.

        Returns:
            LiteLLM's ``ModelResponse``, or its async stream (passed through).

        Raises:
            ContextTruncatedError: even the head and the newest turn cannot fit; LiteLLM
                was not called.
        """
        request, info, edits = _request(args, kwargs)
        hide = _adds_usage_chunk(request)  # read before the fit asks for it
        send = await self.afit_request(request, model_info=info, edits=edits)
        try:
            response = await litellm.acompletion(**request)
        except Exception as exc:
            self.failed(send, exc)
            raise
        return self._received(request, send, response, hide_usage_chunk=hide)

    def _received(
        self, request: Mapping[str, Any], send: _Send, response: Any, *, hide_usage_chunk: bool
    ) -> Any:
        """LiteLLM's answer to ``send``: a stream, wrapped to feed its usage back when
        its last chunk comes (withheld when only windowguard asked for it); a response,
        whose usage is fed back now."""
        if request.get("stream"):
            return _UsageStream(response, self, send, hide_usage_chunk=hide_usage_chunk)
        self.record(send, getattr(response, "usage", None))
        return response


_DEFAULT_GUARD: ContextWindowGuard | None = None
_DEFAULT_LOCK = threading.Lock()


def _default_guard() -> ContextWindowGuard:
    global _DEFAULT_GUARD
    with _DEFAULT_LOCK:
        if _DEFAULT_GUARD is None:
            _DEFAULT_GUARD = ContextWindowGuard()
        return _DEFAULT_GUARD


@typed_completion
def completion(*args: Any, **kwargs: Any) -> Any:
    """``litellm.completion``, fitted into the window (same arguments).

    ``model_info=`` may be a :class:`~windowguard.ModelInfo` (windowguard's, not passed
    on); a dict is LiteLLM's own and goes through untouched. ``edits=`` (windowguard's
    edit stages, ``[wg.ClampToolResults(...), wg.ClearToolResults(...)]``; never passed
    on) edits tool results before whole turns are dropped; ``()`` or none: drop only.
    Conversations share one default :class:`ContextWindowGuard`; build your own for other
    options.

    Raises:
        ContextTruncatedError: even the head and the newest turn cannot fit; LiteLLM was
            not called.
    """
    return _default_guard().completion(*args, **kwargs)


@typed_acompletion
async def acompletion(*args: Any, **kwargs: Any) -> Any:
    """``litellm.acompletion``, fitted into the window (same arguments, as
    :func:`completion`).

    Raises:
        ContextTruncatedError: even the head and the newest turn cannot fit; LiteLLM was
            not called.
    """
    return await _default_guard().acompletion(*args, **kwargs)


# -- the proxy logger --------------------------------------------------------------------


class ContextWindowLogger(CustomLogger):
    """A LiteLLM ``CustomLogger`` that guards chat requests in the LiteLLM proxy.

    ``WindowGuardLogger`` is its old name, kept as an alias.

    Register it in the proxy config (``litellm_settings: callbacks: module.instance``)
    or in ``litellm.callbacks``. ``async_pre_call_hook`` fits ``data`` in place (the
    proxy runs it for every chat request); the success and failure callbacks feed the
    usage back, matched to their send through ``metadata["windowguard_send"]``.

    Args:
        guard: the :class:`ContextWindowGuard` to fit with (default: one built from
            ``options``).
        **options: :class:`ContextWindowGuard` options.
    """

    def __init__(
        self, guard: ContextWindowGuard | None = None, **options: Unpack[GuardOptions]
    ) -> None:
        super().__init__()
        if guard is not None and options:
            raise ConfigurationError("pass either guard= or ContextWindowGuard options, not both")
        self.guard = guard if guard is not None else ContextWindowGuard(**options)

    async def async_pre_call_hook(
        self,
        user_api_key_dict: Any,
        cache: Any,
        data: dict[str, Any],
        call_type: str,
    ) -> dict[str, Any]:
        """Fit a chat request's messages and reply budget in place; tag it for usage.

        Other call types (embeddings, Responses, ...) pass through unchanged.

        Raises:
            ContextTruncatedError: even the head and the newest turn cannot fit.
        """
        if call_type not in _CHAT_CALL_TYPES or not isinstance(data.get("messages"), list):
            return data
        send = await self.guard.afit_request(data, include_usage=False)
        metadata = data.get("metadata")
        tags: dict[str, object] = {SEND_TAG: send.tag}
        if data.get("stream") and not _asks_usage(data.get("stream_options")):
            tags[UNREPORTED_TAG] = True
        data["metadata"] = {**(metadata if isinstance(metadata, Mapping) else {}), **tags}
        return data

    async def async_log_success_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        """Feed the response's usage (for a stream: the assembled one's) back."""
        self._record(kwargs, getattr(response_obj, "usage", None), None)

    def log_success_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        """As :meth:`async_log_success_event`, for sync calls."""
        self._record(kwargs, getattr(response_obj, "usage", None), None)

    async def async_log_failure_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        """Record that no usage came back; learn from an overflow."""
        self._record(kwargs, None, kwargs.get("exception"))

    def log_failure_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        """As :meth:`async_log_failure_event`, for sync calls."""
        self._record(kwargs, None, kwargs.get("exception"))

    def _record(self, kwargs: Mapping[str, Any], usage: object, error: object) -> None:
        tags = _tags_of(kwargs)
        send = None if tags is None else self.guard.send_of(tags[SEND_TAG])
        if tags is None or send is None:
            return
        if isinstance(error, BaseException):
            self.guard.failed(send, error)
        else:
            # A stream that reported no usage: what LiteLLM assembled is an estimate.
            self.guard.record(send, None if tags.get(UNREPORTED_TAG) is True else usage)


def _tags_of(kwargs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The metadata carrying the request's :data:`SEND_TAG`, wherever LiteLLM put it."""
    params = kwargs.get("litellm_params")
    for holder in (
        params.get("metadata") if isinstance(params, Mapping) else None,
        params.get("litellm_metadata") if isinstance(params, Mapping) else None,
        kwargs.get("metadata"),
    ):
        if isinstance(holder, Mapping) and SEND_TAG in holder:
            return holder
    return None


def _adds_usage_chunk(request: Mapping[str, Any]) -> bool:
    """Whether fitting ``request`` asks its stream for a usage chunk the caller did not
    ask for (a stream whose ``stream_options.include_usage`` is unset)."""
    return bool(request.get("stream")) and adds_usage(request.get("stream_options"))


def _asks_usage(options: object) -> bool:
    """Whether a request's ``stream_options`` ask for the usage chunk."""
    return isinstance(options, Mapping) and options.get("include_usage") is True


# -- helpers -----------------------------------------------------------------------------


class _UsageStream:
    """LiteLLM's stream, passed through chunk by chunk; the chunk carrying usage (the
    last, with ``include_usage``) feeds it back, and with ``hide_usage_chunk`` (only
    windowguard asked for it) is not passed on. Anything else is the stream's own."""

    def __init__(
        self, stream: Any, guard: ContextWindowGuard, send: _Send, *, hide_usage_chunk: bool = False
    ) -> None:
        self._stream = stream
        self._guard = guard
        self._send = send
        self._hide = hide_usage_chunk
        self._done = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        while True:
            try:
                chunk = next(self._stream)
            except StopIteration:
                self._finish(None)
                raise
            self._see(chunk)
            if not (self._hide and is_usage_only_chunk(chunk)):
                return chunk

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        while True:
            try:
                chunk = await self._stream.__anext__()
            except StopAsyncIteration:
                self._finish(None)
                raise
            self._see(chunk)
            if not (self._hide and is_usage_only_chunk(chunk)):
                return chunk

    def _see(self, chunk: Any) -> None:
        usage = getattr(chunk, "usage", None)
        if usage is not None and _prompt_tokens(usage) is not None:
            self._finish(usage)

    def _finish(self, usage: object) -> None:
        if not self._done:
            self._done = True
            self._guard.record(self._send, usage)


def _request(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[dict[str, Any], ModelInfo | None, Sequence[EditStage] | None]:
    """LiteLLM's arguments as one request dict (model and messages may be positional),
    and windowguard's ``model_info`` and ``edits`` taken out (LiteLLM has no ``edits``
    argument: it is never passed on)."""
    if len(args) > 2:
        raise ConfigurationError(
            f"pass model and messages positionally and the rest by keyword; got {len(args)} "
            "positional arguments"
        )
    request = dict(kwargs)
    if args:
        if "model" in request:
            raise ConfigurationError("model given both positionally and as a keyword")
        request["model"] = args[0]
    if len(args) > 1:
        if "messages" in request:
            raise ConfigurationError("messages given both positionally and as a keyword")
        request["messages"] = args[1]
    info = request.get("model_info")
    if isinstance(info, ModelInfo):
        del request["model_info"]  # windowguard's; a dict is LiteLLM's own
    else:
        info = None
    edits = request.pop("edits", None)
    return request, info, edits


def _budget_key(request: Mapping[str, Any]) -> str:
    """Where the request's reply budget lives (``max_completion_tokens`` when given)."""
    return (
        "max_completion_tokens"
        if request.get("max_completion_tokens") is not None
        else "max_tokens"
    )


def _tools(request: Mapping[str, Any]) -> list[object]:
    tools = request.get("tools")
    if tools:
        return list(tools)
    functions = request.get("functions")
    if functions:
        return [{"type": "function", "function": function} for function in functions]
    return []


def _prompt_tokens(usage: object) -> object:
    """A usage value the manager can read, or None when the provider reported none."""
    if usage is None:
        return None
    tokens = getattr(usage, "prompt_tokens", None)
    if tokens is None and isinstance(usage, Mapping):
        tokens = usage.get("prompt_tokens")
    return (
        tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0 else None
    )


_StoreKey = tuple[str, ModelInfo | None, tuple[EditStage, ...]]
"""Conversations are kept per model, its limits and the edit stages their managers run."""


def _check_edits(
    edits: Sequence[EditStage] | None, manager: ContextWindowManager | None
) -> tuple[EditStage, ...] | None:
    """A call's ``edits=`` checked (None: the guard's)."""
    if edits is None:
        return None
    try:
        stages = check_edits(edits)
    except ConfigurationError as exc:
        raise ConfigurationError(f"completion(edits=...): {exc}") from exc
    if manager is not None and stages != manager.edits:
        raise ConfigurationError(
            "completion(edits=...): this guard copies a manager= that carries its own edits; "
            "pass edits to that ContextWindowManager instead"
        )
    return stages


def _check_model_info(info: object) -> None:
    if info is not None and not isinstance(info, ModelInfo):
        raise ConfigurationError(
            f"model_info must be a windowguard ModelInfo, got {type(info).__name__}"
        )


LiteLLMGuard = ContextWindowGuard
"""The old name of :class:`ContextWindowGuard` (an alias, the same class)."""
WindowGuardLogger = ContextWindowLogger
"""The old name of :class:`ContextWindowLogger` (an alias, the same class)."""
