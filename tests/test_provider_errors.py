"""provider_errors builders: shapes, and that every output classifies back exactly."""

from __future__ import annotations

import json
import math
from typing import get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from windowguard.core.exceptions import ConfigurationError
from windowguard.core.failures import FailureKind, classify_failure
from windowguard.core.provider_errors import (
    TEMPLATES,
    Flavor,
    WireError,
    auth_error,
    context_overflow_error,
    invalid_request_error,
    output_limit_error,
    rate_limit_error,
    request_too_large_error,
    server_error,
    template_pattern,
)

FLAVORS: tuple[Flavor, ...] = get_args(Flavor)
flavors = st.sampled_from(FLAVORS)
counts = st.integers(min_value=1, max_value=2_000_000)


def _back(wire: WireError):  # type: ignore[no-untyped-def]
    """Classify a builder's output the way a client sees it: status, raw bytes, headers."""
    return classify_failure(status=wire.status, body=wire.json_bytes(), headers=wire.headers)


@settings(deadline=None, max_examples=300)
@given(flavor=flavors, window=counts, prompt=counts, output=st.none() | counts)
def test_context_overflow_round_trips(
    flavor: Flavor, window: int, prompt: int, output: int | None
) -> None:
    wire = context_overflow_error(
        flavor, prompt_tokens=prompt, context_window=window, requested_output=output
    )
    failure = _back(wire)
    assert wire.status == 400
    assert failure.kind is FailureKind.CONTEXT_OVERFLOW and not failure.retryable
    assert failure.context_window == window
    requested = output or 0
    if flavor == "vllm" and prompt > window - requested >= 0:
        # vLLM truncates the prompt at max_input + 1 before counting it.
        assert failure.prompt_tokens == window - requested + 1
        assert failure.prompt_tokens_is_lower_bound
    else:
        assert failure.prompt_tokens == prompt
        assert not failure.prompt_tokens_is_lower_bound
    if flavor == "llamacpp":
        assert failure.requested_output is None
        assert wire.body["error"]["n_prompt_tokens"] == prompt
    elif flavor == "vllm":
        assert failure.requested_output == requested
    elif prompt > window or not requested:
        assert failure.requested_output is None  # the prompt-only wording
    else:
        assert failure.requested_output == requested
    assert failure.provider == {"openai": None}.get(flavor, flavor)


@settings(deadline=None, max_examples=200)
@given(
    flavor=flavors,
    cap=counts,
    over=counts,
    model=st.from_regex(r"[a-z][a-z0-9.-]{0,30}[a-z0-9]", fullmatch=True),
)
def test_output_limit_round_trips(flavor: Flavor, cap: int, over: int, model: str) -> None:
    wire = output_limit_error(
        flavor, requested_output=cap + over, max_output_tokens=cap, model=model
    )
    failure = _back(wire)
    assert failure.kind is FailureKind.OUTPUT_LIMIT and not failure.retryable
    assert failure.max_output_tokens == cap
    assert failure.requested_output == cap + over
    if flavor == "anthropic":
        assert wire.body["error"]["message"].endswith(model)


@settings(deadline=None, max_examples=200)
@given(flavor=flavors, retry_after=st.floats(min_value=0, max_value=86_400))
def test_rate_limit_round_trips_with_its_delay(flavor: Flavor, retry_after: float) -> None:
    wire = rate_limit_error(flavor, retry_after=retry_after)
    failure = _back(wire)
    assert wire.status == 429
    assert failure.kind is FailureKind.RATE_LIMIT and failure.retryable
    assert failure.retry_after is not None
    assert retry_after <= failure.retry_after <= retry_after + 0.001 + 1e-9
    assert int(wire.header("Retry-After") or "-1") == math.ceil(retry_after)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_auth_round_trips(flavor: Flavor) -> None:
    wire = auth_error(flavor)
    assert wire.status == 401
    failure = _back(wire)
    assert failure.kind is FailureKind.AUTH and not failure.retryable


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (500, FailureKind.SERVER),
        (502, FailureKind.SERVER),
        (503, FailureKind.OVERLOADED),
        (504, FailureKind.TIMEOUT),
        (529, FailureKind.OVERLOADED),
    ],
)
def test_server_error_round_trips(flavor: Flavor, status: int, kind: FailureKind) -> None:
    wire = server_error(flavor, status=status)
    failure = _back(wire)
    assert (wire.status, failure.kind, failure.retryable) == (status, kind, True)


def test_anthropic_529_is_the_documented_overloaded_error() -> None:
    assert server_error("anthropic", status=529).body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }


_PLAIN_WORDS = [
    "missing",
    "field",
    "messages",
    "must",
    "be",
    "a",
    "list",
    "invalid",
    "value",
    "for",
    "role",
    "unknown",
    "expected",
    "string",
    "got",
    "object",
    "required",
    "'model'",
    "is",
    "not",
    "supported",
]


