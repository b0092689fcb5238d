"""classify_failure against real provider refusals, SDK exceptions and HTTP responses."""

from __future__ import annotations

import importlib
import json
from typing import Any

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from windowguard.core.failures import Failure, FailureKind, TerminationReason, classify_failure

from .failure_fixtures import FIXTURES, Fixture

_TRANSIENT = {
    FailureKind.RATE_LIMIT,
    FailureKind.SERVER,
    FailureKind.OVERLOADED,
    FailureKind.TIMEOUT,
    FailureKind.CONNECTION,
}


def _classify(fixture: Fixture) -> Failure:
    if fixture.error is not None:
        return classify_failure(fixture.error)
    return classify_failure(status=fixture.status, body=fixture.body, headers=fixture.headers)


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda f: f.name)
def test_every_fixture_classifies_with_its_numbers(fixture: Fixture) -> None:
    failure = _classify(fixture)
    assert failure.kind is fixture.kind
    expected_retryable = (
        fixture.kind in _TRANSIENT if fixture.retryable is None else fixture.retryable
    )
    assert failure.retryable is expected_retryable
    assert failure.prompt_tokens == fixture.prompt_tokens
    assert failure.prompt_tokens_is_lower_bound is fixture.lower_bound
    assert failure.context_window == fixture.context_window
    assert failure.requested_output == fixture.requested_output
    assert failure.max_output_tokens == fixture.max_output_tokens
    assert failure.provider == fixture.provider
    if fixture.retry_after is None:
        assert failure.retry_after is None
    else:
        assert failure.retry_after == pytest.approx(fixture.retry_after)
    if fixture.status is not None:
        assert failure.status == fixture.status


@pytest.mark.parametrize("fixture", [f for f in FIXTURES if f.error is None], ids=lambda f: f.name)
def test_body_as_bytes_and_as_text_classify_the_same(fixture: Fixture) -> None:
    text = fixture.body if isinstance(fixture.body, str) else json.dumps(fixture.body)
    as_text = classify_failure(status=fixture.status, body=text, headers=fixture.headers)
    as_bytes = classify_failure(
        status=fixture.status, body=text.encode("utf-8"), headers=dict(fixture.headers)
    )
    assert as_text == as_bytes == _classify(fixture)


def test_every_fixture_names_its_source() -> None:
    names = [f.name for f in FIXTURES]
    assert len(names) == len(set(names))
    for fixture in FIXTURES:
        assert len(fixture.source) > 10, fixture.name


def test_every_failure_kind_is_reached_by_some_fixture() -> None:
    reached = {f.kind for f in FIXTURES}
    # MALFORMED_RESPONSE comes from the providers reading a 2xx body, never from a refusal
    unreached = {FailureKind.CONNECTION, FailureKind.UNKNOWN, FailureKind.MALFORMED_RESPONSE}
    missing = set(FailureKind) - reached - unreached
    assert not missing


# --- the traps the issue names ------------------------------------------------------


def test_output_cap_refusals_are_not_overflows() -> None:
    for fixture in FIXTURES:
        if "output-cap" in fixture.name or "max-output" in fixture.name:
            assert _classify(fixture).kind is FailureKind.OUTPUT_LIMIT


def test_bedrock_too_many_tokens_is_a_rate_limit_even_without_status() -> None:
    failure = classify_failure(body="Too many tokens, please wait before trying again.")
    assert failure.kind is FailureKind.RATE_LIMIT
    assert failure.retryable


def test_a_rate_limit_mentioning_context_length_stays_a_rate_limit() -> None:
    body = {"error": {"message": "This model's maximum context length is 8192 tokens. TPM"}}
    assert classify_failure(status=429, body=body).kind is FailureKind.RATE_LIMIT


def test_x_should_retry_header_overrides_retryable_but_not_for_overflow() -> None:
    server = classify_failure(status=500, body="oops", headers={"x-should-retry": "false"})
    assert server.kind is FailureKind.SERVER and not server.retryable
    conflict = classify_failure(status=400, body="odd", headers={"X-Should-Retry": "true"})
    assert conflict.kind is FailureKind.INVALID_REQUEST and conflict.retryable
    overflow = classify_failure(
        status=400,
        body="prompt is too long: 10 tokens > 5 maximum",
        headers={"x-should-retry": "true"},
    )
    assert overflow.kind is FailureKind.CONTEXT_OVERFLOW and not overflow.retryable


