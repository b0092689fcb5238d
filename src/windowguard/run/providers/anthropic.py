"""Anthropic Messages providers on the official ``anthropic`` SDK.

:class:`AnthropicProvider` and :class:`AsyncAnthropicProvider` send through
``anthropic.Anthropic`` / ``anthropic.AsyncAnthropic`` over one private base that
builds the request and reads the answer.

Invariants:

- ``system`` travels as its own argument; tools go out as ``{name, description,
  input_schema}``; ``max_tokens`` is always sent (the API requires it): the request's
  fitted value, else the model's output cap.
- Extended thinking (``thinking_budget``) is sent as ``thinking={"type": "enabled",
  "budget_tokens": B}`` with ``1024 <= B < max_tokens``, as the API requires
  (https://docs.claude.com/en/docs/build-with-claude/extended-thinking): B follows a
  shrunk ``max_tokens`` down, and thinking is left out of a request whose
  ``max_tokens`` is too small to hold the 1024-token minimum.
- Prompt caching (on by default) marks the stable prefixes with ``cache_control``
  (:mod:`._cache_control`) on *copies* of the request's messages; the caller's
  transcript is never mutated.
- The assistant message comes back as ``{"role": "assistant", "content": [...]}`` with
  every block verbatim, thinking signatures and redacted thinking included, so it can
  be appended to the transcript and sent back as the API requires.
- Usage: ``input_tokens`` is the whole prompt — Anthropic's ``input_tokens`` plus
  ``cache_creation_input_tokens`` plus ``cache_read_input_tokens`` — with the cache
  writes and reads also reported on their own.
- Every SDK failure is an ``anthropic.APIError``, classified at one place
  (:func:`_sdk_errors`); the SDK's own retries are off by default (``max_retries=0``).
- An answer is used only when it is whole. A success status whose body does not parse
  or has the wrong shape (``content: null`` ...), or a message (streamed or not)
  without a ``stop_reason`` — a stream closed before its ``message_delta``, its text or
  tool input cut short — is a ``MALFORMED_RESPONSE`` ProviderError, transient: the loop
  retries it and never runs a tool call from it. The body is read apart from the send
  (the SDK's raw response), so a bad argument still raises at once, unclassified.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    pass

try:
    import anthropic
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "windowguard.run.providers.anthropic needs the anthropic SDK: "
        'pip install "windowguard[anthropic]"'
    ) from exc

from ...accounting.catalog import ModelInfo
from ...accounting.remote import RemoteCounter
from ...core.exceptions import ConfigurationError, ProviderError
from ...core.failures import classify_failure
from ...core.shapes import Format
from ._cache_control import place_breakpoints
from ._common import (
    DEFAULT_DISCOVERY_TIMEOUT,
    OwnsAsyncClient,
    OwnsClient,
    SdkProvider,
    count_field,
    field,
    incomplete,
    is_default_host,
    is_object,
    malformed,
    reading,
)
from .base import ModelRequest, ModelResponse, StreamDelta, ToolCall, ToolResult, Usage

__all__ = ["MIN_THINKING_BUDGET", "AnthropicProvider", "AsyncAnthropicProvider"]

_DEFAULT_HOST: Final = "api.anthropic.com"
MIN_THINKING_BUDGET: Final = 1024
"""The smallest ``thinking.budget_tokens`` the Messages API accepts."""
_DEFAULT_MAX_TOKENS: Final = 4096
_RESERVED: Final = frozenset({"model", "messages", "system", "tools", "max_tokens", "stream"})


@contextlib.contextmanager
def _sdk_errors() -> Iterator[None]:
    """The one place SDK failures become classified ProviderErrors."""
    try:
        yield
    except anthropic.APIError as exc:
        raise ProviderError(classify_failure(exc)) from exc


def thinking_budget_for(budget: int | None, max_tokens: int) -> int | None:
    """The thinking budget to send with ``max_tokens``, or None to send no thinking.

    Args:
        budget: the configured ``budget_tokens`` (None: thinking off).
        max_tokens: the (possibly shrunk) reply budget of this request.

    Returns:
        ``min(budget, max_tokens - 1)`` when that is at least
        :data:`MIN_THINKING_BUDGET`, else None.
    """
    if budget is None:
        return None
    fitted = min(budget, max_tokens - 1)
    return fitted if fitted >= MIN_THINKING_BUDGET else None


class _AnthropicBase(SdkProvider):
    """What the sync and async providers share: configuration, request, answer."""

    _client: Any

    def __init__(
        self,
        model: str,
        *,
        client: Any,
        api_key: str | None,
        model_info: ModelInfo | None,
        discover: bool | None,
        discovery_timeout: float,
        prompt_caching: bool,
        thinking_budget: int | None,
        extra_body: Mapping[str, Any] | None,
        params: Mapping[str, Any] | None,
    ) -> None:
        self._init_sdk(
            model,
            client,
            default_host=_DEFAULT_HOST,
            vendor="anthropic",
            api_key=api_key,
            model_info=model_info,
            discover=discover,
            discovery_timeout=discovery_timeout,
        )
        reserved = sorted(_RESERVED.intersection(params or {}))
        if reserved:
            raise ConfigurationError(
                f"params may not set {', '.join(reserved)}: the provider sets them from the request"
            )
        if "thinking" in (params or {}):
            raise ConfigurationError(
                "set extended thinking with thinking_budget=, not params['thinking']: the "
                "provider keeps the budget below each request's max_tokens"
            )
        if thinking_budget is not None and (
            isinstance(thinking_budget, bool)
            or not isinstance(thinking_budget, int)
            or thinking_budget < MIN_THINKING_BUDGET
        ):
            raise ConfigurationError(
                f"thinking_budget must be an int >= {MIN_THINKING_BUDGET} (the API's "
                f"minimum), got {thinking_budget!r}"
            )
        self._prompt_caching = bool(prompt_caching)
        self._thinking_budget = thinking_budget
        self._params = dict(params or {})
        self._extra_body = dict(extra_body) if extra_body is not None else None

    @property
    def format(self) -> Format:
        """The wire format of the messages this provider takes: ``"anthropic"``."""
        return "anthropic"

    def tool_result_messages(self, results: Sequence[ToolResult]) -> list[dict[str, Any]]:
        """One user message carrying a ``tool_result`` block per result, in order.

        Anthropic wants every result of a turn in the one user message that follows the
        assistant's ``tool_use`` blocks.
        """
        if not results:
            return []
        blocks = [
            {
                "type": "tool_result",
                "tool_use_id": result.call_id,
                "content": result.content,
                "is_error": result.is_error,
            }
            for result in results
        ]
        return [{"role": "user", "content": blocks}]

    def user_message(self, text: str) -> dict[str, Any]:
        """A plain user message."""
        return {"role": "user", "content": text}

    def _max_tokens(self, request: ModelRequest) -> int:
        if request.max_tokens is not None:
            return request.max_tokens
        info = self.model_info()
        return info.max_output_tokens or min(_DEFAULT_MAX_TOKENS, info.context_window)

    def _create_kwargs(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        max_tokens = self._max_tokens(request)
        kwargs: dict[str, Any] = dict(self._params)
        kwargs["model"] = self._model
        kwargs["max_tokens"] = max_tokens
        tools = [
            {
                "name": spec.name,
                "description": spec.description,
                "input_schema": dict(spec.parameters),
            }
            for spec in request.tools
        ]
        system = request.system
        messages: list[object] = list(request.messages)
        if self._prompt_caching:
            system, messages = place_breakpoints(system, messages, tools)
        kwargs["messages"] = messages
        if system is not None and system != "":
            kwargs["system"] = system
        if tools:
            kwargs["tools"] = tools
            if request.tool_choice is not None:
                kwargs["tool_choice"] = {"type": request.tool_choice}
        budget = thinking_budget_for(self._thinking_budget, max_tokens)
        if budget is not None:
            kwargs["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if stream:
            kwargs["stream"] = True
        if self._extra_body is not None:
            kwargs["extra_body"] = self._extra_body
        return kwargs


def _client_options(
    base_url: str | None, api_key: str | None, timeout: float | None, max_retries: int
) -> dict[str, Any]:
    options: dict[str, Any] = {"timeout": timeout, "max_retries": max_retries}
    if base_url is not None:
        options["base_url"] = base_url
        if api_key is None and not is_default_host(base_url, _DEFAULT_HOST):
            # A local or proxy endpoint may need no key; the SDK refuses to send without.
            api_key = os.environ.get("ANTHROPIC_API_KEY") or "unused"
    if api_key is not None:
        options["api_key"] = api_key
    return options


def _check_retries(max_retries: int) -> None:
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ConfigurationError(f"max_retries must be an int >= 0, got {max_retries!r}")


class AnthropicProvider(OwnsClient, _AnthropicBase):
    """A synchronous provider over ``anthropic.Anthropic``.

    Example::

        provider = AnthropicProvider("claude-sonnet-4-5", thinking_budget=4096)

    Args:
        model: the model name sent with every request.
        client: an ``anthropic.Anthropic`` client to use; its ``max_retries`` is
            replaced by ``max_retries``. When None, one is built from ``base_url``,
            ``api_key`` and ``timeout``.
        base_url: the endpoint without ``/v1`` (``http://127.0.0.1:8080``); None: the
            SDK's default. A non-default endpoint without a key gets
            ``ANTHROPIC_API_KEY`` or ``"unused"``.
        api_key: the key; None: the SDK reads ``ANTHROPIC_API_KEY``.
        model_info: explicit limits; they win over every other source.
        discover: ask the endpoint's Models API for the limits; None: only for
            endpoints other than api.anthropic.com.
        discovery_timeout: seconds for the whole discovery.
        timeout: the SDK's request timeout in seconds.
        max_retries: the SDK's own retries; 0 leaves retries to the tool loop.
        prompt_caching: place ``cache_control`` breakpoints on the stable prefixes.
        thinking_budget: extended thinking's ``budget_tokens`` (>= 1024), kept below
            each request's ``max_tokens``; None: no thinking.
        extra_body: extra JSON fields for every request.
        params: extra ``messages.create`` arguments (``temperature``, ``tool_choice``,
            ``metadata`` ...); not the ones set from the request.

    Raises:
        ConfigurationError: an empty model, a reserved key in ``params``, a thinking
            budget below 1024, or a bad ``max_retries``.
    """

    def __init__(
        self,
        model: str,
        *,
        client: anthropic.Anthropic | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        model_info: ModelInfo | None = None,
        discover: bool | None = None,
        discovery_timeout: float = DEFAULT_DISCOVERY_TIMEOUT,
        timeout: float | None = 600.0,
        max_retries: int = 0,
        prompt_caching: bool = True,
        thinking_budget: int | None = None,
        extra_body: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        _check_retries(max_retries)
        if client is None:
            client = anthropic.Anthropic(**_client_options(base_url, api_key, timeout, max_retries))
            self._owns_client = True
        else:
            client = client.with_options(max_retries=max_retries)
            self._owns_client = False
        self._client = client
        super().__init__(
            model,
            client=client,
            api_key=api_key,
            model_info=model_info,
            discover=discover,
            discovery_timeout=discovery_timeout,
            prompt_caching=prompt_caching,
            thinking_budget=thinking_budget,
            extra_body=extra_body,
            params=params,
        )

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` and return the model's answer.

        Raises:
            ProviderError: the SDK failed (status error, timeout, connection); its
                ``failure`` is the classification.
        """
        kwargs = self._create_kwargs(request, stream=False)
        with _sdk_errors():
            raw = self._client.messages.with_raw_response.create(**kwargs)
        with reading(anthropic.APIError, status=raw.status_code):
            return _to_response(raw.parse(), raw.status_code)

    def stream(self, request: ModelRequest) -> Iterator[StreamDelta | ModelResponse]:
        """Send ``request`` streamed: text deltas as they arrive, then one ModelResponse.

        Raises:
            ProviderError: the SDK failed before or during the stream, or the stream
                was not a whole answer (``MALFORMED_RESPONSE``; its deltas were
                already yielded, its response never is).
        """
        kwargs = self._create_kwargs(request, stream=True)
        with _sdk_errors():
            raw = self._client.messages.with_raw_response.create(**kwargs)
        assembler = _StreamAssembler(raw.status_code)
        with reading(anthropic.APIError, status=raw.status_code):
            with raw.parse() as events:
                for event in events:
                    text = assembler.add(event)
                    if text:
                        yield StreamDelta(text=text)
            response = assembler.response()
        yield response


class AsyncAnthropicProvider(OwnsAsyncClient, _AnthropicBase):
    """The asynchronous twin of :class:`AnthropicProvider` over ``anthropic.AsyncAnthropic``.

    Takes the same arguments (``client`` is an ``anthropic.AsyncAnthropic``).
    :meth:`amodel_info` resolves the limits without blocking the event loop.
    """

    def __init__(
        self,
        model: str,
        *,
        client: anthropic.AsyncAnthropic | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        model_info: ModelInfo | None = None,
        discover: bool | None = None,
        discovery_timeout: float = DEFAULT_DISCOVERY_TIMEOUT,
        timeout: float | None = 600.0,
        max_retries: int = 0,
        prompt_caching: bool = True,
        thinking_budget: int | None = None,
        extra_body: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        _check_retries(max_retries)
        if client is None:
            client = anthropic.AsyncAnthropic(
                **_client_options(base_url, api_key, timeout, max_retries)
            )
            self._owns_client = True
        else:
            client = client.with_options(max_retries=max_retries)
            self._owns_client = False
        self._client = client
        super().__init__(
            model,
            client=client,
            api_key=api_key,
            model_info=model_info,
            discover=discover,
            discovery_timeout=discovery_timeout,
            prompt_caching=prompt_caching,
            thinking_budget=thinking_budget,
            extra_body=extra_body,
            params=params,
        )

    async def amodel_info(self) -> ModelInfo:
        """:meth:`model_info` without blocking the event loop during discovery."""
        return await self._info.aget()

    async def acount_endpoint(self) -> RemoteCounter | None:
        """:meth:`count_endpoint` without blocking the event loop while probing."""
        await self._info.aget()  # the family picks the template text-only APIs need
        return await self._counter.aget()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` and return the model's answer.

        Raises:
            ProviderError: the SDK failed; its ``failure`` is the classification.
        """
        if request.max_tokens is None:
            await self.amodel_info()  # resolve limits off the event loop first
        kwargs = self._create_kwargs(request, stream=False)
        with _sdk_errors():
            raw = await self._client.messages.with_raw_response.create(**kwargs)
        with reading(anthropic.APIError, status=raw.status_code):
            return _to_response(await raw.parse(), raw.status_code)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | ModelResponse]:
        """Send ``request`` streamed: text deltas as they arrive, then one ModelResponse.

        Raises:
            ProviderError: the SDK failed before or during the stream, or the stream
                was not a whole answer (``MALFORMED_RESPONSE``).
        """
        if request.max_tokens is None:
            await self.amodel_info()
        kwargs = self._create_kwargs(request, stream=True)
        with _sdk_errors():
            raw = await self._client.messages.with_raw_response.create(**kwargs)
        assembler = _StreamAssembler(raw.status_code)
        with reading(anthropic.APIError, status=raw.status_code):
            async with await raw.parse() as events:
                async for event in events:
                    text = assembler.add(event)
                    if text:
                        yield StreamDelta(text=text)
            response = assembler.response()
        yield response


# --------------------------------------------------------------------------- answers


def _usage(
    input_tokens: int | None,
    output_tokens: int | None,
    cache_write: int | None,
    cache_read: int | None,
) -> Usage:
    write, read = int(cache_write or 0), int(cache_read or 0)
    total = None if input_tokens is None else input_tokens + write + read
    return Usage(
        input_tokens=total,
        output_tokens=output_tokens,
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def _counts(usage: object, status: int | None) -> dict[str, int | None]:
    """The token counts of a ``usage`` object (absent counts are None).

    Raises:
        ProviderError: ``MALFORMED_RESPONSE`` for usage that is not an object of counts.
    """
    if usage is None:
        return {}
    if not is_object(usage):
        raise malformed(f"usage is {usage!r}, not an object", status=status)
    return {name: count_field(usage, name, "usage", status=status) for name in _COUNTS}


def _block_dict(block: Any, status: int | None) -> dict[str, Any]:
    """A content block as a JSON dict, verbatim.

    Raises:
        ProviderError: ``MALFORMED_RESPONSE`` for a block that is not a typed object.
    """
    dump = getattr(block, "model_dump", None)
    dumped = dump(mode="json", exclude_none=True) if callable(dump) else block
    if not isinstance(dumped, dict) or not isinstance(dumped.get("type"), str):
        raise malformed(f"the content block {block!r} is not a typed object", status=status)
    return dict(dumped)


def _read_blocks(blocks: Sequence[Mapping[str, Any]]) -> tuple[str, tuple[ToolCall, ...]]:
    text = "".join(str(block.get("text", "")) for block in blocks if block.get("type") == "text")
    calls = tuple(
        ToolCall(
            id=str(block.get("id", "")),
            name=str(block.get("name", "")),
            arguments=json.dumps(block.get("input", {}), ensure_ascii=False),
        )
        for block in blocks
        if block.get("type") == "tool_use"
    )
    return text, calls


def _to_response(message: Any, status: int | None) -> ModelResponse:
    """The answer of a whole message.

    Raises:
        ProviderError: ``MALFORMED_RESPONSE`` when ``message`` is not one (the SDK hands
            back text for a body that is not JSON, and builds its models from any JSON
            without checking it), or has no ``stop_reason``.
    """
    if not is_object(message):
        shown = message if not isinstance(message, str) else message[:80]
        raise malformed(f"the body is {shown!r}, not a message", status=status)
    content = field(message, "content")
    if not isinstance(content, list):
        raise malformed(f"the message's content is {content!r}, not a list", status=status)
    blocks = [_block_dict(block, status) for block in content]
    text, calls = _read_blocks(blocks)
    counts = _counts(field(message, "usage"), status)
    stop_reason = field(message, "stop_reason")
    if not isinstance(stop_reason, str) or not stop_reason:
        raise incomplete("the message has no stop_reason", status=status)
    return ModelResponse(
        message={"role": "assistant", "content": blocks},
        text=text,
        tool_calls=calls,
        usage=_usage(*(counts.get(name) for name in _COUNTS)),
        stop_reason=stop_reason,
    )


class _StreamAssembler:
    """Builds the final ModelResponse from the Messages streaming events.

    Event order (https://docs.claude.com/en/docs/build-with-claude/streaming):
    ``message_start`` (input usage), per block ``content_block_start`` /
    ``content_block_delta`` / ``content_block_stop``, ``message_delta`` (stop reason,
    output usage, and on newer servers the final input and cache counts),
    ``message_stop``. An event that is not one raises ``MALFORMED_RESPONSE`` at once;
    a stream that ends before the ``message_delta`` carrying the stop reason raises it
    from :meth:`response`.
    """

    def __init__(self, status: int | None = None) -> None:
        self._status = status
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self._raw_arguments: dict[int, str] = {}
        self._counts: dict[str, int | None] = {}
        self._stop_reason: str | None = None
        self._events = 0

    def _bad(self, what: str, value: object) -> ProviderError:
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:80] + "..."
        return malformed(f"stream event {self._events} has {what} {shown}", status=self._status)

    def _take_usage(self, usage: object) -> None:
        for name, value in _counts(usage, self._status).items():
            if value is not None:
                self._counts[name] = value

    def _index(self, event: object) -> int:
        index = field(event, "index")
        if isinstance(index, bool) or not isinstance(index, int):
            raise self._bad("the block index", index)
        return index

    def add(self, event: Any) -> str:
        """Take one event; return its new reply text ("" when none)."""
        self._events += 1
        kind = field(event, "type") if is_object(event) else None
        if not isinstance(kind, str):
            raise self._bad("no type: it is", event)
        if kind == "message_start":
            message = field(event, "message")
            if not is_object(message):
                raise self._bad("the message", message)
            self._take_usage(field(message, "usage"))
        elif kind == "content_block_start":
            self._blocks[self._index(event)] = _block_dict(
                field(event, "content_block"), self._status
            )
        elif kind == "content_block_delta":
            return self._delta(self._index(event), field(event, "delta"))
        elif kind == "content_block_stop":
            self._close(self._index(event))
        elif kind == "message_delta":
            delta = field(event, "delta")
            if not is_object(delta):
                raise self._bad("the delta", delta)
            stop_reason = field(delta, "stop_reason")
            if isinstance(stop_reason, str) and stop_reason:
                self._stop_reason = stop_reason
            self._take_usage(field(event, "usage"))
        return ""

    def _delta(self, index: int, delta: Any) -> str:
        kind = field(delta, "type") if is_object(delta) else None
        if not isinstance(kind, str):
            raise self._bad("the delta", delta)
        block = self._blocks.setdefault(index, {"type": "text", "text": ""})
        if kind == "text_delta":
            text = str(field(delta, "text") or "")
            block["text"] = block.get("text", "") + text
            return text
        if kind == "input_json_delta":
            self._json.setdefault(index, []).append(str(field(delta, "partial_json") or ""))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + str(field(delta, "thinking") or "")
        elif kind == "signature_delta":
            block["signature"] = field(delta, "signature")
        elif kind == "citations_delta":
            citation = _block_dict(field(delta, "citation"), self._status)
            block.setdefault("citations", []).append(citation)
        return ""

    def _close(self, index: int) -> None:
        pieces = self._json.pop(index, None)
        if pieces is None or index not in self._blocks:
            return
        raw = "".join(pieces)
        try:
            value = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            self._blocks[index]["input"] = value
        else:  # keep what the model produced; the loop reports it as invalid arguments
            self._raw_arguments[index] = raw

    def response(self) -> ModelResponse:
        """The assembled answer (call once the stream has ended).

        Raises:
            ProviderError: ``MALFORMED_RESPONSE`` when the stream ended before its stop
                reason: its text may be cut short and its tool input cut off, so none of
                it is used.
        """
        if self._stop_reason is None:
            chars = sum(len(b.get("text", "")) for b in self._blocks.values())
            tools = sum(1 for b in self._blocks.values() if b.get("type") == "tool_use")
            raise incomplete(
                f"the stream ended without a stop_reason after {self._events} event(s), "
                f"{chars} characters of text and {tools} tool call(s)",
                status=self._status,
            )
        for index in list(self._json):
            self._close(index)
        ordered = [self._blocks[index] for index in sorted(self._blocks)]
        text, calls = _read_blocks(ordered)
        raw = [self._raw_arguments.get(index) for index in sorted(self._blocks)]
        tool_raw = [
            value
            for value, block in zip(raw, ordered, strict=True)
            if block.get("type") == "tool_use"
        ]
        calls = tuple(
            ToolCall(id=call.id, name=call.name, arguments=value) if value is not None else call
            for call, value in zip(calls, tool_raw, strict=True)
        )
        counts = self._counts
        return ModelResponse(
            message={"role": "assistant", "content": ordered},
            text=text,
            tool_calls=calls,
            usage=_usage(*(counts.get(name) for name in _COUNTS)),
            stop_reason=self._stop_reason,
        )