@settings(deadline=None, max_examples=200)
@given(
    flavor=flavors,
    message=st.text(min_size=1, max_size=200).filter(lambda m: m.strip()),
    plain=st.lists(st.sampled_from(_PLAIN_WORDS), min_size=1, max_size=12).map(" ".join),
    param=st.none() | st.sampled_from(["messages", "tools", "max_tokens"]),
)
def test_invalid_request_round_trips(
    flavor: Flavor, message: str, plain: str, param: str | None
) -> None:
    # Any text survives the round trip verbatim ...
    wire = invalid_request_error(flavor, message, param=param)
    failure = _back(wire)
    assert wire.status == 400
    assert failure.message == message
    # ... and a message in plain validation words (which cannot read like an overflow,
    # a cap or a content filter) classifies as INVALID_REQUEST.
    assert (
        _back(invalid_request_error(flavor, plain, param=param)).kind is FailureKind.INVALID_REQUEST
    )


@pytest.mark.parametrize("flavor", FLAVORS)
def test_invalid_request_shapes(flavor: Flavor) -> None:
    wire = invalid_request_error(flavor, "messages: Field required", param="messages")
    body = json.loads(wire.json_bytes())
    if flavor == "anthropic":
        assert body == {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "messages: Field required"},
        }
    elif flavor == "llamacpp":
        assert body["error"]["code"] == 400 and "param" not in body["error"]
    elif flavor == "vllm":
        assert body["error"] == {
            "message": "messages: Field required",
            "type": "BadRequestError",
            "param": "messages",
            "code": 400,
        }
    else:
        assert body["error"]["param"] == "messages" and body["error"]["code"] is None


def test_builders_are_pure_values() -> None:
    first = context_overflow_error("vllm", prompt_tokens=10, context_window=8, requested_output=2)
    second = context_overflow_error("vllm", prompt_tokens=10, context_window=8, requested_output=2)
    assert first == second and first.body is not second.body
    with pytest.raises(AttributeError):
        first.status = 500  # type: ignore[misc]


def test_every_template_reads_its_own_rendering_back() -> None:
    values = {
        "prompt_tokens": 1234,
        "context_window": 999,
        "requested_output": 77,
        "total_tokens": 1311,
        "max_output_tokens": 55,
        "model": "claude-opus-4-1",
        "at_least": "at least ",
    }
    for template in TEMPLATES:
        rendered = template.format(**values)
        match = template_pattern(template).search("Error: " + rendered)
        assert match is not None, template
        for name, value in match.groupdict().items():
            if name != "at_least" and value is not None:
                assert value == str(values[name])


def test_template_pattern_tolerates_reflowed_messages() -> None:
    pattern = template_pattern("input length and `max_tokens` exceed: {prompt_tokens}")
    assert pattern.search("input length and\n     max_tokens exceed: 12")


@pytest.mark.parametrize(
    "call",
    [
        lambda: context_overflow_error(
            "gemini",  # type: ignore[arg-type]
            prompt_tokens=1,
            context_window=1,
            requested_output=1,
        ),
        lambda: context_overflow_error(
            "openai", prompt_tokens=-1, context_window=1, requested_output=None
        ),
        lambda: output_limit_error("openai", requested_output=1.5, max_output_tokens=1, model="m"),  # type: ignore[arg-type]
        lambda: rate_limit_error("openai", retry_after=-1),
        lambda: rate_limit_error("openai", retry_after=float("nan")),
        lambda: server_error("openai", status=404),
        lambda: invalid_request_error("vllm", ""),
    ],
)
def test_bad_arguments_raise_configuration_error(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigurationError):
        call()


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("body_bytes", [None, 40 * 1024 * 1024])
def test_request_too_large_round_trips(flavor: Flavor, body_bytes: int | None) -> None:
    wire = request_too_large_error(flavor, body_bytes=body_bytes, max_body_bytes=32 * 1024 * 1024)
    failure = _back(wire)
    assert wire.status == 413
    assert failure.kind is FailureKind.REQUEST_TOO_LARGE and not failure.retryable
    assert json.loads(wire.json_bytes()) == wire.body
    if flavor == "anthropic":
        assert wire.body["error"]["type"] == "request_too_large"
    elif body_bytes is not None:
        assert str(body_bytes) in wire.body["error"]["message"]


def test_request_too_large_rejects_bad_sizes() -> None:
    with pytest.raises(ConfigurationError):
        request_too_large_error("openai", body_bytes=-1, max_body_bytes=10)
    with pytest.raises(ConfigurationError):
        request_too_large_error("nope", body_bytes=1, max_body_bytes=10)  # type: ignore[arg-type]
