"""pydantic-ai: fit every model request of an ``Agent`` run into the context window.

Two hooks, both over pydantic-ai's own message objects:

- :class:`WindowGuard`, a capability (``Agent(..., capabilities=[WindowGuard(...)])``).
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
  into the run's history; prefer :class:`WindowGuard`.

Invariants:

- Messages are never copied or rewritten: each :class:`~pydantic_ai.messages.ModelMessage`
  is read as one or more OpenAI chat dicts (an index map remembers whose), the
  dicts are fitted turn-atomically, and the kept messages are returned as the caller's
  own objects, in order. A ``ModelResponse`` starts a turn; the ``ModelRequest`` holding
  its ``ToolReturnPart`` / ``RetryPromptPart`` answers (paired by ``tool_call_id``) and
  any user prompt after them belong to the same turn, so a request is never split.
- The system prompt parts and the first user prompt (the head) and the newest turn are
  always kept; a request that cannot fit raises
  :class:`~windowguard.ContextTruncatedError` before any HTTP request.
- Fits of one conversation run one at a time (awaited, never blocking the event loop),
  and usage is fed back only for the request it answers, while that request is the
  one this conversation fitted last: the capability records the response of each
  attempt against the attempt's own send (or nothing, when the attempt failed); the
  processor takes the usage of the ``ModelResponse`` that directly follows the last
  message of the conversation's latest send, and ``NO_USAGE`` otherwise.
- Per-conversation state lives in a :class:`~windowguard._conversations.ConversationStore`
  per model name, keyed by the head, the model name and pydantic-ai's
  ``conversation_id``. The model names are bounded too (a
  :class:`~windowguard._conversations.ConversationStores` of 256, as ``wg.guard``, least
  recently used forgotten first): a caller cycling model names cannot grow memory.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

try:
    from pydantic_ai import messages as _messages
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.tools import RunContext, ToolDefinition
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "windowguard.integrations.pydantic_ai needs pydantic-ai: "
        'pip install "windowguard[pydantic-ai]"'
    ) from exc

from .._conversations import (
    DEFAULT_MAX_CONVERSATIONS,
    DEFAULT_TTL_SECONDS,
    Conversation,
    ConversationStore,
    ConversationStores,
    Fitted,
    ManagerOptions,
    head_key,
)
from ..catalog import ModelInfo
from ..exceptions import ConfigurationError
from ..manager import ContextWindowManager, Fit
from ..prune import PruningPolicy
from ..shrink import DEFAULT_SAFETY_BUFFER
from ..sinks import Sink, as_sinks, emit

__all__ = ["WindowGuard", "history_processor", "to_openai_chat"]

ModelMessage = _messages.ModelRequest | _messages.ModelResponse


# -- reading pydantic-ai messages as OpenAI chat dicts ------------------------------------


def to_openai_chat(
    messages: Sequence[ModelMessage], *, instructions: str | None = None
) -> tuple[list[dict[str, Any]], list[int | None]]:
    """Read pydantic-ai messages as OpenAI Chat Completions dicts, for counting.

    Args:
        messages: the run's messages.
        instructions: the request's instructions, read as a leading system message.

    Returns:
        ``(dicts, owners)``: the dicts, and for each the index in ``messages`` of the
        message it was read from (None for the instructions). A message that holds
        nothing sent as a message (only bookkeeping parts) owns no dict.

    Raises:
        ConfigurationError: an item that is neither a ``ModelRequest`` nor a
            ``ModelResponse``.
    """
    dicts: list[dict[str, Any]] = []
    owners: list[int | None] = []
    if instructions:
        dicts.append({"role": "system", "content": instructions})
        owners.append(None)
    for index, message in enumerate(messages):
        if isinstance(message, _messages.ModelResponse):
            read = [_response_dict(message)]
        elif isinstance(message, _messages.ModelRequest):
            read = _request_dicts(message)
        else:
            raise ConfigurationError(
                f"message {index} is a {type(message).__name__}, not a pydantic-ai "
                "ModelRequest or ModelResponse"
            )
        dicts.extend(read)
        owners.extend([index] * len(read))
    return dicts, owners


def _request_dicts(request: _messages.ModelRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in request.parts:
        if isinstance(part, _messages.SystemPromptPart):
            out.append({"role": "system", "content": part.content})
        elif isinstance(part, _messages.UserPromptPart):
            out.append({"role": "user", "content": _user_content(part.content)})
        elif isinstance(part, _messages.NativeToolReturnPart):
            out.append({"role": "user", "content": _text(part.content)})
        elif isinstance(part, _messages.BaseToolReturnPart):
            out.append(
                {"role": "tool", "tool_call_id": part.tool_call_id, "content": _tool_text(part)}
            )
        elif isinstance(part, _messages.RetryPromptPart):  # pyright: ignore[reportDeprecated]
            text = _retry_text(part)
            if part.tool_name is not None:
                out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": text})
            else:
                out.append({"role": "user", "content": text})
        elif isinstance(part, _messages.RetryFeedbackPart):
            out.append({"role": "user", "content": _retry_text(part)})
        # Delta and bookkeeping parts are not sent as messages.
    return out


def _response_dict(response: _messages.ModelResponse) -> dict[str, Any]:
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in response.parts:
        if isinstance(part, _messages.TextPart):
            text.append(part.content)
        elif isinstance(part, _messages.ThinkingPart):
            reasoning.append(part.content)
        elif isinstance(part, _messages.NativeToolCallPart):
            # Server-side tool calls travel inside their response, with their returns.
            text.append(part.args_as_json_str())
        elif isinstance(part, _messages.BaseToolCallPart):
            calls.append(
                {
                    "id": part.tool_call_id,
                    "type": "function",
                    "function": {"name": part.tool_name, "arguments": part.args_as_json_str()},
                }
            )
        elif isinstance(part, _messages.NativeToolReturnPart):
            text.append(_text(part.content))
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if reasoning:
        message["reasoning_content"] = "\n".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    return message


def _user_content(content: object) -> object:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for item in content if isinstance(content, Iterable) else [content]:
        if isinstance(item, str):
            parts.append({"type": "text", "text": item})
        elif isinstance(item, (_messages.ImageUrl, _messages.BinaryImage)) or (
            isinstance(item, _messages.BinaryContent) and item.is_image
        ):
            # Media counts as a fixed per-item cost, never by its bytes.
            parts.append({"type": "image_url", "image_url": {"url": "image"}})
        elif isinstance(item, (_messages.FileUrl, _messages.BinaryContent, _messages.UploadedFile)):
            parts.append({"type": "file", "file": {"filename": "file"}})
        elif isinstance(item, _messages.CachePoint):
            continue
        else:
            parts.append({"type": "text", "text": _text(getattr(item, "content", item))})
    return parts


def _tool_text(part: _messages.BaseToolReturnPart[Any]) -> str:
    try:
        return part.model_response_str()
    except Exception:  # an unusual content type: count what it prints as
        return _text(part.content)


def _retry_text(part: object) -> str:
    try:
        return str(cast(Any, part).model_response())
    except Exception:
        return _text(getattr(part, "content", ""))


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _tool_dicts(definitions: Iterable[ToolDefinition]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description or "",
                "parameters": tool.parameters_json_schema,
            },
        }
        for tool in definitions
    ]


def _kept(
    messages: Sequence[ModelMessage], owners: Sequence[int | None], fit: Fit, dicts: list[Any]
) -> list[ModelMessage]:
    """The messages owning a kept dict, in order; a message owning no dict goes with the
    next message that owns one (or the previous, at the end)."""
    by_identity = {id(d): owner for d, owner in zip(dicts, owners, strict=True)}
    keep = {by_identity[id(d)] for d in fit.messages} - {None}
    out: list[ModelMessage] = []
    owned = set(owners)
    pending: list[ModelMessage] = []
    last_kept = False
    for index, message in enumerate(messages):
        if index not in owned:
            pending.append(message)
            continue
        last_kept = index in keep
        if last_kept:
            out.extend(pending)
            out.append(message)
        pending = []
    if pending and last_kept:
        out.extend(pending)
    return out


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
        *,
        tools: list[dict[str, Any]] | None,
        max_tokens: int | None,
    ) -> tuple[list[ModelMessage], Fitted]:
        """Fit in the conversation's turn (awaited, never blocking the loop)."""
        fitted = await conversation.aprepare(
            dicts, tools=tools, max_tokens=max_tokens, format="openai_chat"
        )
        for event in fitted.fit.events:
            emit(event, self.sinks)
        return _kept(messages, owners, fitted.fit, dicts), fitted


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