def test_unrecognisable_inputs_are_unknown_and_never_raise() -> None:
    assert classify_failure().kind is FailureKind.UNKNOWN
    assert classify_failure(body=b"\xff\xfe not json").kind is FailureKind.UNKNOWN
    assert classify_failure(body=[]).kind is FailureKind.UNKNOWN
    assert classify_failure(object()).kind is FailureKind.UNKNOWN
    assert classify_failure(status=302, body="moved").kind is FailureKind.UNKNOWN


def test_status_alone_decides_when_the_body_says_nothing() -> None:
    expected = {
        400: FailureKind.INVALID_REQUEST,
        401: FailureKind.AUTH,
        403: FailureKind.PERMISSION,
        404: FailureKind.NOT_FOUND,
        408: FailureKind.TIMEOUT,
        413: FailureKind.REQUEST_TOO_LARGE,
        422: FailureKind.INVALID_REQUEST,
        429: FailureKind.RATE_LIMIT,
        500: FailureKind.SERVER,
        503: FailureKind.OVERLOADED,
        529: FailureKind.OVERLOADED,
    }
    for status, kind in expected.items():
        assert classify_failure(status=status, body="").kind is kind, status


def test_anthropic_message_object_with_window_stop_reason() -> None:
    class Usage:
        input_tokens = 1200
        cache_creation_input_tokens = 300
        cache_read_input_tokens = None

    class Message:
        stop_reason = "model_context_window_exceeded"
        usage = Usage()

    failure = classify_failure(Message())
    assert failure.kind is FailureKind.CONTEXT_OVERFLOW
    assert failure.prompt_tokens == 1500 and not failure.retryable

    class Finished(Message):
        stop_reason = "end_turn"

    assert classify_failure(Finished()).kind is FailureKind.UNKNOWN


# --- HTTP responses and SDK exceptions ----------------------------------------------


def _response(status: int, body: Any, headers: dict[str, str] | None = None) -> httpx2.Response:
    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    content = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return httpx2.Response(status, content=content, headers=headers or {}, request=request)


@pytest.mark.parametrize("fixture", [f for f in FIXTURES if f.status], ids=lambda f: f.name)
def test_an_httpx2_response_classifies_like_its_parts(fixture: Fixture) -> None:
    response = _response(fixture.status or 0, fixture.body, dict(fixture.headers))
    assert classify_failure(response) == _classify(fixture)


def test_an_unread_streaming_response_still_classifies_by_status() -> None:
    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")
    stream = httpx2.ByteStream(b'{"error": {"message": "x"}}')
    response = httpx2.Response(529, stream=stream, request=request)
    assert classify_failure(response).kind is FailureKind.OVERLOADED


def _sdk_modules() -> list[Any]:
    return [importlib.import_module(name) for name in ("openai", "anthropic")]


def _exception_classes(module: Any) -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    names = set(getattr(module, "__all__", ())) | set(dir(module))
    for name in sorted(names):
        value = getattr(module, name, None)
        if isinstance(value, type) and issubclass(value, BaseException):
            found[f"{value.__module__}.{value.__qualname__}"] = value
    return list(found.values())


_SDK_STATUS = {
    "BadRequestError": 400,
    "AuthenticationError": 401,
    "OAuthError": 401,
    "PaymentRequiredError": 402,
    "PermissionDeniedError": 403,
    "NotFoundError": 404,
    "RequestTimeoutError": 408,
    "ConflictError": 409,
    "PreconditionFailedError": 412,
    "ContentTooLargeError": 413,
    "UnprocessableEntityError": 422,
    "RateLimitError": 429,
    "RequestHeaderFieldsTooLargeError": 431,
    "ClientClosedRequestError": 499,
    "InternalServerError": 500,
    "HTTPNotImplementedError": 501,
    "ServiceUnavailableError": 503,
    "GatewayTimeoutError": 504,
    "OverloadedError": 529,
}


