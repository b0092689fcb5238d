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
  processor's result, copies included, back into the run's history.
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
- Per-conversation state lives in a :class:`~windowguard._conversations.ConversationStore`
  per model name, keyed by the head, the model name and pydantic-ai's
  ``conversation_id``. The model names are bounded too (a
  :class:`~windowguard._conversations.ConversationStores` of 256, as ``wg.guard``, least
  recently used forgotten first): a caller cycling model names cannot grow memory.
"""

from __future__ import annotations

import dataclasses
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
from ..edits.config import EditStage
from ..exceptions import ConfigurationError
from ..manager import ContextWindowManager, Fit
from ..prune import PruningPolicy
from ..shrink import DEFAULT_SAFETY_BUFFER
from ..sinks import Sink, as_sinks, emit
from ._sent import align, call_arguments

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
    dicts, owners, _ = _read(messages, instructions)
    return dicts, owners


def _read(
    messages: Sequence[ModelMessage], instructions: str | None
) -> tuple[list[dict[str, Any]], list[int | None], list[int | None]]:
    """:func:`to_openai_chat`, with each dict's part index in its request (None for a
    response's one dict and the instructions)."""
    dicts: list[dict[str, Any]] = []
    owners: list[int | None] = []
    parts: list[int | None] = []
    if instructions:
        dicts.append({"role": "system", "content": instructions})
        owners.append(None)
        parts.append(None)
    for index, message in enumerate(messages):
        if isinstance(message, _messages.ModelResponse):
            read: list[tuple[int | None, dict[str, Any]]] = [(None, _response_dict(message))]
        elif isinstance(message, _messages.ModelRequest):
            read = list(_request_dicts(message))
        else:
            raise ConfigurationError(
                f"message {index} is a {type(message).__name__}, not a pydantic-ai "
                "ModelRequest or ModelResponse"
            )
        dicts.extend(d for _, d in read)
        owners.extend([index] * len(read))
        parts.extend(p for p, _ in read)
    return dicts, owners, parts


def _request_dicts(request: _messages.ModelRequest) -> list[tuple[int | None, dict[str, Any]]]:
    """The dicts a request is read as, each with the index of its part."""
    out: list[tuple[int | None, dict[str, Any]]] = []
    for number, part in enumerate(request.parts):
        read: dict[str, Any] | None = None
        if isinstance(part, _messages.SystemPromptPart):
            read = {"role": "system", "content": part.content}
        elif isinstance(part, _messages.UserPromptPart):
            read = {"role": "user", "content": _user_content(part.content)}
        elif isinstance(part, _messages.NativeToolReturnPart):
            read = {"role": "user", "content": _text(part.content)}
        elif isinstance(part, _messages.BaseToolReturnPart):
            read = {"role": "tool", "tool_call_id": part.tool_call_id, "content": _tool_text(part)}
        elif isinstance(part, _messages.RetryPromptPart):  # pyright: ignore[reportDeprecated]
            text = _retry_text(part)
            if part.tool_name is not None:
                read = {"role": "tool", "tool_call_id": part.tool_call_id, "content": text}
            else:
                read = {"role": "user", "content": text}
        elif isinstance(part, _messages.RetryFeedbackPart):
            read = {"role": "user", "content": _retry_text(part)}
        if read is not None:
            out.append((number, read))
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
    messages: Sequence[ModelMessage],
    owners: Sequence[int | None],
    fit: Fit,
    dicts: list[Any],
    parts: Sequence[int | None],
) -> list[ModelMessage]:
    """The messages owning a kept dict, in order, each a copy carrying its edited dicts
    when it has any, with a summary's ``ModelRequest`` before the first message after
    it; a message owning no dict goes with the next message that owns one (or the
    previous, at the end)."""
    keep: dict[int, dict[int, Mapping[str, Any]]] = {}  # owner -> {dict index: edited}
    before: dict[int, list[ModelMessage]] = {}  # summaries, by the owner they precede
    waiting: list[ModelMessage] = []
    for index, sent in zip(align(dicts, fit.messages), fit.messages, strict=True):
        if index is None:
            waiting.append(_summary_request(cast("Mapping[str, Any]", sent)))
            continue
        owner = owners[index]
        if owner is None:
            continue  # the instructions: counted, not a message
        if waiting:
            before.setdefault(owner, []).extend(waiting)
            waiting = []
        edits = keep.setdefault(owner, {})
        if sent is not dicts[index]:
            edits[index] = cast("Mapping[str, Any]", sent)
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
            out.extend(before.get(index, ()))
            out.extend(pending)
            edited = keep[index]
            out.append(_edited(message, edited, parts) if edited else message)
        pending = []
    if pending and last_kept:
        out.extend(pending)
    out.extend(waiting)
    return out


