"""The reactive retry policy: what to do after a fitted send fails.

The manager fits every request before it is sent, so a refusal afterwards means the
estimate or a limit was wrong, or the provider is briefly unable to serve. This module
decides, from the classified :class:`~windowguard.core.failures.Failure` and the failures
already seen for the same send, which of four things happens next. It is a pure
policy: it never sleeps, reads no clock and draws no random number of its own; the
caller injects randomness for jitter and does the waiting.

Decisions (a closed union on ``kind``):
    * ``refit`` (CONTEXT_OVERFLOW, first time): the window was overrun although the
      fit said it would not be. When the provider stated the prompt's exact size,
      grow the calibration from it (``observed_prompt_tokens``); then fit again with
      the reactive safety margin (100 tokens, the shrink guard's) and send once more at once.
      A second overflow of the same send stops the run with ``CONTEXT_TRUNCATED``:
      never the tight 400-loop of re-sending what the provider already refused.
    * ``clamp_output`` (OUTPUT_LIMIT, first time): lower ``max_tokens`` to the cap the
      provider stated and remember that cap for the rest of the run; send once more.
    * ``backoff`` (RATE_LIMIT, SERVER, OVERLOADED, TIMEOUT, CONNECTION while
      retryable): wait ``delay`` seconds, then send the same request. The delay grows
      exponentially (``base_delay * multiplier ** n``, capped at ``max_delay``), with
      optional jitter, and is never shorter than the provider's ``retry_after``.
      After ``max_transient_retries`` such waits the run stops with PROVIDER_ERROR,
      as it does at once when the provider asks for a wait beyond ``max_retry_after``.
    * ``stop``: AUTH, PERMISSION, NOT_FOUND, INVALID_REQUEST, CONTENT_FILTER, UNKNOWN,
      REQUEST_TOO_LARGE (one request above the per-minute budget or the byte limit:
      waiting never lets it pass, and it is not the context window, so no refit), and any
      failure not retryable as is (quota exhausted, a daily quota ...): end the run with
      ``termination`` (PROVIDER_ERROR, or CONTEXT_TRUNCATED after a second overflow).

How the tool loop uses it, per provider send::

    history, safety = SendHistory(), None
    while True:
        fit = manager.fit(messages, tools=tools, max_tokens=cap_for_run or max_tokens,
                          safety=safety, ...)
        try:
            reply = provider.send(fit)
            break
        except ProviderError as exc:
            failure = classify_failure(exc)
        decision = policy.decide(failure, history, random=rng.random)
        history = history.after(failure)
        match decision:
            case Refit(observed_prompt_tokens=p, context_window=w, safety=s):
                manager.observe_overflow(p, w)   # exact counts only; a smaller window
                safety = s                       # then loop: fit again, send once more
            case ClampOutput(max_output_tokens=c):
                cap_for_run = c                  # kept for the whole run
            case Backoff(delay=d):
                sleep(d)                         # the driver's own (injected) clock
            case Stop(termination=t):
                return RunResult(termination=t, failure=failure, ...)
            case _:
                assert_never(decision)

A new ``SendHistory`` starts with every new send (every loop iteration); the output
cap learnt from ``clamp_output`` is the caller's to keep for the run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ..core.exceptions import ConfigurationError
from ..core.failures import TRANSIENT_KINDS, Failure, FailureKind, TerminationReason

__all__ = [
    "REACTIVE_SAFETY_TOKENS",
    "Backoff",
    "ClampOutput",
    "Refit",
    "RetryDecision",
    "RetryPolicy",
    "SendHistory",
    "Stop",
]

REACTIVE_SAFETY_TOKENS = 100
"""Safety margin of the refit after an overflow (the shrink guard's 500 before, 100 after)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Refit:
    """Fit the transcript again with a tighter margin and send once more, at once.

    Attributes:
        safety: the safety margin in tokens for the refit.
        observed_prompt_tokens: the prompt size the provider stated, exact; grow the
            calibration from it. None when the provider stated no count or only a
            lower bound ("at least P"), which must not be taken for the real size.
        context_window: the window the provider stated, when it did; a window
            smaller than the one the manager used is worth adopting.
        reason: why, in words.
    """

    kind: Literal["refit"] = "refit"
    safety: int
    observed_prompt_tokens: int | None
    context_window: int | None
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ClampOutput:
    """Lower ``max_tokens`` to the provider's output cap, keep it for the run, resend.

    Attributes:
        max_output_tokens: the cap the provider stated.
        reason: why, in words.
    """

    kind: Literal["clamp_output"] = "clamp_output"
    max_output_tokens: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    """Wait ``delay`` seconds, then send the same request again.

    Attributes:
        delay: seconds to wait (the caller sleeps; the policy never does).
        attempt: which transient retry this is, from 1.
        reason: why, in words.
    """

    kind: Literal["backoff"] = "backoff"
    delay: float
    attempt: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Stop:
    """End the run; no further provider call for this send.

    Attributes:
        termination: PROVIDER_ERROR, or CONTEXT_TRUNCATED after a repeated overflow.
        reason: why, in words.
    """

    kind: Literal["stop"] = "stop"
    termination: TerminationReason
    reason: str


RetryDecision = Refit | ClampOutput | Backoff | Stop


@dataclass(frozen=True, slots=True, kw_only=True)
class SendHistory:
    """The failures already seen for one logical send, oldest first.

    Attributes:
        failures: earlier failures of this send (not including the one being decided).
    """

    failures: tuple[Failure, ...] = ()

    def after(self, failure: Failure) -> SendHistory:
        """This history with ``failure`` appended (a new value; this one is unchanged)."""
        return SendHistory(failures=(*self.failures, failure))

    def count(self, *kinds: FailureKind) -> int:
        """How many earlier failures are of one of ``kinds``."""
        return sum(1 for f in self.failures if f.kind in kinds)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Bounded reactions to classified provider failures.

    Attributes:
        max_transient_retries: waits allowed per send for transient failures.
        base_delay: seconds before the first transient retry.
        multiplier: growth of the delay per retry.
        max_delay: upper bound of the computed delay (``retry_after`` may exceed it,
            up to ``max_retry_after``).
        jitter: fraction of the delay randomised when a random source is given: the
            delay is scaled by a factor in ``[1 - jitter, 1 + jitter)``.
        max_retry_after: the longest ``retry_after`` worth waiting for; a provider
            asking for more stops the run instead of stalling it.
        reactive_safety: safety margin of a refit after an overflow.
    """

    max_transient_retries: int = 4
    base_delay: float = 1.0
    multiplier: float = 2.0
    max_delay: float = 30.0
    jitter: float = 0.25
    max_retry_after: float = 120.0
    reactive_safety: int = REACTIVE_SAFETY_TOKENS

    def __post_init__(self) -> None:
        if not isinstance(self.max_transient_retries, int) or self.max_transient_retries < 0:
            raise ConfigurationError(
                f"max_transient_retries must be an int >= 0, got {self.max_transient_retries!r}"
            )
        for name in ("base_delay", "max_delay", "max_retry_after"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ConfigurationError(f"{name} must be a finite number >= 0, got {value!r}")
        if not math.isfinite(self.multiplier) or self.multiplier < 1:
            raise ConfigurationError(f"multiplier must be >= 1, got {self.multiplier!r}")
        if not 0 <= self.jitter < 1:
            raise ConfigurationError(f"jitter must be in [0, 1), got {self.jitter!r}")
        if not isinstance(self.reactive_safety, int) or self.reactive_safety < 0:
            raise ConfigurationError(
                f"reactive_safety must be an int >= 0, got {self.reactive_safety!r}"
            )

    def decide(
        self,
        failure: Failure,
        history: SendHistory = SendHistory(),  # an immutable value: safe as a default
        *,
        random: Callable[[], float] | None = None,
    ) -> RetryDecision:
        """Say what to do after ``failure`` of a fitted send.

        Args:
            failure: the classified failure of the latest attempt.
            history: the failures of earlier attempts of the same send.
            random: a source of floats in ``[0, 1)`` for jitter; None gives the
                deterministic delay.

        Returns:
            The decision; see the module docstring.

        Raises:
            ConfigurationError: ``random`` returned a value outside ``[0, 1)``.
        """
        kind = failure.kind
        if kind is FailureKind.CONTEXT_OVERFLOW:
            return self._overflow(failure, history)
        if kind is FailureKind.OUTPUT_LIMIT:
            return self._output_limit(failure, history)
        if kind in TRANSIENT_KINDS:
            return self._transient(failure, history, random)
        if kind is FailureKind.REQUEST_TOO_LARGE:
            return Stop(
                termination=TerminationReason.PROVIDER_ERROR,
                reason=f"the request is larger than a limit that is not the context window "
                f"(status {failure.status}), such as the per-minute token budget or the body "
                "size; waiting cannot let it pass: send less (a smaller window for this model) "
                f"or raise the limit: {failure.message or 'no message'}",
            )
        return Stop(
            termination=TerminationReason.PROVIDER_ERROR,
            reason=f"{kind.value} failure (status {failure.status}) cannot pass by retrying: "
            f"{failure.message or 'no message'}",
        )

    def _overflow(self, failure: Failure, history: SendHistory) -> RetryDecision:
        if history.count(FailureKind.CONTEXT_OVERFLOW):
            return Stop(
                termination=TerminationReason.CONTEXT_TRUNCATED,
                reason="the provider refused the refitted request for overflow again; "
                "stopping instead of re-sending a request it will refuse",
            )
        exact = failure.prompt_tokens if not failure.prompt_tokens_is_lower_bound else None
        if exact is not None:
            why = f"provider counted {exact} prompt tokens; recalibrate and refit"
        elif failure.prompt_tokens is not None:
            why = f"provider counted at least {failure.prompt_tokens} prompt tokens; refit"
        else:
            why = "provider reported a context overflow without a count; refit"
        return Refit(
            safety=self.reactive_safety,
            observed_prompt_tokens=exact,
            context_window=failure.context_window,
            reason=why,
        )

    def _output_limit(self, failure: Failure, history: SendHistory) -> RetryDecision:
        cap = failure.max_output_tokens
        if history.count(FailureKind.OUTPUT_LIMIT):
            return Stop(
                termination=TerminationReason.PROVIDER_ERROR,
                reason="the provider refused max_tokens again after clamping to its cap",
            )
        if cap is None or cap <= 0:
            return Stop(
                termination=TerminationReason.PROVIDER_ERROR,
                reason="the provider refused max_tokens without stating a usable output cap: "
                f"{failure.message or 'no message'}",
            )
        return ClampOutput(
            max_output_tokens=cap,
            reason=f"max_tokens {failure.requested_output} exceeds the output cap {cap}",
        )

    def _transient(
        self, failure: Failure, history: SendHistory, random: Callable[[], float] | None
    ) -> RetryDecision:
        if not failure.retryable:
            return Stop(
                termination=TerminationReason.PROVIDER_ERROR,
                reason=f"{failure.kind.value} failure the provider marks as not retryable: "
                f"{failure.message or 'no message'}",
            )
        done = history.count(*TRANSIENT_KINDS)
        if done >= self.max_transient_retries:
            return Stop(
                termination=TerminationReason.PROVIDER_ERROR,
                reason=f"{failure.kind.value} persisted through {done} retries",
            )
        wait = failure.retry_after
        if wait is not None and wait > self.max_retry_after:
            return Stop(
                termination=TerminationReason.PROVIDER_ERROR,
                reason=f"the provider asked to wait {wait:g}s, more than the "
                f"{self.max_retry_after:g}s this policy waits",
            )
        delay = min(self.max_delay, self.base_delay * self.multiplier**done)
        if random is not None and self.jitter:
            draw = random()
            if not 0 <= draw < 1:
                raise ConfigurationError(f"random() must return a float in [0, 1), got {draw!r}")
            delay *= 1 - self.jitter + 2 * self.jitter * draw
        if wait is not None:
            delay = max(delay, wait)
        return Backoff(
            delay=delay,
            attempt=done + 1,
            reason=f"{failure.kind.value} (status {failure.status}); retry {done + 1} of "
            f"{self.max_transient_retries} after {delay:.3g}s",
        )