_BY_STATUS = {
    401: FailureKind.AUTH,
    402: FailureKind.PERMISSION,
    403: FailureKind.PERMISSION,
    404: FailureKind.NOT_FOUND,
    408: FailureKind.TIMEOUT,
    409: FailureKind.SERVER,
    413: FailureKind.REQUEST_TOO_LARGE,
    429: FailureKind.RATE_LIMIT,
    499: FailureKind.CONNECTION,
    500: FailureKind.SERVER,
    501: FailureKind.SERVER,
    503: FailureKind.OVERLOADED,
    504: FailureKind.TIMEOUT,
    529: FailureKind.OVERLOADED,
}


def _status_for(cls: type[BaseException]) -> int:
    declared = getattr(cls, "status_code", None)
    if isinstance(declared, int):
        return declared
    for base in cls.__mro__:
        if base.__name__ in _SDK_STATUS:
            return _SDK_STATUS[base.__name__]
    return 500


def _completion() -> Any:
    from openai.types.chat import ChatCompletion

    return ChatCompletion.model_construct(
        id="chatcmpl-1", choices=[], created=0, model="m", object="chat.completion", usage=None
    )


def _instantiate(cls: type[BaseException]) -> BaseException:
    """Build ``cls`` the way its SDK does, with a real httpx2 request/response."""
    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    attempts: list[Any] = []
    if any(b.__name__ == "APIStatusError" for b in cls.__mro__):
        status = _status_for(cls)
        body = {"error": {"message": "refused"}}
        response = httpx2.Response(status, json=body, request=request)
        attempts += [
            lambda: cls("refused", response=response, body=body),  # type: ignore[call-arg]
            lambda: cls(response=response, body=body),  # type: ignore[call-arg]
        ]
    attempts += [
        lambda: cls(request=request),  # type: ignore[call-arg]
        lambda: cls(request),  # type: ignore[call-arg]
        lambda: cls(httpx2.Response(500, request=request), None),  # type: ignore[call-arg]
        lambda: cls("refused", request, body=None),  # type: ignore[call-arg]
        lambda: cls("refused", unsent_messages=[]),  # type: ignore[call-arg]
        lambda: cls(completion=_completion()),  # type: ignore[call-arg]
        lambda: cls("refused"),
        lambda: cls(),
    ]
    errors = []
    for attempt in attempts:
        try:
            return attempt()  # type: ignore[no-any-return]
        except TypeError as exc:
            errors.append(str(exc))
    raise AssertionError(f"could not build {cls.__qualname__}: {errors}")


_SDK_CLASSES = [cls for module in _sdk_modules() for cls in _exception_classes(module)]
_SDK_API_ERRORS = tuple(module.APIError for module in _sdk_modules())


@pytest.mark.parametrize("cls", _SDK_CLASSES, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_every_exported_sdk_exception_maps_to_a_kind(cls: type[BaseException]) -> None:
    failure = classify_failure(_instantiate(cls))
    assert isinstance(failure.kind, FailureKind)
    if any(b.__name__ == "APIStatusError" for b in cls.__mro__):
        status = _status_for(cls)
        assert failure.status == status
        assert failure.kind is _BY_STATUS.get(status, FailureKind.INVALID_REQUEST)
    elif any(b.__name__ == "APIConnectionError" for b in cls.__mro__):
        assert failure.kind in (FailureKind.TIMEOUT, FailureKind.CONNECTION)
        assert failure.retryable


def test_sdk_exception_walk_found_the_status_errors() -> None:
    names = {cls.__name__ for cls in _SDK_CLASSES}
    assert {"APITimeoutError", "APIConnectionError", "RateLimitError", "OverloadedError"} <= names


def test_sdk_timeout_and_connection_errors() -> None:
    import anthropic
    import openai

    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")
    for module in (openai, anthropic):
        timeout = classify_failure(module.APITimeoutError(request=request))
        assert timeout.kind is FailureKind.TIMEOUT and timeout.retryable
        refused = module.APIConnectionError(request=request)
        refused.__cause__ = ConnectionRefusedError(111, "Connection refused")
        assert classify_failure(refused).kind is FailureKind.CONNECTION
    assert classify_failure(TimeoutError("read")).kind is FailureKind.TIMEOUT


def test_sdk_status_error_carries_body_and_headers() -> None:
    import anthropic
    import openai

    body = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 9 tokens > 8 maximum",
        },
    }
    response = _response(400, body, {"request-id": "req_1", "anthropic-organization-id": "o"})
    error = anthropic.BadRequestError("refused", response=response, body=body)
    failure = classify_failure(error)
    assert (failure.kind, failure.prompt_tokens, failure.context_window) == (
        FailureKind.CONTEXT_OVERFLOW,
        9,
        8,
    )
    assert failure.provider == "anthropic"

    inner = {
        "message": "Rate limit reached for requests",
        "type": "requests",
        "code": "rate_limit_exceeded",
    }
    response = _response(429, {"error": inner}, {"retry-after": "7"})
    limited = classify_failure(openai.RateLimitError("limited", response=response, body=inner))
    assert (limited.kind, limited.retry_after, limited.code) == (
        FailureKind.RATE_LIMIT,
        7.0,
        "rate_limit_exceeded",
    )


