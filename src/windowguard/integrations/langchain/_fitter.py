"""The core both LangChain hooks share: per-conversation managers, the mapping of
LangChain messages to the OpenAI Chat dicts the manager counts, and usage feedback.

Invariants:

- Messages are mapped for counting only; :meth:`Fitter.prepare` returns a subsequence
  of the caller's own message objects, in order (an index map takes the fitted dicts
  back to the messages they came from). With edit stages (``edits=``), a message whose
  tool result was clamped or cleared, or whose call arguments were cleared, is sent as
  a copy of the caller's message (``model_copy``) with only that content replaced, and a
  summary as a new ``HumanMessage`` after the head (:mod:`windowguard.integrations._sent`
  says which dict each sent message stands for); the state is never changed. A
  summarizer is given the OpenAI Chat dicts the messages are counted as.
- Fits of one conversation run one at a time (``Conversation.prepare``), each numbered
  as it is fitted, and a reply's usage is recorded only for its own send, while that
  send is still the conversation's latest fit.
- The served models (name, base URL) are bounded: a
  :class:`~windowguard.run._conversations.ConversationStores` keeps 256 (as ``wg.guard``),
  least recently used forgotten first (its conversations' next sends start new runs),
  so a caller cycling model names cannot grow memory. A model's discovery runs outside
  every lock.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware.types import (
    ExtendedModelResponse,
    ModelResponse,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import convert_to_openai_messages
from langchain_core.utils.function_calling import convert_to_openai_tool

from ...accounting.usage import prompt_tokens_from_usage
from ...core.exceptions import ConfigurationError
from ...core.gauge import ContextGauge
from ...pipeline.manager import ContextWindowManager, Fit
from ...run._conversations import (
    Conversation,
    ConversationStore,
    ConversationStores,
    ManagerOptions,
    head_key,
)
from ...run.sinks import Sink, as_sinks, emit
from .._sent import align, call_arguments
from ._streams import AsyncHidingCompletions, HidingCompletions

_MAX_TOKENS_KEYS = ("max_completion_tokens", "max_tokens")
# Endpoints whose models the catalog describes: no discovery request is made for them.
_OFFICIAL_APIS = ("https://api.openai.com", "https://api.anthropic.com")


class Fitter:
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
        # (id(chat model), hiding) -> (the model, its copy that asks for usage in streams)
        self._reporting: dict[tuple[int, bool], tuple[object, object]] = {}
        # One store per (model name, base URL): each serves its own window. The store is
        # made on the model's first use, outside the map's lock (discovery does I/O).
        self._served: ConversationStores[tuple[str, str], _Served] = ConversationStores(
            lambda _key: _Served()
        )
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
            and options.discover is not False
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
        official = self.options.discover is True
        name, base_url, api_key = _describe_model(chat_model, official=official)
        served = self._served.get((name, base_url))
        store = served.store
        if store is not None:
            return store
        prototype = self._prototype(name, base_url, api_key)  # may do discovery I/O
        with self._lock:
            if served.store is None:
                served.store = self.options.store(prototype.copy)
            return served.store

    def reporting(self, chat_model: Any, *, hide_usage_chunk: bool = False) -> Any:
        """``chat_model``, or a copy of it that asks for usage in streams.

        A ``ChatOpenAI`` (and its subclasses) left with ``stream_usage`` unset streams
        without usage against any base URL but OpenAI's own; the copy sets it, so a
        streamed reply reports its prompt tokens (``stream_options.include_usage``,
        which OpenAI, vLLM, SGLang and llama.cpp accept). Other models, and a model
        whose ``model_kwargs`` set ``stream_options.include_usage``, are unchanged.

        With ``hide_usage_chunk`` (the middleware, which wraps the model call in
        :func:`~windowguard.integrations.langchain._streams.collecting`), the copy's
        openai client withholds the usage-only chunk and reports its usage there, so the
        stream LangChain builds is the one it builds without windowguard.
        """
        if (
            not self.stream_usage
            or not isinstance(chat_model, BaseChatModel)
            or "stream_usage" not in type(chat_model).model_fields
            or chat_model.stream_usage is not None  # type: ignore[attr-defined]
            or _asks_stream_usage(chat_model)
        ):
            return chat_model
        key = (id(chat_model), hide_usage_chunk)
        with self._lock:
            known = self._reporting.get(key)
            if known is not None and known[0] is chat_model:
                return known[1]
        update: dict[str, object] = {"stream_usage": True}
        if hide_usage_chunk:
            update.update(_hiding_clients(chat_model))
        reporting = chat_model.model_copy(update=update)
        with self._lock:
            if len(self._reporting) >= self.options.max_conversations:
                self._reporting.clear()  # models are few; this only bounds a leak
            self._reporting[key] = (chat_model, reporting)
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
        if usage_before is not None:
            # Kept only while that send is still the manager's last fit; this fit then
            # takes it (no other fit can come between unnoticed: see Conversation.record).
            self.received(conversation, *usage_before)
        fitted = conversation.prepare(
            dicts, tools=schemas, max_tokens=max_tokens, format="openai_chat"
        )
        fit, send = fitted.fit, fitted.send
        for event in fit.events:
            emit(event, self.sinks)
        return conversation, send, fit, _sent_messages(messages, dicts, owners, fit)

    def received(self, conversation: Conversation, send: int, tokens: int | None) -> None:
        """Feed a send's prompt tokens (None: none came back) to its conversation, if
        that send is still the latest; a later send has taken its usage slot."""
        if conversation.record(tokens, send=send) and tokens is not None:
            gauge = ContextGauge(conversation.manager.context_window)
            for event in gauge.observe(tokens):
                emit(event, self.sinks)


def _asks_stream_usage(chat_model: object) -> bool:
    """Whether a model's own ``model_kwargs`` set ``stream_options.include_usage``."""
    kwargs = getattr(chat_model, "model_kwargs", None)
    options = kwargs.get("stream_options") if isinstance(kwargs, Mapping) else None
    return isinstance(options, Mapping) and "include_usage" in options


