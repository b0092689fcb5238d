"""LangGraph: :func:`pre_model_hook` for ``create_react_agent`` (see
:mod:`windowguard.integrations.langchain`).

Invariants: the hook returns ``{"llm_input_messages": kept}`` (with ``edits=``, copies
of the edited messages among them) and never rewrites the state; the fitted
``max_tokens`` and the send number belong to one hook call, kept under the key of the
state's last message (its id, else its identity), which the model node and the next
hook call see again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from ...accounting.catalog import ModelInfo
from ...core.edits.config import EditStage
from ...core.exceptions import ConfigurationError
from ...core.prune import PruningPolicy
from ...core.shrink import DEFAULT_SAFETY_BUFFER
from ...pipeline.manager import ContextWindowManager
from ...run._conversations import (
    DEFAULT_MAX_CONVERSATIONS,
    DEFAULT_TTL_SECONDS,
    ManagerOptions,
)
from ...run.sinks import Sink
from ._fitter import Fitter, input_tokens, requested_max_tokens, thread_id


class ContextWindowHook:
    """A LangGraph ``pre_model_hook`` (and dynamic model) that fits each model call.

    Made by :func:`pre_model_hook`; see there. Calling it with the graph state returns
    ``{"llm_input_messages": kept}``; :meth:`model` is a dynamic-model callable for
    ``create_react_agent`` that binds the tools and the fitted ``max_tokens``.
    """

    def __init__(
        self,
        fitter: Fitter,
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
            requested = requested_max_tokens(self._model, {})[1]
        _, send, fit, kept = self._fitter.prepare(
            messages,
            chat_model=self._model,
            tools=self._tools,
            max_tokens=requested,
            system=self._system,
            usage_before=self._answered(messages),
            thread=thread_id(runtime),
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
                return call.send, input_tokens(messages[index])
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
        field, _ = requested_max_tokens(chat_model, {})
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
    safety: int = DEFAULT_SAFETY_BUFFER,
    pruning: PruningPolicy = "low_water",
    edits: Sequence[EditStage] | None = None,
    strict: bool = False,
    ttl_seconds: float | None = DEFAULT_TTL_SECONDS,
    max_conversations: int = DEFAULT_MAX_CONVERSATIONS,
    discover: bool | None = None,
    sinks: Sink | Iterable[Sink] | None = None,
    manager: ContextWindowManager | None = None,
    stream_usage: bool = False,
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
        edits: edit stages run before whole turns are dropped (``docs/edits.md``);
            None (default): :data:`~windowguard.DEFAULT_EDITS`; ``()``: drop only.
            Edited messages are copies in ``llm_input_messages``; the state keeps the
            originals.
        manager: a configured manager (each conversation gets a copy); excludes
            ``model_info``, ``safety``, ``pruning``, ``strict`` and ``edits``.
        ttl_seconds: a conversation idle this long is forgotten (None: never).
        max_conversations: conversations whose state is kept.
        discover: ask the chat model's own server for its window (None: unless it is
            OpenAI's or Anthropic's API; True: those too; False: never).
        stream_usage: let ``hook.model`` ask a ``ChatOpenAI`` whose ``stream_usage``
            is unset for usage in streamed replies too. Off by default: the hook cannot
            wrap the model call, so the usage-only chunk that brings would reach your
            ``stream_mode="messages"`` reader (LangChain shows it as one more
            ``AIMessageChunk``). Without it a streamed reply feeds back no usage and the
            next send rests on its counters (``NO_USAGE``).

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
        edits=edits,
        max_conversations=max_conversations,
        ttl_seconds=ttl_seconds,
        discover=discover,
    )
    fitter = Fitter(options, sinks=sinks, stream_usage=stream_usage)
    return ContextWindowHook(fitter, model=model, tools=tools, system=system, max_tokens=max_tokens)


def _state_messages(state: Mapping[str, Any] | object) -> list[BaseMessage]:
    messages = (
        state.get("messages") if isinstance(state, Mapping) else getattr(state, "messages", None)
    )
    if not isinstance(messages, list):
        raise ConfigurationError(
            f"the agent state has no 'messages' list (got {type(messages).__name__})"
        )
    return messages
