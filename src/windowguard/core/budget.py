"""Reserve and budget arithmetic (the tool-loop design: reserve room for the reply, fail legibly).

``budget = min(context_window - reserve - safety, max_input_tokens)`` where the
reserve is the reply allocation: the request's ``max_tokens``, else the model's
output cap, else a proportional floor (an eighth of the window).

For pruning only, the reserve is capped at half the window: a ``max_tokens`` as large
as the window (the shrink guard's 131072 on a 131k model, or catalogs whose output cap equals
the window) would otherwise prune the transcript to nothing. The transcript is fitted
to the capped reserve and the shrink guard then fits ``max_tokens`` itself to what
remains — there is never a defensive cap on ``max_tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .exceptions import ConfigurationError

__all__ = ["Budget", "compute_budget", "proportional_reserve"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """The input budget of one request and how it was derived.

    Attributes:
        context_window: the model's window (prompt + output).
        reserve: the reply allocation used for pruning (capped at half the window).
        reserve_source: ``"max_tokens"``, ``"max_output_tokens"`` or ``"proportional"``.
        safety: tokens kept free for the estimator's variance and provider overhead.
        input_tokens: what the prompt (messages + system + tools) may use.
    """

    context_window: int
    reserve: int
    reserve_source: str
    safety: int
    input_tokens: int


def proportional_reserve(context_window: int) -> int:
    """The reply allocation when neither the request nor the model names one."""
    return max(context_window // 8, 1)


def compute_budget(
    *,
    context_window: int,
    max_tokens: int | None = None,
    max_output_tokens: int | None = None,
    max_input_tokens: int | None = None,
    safety: int = 500,
) -> Budget:
    """Compute the input budget of a request.

    Args:
        context_window: the model's total window.
        max_tokens: the reply budget the request asks for, if any.
        max_output_tokens: the model's output cap, if known.
        max_input_tokens: the model's prompt cap, if below the window.
        safety: tokens kept free.

    Returns:
        The budget; its ``input_tokens`` may be zero or negative when nothing fits.

    Raises:
        ConfigurationError: a non-positive window, a negative safety or a
            non-positive ``max_tokens``.
    """
    _positive("context_window", context_window)
    if max_tokens is not None:
        _positive("max_tokens", max_tokens)
    if not isinstance(safety, int) or isinstance(safety, bool) or safety < 0:
        raise ConfigurationError(f"safety must be a non-negative int, got {safety!r}")
    if max_tokens is not None:
        reserve, source = max_tokens, "max_tokens"
        if max_output_tokens is not None:
            reserve = min(reserve, max_output_tokens)
    elif max_output_tokens is not None:
        reserve, source = max_output_tokens, "max_output_tokens"
    else:
        reserve, source = proportional_reserve(context_window), "proportional"
    reserve = min(reserve, context_window // 2)
    input_tokens = context_window - reserve - safety
    if max_input_tokens is not None:
        input_tokens = min(input_tokens, max_input_tokens)
    return Budget(
        context_window=context_window,
        reserve=reserve,
        reserve_source=source,
        safety=safety,
        input_tokens=input_tokens,
    )


def _positive(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigurationError(f"{name} must be a positive int, got {value!r}")