def test_explicit_parts_override_what_the_error_carries() -> None:
    response = _response(500, {"error": {"message": "boom"}})
    assert classify_failure(response, status=503).kind is FailureKind.OVERLOADED


# --- TerminationReason --------------------------------------------------------------


def test_only_provider_error_is_retryable() -> None:
    retryable = {reason for reason in TerminationReason if reason.is_retryable}
    assert retryable == {TerminationReason.PROVIDER_ERROR}
    assert TerminationReason.CONTEXT_TRUNCATED.is_retryable is False


# --- the real SDKs over a mock transport --------------------------------------------


def _sdk_client(sdk: str, handler: Any) -> Any:
    import anthropic
    import openai

    http = httpx2.Client(transport=httpx2.MockTransport(handler))
    if sdk == "anthropic":
        return anthropic.Anthropic(
            api_key="k", base_url="http://127.0.0.1:9", http_client=http, max_retries=0
        )
    return openai.OpenAI(
        api_key="k", base_url="http://127.0.0.1:9/v1", http_client=http, max_retries=0
    )


def _sdk_call(client: Any, sdk: str) -> None:
    messages = [{"role": "user", "content": "hi"}]
    if sdk == "anthropic":
        client.messages.create(model="m", max_tokens=10, messages=messages)
    else:
        client.chat.completions.create(model="m", messages=messages)


@pytest.mark.parametrize("fixture", [f for f in FIXTURES if f.status], ids=lambda f: f.name)
def test_fixture_raised_by_the_real_sdk_classifies_the_same(fixture: Fixture) -> None:
    """Serve the fixture to the SDK and classify the exception the SDK itself raises."""
    sdk = "anthropic" if fixture.provider == "anthropic" else "openai"
    text = fixture.body if isinstance(fixture.body, str) else json.dumps(fixture.body)

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(fixture.status or 0, content=text, headers=dict(fixture.headers))

    with pytest.raises(_SDK_API_ERRORS) as caught:
        _sdk_call(_sdk_client(sdk, handler), sdk)
    failure = classify_failure(caught.value)
    expected = _classify(fixture)
    assert (failure.kind, failure.status, failure.retryable) == (
        expected.kind,
        expected.status,
        expected.retryable,
    )
    numbers = ("prompt_tokens", "context_window", "requested_output", "max_output_tokens")
    assert [getattr(failure, n) for n in numbers] == [getattr(expected, n) for n in numbers]
    assert failure.prompt_tokens_is_lower_bound is expected.prompt_tokens_is_lower_bound
    assert failure.retry_after == expected.retry_after


def test_responses_stream_error_and_failed_events_from_the_sdk() -> None:
    error_event = {
        "type": "error",
        "code": "context_length_exceeded",
        "message": "Your input exceeds the context window of this model. Please adjust your "
        "input and try again.",
        "param": "input",
        "sequence_number": 1,
    }
    failed_event = {
        "type": "response.failed",
        "sequence_number": 2,
        "response": {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": "m",
            "output": [],
            "status": "failed",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "error": {"code": "server_error", "message": "The model produced an error."},
        },
    }
    stream = "".join(
        f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
        for event in (error_event, failed_event)
    )

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=stream, headers={"content-type": "text/event-stream"})

    client = _sdk_client("openai", handler)
    kinds = [
        classify_failure(event).kind
        for event in client.responses.create(model="m", input="hi", stream=True)
    ]
    assert kinds == [FailureKind.CONTEXT_OVERFLOW, FailureKind.SERVER]