class WindowGuard(AbstractCapability[Any]):
    """A pydantic-ai capability that fits every model request into the context window.

    Example:
        >>> agent = Agent(model, tools=[...], capabilities=[WindowGuard(safety=500)])

    Args:
        model_info: the model's limits; else the catalog's for the request's model name
            (an unknown model gets the conservative fallback window).
        safety: tokens kept free below the window.
        pruning: ``"low_water"`` (default, cache-friendly) or ``"minimal"``.
        strict: raise :class:`~windowguard.InvalidTranscriptError` on damaged history.
        sinks: callables given every event (``context_estimate``, ``transcript_pruned``,
            ``max_tokens_shrunk``, ``usage_measured`` ...).
        manager: a configured manager to copy for each conversation (then leave the
            options above at their defaults: the manager carries its own).
        max_conversations: conversations remembered (least recently used forgotten).
        ttl_seconds: a conversation idle this long is forgotten.

    Raises:
        ConfigurationError: an unusable option.
    """

    def __init__(
        self,
        *,
        model_info: ModelInfo | None = None,
        safety: int = DEFAULT_SAFETY_BUFFER,
        pruning: PruningPolicy = "low_water",
        strict: bool = False,
        sinks: Iterable[Sink] = (),
        manager: ContextWindowManager | None = None,
        max_conversations: int = DEFAULT_MAX_CONVERSATIONS,
        ttl_seconds: float | None = DEFAULT_TTL_SECONDS,
    ) -> None:
        super().__init__()
        options = ManagerOptions(
            caller="WindowGuard()",
            manager=manager,
            model_info=model_info,
            safety=safety,
            pruning=pruning,
            strict=strict,
            max_conversations=max_conversations,
            ttl_seconds=ttl_seconds,
        )
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
        dicts, owners = to_openai_chat(
            messages, instructions=_instructions(parameters.instruction_parts)
        )
        tool_defs = [*parameters.function_tools, *parameters.output_tools]
        model_name = _model_name(request_context.model)
        conversation = self._fitter.conversation(model_name, dicts, ctx.conversation_id)
        settings = request_context.model_settings
        kept, fitted = await self._fitter.fit(
            conversation,
            messages,
            dicts,
            owners,
            tools=_tool_dicts(tool_defs) or None,
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
    strict: bool = False,
    sinks: Iterable[Sink] = (),
    manager: ContextWindowManager | None = None,
    max_conversations: int = DEFAULT_MAX_CONVERSATIONS,
    ttl_seconds: float | None = DEFAULT_TTL_SECONDS,
) -> Callable[[RunContext[Any], list[ModelMessage]], Any]:
    """A history processor for ``ProcessHistory`` that fits the history into the window.

    Example:
        >>> from pydantic_ai.capabilities import ProcessHistory
        >>> agent = Agent(model, capabilities=[ProcessHistory(history_processor(safety=500))])

    A processor sees the messages and the run context only: it fits against the run's
    ``model_settings["max_tokens"]`` (the reply reserve) but cannot change it, and it
    cannot see the request's tool definitions (give ``safety`` room for them). The
    :class:`WindowGuard` capability does both. ``ProcessHistory`` writes the kept
    messages back into the run's history.

    Args:
        model: the model name for catalog limits; else the run's model name.
        model_info: the model's limits (wins over the catalog).
        safety, pruning, strict, sinks, manager, max_conversations, ttl_seconds: as for
            :class:`WindowGuard`.

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
        max_conversations=max_conversations,
        ttl_seconds=ttl_seconds,
    )
    fitter = _Fitter(options, as_sinks(sinks))
    if model is not None and not isinstance(model, str):
        raise ConfigurationError(f"model must be a model name string, got {model!r}")
    # Per conversation: the last message of its latest send, and that send's number.
    last_sent: OrderedDict[str, tuple[ModelMessage, int]] = OrderedDict()

    async def process(ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        instructions = next(
            (
                m.instructions
                for m in reversed(messages)
                if isinstance(m, _messages.ModelRequest) and m.instructions
            ),
            None,
        )
        dicts, owners = to_openai_chat(messages, instructions=instructions)
        model_name = model or _model_name(ctx.model)
        conversation = fitter.conversation(model_name, dicts, ctx.conversation_id)
        with conversation.lock:
            previous = last_sent.get(conversation.key)
        if previous is not None:
            # The usage of the reply to the latest send, if it is in this history; kept
            # only while that send is still the conversation's latest fit.
            conversation.record(_usage_after(messages, previous[0]), send=previous[1])
        kept, fitted = await fitter.fit(
            conversation,
            messages,
            dicts,
            owners,
            tools=None,
            max_tokens=_max_tokens(cast("Mapping[str, Any] | None", ctx.model_settings)),
        )
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
