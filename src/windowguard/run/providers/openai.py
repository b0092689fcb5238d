"""OpenAI Chat Completions providers on the official ``openai`` SDK.

:class:`OpenAIChatProvider` and :class:`AsyncOpenAIChatProvider` talk to any
OpenAI-compatible ``/v1/chat/completions`` endpoint — OpenAI, Azure, vLLM, SGLang,
llama.cpp, Ollama, OpenRouter, Groq, DeepSeek — through ``openai.OpenAI`` /
``openai.AsyncOpenAI``. Both sit on one private base that builds the request and reads
the answer; the two classes differ only in how they wait.

Invariants:

- The request's messages are sent as given (never mutated); tool specs go out in the
  ``function`` tool format; the fitted reply budget goes out as ``max_tokens``, or as
  ``max_completion_tokens`` for OpenAI's reasoning models (o1/o3/o4, gpt-5), which
  reject ``max_tokens`` (https://platform.openai.com/docs/guides/reasoning).
- The assistant message comes back as a JSON-ready chat dict from the SDK's own
  model (``model_dump(exclude_none=True)``), extra fields such as vLLM's and DeepSeek's
  ``reasoning_content`` kept verbatim, so it can be appended to the transcript as is.
- Usage: ``prompt_tokens`` is the input count; ``prompt_tokens_details.cached_tokens``
  (DeepSeek: ``prompt_cache_hit_tokens``) the cache reads. Streams ask for
  ``stream_options.include_usage`` and take the usage from the last chunk.
- Every SDK failure is an ``openai.APIError``; it is classified at one place
  (:func:`_sdk_errors`) into a :class:`~windowguard.core.exceptions.ProviderError`.
- An answer is used only when it is whole. A success status whose body does not parse
  or has the wrong shape, or a completion (streamed or not) without a
  ``finish_reason`` — a stream closed early, its text or tool arguments cut short — is
  a ``MALFORMED_RESPONSE`` ProviderError, transient like a dropped connection: the
  loop retries it and never runs a tool call from it. The body is read apart from the
  send (the SDK's raw response), so a bad argument still raises at once, unclassified.
- The SDK's own retries are off by default (``max_retries=0``): the tool loop's retry
  policy owns retries, so a 429 is not retried twice over.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    pass

try:
    import openai
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'windowguard.run.providers.openai needs the openai SDK: pip install "windowguard[openai]"'
    ) from exc

from ...accounting.catalog import ModelInfo
from ...accounting.remote import RemoteCounter
from ...core.exceptions import ConfigurationError, ProviderError
from ...core.failures import classify_failure
from ...core.shapes import Format
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

__all__ = ["AsyncOpenAIChatProvider", "OpenAIChatProvider", "uses_max_completion_tokens"]

_DEFAULT_HOST: Final = "api.openai.com"
_REASONING_MODEL: Final = re.compile(r"^(?:o\d+|gpt-5)(?:$|[-.:_])")
_RESERVED: Final = frozenset(
    {
        "model",
        "messages",
        "tools",
        "max_tokens",
        "max_completion_tokens",
        "stream",
        "stream_options",
    }
)
# Response-only fields of the SDK's message model that a request must not echo back.
_RESPONSE_ONLY: Final = ("annotations",)
# Fields servers add to a delta for the model's reasoning (vLLM, DeepSeek, OpenRouter).
_REASONING_FIELDS: Final = ("reasoning_content", "reasoning")


def uses_max_completion_tokens(model: str) -> bool:
    """Whether ``model`` is an OpenAI reasoning model that takes ``max_completion_tokens``.

    Args:
        model: the model name; a routing prefix (``openai/o3-mini``) is ignored.

    Returns:
        True for the o1/o3/o4 and gpt-5 families.
    """
    name = model.rsplit("/", 1)[-1].lower()
    return _REASONING_MODEL.match(name) is not None


@contextlib.contextmanager
def _sdk_errors() -> Iterator[None]:
    """The one place SDK failures become classified ProviderErrors."""
    try:
        yield
    except openai.APIError as exc:
        raise ProviderError(classify_failure(exc)) from exc


class _OpenAIChatBase(SdkProvider):
    """What the sync and async providers share: configuration, request, answer."""

    _client: Any

    def __init__(
        self,
        model: str,
        *,
        client: Any,
        base_url: str | None,
        api_key: str | None,
        model_info: ModelInfo | None,
        discover: bool | None,
        discovery_timeout: float,
        extra_body: Mapping[str, Any] | None,
        params: Mapping[str, Any] | None,
        max_tokens_param: str | None,
    ) -> None:
        self._init_sdk(
            model,
            client,
            default_host=_DEFAULT_HOST,
            vendor="openai",
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
        if max_tokens_param not in (None, "max_tokens", "max_completion_tokens"):
            raise ConfigurationError(
                "max_tokens_param must be 'max_tokens', 'max_completion_tokens' or None, "
                f"got {max_tokens_param!r}"
            )
        self._params = dict(params or {})
        self._extra_body = dict(extra_body) if extra_body is not None else None
        if max_tokens_param is None:
            max_tokens_param = (
                "max_completion_tokens" if uses_max_completion_tokens(model) else "max_tokens"
            )
        self._max_tokens_param = max_tokens_param

    @property
    def format(self) -> Format:
        """The wire format of the messages this provider takes: ``"openai_chat"``."""
        return "openai_chat"

    def tool_result_messages(self, results: Sequence[ToolResult]) -> list[dict[str, Any]]:
        """One ``{"role": "tool"}`` message per result, in order.

        Chat Completions has no error flag on a tool message; the content says it.
        """
        return [
            {"role": "tool", "tool_call_id": result.call_id, "content": result.content}
            for result in results
        ]

    def user_message(self, text: str) -> dict[str, Any]:
        """A plain user message."""
        return {"role": "user", "content": text}

    def _create_kwargs(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        kwargs: dict[str, Any] = dict(self._params)
        kwargs["model"] = self._model
        kwargs["messages"] = list(request.messages)
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": spec.name,
                        "description": spec.description,
                        "parameters": dict(spec.parameters),
                    },
                }
                for spec in request.tools
            ]
            if request.tool_choice is not None:
                kwargs["tool_choice"] = request.tool_choice
        if request.max_tokens is not None:
            kwargs[self._max_tokens_param] = request.max_tokens
        if stream:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
        if self._extra_body is not None:
            kwargs["extra_body"] = self._extra_body
        return kwargs


def _client_options(
    base_url: str | None, api_key: str | None, timeout: float | None, max_retries: int
) -> dict[str, Any]:
    options: dict[str, Any] = {"timeout": timeout, "max_retries": max_retries}
    if base_url is not None:
        options["base_url"] = base_url
    if api_key is None and base_url is not None and not is_default_host(base_url, _DEFAULT_HOST):
        # Local servers (vLLM, llama.cpp, Ollama) take any key; the SDK insists on one.
        api_key = os.environ.get("OPENAI_API_KEY") or "unused"
    options["api_key"] = api_key
    return options


def _check_retries(max_retries: int) -> None:
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ConfigurationError(f"max_retries must be an int >= 0, got {max_retries!r}")


class OpenAIChatProvider(OwnsClient, _OpenAIChatBase):
    """A synchronous provider over ``openai.OpenAI`` (any OpenAI-compatible endpoint).

    Example::

        provider = OpenAIChatProvider("Qwen/Qwen3-8B", base_url="http://localhost:8000/v1")
        provider.model_info().context_window   # what vLLM was started with

    Args:
        model: the model name sent with every request.
        client: an ``openai.OpenAI`` (or ``AzureOpenAI``) client to use; its
            ``max_retries`` is replaced by ``max_retries`` (via ``with_options``).
            When None, one is built from ``base_url``, ``api_key`` and ``timeout``.
        base_url: the endpoint (``http://localhost:8000/v1``); None: the SDK's default.
            A non-default endpoint without a key gets ``OPENAI_API_KEY`` or ``"unused"``.
        api_key: the key; None: the SDK reads ``OPENAI_API_KEY``.
        model_info: explicit limits; they win over every other source.
        discover: ask the endpoint for the served window; None: only for endpoints
            other than api.openai.com.
        discovery_timeout: seconds for the whole discovery.
        timeout: the SDK's request timeout in seconds.
        max_retries: the SDK's own retries; 0 leaves retries to the tool loop.
        extra_body: extra JSON fields for every request (vLLM's ``top_k`` ...).
        params: extra ``chat.completions.create`` arguments (``temperature``,
            ``tool_choice``, ``reasoning_effort`` ...); not the ones set from the request.
        max_tokens_param: ``"max_tokens"`` or ``"max_completion_tokens"``; None picks
            by model name (reasoning models take ``max_completion_tokens``).

    Raises:
        ConfigurationError: an empty model, a reserved key in ``params``, a bad
            ``max_tokens_param`` or ``max_retries``, or an SDK client that cannot be
            built (no API key).
    """

    def __init__(
        self,
        model: str,
        *,
        client: openai.OpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        model_info: ModelInfo | None = None,
        discover: bool | None = None,
        discovery_timeout: float = DEFAULT_DISCOVERY_TIMEOUT,
        timeout: float | None = 600.0,
        max_retries: int = 0,
        extra_body: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
        max_tokens_param: str | None = None,
    ) -> None:
        _check_retries(max_retries)
        if client is None:
            try:
                client = openai.OpenAI(**_client_options(base_url, api_key, timeout, max_retries))
            except openai.OpenAIError as exc:
                raise ConfigurationError(f"cannot build the OpenAI client: {exc}") from exc
            self._owns_client = True
        else:
            client = client.with_options(max_retries=max_retries)
            self._owns_client = False
        self._client = client
        super().__init__(
            model,
            client=client,
            base_url=base_url,
            api_key=api_key,
            model_info=model_info,
            discover=discover,
            discovery_timeout=discovery_timeout,
            extra_body=extra_body,
            params=params,
            max_tokens_param=max_tokens_param,
        )

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` and return the model's answer.

        Raises:
            ProviderError: the SDK failed (status error, timeout, connection); its
                ``failure`` is the classification.
        """
        kwargs = self._create_kwargs(request, stream=False)
        with _sdk_errors():
            raw = self._client.chat.completions.with_raw_response.create(**kwargs)
        with reading(openai.APIError, status=raw.status_code):
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
            raw = self._client.chat.completions.with_raw_response.create(**kwargs)
        assembler = _StreamAssembler(raw.status_code)
        with reading(openai.APIError, status=raw.status_code):
            with raw.parse() as chunks:
                for chunk in chunks:
                    text = assembler.add(chunk)
                    if text:
                        yield StreamDelta(text=text)
            response = assembler.response()
        yield response


class AsyncOpenAIChatProvider(OwnsAsyncClient, _OpenAIChatBase):
    """The asynchronous twin of :class:`OpenAIChatProvider` over ``openai.AsyncOpenAI``.

    Takes the same arguments (``client`` is an ``openai.AsyncOpenAI``).
    :meth:`amodel_info` resolves the limits without blocking the event loop.
    """

    def __init__(
        self,
        model: str,
        *,
        client: openai.AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        model_info: ModelInfo | None = None,
        discover: bool | None = None,
        discovery_timeout: float = DEFAULT_DISCOVERY_TIMEOUT,
        timeout: float | None = 600.0,
        max_retries: int = 0,
        extra_body: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
        max_tokens_param: str | None = None,
    ) -> None:
        _check_retries(max_retries)
        if client is None:
            try:
                client = openai.AsyncOpenAI(
                    **_client_options(base_url, api_key, timeout, max_retries)
                )
            except openai.OpenAIError as exc:
                raise ConfigurationError(f"cannot build the OpenAI client: {exc}") from exc
            self._owns_client = True
        else:
            client = client.with_options(max_retries=max_retries)
            self._owns_client = False
        self._client = client
        super().__init__(
            model,
            client=client,
            base_url=base_url,
            api_key=api_key,
            model_info=model_info,
            discover=discover,
            discovery_timeout=discovery_timeout,
            extra_body=extra_body,
            params=params,
            max_tokens_param=max_tokens_param,
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
        kwargs = self._create_kwargs(request, stream=False)
        with _sdk_errors():
            raw = await self._client.chat.completions.with_raw_response.create(**kwargs)
        with reading(openai.APIError, status=raw.status_code):
            return _to_response(raw.parse(), raw.status_code)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | ModelResponse]:
        """Send ``request`` streamed: text deltas as they arrive, then one ModelResponse.

        Raises:
            ProviderError: the SDK failed before or during the stream, or the stream
                was not a whole answer (``MALFORMED_RESPONSE``).
        """
        kwargs = self._create_kwargs(request, stream=True)
        with _sdk_errors():
            raw = await self._client.chat.completions.with_raw_response.create(**kwargs)
        assembler = _StreamAssembler(raw.status_code)
        with reading(openai.APIError, status=raw.status_code):
            async with raw.parse() as chunks:
                async for chunk in chunks:
                    text = assembler.add(chunk)
                    if text:
                        yield StreamDelta(text=text)
            response = assembler.response()
        yield response


# --------------------------------------------------------------------------- answers


def _usage(usage: Any, status: int | None) -> Usage | None:
    """The usage an answer reports; None when it reports none.

    Raises:
        ProviderError: ``MALFORMED_RESPONSE`` for usage that is not an object of counts.
    """
    if usage is None:
        return None
    if not is_object(usage):
        raise malformed(f"usage is {usage!r}, not an object", status=status)
    details = field(usage, "prompt_tokens_details")
    cached = count_field(details, "cached_tokens", "usage.prompt_tokens_details", status=status)
    if cached is None:  # DeepSeek reports cache hits beside the prompt count
        extra = field(usage, "model_extra") or {}
        cached = count_field(extra, "prompt_cache_hit_tokens", "usage", status=status)
    return Usage(
        input_tokens=count_field(usage, "prompt_tokens", "usage", status=status),
        output_tokens=count_field(usage, "completion_tokens", "usage", status=status),
        cache_read_tokens=cached or 0,
    )


def _tool_calls(raw_calls: Sequence[Mapping[str, Any]]) -> tuple[ToolCall, ...]:
    calls: list[ToolCall] = []
    for raw in raw_calls:
        function = raw.get("function") or raw.get("custom") or {}
        arguments = function.get("arguments", function.get("input", ""))
        calls.append(
            ToolCall(
                id=str(raw.get("id", "")),
                name=str(function.get("name", "")),
                arguments=arguments if isinstance(arguments, str) else str(arguments),
            )
        )
    return tuple(calls)


def _to_response(completion: Any, status: int | None) -> ModelResponse:
    """The answer of a whole completion.

    Raises:
        ProviderError: ``MALFORMED_RESPONSE`` when ``completion`` is not one (the SDK
            hands back text for a body that is not JSON, and builds its models from any
            JSON without checking it), or has no ``finish_reason``.
    """
    if not is_object(completion):
        shown = completion if not isinstance(completion, str) else completion[:80]
        raise malformed(f"the body is {shown!r}, not a chat completion", status=status)
    choices = field(completion, "choices")
    if not isinstance(choices, list) or not choices:
        raise malformed(f"the completion has no choices (choices: {choices!r})", status=status)
    choice = choices[0]
    raw_message = field(choice, "message")
    if not is_object(choice) or not is_object(raw_message):
        raise malformed(f"choices[0] holds no message ({choice!r})", status=status)
    dump = getattr(raw_message, "model_dump", None)
    message: dict[str, Any] = (
        dump(mode="json", exclude_none=True) if callable(dump) else dict(raw_message)  # type: ignore[call-overload]
    )
    for name in _RESPONSE_ONLY:
        message.pop(name, None)
    message.setdefault("role", "assistant")
    message.setdefault("content", None)
    content = message.get("content")
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list) or not all(isinstance(c, dict) for c in raw_calls):
        raise malformed(f"tool_calls is {raw_calls!r}, not a list of calls", status=status)
    usage = _usage(field(completion, "usage"), status)
    finish = field(choice, "finish_reason")
    if not isinstance(finish, str) or not finish:
        raise incomplete("the completion has no finish_reason", status=status)
    return ModelResponse(
        message=message,
        text=content if isinstance(content, str) else "",
        tool_calls=_tool_calls(raw_calls),
        usage=usage,
        stop_reason=finish,
    )


class _StreamAssembler:
    """Builds the final ModelResponse from ``chat.completion.chunk`` events.

    A chunk that is not one raises ``MALFORMED_RESPONSE`` at once; a stream that ends
    before choice 0's ``finish_reason`` raises it from :meth:`response`.
    """

    def __init__(self, status: int | None = None) -> None:
        self._status = status
        self._text: list[str] = []
        self._extra: dict[str, list[str]] = {}
        self._calls: dict[int, dict[str, Any]] = {}
        self._usage: Usage | None = None
        self._stop_reason: str | None = None
        self._chunks = 0

    def add(self, chunk: Any) -> str:
        """Take one chunk; return its new reply text ("" when none)."""
        self._chunks += 1
        choices = field(chunk, "choices") if is_object(chunk) else None
        if not isinstance(choices, list):
            raise malformed(
                f"stream chunk {self._chunks} is {_shown(chunk)}, not a completion chunk",
                status=self._status,
            )
        usage = _usage(field(chunk, "usage"), self._status)
        if usage is not None:
            self._usage = usage
        text = ""
        for choice in choices:
            if not is_object(choice):
                raise malformed(
                    f"stream chunk {self._chunks} holds the choice {choice!r}",
                    status=self._status,
                )
            if field(choice, "index") != 0:
                continue
            finish = field(choice, "finish_reason")
            if isinstance(finish, str) and finish:
                self._stop_reason = finish
            delta = field(choice, "delta")
            if delta is None:
                continue
            if not is_object(delta):
                raise malformed(
                    f"stream chunk {self._chunks} holds the delta {delta!r}", status=self._status
                )
            content = field(delta, "content")
            if isinstance(content, str):
                text += content
            extra = field(delta, "model_extra") or {}
            for name in _REASONING_FIELDS:
                piece = field(extra, name)
                if isinstance(piece, str) and piece:
                    self._extra.setdefault(name, []).append(piece)
            calls = field(delta, "tool_calls") or []
            if not isinstance(calls, list):
                raise malformed(
                    f"stream chunk {self._chunks} holds tool_calls {calls!r}", status=self._status
                )
            for call in calls:
                self._add_call(call)
        if text:
            self._text.append(text)
        return text

    def _add_call(self, call: Any) -> None:
        index = field(call, "index")
        if not is_object(call) or isinstance(index, bool) or not isinstance(index, int):
            raise malformed(
                f"stream chunk {self._chunks} holds the tool-call delta {call!r}",
                status=self._status,
            )
        slot = self._calls.setdefault(index, {"id": "", "name": "", "arguments": []})
        call_id = field(call, "id")
        if isinstance(call_id, str) and call_id and not slot["id"]:
            slot["id"] = call_id
        function = field(call, "function")
        if function is None:
            return
        name, arguments = field(function, "name"), field(function, "arguments")
        # Some servers repeat the whole name in every delta, others send it once.
        if isinstance(name, str) and name and name != slot["name"]:
            slot["name"] += name
        if isinstance(arguments, str) and arguments:
            slot["arguments"].append(arguments)

    def response(self) -> ModelResponse:
        """The assembled answer (call once the stream has ended).

        Raises:
            ProviderError: ``MALFORMED_RESPONSE`` when the stream ended before a
                finish reason: its text may be cut short and its tool arguments cut
                off, so none of it is used.
        """
        text = "".join(self._text)
        if self._stop_reason is None:
            raise incomplete(
                f"the stream ended without a finish_reason after {self._chunks} chunk(s), "
                f"{len(text)} characters of text and {len(self._calls)} tool call(s)",
                status=self._status,
            )
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        for name, pieces in self._extra.items():
            message[name] = "".join(pieces)
        raw_calls = [
            {
                "id": slot["id"],
                "type": "function",
                "function": {"name": slot["name"], "arguments": "".join(slot["arguments"])},
            }
            for _, slot in sorted(self._calls.items())
        ]
        if raw_calls:
            message["tool_calls"] = raw_calls
        return ModelResponse(
            message=message,
            text=text,
            tool_calls=_tool_calls(raw_calls),
            usage=self._usage,
            stop_reason=self._stop_reason,
        )


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."