def test_chat_stream_error_chunk_raised_by_the_sdk() -> None:
    chunk = {
        "error": {
            "code": 400,
            "message": "request (9000 tokens) exceeds the available context size (8192 "
            "tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 9000,
            "n_ctx": 8192,
        }
    }

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200,
            content=f"data: {json.dumps(chunk)}\n\n",
            headers={"content-type": "text/event-stream"},
        )

    client = _sdk_client("openai", handler)
    with pytest.raises(_SDK_API_ERRORS) as caught:
        for _ in client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], stream=True
        ):
            pass
    failure = classify_failure(caught.value)
    assert (failure.kind, failure.prompt_tokens, failure.context_window, failure.provider) == (
        FailureKind.CONTEXT_OVERFLOW,
        9000,
        8192,
        "llamacpp",
    )


# --- issue 12: the status gates the overflow patterns ------------------------------

_OPENAI_OVERFLOW_TEXT = (
    "This model's maximum context length is 8192 tokens. However, your messages resulted in "
    "9000 tokens. Please reduce the length of the messages."
)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, FailureKind.AUTH),
        (402, FailureKind.PERMISSION),
        (403, FailureKind.PERMISSION),
        (404, FailureKind.NOT_FOUND),
        (409, FailureKind.SERVER),
        (503, FailureKind.OVERLOADED),
        (504, FailureKind.TIMEOUT),
    ],
)
def test_a_status_that_cannot_carry_an_overflow_wins_over_an_overflow_text(
    status: int, kind: FailureKind
) -> None:
    # A gateway's auth page (or a misrouted request) quoting an overflow must not be taken
    # for one: the loop would prune and resend instead of stopping on the real cause.
    bodies: list[Any] = [
        {"error": {"message": _OPENAI_OVERFLOW_TEXT, "type": "invalid_request_error"}},
        {"type": "error", "error": {"type": "error", "message": "prompt is too long"}},
        {"error": {"message": "prompt is too long: 9000 tokens > 8192 maximum"}},
        {"error": {"message": "x", "code": "context_length_exceeded"}},
        {"error": {"code": status, "message": "x", "n_prompt_tokens": 9000, "n_ctx": 8192}},
        {
            "error": {
                "message": "max_tokens is too large: 9000. This model supports at most 4096 "
                "completion tokens, whereas you provided 9000."
            }
        },
    ]
    for body in bodies:
        failure = classify_failure(status=status, body=body)
        assert failure.kind is kind, (status, body)
        assert failure.prompt_tokens is None and failure.context_window is None
        assert failure.max_output_tokens is None


@pytest.mark.parametrize("status", [None, 400, 413, 422, 500])
def test_statuses_that_carry_overflows_still_match(status: int | None) -> None:
    failure = classify_failure(status=status, body={"error": {"message": _OPENAI_OVERFLOW_TEXT}})
    assert failure.kind is FailureKind.CONTEXT_OVERFLOW
    assert (failure.prompt_tokens, failure.context_window) == (9000, 8192)


def test_a_raw_overflow_body_without_status_keeps_todays_reading() -> None:
    for text in ("prompt is too long", _OPENAI_OVERFLOW_TEXT, "Context size has been exceeded."):
        assert classify_failure(body=text).kind is FailureKind.CONTEXT_OVERFLOW


