"""RetryPolicy: bounded, deterministic reactions to classified failures."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from windowguard.core.exceptions import ConfigurationError
from windowguard.core.failures import Failure, FailureKind, TerminationReason, classify_failure
from windowguard.core.provider_errors import (
    context_overflow_error,
    output_limit_error,
    rate_limit_error,
    server_error,
)
from windowguard.run.retry import (
    REACTIVE_SAFETY_TOKENS,
    Backoff,
    ClampOutput,
    Refit,
    RetryPolicy,
    SendHistory,
    Stop,
)

TRANSIENT = (
    FailureKind.RATE_LIMIT,
    FailureKind.SERVER,
    FailureKind.OVERLOADED,
    FailureKind.TIMEOUT,
    FailureKind.CONNECTION,
)
FATAL = (
    FailureKind.AUTH,
    FailureKind.PERMISSION,
    FailureKind.NOT_FOUND,
    FailureKind.INVALID_REQUEST,
    FailureKind.CONTENT_FILTER,
    FailureKind.REQUEST_TOO_LARGE,
    FailureKind.UNKNOWN,
)


def _failure(kind: FailureKind, **fields: object) -> Failure:
    return Failure(kind=kind, retryable=kind in TRANSIENT, **fields)  # type: ignore[arg-type]


def test_overflow_with_exact_count_recalibrates_and_refits_once() -> None:
    wire = context_overflow_error(
        "anthropic", prompt_tokens=9100, context_window=8192, requested_output=None
    )
    failure = classify_failure(status=wire.status, body=wire.body)
    decision = RetryPolicy().decide(failure)
    assert isinstance(decision, Refit)
    assert decision.safety == REACTIVE_SAFETY_TOKENS == 100
    assert decision.observed_prompt_tokens == 9100
    assert decision.context_window == 8192


def test_overflow_with_lower_bound_refits_without_calibrating() -> None:
    wire = context_overflow_error(
        "vllm", prompt_tokens=9100, context_window=8192, requested_output=512
    )
    failure = classify_failure(status=wire.status, body=wire.body)
    assert failure.prompt_tokens_is_lower_bound
    decision = RetryPolicy().decide(failure)
    assert isinstance(decision, Refit)
    assert decision.observed_prompt_tokens is None


def test_second_overflow_stops_with_context_truncated() -> None:
    policy = RetryPolicy()
    first = _failure(FailureKind.CONTEXT_OVERFLOW, prompt_tokens=9000)
    history = SendHistory().after(first)
    decision = policy.decide(first, history)
    assert isinstance(decision, Stop)
    assert decision.termination is TerminationReason.CONTEXT_TRUNCATED
    assert not decision.termination.is_retryable


def test_overflow_after_transient_failures_still_gets_its_one_refit() -> None:
    history = SendHistory().after(_failure(FailureKind.SERVER)).after(_failure(FailureKind.TIMEOUT))
    assert isinstance(RetryPolicy().decide(_failure(FailureKind.CONTEXT_OVERFLOW), history), Refit)


def test_output_limit_clamps_to_the_stated_cap_once() -> None:
    wire = output_limit_error(
        "anthropic", requested_output=100_000, max_output_tokens=64_000, model="claude-x"
    )
    failure = classify_failure(status=wire.status, body=wire.body)
    decision = RetryPolicy().decide(failure)
    assert isinstance(decision, ClampOutput) and decision.max_output_tokens == 64_000
    again = RetryPolicy().decide(failure, SendHistory().after(failure))
    assert isinstance(again, Stop) and again.termination is TerminationReason.PROVIDER_ERROR


def test_output_limit_without_a_cap_stops() -> None:
    decision = RetryPolicy().decide(_failure(FailureKind.OUTPUT_LIMIT))
    assert isinstance(decision, Stop)
    assert decision.termination is TerminationReason.PROVIDER_ERROR


@pytest.mark.parametrize("kind", FATAL)
def test_fatal_kinds_stop_at_once(kind: FailureKind) -> None:
    decision = RetryPolicy().decide(_failure(kind, status=400, message="nope"))
    assert isinstance(decision, Stop)
    assert decision.termination is TerminationReason.PROVIDER_ERROR
    assert "nope" in decision.reason


@pytest.mark.parametrize("kind", TRANSIENT)
def test_transient_kinds_back_off_exponentially_then_stop(kind: FailureKind) -> None:
    policy = RetryPolicy(max_transient_retries=4, base_delay=1.0, multiplier=2.0, max_delay=5.0)
    history = SendHistory()
    delays = []
    failure = _failure(kind)
    while True:
        decision = policy.decide(failure, history)
        if isinstance(decision, Stop):
            break
        assert isinstance(decision, Backoff)
        assert decision.attempt == len(delays) + 1
        delays.append(decision.delay)
        history = history.after(failure)
    assert delays == [1.0, 2.0, 4.0, 5.0]
    assert decision.termination is TerminationReason.PROVIDER_ERROR


def test_not_retryable_rate_limit_stops_at_once() -> None:
    failure = replace(_failure(FailureKind.RATE_LIMIT), retryable=False, message="quota")
    assert isinstance(RetryPolicy().decide(failure), Stop)


def test_retry_after_is_honoured_over_a_shorter_backoff() -> None:
    wire = rate_limit_error("anthropic", retry_after=7.25)
    failure = classify_failure(status=wire.status, body=wire.body, headers=wire.headers)
    decision = RetryPolicy(base_delay=1.0).decide(failure)
    assert isinstance(decision, Backoff) and decision.delay == pytest.approx(7.25)


def test_a_retry_after_beyond_the_bound_stops_instead_of_stalling() -> None:
    failure = _failure(FailureKind.RATE_LIMIT, retry_after=3600.0)
    decision = RetryPolicy(max_retry_after=120).decide(failure)
    assert isinstance(decision, Stop)


def test_server_errors_from_the_builders_back_off() -> None:
    for status in (500, 503, 529):
        wire = server_error("anthropic", status=status)
        assert isinstance(
            RetryPolicy().decide(classify_failure(status=status, body=wire.body)), Backoff
        )


@settings(deadline=None, max_examples=300)
@given(
    draws=st.lists(st.floats(min_value=0, max_value=1, exclude_max=True), min_size=1, max_size=8),
    jitter=st.floats(min_value=0, max_value=0.9),
    kinds=st.lists(st.sampled_from(TRANSIENT), min_size=1, max_size=8),
    retry_after=st.none() | st.floats(min_value=0, max_value=100),
)
def test_jittered_delays_stay_in_bounds_and_attempts_are_bounded(
    draws: list[float], jitter: float, kinds: list[FailureKind], retry_after: float | None
) -> None:
    policy = RetryPolicy(max_transient_retries=5, base_delay=0.5, max_delay=30.0, jitter=jitter)
    history = SendHistory()
    source = iter(draws * 10)
    backoffs = 0
    for index in range(20):
        failure = _failure(kinds[index % len(kinds)], retry_after=retry_after)
        decision = policy.decide(failure, history, random=lambda: next(source))
        if isinstance(decision, Stop):
            break
        assert isinstance(decision, Backoff)
        nominal = min(30.0, 0.5 * 2.0**backoffs)
        low = nominal * (1 - jitter)
        high = nominal * (1 + jitter)
        if retry_after is not None:
            low, high = max(low, retry_after), max(high, retry_after)
        assert low - 1e-9 <= decision.delay <= high + 1e-9
        backoffs += 1
        history = history.after(failure)
    assert backoffs == 5


@settings(deadline=None, max_examples=300)
@given(kinds=st.lists(st.sampled_from(list(FailureKind)), min_size=1, max_size=40))
def test_any_failure_sequence_ends_within_a_bounded_number_of_attempts(
    kinds: list[FailureKind],
) -> None:
    """No run of failures can keep a send alive forever: one refit, one clamp, N waits."""
    policy = RetryPolicy(max_transient_retries=3)
    history = SendHistory()
    attempts = 0
    for kind in kinds:
        failure = _failure(kind, max_output_tokens=100)
        decision = policy.decide(failure, history)
        attempts += 1
        if isinstance(decision, Stop):
            break
        history = history.after(failure)
    assert attempts <= 1 + 1 + 3 + 1


def test_the_same_inputs_give_the_same_decision() -> None:
    failure = _failure(FailureKind.OVERLOADED)
    assert RetryPolicy().decide(failure) == RetryPolicy().decide(failure)


def test_a_bad_random_source_is_reported() -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy().decide(_failure(FailureKind.SERVER), random=lambda: 1.5)


@pytest.mark.parametrize(
    "fields",
    [
        {"max_transient_retries": -1},
        {"base_delay": -1.0},
        {"max_delay": float("inf")},
        {"multiplier": 0.5},
        {"jitter": 1.0},
        {"reactive_safety": -5},
    ],
)
def test_bad_policy_settings_raise(fields: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy(**fields)  # type: ignore[arg-type]


# --- issue 12: two real bodies that got the wrong decision -------------------------


def _fixture(name: str) -> Failure:
    from .failure_fixtures import FIXTURES

    (fixture,) = [f for f in FIXTURES if f.name == name]
    return classify_failure(status=fixture.status, body=fixture.body, headers=fixture.headers)


def test_a_request_above_the_whole_per_minute_limit_stops_at_once() -> None:
    # OpenAI 429 "Request too large for gpt-4o ... (TPM): Limit 30000, Requested 34102":
    # no wait lets it pass, and it is not the context window, so no refit either.
    failure = _fixture("openai-429-request-too-large-for-tpm")
    assert failure.kind is FailureKind.REQUEST_TOO_LARGE and not failure.retryable
    decision = RetryPolicy().decide(failure)
    assert isinstance(decision, Stop)
    assert decision.termination is TerminationReason.PROVIDER_ERROR
    assert "waiting cannot let it pass" in decision.reason and "34102" in decision.reason


def test_gemini_per_minute_quota_waits_its_retry_info_delay() -> None:
    failure = _fixture("gemini-429-per-minute-quota-retry-info")
    assert failure.kind is FailureKind.RATE_LIMIT and failure.retryable
    assert failure.retry_after == 26.0
    decision = RetryPolicy(base_delay=1.0).decide(failure)
    assert isinstance(decision, Backoff) and decision.delay == 26.0


def test_gemini_per_day_quota_stops_although_it_names_a_delay() -> None:
    failure = _fixture("gemini-429-per-day-quota-retry-info")
    assert failure.retry_after == 36.0 and not failure.retryable
    decision = RetryPolicy().decide(failure)
    assert isinstance(decision, Stop)
    assert decision.termination is TerminationReason.PROVIDER_ERROR