def _hiding_clients(chat_model: object) -> dict[str, object]:
    """The openai ``chat.completions`` clients of a ``ChatOpenAI``, wrapped to hide the
    usage-only chunk (none for a model without them: its stream keeps the chunk)."""
    fields = type(chat_model).model_fields  # type: ignore[attr-defined]
    out: dict[str, object] = {}
    for name, wrapper in (("client", HidingCompletions), ("async_client", AsyncHidingCompletions)):
        client = getattr(chat_model, name, None)
        if name in fields and client is not None and hasattr(client, "create"):
            out[name] = wrapper(client)
    return out


def _sent_messages(
    messages: Sequence[BaseMessage], dicts: list[dict[str, Any]], owners: list[int], fit: Fit
) -> list[BaseMessage]:
    """The LangChain messages to send for a fit of their dicts: the caller's own where a
    kept dict is one given, a copy with the edited content where it is an edited copy,
    and a ``HumanMessage`` where it is a summary; in order."""
    keep: dict[int, dict[int, Mapping[str, Any]]] = {}  # owner -> {dict index: edited}
    before: dict[int, list[BaseMessage]] = {}  # summaries, by the owner they precede
    waiting: list[BaseMessage] = []
    for index, sent in zip(align(dicts, fit.messages), fit.messages, strict=True):
        if index is None:
            waiting.append(HumanMessage(content=sent["content"]))  # type: ignore[index]
            continue
        owner = owners[index]
        if owner == -1:
            continue  # the hook's own system prompt: counted, not returned
        if waiting:
            before.setdefault(owner, []).extend(waiting)
            waiting = []
        edits = keep.setdefault(owner, {})
        # An equal dict of an earlier send is the same message, not an edit of it.
        if sent is not dicts[index] and sent != dicts[index]:
            edits[index] = sent  # type: ignore[assignment]
    out: list[BaseMessage] = []
    for owner in sorted(keep):
        out.extend(before.get(owner, ()))
        edited = keep[owner]
        out.append(_edited(messages[owner], edited) if edited else messages[owner])
    out.extend(waiting)
    return out


def _edited(message: BaseMessage, edited: Mapping[int, Mapping[str, Any]]) -> BaseMessage:
    """A copy of ``message`` carrying its edited dicts' content: a tool message's
    content, a human message's ``tool_result`` blocks, an AI message's call arguments."""
    if isinstance(message, AIMessage):
        arguments: dict[object, str] = {}
        for sent in edited.values():
            arguments.update(call_arguments(sent))
        return _with_arguments(message, arguments)
    results = {sent.get("tool_call_id"): sent.get("content") for sent in edited.values()}
    if message.type == "tool":
        (content,) = results.values()
        return message.model_copy(update={"content": content})
    content = message.content
    if not isinstance(content, list):
        return message
    blocks = [
        {**block, "content": results[block.get("tool_use_id")]}
        if isinstance(block, Mapping)
        and block.get("type") == "tool_result"
        and block.get("tool_use_id") in results
        else block
        for block in content
    ]
    return message.model_copy(update={"content": blocks})


