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
  (:func:`_sdk_errors`) into a :class:`~windowguard.exceptions.ProviderError`.
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
        'windowguard.providers.openai needs the openai SDK: pip install "windowguard[openai]"'
    ) from exc

from ..accounting.remote import RemoteCounter
from ..catalog import ModelInfo
from ..exceptions import ConfigurationError, ProviderError
from ..failures import Failure, FailureKind, classify_failure
from ..shapes import Format
from ._common import (
    DEFAULT_DISCOVERY_TIMEOUT,
    OwnsAsyncClient,
    OwnsClient,
    SdkProvider,
    is_default_host,
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
            completion = self._client.chat.completions.create(**kwargs)
        return _to_response(completion)

    def stream(self, request: ModelRequest) -> Iterator[StreamDelta | ModelResponse]:
        """Send ``request`` streamed: text deltas as they arrive, then one ModelResponse.

        Raises:
            ProviderError: the SDK failed before or during the stream.
        """
        kwargs = self._create_kwargs(request, stream=True)
        assembler = _StreamAssembler()
        with _sdk_errors():
            chunks = self._client.chat.completions.create(**kwargs)
            with chunks:
                for chunk in chunks:
                    text = assembler.add(chunk)
                    if text:
                        yield StreamDelta(text=text)
        yield assembler.response()


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
            completion = await self._client.chat.completions.create(**kwargs)
        return _to_response(completion)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | ModelResponse]:
        """Send ``request`` streamed: text deltas as they arrive, then one ModelResponse.

        Raises:
            ProviderError: the SDK failed before or during the stream.
        """
        kwargs = self._create_kwargs(request, stream=True)
        assembler = _StreamAssembler()
        with _sdk_errors():
            chunks = await self._client.chat.completions.create(**kwargs)
            async with chunks:
                async for chunk in chunks:
                    text = assembler.add(chunk)
                    if text:
                        yield StreamDelta(text=text)
        yield assembler.response()


# --------------------------------------------------------------------------- answers


def _no_answer(detail: str) -> ProviderError:
    return ProviderError(
        Failure(kind=FailureKind.UNKNOWN, retryable=False, message=f"no answer: {detail}")
    )


def _usage(usage: Any) -> Usage | None:
    if usage is None:
        return None
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    if cached is None:  # DeepSeek reports cache hits beside the prompt count
        extra = getattr(usage, "model_extra", None) or {}
        cached = extra.get("prompt_cache_hit_tokens")
    return Usage(
        input_tokens=getattr(usage, "prompt_tokens", None),
        output_tokens=getattr(usage, "completion_tokens", None),
        cache_read_tokens=int(cached or 0),
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


def _to_response(completion: Any) -> ModelResponse:
    choices = getattr(completion, "choices", None)
    if not choices:
        raise _no_answer("the completion has no choices")
    choice = choices[0]
    message: dict[str, Any] = choice.message.model_dump(mode="json", exclude_none=True)
    for name in _RESPONSE_ONLY:
        message.pop(name, None)
    message.setdefault("role", "assistant")
    message.setdefault("content", None)
    content = message.get("content")
    return ModelResponse(
        message=message,
        text=content if isinstance(content, str) else "",
        tool_calls=_tool_calls(message.get("tool_calls") or ()),
        usage=_usage(getattr(completion, "usage", None)),
        stop_reason=choice.finish_reason,
    )


class _StreamAssembler:
    """Builds the final ModelResponse from ``chat.completion.chunk`` events."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._extra: dict[str, list[str]] = {}
        self._calls: dict[int, dict[str, Any]] = {}
        self._usage: Usage | None = None
        self._stop_reason: str | None = None

    def add(self, chunk: Any) -> str:
        """Take one chunk; return its new reply text ("" when none)."""
        if getattr(chunk, "usage", None) is not None:
            self._usage = _usage(chunk.usage)
        text = ""
        for choice in getattr(chunk, "choices", None) or ():
            if choice.index != 0:
                continue
            if choice.finish_reason is not None:
                self._stop_reason = choice.finish_reason
            delta = choice.delta
            if delta is None:
                continue
            if delta.content:
                text += delta.content
            extra = delta.model_extra or {}
            for name in _REASONING_FIELDS:
                piece = extra.get(name)
                if isinstance(piece, str) and piece:
                    self._extra.setdefault(name, []).append(piece)
            for call in delta.tool_calls or ():
                self._add_call(call)
        if text:
            self._text.append(text)
        return text

    def _add_call(self, call: Any) -> None:
        slot = self._calls.setdefault(call.index, {"id": "", "name": "", "arguments": []})
        if call.id and not slot["id"]:
            slot["id"] = call.id
        function = call.function
        if function is None:
            return
        # Some servers repeat the whole name in every delta, others send it once.
        if function.name and function.name != slot["name"]:
            slot["name"] += function.name
        if function.arguments:
            slot["arguments"].append(function.arguments)

    def response(self) -> ModelResponse:
        """The assembled answer (call once the stream has ended)."""
        text = "".join(self._text)
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
