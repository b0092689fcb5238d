"""LangChain v1: :class:`ContextWindowMiddleware` fits every model call of a
``create_agent`` agent (see :mod:`windowguard.integrations.langchain`).

Invariants: the agent's state keeps the whole history, only the one model call sees
the fitted list (with ``edits=``, copies of the edited messages) and reply budget; a
reply's usage is fed back only to the send it answers, while that send is its conversation's latest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AnyMessage, BaseMessage

from ...accounting.catalog import ModelInfo
from ...core.edits.config import EditStage
from ...core.prune import PruningPolicy
from ...core.shrink import DEFAULT_SAFETY_BUFFER
from ...pipeline.manager import ContextWindowManager
from ...run._conversations import (
    DEFAULT_MAX_CONVERSATIONS,
    DEFAULT_TTL_SECONDS,
    Conversation,
    ManagerOptions,
)
from ...run.sinks import Sink
from ._fitter import Fitter, input_tokens, requested_max_tokens, thread_id
from ._streams import collecting


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
        safety: tokens kept free below the window.
        pruning: ``"low_water"`` (keeps the provider's prompt cache stable) or
            ``"minimal"``.
        sinks: event sinks (fit events and ``context_pressure`` from usage).
        strict: raise :class:`~windowguard.InvalidTranscriptError` on a damaged
            history instead of passing it on unchanged.
        edits: edit stages run before whole turns are dropped
            (``[wg.ClampToolResults(...), wg.ClearToolResults(...), wg.Summarize(...)]``;
            ``docs/edits.md``); None (default): :data:`~windowguard.DEFAULT_EDITS`;
            ``()``: drop only. Edited messages are copies sent to the model only; the
            agent's state keeps the originals.
        manager: a configured :class:`~windowguard.ContextWindowManager`; each
            conversation gets a copy. Excludes ``model_info``, ``safety``, ``pruning``,
            ``strict`` and ``edits`` (left at their defaults).
        ttl_seconds: a conversation idle this long is forgotten (None: never).
        max_conversations: conversations whose state is kept (least recently used
            forgotten first).
        discover: ask the chat model's own server (its base URL) for the window it
            serves; None (default): yes, unless it is OpenAI's or Anthropic's API, whose
            windows the catalog knows; True: those too; False: never.
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
        safety: int = DEFAULT_SAFETY_BUFFER,
        pruning: PruningPolicy = "low_water",
        edits: Sequence[EditStage] | None = None,
        strict: bool = False,
        ttl_seconds: float | None = DEFAULT_TTL_SECONDS,
        max_conversations: int = DEFAULT_MAX_CONVERSATIONS,
        discover: bool | None = None,
        sinks: Sink | Iterable[Sink] | None = None,
        manager: ContextWindowManager | None = None,
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
            edits=edits,
            max_conversations=max_conversations,
            ttl_seconds=ttl_seconds,
            discover=discover,
        )
        self._fitter = Fitter(options, sinks=sinks, stream_usage=stream_usage)

    def _fitted(self, request: ModelRequest[Any]) -> tuple[Conversation, int, ModelRequest[Any]]:
        history: list[BaseMessage] = list(request.messages)
        system = request.system_message
        messages = [system, *history] if system is not None else history
        key, requested = requested_max_tokens(request.model, request.model_settings)
        conversation, send, fit, kept = self._fitter.prepare(
            messages,
            chat_model=request.model,
            tools=request.tools,
            max_tokens=requested,
            thread=thread_id(request.runtime),
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
                model=self._fitter.reporting(request.model, hide_usage_chunk=True),
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
            with collecting() as streamed:  # a stream's usage, withheld from the caller
                response = handler(fitted)
        except BaseException as exc:
            conversation.failed(exc, send=send)
            raise
        self._fitter.received(conversation, send, input_tokens(response, streamed))
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
            with collecting() as streamed:
                response = await handler(fitted)
        except BaseException as exc:
            conversation.failed(exc, send=send)
            raise
        self._fitter.received(conversation, send, input_tokens(response, streamed))
        return response