def _loop_over(sdk: str, status: int, body: dict[str, Any], *, async_: bool) -> Any:
    """Run a ToolLoop whose real provider's SDK is answered ``status``/``body`` by a mock."""
    import asyncio

    import anthropic
    import openai

    import windowguard as wg
    from windowguard.run.providers.anthropic import AnthropicProvider, AsyncAnthropicProvider
    from windowguard.run.providers.openai import AsyncOpenAIChatProvider, OpenAIChatProvider

    calls: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        calls.append(request.url.path)
        return httpx2.Response(status, json=body)

    info = wg.ModelInfo(8192, tokenizer="o200k")
    manager = wg.ContextWindowManager(model_info=info)
    task = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the bug."},
    ]
    options: dict[str, Any] = {"model_info": info, "discover": False}
    if async_:
        http_async = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
        provider: Any
        if sdk == "anthropic":
            provider = AsyncAnthropicProvider(
                "claude-x",
                client=anthropic.AsyncAnthropic(
                    api_key="k", base_url="http://127.0.0.1:9", http_client=http_async
                ),
                **options,
            )
        else:
            provider = AsyncOpenAIChatProvider(
                "gpt-x",
                client=openai.AsyncOpenAI(
                    api_key="k", base_url="http://127.0.0.1:9/v1", http_client=http_async
                ),
                **options,
            )

        async def sleep(seconds: float) -> None:
            pass

        result = asyncio.run(wg.AsyncToolLoop(provider, manager=manager, sleep=sleep).run(task))
    else:
        http = httpx2.Client(transport=httpx2.MockTransport(handler))
        if sdk == "anthropic":
            provider = AnthropicProvider(
                "claude-x",
                client=anthropic.Anthropic(
                    api_key="k", base_url="http://127.0.0.1:9", http_client=http
                ),
                **options,
            )
        else:
            provider = OpenAIChatProvider(
                "gpt-x",
                client=openai.OpenAI(
                    api_key="k", base_url="http://127.0.0.1:9/v1", http_client=http
                ),
                **options,
            )
        result = wg.ToolLoop(provider, manager=manager, sleep=lambda s: None).run(task)
    return result, calls


@pytest.mark.parametrize("async_", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(
    ("sdk", "status", "body", "kind"),
    [
        (
            "openai",
            401,
            {"error": {"message": _OPENAI_OVERFLOW_TEXT, "type": "invalid_request_error"}},
            FailureKind.AUTH,
        ),
        (
            "anthropic",
            403,
            {
                "type": "error",
                "error": {
                    "type": "permission_error",
                    "message": "prompt is too long: 9000 tokens > 8192 maximum",
                },
            },
            FailureKind.PERMISSION,
        ),
    ],
    ids=["openai-401", "anthropic-403"],
)
def test_through_the_loop_an_auth_error_quoting_an_overflow_is_a_provider_error(
    sdk: str, status: int, body: dict[str, Any], kind: FailureKind, async_: bool
) -> None:
    import windowguard as wg

    result, calls = _loop_over(sdk, status, body, async_=async_)
    assert result.termination is wg.TerminationReason.PROVIDER_ERROR
    assert result.failure is not None and result.failure.kind is kind
    assert len(calls) == 1  # stopped at once: no refit, no second send


# --- issue 12: credentials a server echoes never reach a Failure --------------------

_KEYS = (
    "sk-proj-AbCdEf0123456789GhIjKlMnOpQrStUvWxYz",
    "sk-ant-api03-AbCdEf0123456789-GhIjKl_MnOpQrSt",
    "AIzaSyA1234567890abcdefghijklmnopqrstu",
    "gsk_AbCdEf0123456789GhIjKlMn",
    "5up3r-s3cr3t-h3ad3r-valu3",
)


def _echoing_body() -> dict[str, Any]:
    """A gateway's 401 that quotes the request's headers and URL back."""
    return {
        "error": {
            "message": f"upstream refused the key {_KEYS[0]} (headers: {{'Authorization': "
            f"'Bearer {_KEYS[1]}', 'x-api-key': '{_KEYS[4]}'}}, url: "
            f"https://generativelanguage.googleapis.com/v1beta/models/m:generateContent?key="
            f"{_KEYS[2]}, groq key {_KEYS[3]})",
            "type": "authentication_error",
        }
    }


def test_credentials_in_bodies_and_headers_never_reach_the_failure() -> None:
    headers = {"authorization": f"Bearer {_KEYS[0]}", "x-api-key": _KEYS[4]}
    failure = classify_failure(status=401, body=_echoing_body(), headers=headers)
    assert failure.kind is FailureKind.AUTH
    for key in _KEYS:
        assert key not in repr(failure)
    assert "[REDACTED]" in failure.message and "upstream refused the key" in failure.message


def test_credentials_in_an_sdk_exception_never_reach_the_failure_or_provider_error() -> None:
    import openai

    from windowguard.core.exceptions import ProviderError

    body = _echoing_body()
    response = _response(401, body, {"x-api-key": _KEYS[4]})
    error = openai.AuthenticationError("refused", response=response, body=body["error"])
    failure = classify_failure(error)
    raised = ProviderError(failure)
    by_hand = ProviderError(Failure(kind=FailureKind.AUTH, retryable=False, message=str(body)))
    for key in _KEYS:
        assert key not in str(raised) and key not in str(by_hand) and key not in repr(failure)


def test_redaction_keeps_the_numbers_an_overflow_is_read_from() -> None:
    body = {
        "error": {
            "message": f"{_OPENAI_OVERFLOW_TEXT} (key sk-proj-{'x' * 40})",
            "code": "context_length_exceeded",
        }
    }
    failure = classify_failure(status=400, body=body)
    assert (failure.kind, failure.prompt_tokens, failure.context_window) == (
        FailureKind.CONTEXT_OVERFLOW,
        9000,
        8192,
    )
    assert "x" * 40 not in failure.message and "9000 tokens" in failure.message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Incorrect API key provided: sk-proj-abcdefgh12345678.",
            "Incorrect API key provided: [REDACTED].",
        ),
        ("Authorization: Bearer abc.def-ghi_jkl", "Authorization: Bearer [REDACTED]"),
        ('{"x-api-key": "v4lu3-0f-th3-k3y"}', '{"x-api-key": "[REDACTED]"}'),
        ("GET /v1/models?key=s3cr3tv4lue&alt=sse", "GET /v1/models?key=[REDACTED]&alt=sse"),
        ("api_key=abcd1234 password=hunter22", "api_key=[REDACTED] password=[REDACTED]"),
        ("maximum context length is 8192 tokens; max_tokens=4096", None),
        ("a task-oriented key point: tokens per min (TPM)", None),
    ],
)
def test_redact_secrets_examples(text: str, expected: str | None) -> None:
    from windowguard.core.failures import redact_secrets

    out = redact_secrets(text)
    assert out == (text if expected is None else expected)
    assert redact_secrets(out) == out  # idempotent