def _with_arguments(message: AIMessage, arguments: Mapping[object, str]) -> AIMessage:
    """A copy of ``message`` whose calls carry ``arguments`` (JSON text, by call id),
    wherever the chat model may read them from: ``tool_calls``, ``invalid_tool_calls``,
    the raw ``additional_kwargs["tool_calls"]`` and ``tool_use`` content blocks."""

    def parsed(text: str) -> dict[str, Any]:
        try:
            value = json.loads(text)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    calls = [
        {**call, "args": parsed(arguments[call.get("id")])} if call.get("id") in arguments else call
        for call in message.tool_calls
    ]
    invalid = [  # their arguments did not parse: sent as the text they are
        {**call, "args": arguments[call.get("id")]} if call.get("id") in arguments else call
        for call in message.invalid_tool_calls
    ]
    update: dict[str, Any] = {"tool_calls": calls, "invalid_tool_calls": invalid}
    raw = message.additional_kwargs.get("tool_calls")
    if isinstance(raw, list):
        update["additional_kwargs"] = {
            **message.additional_kwargs,
            "tool_calls": [
                {**call, "function": {**call["function"], "arguments": arguments[call.get("id")]}}
                if isinstance(call, Mapping)
                and call.get("id") in arguments
                and isinstance(call.get("function"), Mapping)
                else call
                for call in raw
            ],
        }
    if isinstance(message.content, list):
        update["content"] = [
            {**block, "input": parsed(arguments[block.get("id")])}
            if isinstance(block, Mapping)
            and block.get("type") == "tool_use"
            and block.get("id") in arguments
            else block
            for block in message.content
        ]
    return message.model_copy(update=update)


class _Served:
    """One served model's conversations: None until its first send has made the store
    (a model that was forgotten meanwhile keeps none; its next send makes a new one)."""

    __slots__ = ("store",)

    def __init__(self) -> None:
        self.store: ConversationStore | None = None


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


def thread_id(runtime: object) -> str | None:
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


def _describe_model(chat_model: object, *, official: bool = False) -> tuple[str, str, str | None]:
    """The chat model's name, base URL and API key (empty / None when unknown; the
    vendors' own API URLs empty too, unless ``official``: ``discover=True``)."""
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
    if (
        not official
        and isinstance(base_url, str)
        and base_url.rstrip("/").startswith(_OFFICIAL_APIS)
    ):
        base_url = ""  # the catalog knows the official APIs' models
    secret = getattr(target, "openai_api_key", None) or getattr(target, "anthropic_api_key", None)
    reveal = getattr(secret, "get_secret_value", None)
    api_key = reveal() if callable(reveal) else None
    return (
        name if isinstance(name, str) else "",
        base_url if isinstance(base_url, str) else "",
        api_key if isinstance(api_key, str) else None,
    )


def requested_max_tokens(chat_model: object, settings: Mapping[str, Any]) -> tuple[str, int | None]:
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


def input_tokens(reply: object, streamed: Sequence[object] = ()) -> int | None:
    """The prompt tokens a model reply reports (``usage_metadata.input_tokens``), else
    the ones its stream reported and the middleware withheld (``streamed``: the usage
    :func:`~windowguard.integrations.langchain._streams.collecting` gathered)."""
    for usage in streamed[:1]:
        try:
            tokens = prompt_tokens_from_usage(usage)
        except ConfigurationError:
            tokens = None
        if tokens:
            return tokens
    if isinstance(reply, ExtendedModelResponse):
        reply = reply.model_response
    if isinstance(reply, ModelResponse):
        found = [m for m in reply.result if isinstance(m, AIMessage)]
        reply = found[-1] if found else None
    if not isinstance(reply, AIMessage) or reply.usage_metadata is None:
        return None
    tokens = reply.usage_metadata.get("input_tokens")
    return tokens if isinstance(tokens, int) and tokens > 0 else None