def _summary_request(sent: Mapping[str, Any]) -> _messages.ModelRequest:
    return _messages.ModelRequest(parts=[_messages.UserPromptPart(content=sent["content"])])


def _edited(
    message: ModelMessage, edited: Mapping[int, Mapping[str, Any]], parts: Sequence[int | None]
) -> ModelMessage:
    """A copy of ``message`` with its edited dicts' content: a request's tool returns
    (the edited text, as a ``ToolReturnPart``), a response's cleared call arguments."""
    if isinstance(message, _messages.ModelResponse):
        arguments: dict[object, str] = {}
        for sent in edited.values():
            arguments.update(call_arguments(sent))
        new_parts: list[Any] = [
            dataclasses.replace(
                cast(Any, part), args=_arguments(part, arguments[part.tool_call_id])
            )
            if isinstance(part, _messages.BaseToolCallPart)
            and not isinstance(part, _messages.NativeToolCallPart)
            and part.tool_call_id in arguments
            else part
            for part in message.parts
        ]
        return dataclasses.replace(message, parts=new_parts)
    texts = {parts[index]: sent.get("content") for index, sent in edited.items()}
    request_parts: list[Any] = list(message.parts)
    for number, text in texts.items():
        if number is None:
            continue
        part = request_parts[number]
        if isinstance(part, _messages.BaseToolReturnPart):
            request_parts[number] = dataclasses.replace(part, content=text)
        elif isinstance(part, _messages.RetryPromptPart):  # pyright: ignore[reportDeprecated]
            # A retry prompt is sent with a suffix of pydantic-ai's own: as a tool return
            # the model is sent exactly the edited text that was counted.
            request_parts[number] = _messages.ToolReturnPart(
                tool_name=part.tool_name or "",
                content=text,
                tool_call_id=part.tool_call_id,
                timestamp=part.timestamp,
            )
    return dataclasses.replace(message, parts=request_parts)


def _arguments(part: _messages.BaseToolCallPart[Any], text: str) -> str | dict[str, Any]:
    """Cleared arguments in the form the part holds them (JSON text or a dict)."""
    if isinstance(part.args, str):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


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
    ) -> tuple[list[ModelMessage], Fitted]:
        """Fit in the conversation's turn (awaited, never blocking the loop)."""
        fitted = await conversation.aprepare(
            dicts, tools=tools, max_tokens=max_tokens, format="openai_chat"
        )
        for event in fitted.fit.events:
            emit(event, self.sinks)
        return _kept(messages, owners, fitted.fit, dicts, parts), fitted


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
        edits: edit stages run before whole turns are dropped
            (``[wg.ClampToolResults(...), wg.ClearToolResults(...), wg.Summarize(...)]``;
            ``docs/edits.md``); ``()`` (default): drop only. The edited messages are
            copies sent with that request only.
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
        edits: Sequence[EditStage] = (),
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
            edits=edits,
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
        dicts, owners, parts = _read(messages, _instructions(parameters.instruction_parts))
        tool_defs = [*parameters.function_tools, *parameters.output_tools]
        model_name = _model_name(request_context.model)
        conversation = self._fitter.conversation(model_name, dicts, ctx.conversation_id)
        settings = request_context.model_settings
        kept, fitted = await self._fitter.fit(
            conversation,
            messages,
            dicts,
            owners,
            parts,
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
    edits: Sequence[EditStage] = (),
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
        safety, pruning, strict, sinks, edits, manager, max_conversations, ttl_seconds: as
            for :class:`WindowGuard`. ``ProcessHistory`` writes what the processor
            returns into the run's history, so with ``edits=`` the edited copies (a
            clamped or cleared result) stay in the history for the rest of the run.

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
        dicts, owners, parts = _read(messages, instructions)
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
            parts,
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