def test_an_http_error_without_a_request_is_classified_not_raised() -> None:
    # httpx's errors raise RuntimeError from `.request` when none was set; the proxy
    # classifies the error a stream broke off with (issue 20, item 8).
    error = httpx2.RemoteProtocolError("peer closed connection without sending complete body")
    assert classify_failure(error).kind is FailureKind.CONNECTION


# --- more provider wordings: waits, 498/501, odd input --------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("1m26.4s", 86.4),  # Go's time.Duration text, as gateways written in Go send it
        ("2m0s", 120.0),
        ("350ms", 0.35),
        ("1h2m3s", 3723.0),
        ("0", 0.0),
        ("1.5h", 5400.0),
        ("250us", 0.00025),
        ("7", 7.0),  # the forms read before keep working
        ("2.5", 2.5),
    ],
)
def test_retry_after_seconds_and_go_durations(value: str, seconds: float) -> None:
    failure = classify_failure(status=429, body="", headers={"retry-after": value})
    assert failure.kind is FailureKind.RATE_LIMIT
    assert failure.retry_after == pytest.approx(seconds)


def test_retry_after_http_date_still_reads_against_the_date_header() -> None:
    headers = {
        "retry-after": "Wed, 21 Oct 2026 07:28:30 GMT",
        "date": "Wed, 21 Oct 2026 07:28:00 GMT",
    }
    assert classify_failure(status=503, body="", headers=headers).retry_after == 30.0


@pytest.mark.parametrize(
    "value",
    [
        "",
        "soon",
        "-5",
        "-1m",
        "1h-2m",
        "1.2.3s",
        "1d",
        "m",
        "inf",
        "nan",
        "\x00",
        "9" * 400 + "h",
        "Wed, 21 Oct 2026 07:28:30 GMT",  # an HTTP date without a Date header: no clock
        "Wed, 21 Oct 99999 07:28:30 GMT",
    ],
)
def test_a_retry_after_that_is_no_wait_is_none_never_an_exception(value: str) -> None:
    headers = {"retry-after": value, "retry-after-ms": value}
    failure = classify_failure(status=429, body="", headers=headers)
    assert failure.kind is FailureKind.RATE_LIMIT
    assert failure.retry_after is None


