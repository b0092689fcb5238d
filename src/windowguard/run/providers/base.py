"""The provider contract the tool loop drives.

A provider turns a :class:`ModelRequest` (the fitted transcript in the provider's own
wire format, tool specs, the fitted ``max_tokens``) into a :class:`ModelResponse`
(the assistant message as a JSON-ready dict in the same wire format, its text, its
tool calls and the usage the provider reported). It also builds the wire-format
messages the loop appends: tool results and plain user text.

Providers raise :class:`~windowguard.core.exceptions.ProviderError` carrying a classified
:class:`~windowguard.core.failures.Failure`, mapped at one place per provider from the SDK's
own exception (``raise ProviderError(...) from exc``); the loop never looks at SDK
exception classes.

Sync and async providers share one private base per SDK; the loop has a driver for
each (``ToolLoop`` / ``AsyncToolLoop``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ...accounting.catalog import ModelInfo
from ...core.exceptions import ConfigurationError
from ...core.shapes import Format

__all__ = [
    "AsyncProvider",
    "ModelRequest",
    "ModelResponse",
    "Provider",
    "Site",
    "StreamDelta",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Usage",
]

Site = Literal["tool_send", "plain", "synthesis"]
"""The three provider-send sites of the loop (the tool-loop design): the in-loop send with tools,
the plain completion without tools, and the cap-hit synthesis call without tools."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool as the model sees it: name, description and JSON schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def schema(self, format: Format) -> dict[str, Any]:
        """The tool as ``format``'s request takes it: an OpenAI Chat ``function`` tool, a
        Responses ``function`` tool (``strict`` off, so any JSON schema works), or an
        Anthropic tool (``input_schema``).

        Raises:
            ConfigurationError: an unknown format.
        """
        parameters = dict(self.parameters)
        if format == "openai_chat":
            return {
                "type": "function",
                "function": {
                    "name": self.name,
                    "description": self.description,
                    "parameters": parameters,
                },
            }
        if format == "responses":
            return {
                "type": "function",
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
                "strict": False,
            }
        if format == "anthropic":
            return {"name": self.name, "description": self.description, "input_schema": parameters}
        raise ConfigurationError(
            f"unknown format {format!r}; expected openai_chat, anthropic or responses"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """One provider send.

    Attributes:
        messages: the fitted transcript to send (the caller's objects or JSON dicts),
            in the provider's wire format; Anthropic's system prompt is in ``system``.
        tools: tool specs; empty at the plain and synthesis sites.
        max_tokens: the fitted reply budget (None: the provider's default).
        system: Anthropic's separate system argument (None for other formats).
        site: which send site this is.
        stream: whether the caller wants text deltas as they arrive.
        tool_choice: ``"none"`` when tools are sent only because the format requires
            them but the model must not call any (Anthropic's synthesis call: the Messages
            API refuses a history holding tool blocks without tool definitions); None
            leaves the provider's default.
    """

    messages: Sequence[object]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    system: object = None
    site: Site = "tool_send"
    stream: bool = False
    tool_choice: Literal["auto", "none"] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A tool call the model made; ``arguments`` is the raw JSON text (may be invalid)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """The outcome of one tool call, as the model will see it."""

    call_id: str
    name: str
    content: str
    is_error: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token usage the provider reported for one call.

    Attributes:
        input_tokens: the whole prompt as the provider counted it, cache reads and
            writes included (what calibration and the pressure gauge use).
        output_tokens: tokens generated.
        cache_read_tokens: prompt tokens served from the provider's prompt cache.
        cache_write_tokens: prompt tokens written to the cache.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def to_dict(self) -> dict[str, int | None]:
        """JSON-ready form."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse:
    """What the model answered.

    Attributes:
        message: the assistant message as a JSON-ready dict in the provider's wire
            format, to append to the transcript verbatim (opaque parts such as thinking
            signatures included).
        text: the reply's text.
        tool_calls: the tool calls, in order.
        usage: what the provider reported, if anything.
        stop_reason: the provider's finish/stop reason.
    """

    message: dict[str, Any]
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    stop_reason: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamDelta:
    """A piece of reply text, yielded while a streamed response arrives."""

    text: str


@runtime_checkable
class Provider(Protocol):
    """A synchronous provider."""

    @property
    def format(self) -> Format: ...

    @property
    def model(self) -> str: ...

    def model_info(self) -> ModelInfo:
        """The model's limits: explicit, discovered, catalog, fallback, in that order."""
        ...

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request``; raise ProviderError on failure."""
        ...

    def stream(self, request: ModelRequest) -> Iterator[StreamDelta | ModelResponse]:
        """Send ``request`` streamed: text deltas, then exactly one ModelResponse last."""
        ...

    def tool_result_messages(self, results: Sequence[ToolResult]) -> list[dict[str, Any]]:
        """Wire-format messages carrying ``results`` (all results of one turn)."""
        ...

    def user_message(self, text: str) -> dict[str, Any]:
        """A wire-format user message with ``text``."""
        ...


@runtime_checkable
class AsyncProvider(Protocol):
    """An asynchronous provider (same contract, awaitable sends)."""

    @property
    def format(self) -> Format: ...

    @property
    def model(self) -> str: ...

    def model_info(self) -> ModelInfo: ...

    async def complete(self, request: ModelRequest) -> ModelResponse: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | ModelResponse]: ...

    def tool_result_messages(self, results: Sequence[ToolResult]) -> list[dict[str, Any]]: ...

    def user_message(self, text: str) -> dict[str, Any]: ...
