"""LangChain v1 agents and LangGraph's prebuilt ReAct agent, kept inside the window.

Two hooks, one set of rules:

* :class:`ContextWindowMiddleware` for ``langchain.agents.create_agent(...,
  middleware=[...])``. Its ``wrap_model_call`` / ``awrap_model_call`` sees the request
  the model node is about to send (system message, messages, tools, model settings),
  fits it, and calls the model with ``request.override(messages=kept,
  model_settings={..., "max_tokens": fitted})``. The agent's state keeps the full
  history; only this one model call sees the fitted list.
* :func:`pre_model_hook` for ``langgraph.prebuilt.create_react_agent(...,
  pre_model_hook=...)``. It returns ``{"llm_input_messages": kept}``, which LangGraph
  feeds to the model without rewriting the state; its :meth:`ContextWindowHook.model`
  (passed as the agent's model) binds the fitted ``max_tokens``.

Invariants:

- What reaches the model is a subsequence of the framework's own message objects, in
  order, never copies: each LangChain message is mapped to OpenAI Chat dicts for
  counting only (``convert_to_openai_messages``) and an index map takes the fitted
  dicts back to the messages they came from.
- Pruning is turn-atomic: an ``AIMessage`` and every ``ToolMessage`` answering its
  ``tool_calls`` (by ``tool_call_id``) are kept or dropped together, so no tool message
  is ever orphaned. The head (system prompt through the first user message) and the
  newest turn are always kept.
- A request that cannot fit raises :class:`~windowguard.ContextTruncatedError` before
  the model is called: no HTTP request is made.
- Each conversation (keyed by its head and model, see :mod:`windowguard._conversations`)
  has its own manager; the ``usage_metadata.input_tokens`` of each reply is fed back as
  the next fit's ``last_usage``, and only to the send it answers: each fit is numbered
  (``Conversation.sent()``) and its usage recorded only while it is the conversation's
  latest (``Conversation.is_latest``), so two runs with the same head at once (no
  checkpointer to tell them apart) never feed each other's counts.
- The LangGraph hook's fitted ``max_tokens`` belongs to one call, not to a conversation:
  it is kept under the last message of the state it fitted (the newest turn is always
  kept, and the model node sees the same state), so two same-head runs never swap
  budgets. A streamed reply carries usage only when the chat model
  asks for it: a ``ChatOpenAI`` left with ``stream_usage`` unset is asked to (a copy of
  it, for the fitted call only); a reply without usage makes the next fit say
  ``NO_USAGE`` and rest on its counters.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

try:
    from langchain.agents.middleware.types import (
        AgentMiddleware,
        AgentState,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
    )
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage
    from langchain_core.messages.utils import convert_to_openai_messages
    from langchain_core.utils.function_calling import convert_to_openai_tool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "windowguard.integrations.langchain needs LangChain v1 (langchain, langchain-core): "
        'pip install "windowguard[langchain]"'
    ) from exc

from .._conversations import (
    DEFAULT_MAX_CONVERSATIONS,
    Conversation,
    ConversationStore,
    ManagerOptions,
    head_key,
)
from ..catalog import ModelInfo
from ..exceptions import ConfigurationError
from ..gauge import ContextGauge
from ..manager import ContextWindowManager, Fit
from ..prune import PruningPolicy
from ..sinks import Sink, as_sinks, emit

__all__ = ["ContextWindowHook", "ContextWindowMiddleware", "pre_model_hook"]

_MAX_TOKENS_KEYS = ("max_completion_tokens", "max_tokens")
# Endpoints whose models the catalog describes: no discovery request is made for them.
_OFFICIAL_APIS = ("https://api.openai.com", "https://api.anthropic.com")


class _Fitter:
    """The shared core: per-conversation managers, message mapping, usage feedback."""

    def __init__(
        self, options: ManagerOptions, *, sinks: Sink | Iterable[Sink] | None, stream_usage: bool
    ) -> None:
        if not isinstance(stream_usage, bool):
            raise ConfigurationError(
                f"{options.caller}: stream_usage must be True or False, got {stream_usage!r}"
            )
        self.options = options
        self.sinks = as_sinks(sinks)
        self.stream_usage = stream_usage
        # id(chat model) -> (the model, its copy that asks for usage in streams)
        self._reporting: dict[int, tuple[object, object]] = {}
        # One store per (model name, base URL): each serves its own window.
        self._stores: dict[tuple[str, str], ConversationStore] = {}
        self._lock = threading.Lock()

    # -- managers --------------------------------------------------------------------

    def _prototype(self, name: str, base_url: str, api_key: str | None) -> ContextWindowManager:
        """The configured manager for one served model; its copies serve conversations.

        The window comes from ``manager=``, ``model_info=``, discovery at the chat
        model's own base URL (when it has one) merged with the catalog, else the
        catalog; an unknown model gets the fallback window.
        """
        options = self.options
        model = name or None
        if (
            options.manager is None
            and options.model_info is None
            and model is not None
            and base_url.startswith("http")
        ):
            # A server of its own (vLLM, llama.cpp, a gateway) may serve a smaller window
            # than the catalog's: ask it, and let the catalog fill in what it does not say.
            return ContextWindowManager.from_endpoint(
                base_url, model, api_key, **options.keywords()
            )
        return options.make(model)

    def _store(self, chat_model: object) -> ConversationStore:
        name, base_url, api_key = _describe_model(chat_model)
        key = (name, base_url)
        with self._lock:
            store = self._stores.get(key)
        if store is not None:
            return store
        prototype = self._prototype(name, base_url, api_key)  # may do discovery I/O
        with self._lock:
            store = self._stores.get(key)
            if store is None:
                store = self.options.store(prototype.copy)
                self._stores[key] = store
            return store

    def reporting(self, chat_model: Any) -> Any:
        """``chat_model``, or a copy of it that asks for usage in streams.

        A ``ChatOpenAI`` (and its subclasses) left with ``stream_usage`` unset streams
        without usage against any base URL but OpenAI's own; the copy sets it, so a
        streamed reply reports its prompt tokens (``stream_options.include_usage``,
        which OpenAI, vLLM, SGLang and llama.cpp accept). Other models are unchanged.
        """
        if (
            not self.stream_usage
            or not isinstance(chat_model, BaseChatModel)
            or "stream_usage" not in type(chat_model).model_fields
            or chat_model.stream_usage is not None  # type: ignore[attr-defined]
        ):
            return chat_model
        with self._lock:
            known = self._reporting.get(id(chat_model))
            if known is not None and known[0] is chat_model:
                return known[1]
        reporting = chat_model.model_copy(update={"stream_usage": True})
        with self._lock:
            if len(self._reporting) >= self.options.max_conversations:
                self._reporting.clear()  # models are few; this only bounds a leak
            self._reporting[id(chat_model)] = (chat_model, reporting)
        return reporting

    # -- one send ------------------------------------------------------------------------

    def prepare(
        self,
        messages: Sequence[BaseMessage],
        *,
        chat_model: object,
        tools: Sequence[object],
        max_tokens: int | None,
        system: object = None,
        usage_before: tuple[int, int | None] | None = None,
        thread: str | None = None,
    ) -> tuple[Conversation, int, Fit, list[BaseMessage]]:
        """Fit ``messages`` (the framework's own objects) for one model call.

        Args:
            messages: what the model would receive, system message included.
            chat_model: the LangChain chat model (for its name, window and base URL).
            tools: the bound tools (BaseTool, dict or callable), counted as schemas.
            max_tokens: the reply budget asked for, or None.
            system: a system prompt added after the hook (``create_react_agent``'s
                ``prompt=``), counted but not returned.
            usage_before: ``(send, input tokens)`` of an earlier send, when the caller
                found its usage in the history rather than in a response (the LangGraph
                hook); recorded only if that send is still the conversation's latest.
            thread: the LangGraph thread id, when the graph has a checkpointer: two
                threads with the same head are two conversations.

        Returns:
            The conversation, this send's number (for :meth:`received`), the fit, and
            the kept messages (a subsequence).

        Raises:
            ContextTruncatedError: nothing that keeps the head and newest turn fits.
        """
        dicts, owners = _to_openai(messages)
        if system is not None:
            extra = _system_dicts(system)
            dicts = extra + dicts
            owners = [-1] * len(extra) + owners
        store = self._store(chat_model)
        conversation = store.get(_conversation_key(dicts, chat_model, thread))
        schemas = _tool_schemas(tools) or None
        with conversation.lock:  # the usage, the fit and its number, as one step
            if usage_before is not None:
                self.received(conversation, *usage_before)
            fit = conversation.fit(
                dicts, tools=schemas, max_tokens=max_tokens, format="openai_chat"
            )
            send = conversation.sent()
        for event in fit.events:
            emit(event, self.sinks)
        kept_ids = {id(d) for d in fit.messages}
        keep = sorted({owners[i] for i, d in enumerate(dicts) if id(d) in kept_ids} - {-1})
        return conversation, send, fit, [messages[i] for i in keep]

    def received(self, conversation: Conversation, send: int, tokens: int | None) -> None:
        """Feed a send's prompt tokens (None: none came back) to its conversation, if
        that send is still the latest; a later send has taken its usage slot."""
        with conversation.lock:
            if not conversation.is_latest(send):
                return
            conversation.record(tokens)
        if tokens is not None:
            gauge = ContextGauge(conversation.manager.context_window)
            for event in gauge.observe(tokens):
                emit(event, self.sinks)


class ContextWindowMiddleware(AgentMiddleware[AgentState[Any], Any]):
    """Keeps every model call of a LangChain v1 agent inside the model's window.

    Example::

        from langchain.agents import create_agent
        from windowguard.integrations.langchain import ContextWindowMiddleware

        agent = create_agent(model, tools, middleware=[ContextWindowMiddleware()])

    Put it last in ``middleware=[...]`` (innermost), so it fits the request that other
    middleware (model fallback, dynamic prompts, tool selection) finally sends.

    Args:
        model_info: the model's limits, overriding the catalog and discovery.
        safety: tokens kept free below the window (the manager's default when None).
        pruning: ``"low_water"`` (keeps the provider's prompt cache stable) or
            ``"minimal"``.
        sinks: event sinks (fit events and ``context_pressure`` from usage).
        strict: raise :class:`~windowguard.InvalidTranscriptError` on a damaged
            history instead of passing it on unchanged.
        manager: a configured :class:`~windowguard.ContextWindowManager`; each
            conversation gets a copy. Excludes ``model_info``, ``safety``, ``pruning``
            and ``strict`` (left at their defaults).
        max_conversations: conversations whose state is kept (least recently used
            forgotten first).
        stream_usage: let a ``ChatOpenAI`` whose ``stream_usage`` is unset report usage
            in streamed replies too (False: leave the model as configured; streamed
            replies then feed no usage back and fits rest on the counters alone).

    Raises:
        ConfigurationError: an option of the wrong type or out of range.
    """

    def __init__(
        self,
        *,
        model_info: ModelInfo | None = None,
        safety: int | None = None,
        pruning: PruningPolicy = "low_water",
        sinks: Sink | Iterable[Sink] | None = None,
        strict: bool = False,
        manager: ContextWindowManager | None = None,
        max_conversations: int = DEFAULT_MAX_CONVERSATIONS,
        stream_usage: bool = True,
    ) -> None:
        super().__init__()
        options = ManagerOptions(
            caller="ContextWindowMiddleware()",
            manager=manager,
            model_info=model_info,
            safety=safety,
            pruning=pruning,
            strict=strict,
            max_conversations=max_conversations,
        )
        self._fitter = _Fitter(options, sinks=sinks, stream_usage=stream_usage)

    def _fitted(self, request: ModelRequest[Any]) -> tuple[Conversation, int, ModelRequest[Any]]:
        history: list[BaseMessage] = list(request.messages)
        system = request.system_message
        messages = [system, *history] if system is not None else history
        key, requested = _requested_max_tokens(request.model, request.model_settings)
        conversation, send, fit, kept = self._fitter.prepare(
            messages,
            chat_model=request.model,
            tools=request.tools,
            max_tokens=requested,
            thread=_thread_id(request.runtime),
        )
        if system is not None:
            kept = kept[1:]  # the head always holds the system message
        settings = {**request.model_settings, key: fit.max_tokens}
        fitted: list[AnyMessage] = kept  # type: ignore[assignment]  # a subsequence of them
        return (
            conversation,
            send,
            request.override(
                messages=fitted,
                model_settings=settings,
                model=self._fitter.reporting(request.model),
            ),
        )

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Fit the request, call the model with it, and feed its usage back.

        Raises:
            ContextTruncatedError: the request cannot fit; the model is not called.
        """
        conversation, send, fitted = self._fitted(request)
        try:
            response = handler(fitted)
        except BaseException as exc:
            conversation.failed(exc, latest=conversation.is_latest(send))
            raise
        self._fitter.received(conversation, send, _input_tokens(response))
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """The async twin of :meth:`wrap_model_call`; fitting (which may ask a count
        endpoint or discover the window) runs in a worker thread.

        Raises:
            ContextTruncatedError: the request cannot fit; the model is not called.
        """
        conversation, send, fitted = await asyncio.to_thread(self._fitted, request)
        try:
            response = await handler(fitted)
        except BaseException as exc:
            conversation.failed(exc, latest=conversation.is_latest(send))
            raise
        self._fitter.received(conversation, send, _input_tokens(response))
        return response


class ContextWindowHook:
    """A LangGraph ``pre_model_hook`` (and dynamic model) that fits each model call.

    Made by :func:`pre_model_hook`; see there. Calling it with the graph state returns
    ``{"llm_input_messages": kept}``; :meth:`model` is a dynamic-model callable for
    ``create_react_agent`` that binds the tools and the fitted ``max_tokens``.
    """

    def __init__(
        self,
        fitter: _Fitter,
        *,
        model: object,
        tools: Sequence[object],
        system: object,
        max_tokens: int | None,
    ) -> None:
        self._fitter = fitter
        self._model = model
        self._tools = list(tools)
        self._system = system
        self._max_tokens = max_tokens
        # One entry per hook call, under the key of the last message it fitted (which
        # the model node and the next hook call see again): its conversation, send
        # number and fitted max_tokens. Bounded; the oldest calls go first.
        self._calls: OrderedDict[object, _Call] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, state: Mapping[str, Any] | object, runtime: object = None) -> dict[str, Any]:
        """Fit the state's messages; the state itself is left unchanged.

        Args:
            state: the agent's state (a dict, or a pydantic state with ``messages``).
            runtime: LangGraph's runtime (injected by name), for the thread id.

        Returns:
            ``{"llm_input_messages": kept}``.

        Raises:
            ContextTruncatedError: the request cannot fit; the model is not called.
            ConfigurationError: the state has no ``messages``.
        """
        messages = _state_messages(state)
        requested = self._max_tokens
        if requested is None:
            requested = _requested_max_tokens(self._model, {})[1]
        _, send, fit, kept = self._fitter.prepare(
            messages,
            chat_model=self._model,
            tools=self._tools,
            max_tokens=requested,
            system=self._system,
            usage_before=self._answered(messages),
            thread=_thread_id(runtime),
        )
        if messages:
            key = _message_key(messages[-1])
            with self._lock:
                self._calls[key] = _Call(messages[-1], send, fit.max_tokens)
                self._calls.move_to_end(key)
                while len(self._calls) > self._fitter.options.max_conversations:
                    self._calls.popitem(last=False)
        return {"llm_input_messages": kept}

    def _answered(self, messages: Sequence[BaseMessage]) -> tuple[int, int | None] | None:
        """``(send, input tokens)`` of the reply that is the newest ``AIMessage``: the
        send is the hook call whose last message the reply follows (None: unknown)."""
        for index in range(len(messages) - 1, 0, -1):
            if isinstance(messages[index], AIMessage):
                with self._lock:
                    call = self._calls.get(_message_key(messages[index - 1]))
                if call is None:
                    return None
                return call.send, _input_tokens(messages[index])
        return None

    def model(self, state: Mapping[str, Any] | object, runtime: object = None) -> Any:
        """The chat model with the tools and the fitted ``max_tokens`` bound.

        Pass it as ``create_react_agent``'s model (a dynamic model) so the reply budget
        of each call is the one the hook fitted.

        Raises:
            ConfigurationError: the hook was made without ``model=``.
        """
        chat_model: Any = self._model
        if chat_model is None:
            raise ConfigurationError("pre_model_hook(model=...) is needed to use hook.model")
        messages = _state_messages(state)
        call = None
        if messages:
            with self._lock:
                call = self._calls.get(_message_key(messages[-1]))
        fitted = None if call is None else call.max_tokens
        reporting = self._fitter.reporting(chat_model)
        bound = reporting.bind_tools(self._tools) if self._tools else reporting
        if fitted is None:
            return bound
        field, _ = _requested_max_tokens(chat_model, {})
        return bound.bind(**{field: fitted})


class _Call:
    """One hook call: the message it is keyed by (held, so an id key stays its own),
    its send number and its fitted ``max_tokens``."""

    __slots__ = ("max_tokens", "message", "send")

    def __init__(self, message: BaseMessage, send: int, max_tokens: int) -> None:
        self.message = message
        self.send = send
        self.max_tokens = max_tokens


def _message_key(message: BaseMessage) -> object:
    """A state message's key across graph steps: its id (``add_messages`` gives every
    message one, kept through checkpoints), else the object's identity."""
    return ("id", message.id) if isinstance(message.id, str) and message.id else id(message)


def pre_model_hook(
    model: object = None,
    *,
    tools: Sequence[object] = (),
    system: object = None,
    max_tokens: int | None = None,
    model_info: ModelInfo | None = None,
    safety: int | None = None,
    pruning: PruningPolicy = "low_water",
    sinks: Sink | Iterable[Sink] | None = None,
    strict: bool = False,
    manager: ContextWindowManager | None = None,
    max_conversations: int = DEFAULT_MAX_CONVERSATIONS,
    stream_usage: bool = True,
) -> ContextWindowHook:
    """A ``pre_model_hook`` for LangGraph's ``create_react_agent``.

    Example::

        hook = pre_model_hook(llm, tools=tools, system=PROMPT)
        agent = create_react_agent(hook.model, tools, prompt=PROMPT, pre_model_hook=hook)

    The hook sees the state before ``prompt=`` is applied and not the bound tools, so
    pass them here to have them counted. Passing ``hook.model`` as the agent's model
    also fits ``max_tokens``; with the plain model only the messages are fitted.

    Args:
        model: the chat model (its name picks the window; its base URL serves
            discovery; :meth:`ContextWindowHook.model` binds it).
        tools: the agent's tools, counted as schemas and bound by ``hook.model``.
        system: the agent's ``prompt=`` when it is a string or ``SystemMessage``.
        max_tokens: the reply budget wanted (default: the model's own ``max_tokens``,
            else the largest that fits).
        model_info: the model's limits, overriding the catalog and discovery.
        safety: tokens kept free below the window.
        pruning: ``"low_water"`` or ``"minimal"``.
        sinks: event sinks.
        strict: raise on a damaged history instead of passing it on unchanged.
        manager: a configured manager (each conversation gets a copy); excludes
            ``model_info``, ``safety``, ``pruning`` and ``strict``.
        max_conversations: conversations whose state is kept.
        stream_usage: let ``hook.model`` ask a ``ChatOpenAI`` whose ``stream_usage``
            is unset for usage in streamed replies too.

    Returns:
        A :class:`ContextWindowHook`.

    Raises:
        ConfigurationError: an option of the wrong type or out of range.
    """
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        raise ConfigurationError(f"max_tokens must be a positive int or None, got {max_tokens!r}")
    if system is not None and not isinstance(system, (str, SystemMessage)):
        raise ConfigurationError(
            f"system must be a str or SystemMessage, got {type(system).__name__}"
        )
    options = ManagerOptions(
        caller="pre_model_hook()",
        manager=manager,
        model_info=model_info,
        safety=safety,
        pruning=pruning,
        strict=strict,
        max_conversations=max_conversations,
    )
    fitter = _Fitter(options, sinks=sinks, stream_usage=stream_usage)
    return ContextWindowHook(fitter, model=model, tools=tools, system=system, max_tokens=max_tokens)


# -- mapping LangChain objects to what the manager counts ---------------------------------


def _to_openai(messages: Sequence[BaseMessage]) -> tuple[list[dict[str, Any]], list[int]]:
    """OpenAI Chat dicts for ``messages`` and, for each dict, the message it came from.

    A message usually maps to one dict; a human message carrying Anthropic-style
    ``tool_result`` blocks maps to several (kept when any of them is kept).
    """
    dicts: list[dict[str, Any]] = []
    owners: list[int] = []
    for index, message in enumerate(messages):
        if not isinstance(message, BaseMessage):
            raise ConfigurationError(
                f"messages[{index}] is a {type(message).__name__}, not a LangChain message"
            )
        converted = convert_to_openai_messages([message])
        if not converted:
            converted = [{"role": _ROLES.get(message.type, "user"), "content": ""}]
        if isinstance(message, AIMessage) and message.invalid_tool_calls:
            converted[-1] = _with_invalid_calls(converted[-1], message)
        dicts.extend(converted)
        owners.extend([index] * len(converted))
    return dicts, owners


_ROLES = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}


def _with_invalid_calls(converted: dict[str, Any], message: AIMessage) -> dict[str, Any]:
    """Add the calls whose arguments did not parse: chat models still send them (as
    ``ChatOpenAI`` does) and ``create_agent`` answers them with a ``ToolMessage``, so
    they pair like any other call."""
    calls = list(converted.get("tool_calls") or ())
    known = {call.get("id") for call in calls}
    for call in message.invalid_tool_calls:
        if call.get("id") in known:
            continue
        arguments = call.get("args")
        function = {"name": call.get("name") or "", "arguments": arguments or ""}
        calls.append({"type": "function", "id": call.get("id"), "function": function})
    return {**converted, "tool_calls": calls}


def _conversation_key(dicts: Sequence[object], chat_model: object, thread: str | None) -> str:
    name = _describe_model(chat_model)[0]
    return head_key(dicts, model=name, extra=() if thread is None else (thread,))


def _thread_id(runtime: object) -> str | None:
    """The LangGraph thread of this run (None without a checkpointer)."""
    info = getattr(runtime, "execution_info", None)
    thread = getattr(info, "thread_id", None)
    return thread if isinstance(thread, str) and thread else None


def _system_dicts(system: object) -> list[dict[str, Any]]:
    message = system if isinstance(system, SystemMessage) else SystemMessage(content=str(system))
    return list(convert_to_openai_messages([message]))


def _tool_schemas(tools: Sequence[object]) -> list[dict[str, Any]]:
    """The tools as OpenAI function schemas; a provider's built-in tool dict as is."""
    schemas: list[dict[str, Any]] = []
    for tool in tools:
        try:
            schemas.append(convert_to_openai_tool(tool))  # type: ignore[arg-type]
        except Exception:  # a built-in tool ({"type": "web_search"}) has no schema
            if isinstance(tool, Mapping):
                schemas.append(dict(tool))
    return schemas


def _describe_model(chat_model: object) -> tuple[str, str, str | None]:
    """The chat model's name, base URL and API key (empty / None when unknown)."""
    target: Any = chat_model
    bound = getattr(target, "bound", None)  # a RunnableBinding around the model
    if bound is not None and getattr(target, "kwargs", None) is not None:
        target = bound
    name = getattr(target, "model_name", None) or getattr(target, "model", None)
    base_url = (
        getattr(target, "openai_api_base", None)
        or getattr(target, "anthropic_api_url", None)
        or getattr(target, "base_url", None)
    )
    if isinstance(base_url, str) and base_url.rstrip("/").startswith(_OFFICIAL_APIS):
        base_url = ""  # the catalog knows the official APIs' models
    secret = getattr(target, "openai_api_key", None) or getattr(target, "anthropic_api_key", None)
    reveal = getattr(secret, "get_secret_value", None)
    api_key = reveal() if callable(reveal) else None
    return (
        name if isinstance(name, str) else "",
        base_url if isinstance(base_url, str) else "",
        api_key if isinstance(api_key, str) else None,
    )


def _requested_max_tokens(
    chat_model: object, settings: Mapping[str, Any]
) -> tuple[str, int | None]:
    """The settings key for the reply budget and the budget asked for (None: any).

    ``model_settings`` win over the model's own field; ``max_tokens`` is the name every
    LangChain chat model takes (``ChatOpenAI`` sends it as ``max_completion_tokens``).
    """
    for key in _MAX_TOKENS_KEYS:
        value = settings.get(key)
        if value is not None:
            return key, _positive(value, key)
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        value = getattr(chat_model, key, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return "max_tokens", _positive(value, key)
    return "max_tokens", None


def _positive(value: object, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigurationError(f"{name} must be a positive int, got {value!r}")
    return value


def _input_tokens(reply: object) -> int | None:
    """The prompt tokens a model reply reports (``usage_metadata.input_tokens``)."""
    if isinstance(reply, ExtendedModelResponse):
        reply = reply.model_response
    if isinstance(reply, ModelResponse):
        found = [m for m in reply.result if isinstance(m, AIMessage)]
        reply = found[-1] if found else None
    if not isinstance(reply, AIMessage) or reply.usage_metadata is None:
        return None
    tokens = reply.usage_metadata.get("input_tokens")
    return tokens if isinstance(tokens, int) and tokens > 0 else None


def _state_messages(state: Mapping[str, Any] | object) -> list[BaseMessage]:
    messages = (
        state.get("messages") if isinstance(state, Mapping) else getattr(state, "messages", None)
    )
    if not isinstance(messages, list):
        raise ConfigurationError(
            f"the agent state has no 'messages' list (got {type(messages).__name__})"
        )
    return messages