def test_a_wait_stated_in_the_message_is_finite_or_none() -> None:
    failure = classify_failure(status=429, body=f"Please retry in {'9' * 400}s.")
    assert failure.retry_after is None


def test_groq_498_and_its_code_are_overloaded_and_retried() -> None:
    bare = classify_failure(status=498, body="")
    assert (bare.kind, bare.retryable) == (FailureKind.OVERLOADED, True)
    # The body code alone (a streamed error, no status) says the same.
    streamed = classify_failure(
        body={"error": {"message": "capacity exceeded", "code": "capacity_exceeded"}}
    )
    assert (streamed.kind, streamed.retryable) == (FailureKind.OVERLOADED, True)


def test_501_and_not_supported_error_are_never_retried() -> None:
    bare = classify_failure(status=501, body="")
    assert (bare.kind, bare.retryable) == (FailureKind.SERVER, False)
    streamed = classify_failure(
        body={
            "error": {
                "code": 501,
                "message": "This server does not support infill.",
                "type": "not_supported_error",
            }
        }
    )
    assert (streamed.kind, streamed.retryable) == (FailureKind.SERVER, False)
    # The server's explicit word still wins, as for any server failure.
    told = classify_failure(status=501, body="", headers={"x-should-retry": "true"})
    assert told.retryable


def test_the_tgi_output_cap_rule_never_reads_the_combined_overflow() -> None:
    # A truncated "`inputs` tokens + `max_new_tokens` must be <= N. Given: P" is prompt plus
    # output over the window: never an output cap of N.
    for text in (
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 1024. Given: 1872",
        "Input validation error: inputs tokens + max_new_tokens must be <= 1024. Given: 1872",
    ):
        failure = classify_failure(status=422, body={"error": text, "error_type": "validation"})
        assert failure.kind is not FailureKind.OUTPUT_LIMIT
        assert failure.max_output_tokens is None


def test_cohere_too_many_tokens_is_not_bedrock_throttling() -> None:
    cohere = classify_failure(
        status=400,
        body={"message": "too many tokens: total number of tokens in the prompt cannot exceed 10"},
    )
    assert cohere.kind is FailureKind.CONTEXT_OVERFLOW and not cohere.retryable
    throttled = classify_failure(body="Too many tokens, please wait before trying again.")
    assert throttled.kind is FailureKind.RATE_LIMIT


_JSON_LEAVES = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20)
)
_JSON_KEYS = st.sampled_from(
    [
        "error",
        "message",
        "code",
        "type",
        "status",
        "details",
        "metadata",
        "raw",
        "innererror",
        "error_type",
        "n_prompt_tokens",
        "n_ctx",
        "@type",
        "retryDelay",
        "violations",
        "quotaId",
        "quotaValue",
        "response",
        "object",
        "param",
        "detail",
    ]
) | st.text(max_size=5)
_JSON = st.recursive(
    _JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_JSON_KEYS, inner, max_size=5),
    max_leaves=25,
)
_HEADER_VALUES = st.text(max_size=30) | st.sampled_from(
    ["1m26.4s", "350ms", "inf", "nan", "-1", "1e999", "Wed, 21 Oct 2026 07:28:30 GMT"]
)


@settings(deadline=None, max_examples=300)
@given(
    status=st.none() | st.integers(min_value=-5, max_value=1000),
    body=_JSON,
    headers=st.dictionaries(
        st.sampled_from(["retry-after", "retry-after-ms", "date", "x-should-retry"]),
        _HEADER_VALUES,
        max_size=4,
    ),
)
def test_odd_bodies_and_headers_classify_without_raising(
    status: int | None, body: Any, headers: dict[str, str]
) -> None:
    failure = classify_failure(status=status, body=body, headers=headers)
    assert isinstance(failure.kind, FailureKind)
    if failure.retry_after is not None:
        assert 0 <= failure.retry_after < float("inf")
