"""What a provider's usage report says, and the run's calibration factors.

:func:`prompt_tokens_from_usage` reads the prompt tokens of a usage value in any
supported shape (an int, OpenAI Chat, Anthropic, Responses; dicts or SDK objects);
:data:`NO_USAGE` says a later send's provider reported none. :class:`Calibration` is
the tool-loop design's factor: seeded above 1.0, it only rises toward what reports show, and resets
on a run's first send.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from ..core.exceptions import ConfigurationError

__all__ = [
    "DEFAULT_CALIBRATION_SEED",
    "NO_USAGE",
    "Calibration",
    "cached_tokens_from_usage",
    "prompt_tokens_from_usage",
]

DEFAULT_CALIBRATION_SEED: Final = 1.05
"""The heuristic's factor starts above 1.0, so its estimates err high."""


# --------------------------------------------------------------------------- calibration


class Calibration:
    """A run's calibration factor: seeded above 1.0, only ever rises.

    After each provider call, :meth:`observe` raises the factor to the observed ratio
    of reported prompt tokens to the raw estimate of that same request, when that ratio
    is higher. :meth:`reset` (a run's first send) returns to the seed.

    Args:
        seed: the starting factor, >= 1.0.

    Raises:
        ConfigurationError: a seed below 1.0 or not finite.
    """

    __slots__ = ("_factor", "_seed")

    def __init__(self, seed: float = DEFAULT_CALIBRATION_SEED) -> None:
        if not isinstance(seed, (int, float)) or not math.isfinite(seed) or seed < 1.0:
            raise ConfigurationError(
                f"calibration seed must be a finite number >= 1.0, got {seed!r}"
            )
        self._seed = float(seed)
        self._factor = float(seed)

    @property
    def factor(self) -> float:
        """The current factor (>= the seed)."""
        return self._factor

    @property
    def seed(self) -> float:
        """The factor a reset returns to."""
        return self._seed

    def observe(
        self, reported_prompt_tokens: int, raw_estimate: int, *, limit: float | None = None
    ) -> float:
        """Raise the factor to ``reported / raw`` when that is higher; return the factor.

        Args:
            reported_prompt_tokens: the provider's prompt tokens for the request.
            raw_estimate: the raw estimate of that same request.
            limit: the factor rises to at most this (a cap on how fast it may grow).

        Raises:
            ConfigurationError: negative or non-integer numbers.
        """
        for name, value in (
            ("reported_prompt_tokens", reported_prompt_tokens),
            ("raw_estimate", raw_estimate),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"{name} must be a non-negative int, got {value!r}")
        if raw_estimate > 0:
            ratio = reported_prompt_tokens / raw_estimate
            if limit is not None:
                ratio = min(ratio, limit)
            self._factor = max(self._factor, ratio)
        return self._factor

    def apply(self, raw_estimate: int) -> int:
        """The calibrated estimate: ``ceil(raw * factor)``."""
        return math.ceil(raw_estimate * self._factor)

    def reset(self) -> None:
        """Return to the seed (a new run's first send)."""
        self._factor = self._seed

    def __repr__(self) -> str:
        return f"Calibration(factor={self._factor:.4f}, seed={self._seed})"


# --------------------------------------------------------------------------- usage


class _NoUsage:
    """Sentinel: the provider reported no usage for the previous call."""

    __slots__ = ()
    _instance: _NoUsage | None = None

    def __new__(cls) -> _NoUsage:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_USAGE"

    def __reduce__(self) -> str:
        return "NO_USAGE"


NO_USAGE: Final = _NoUsage()
"""Pass as ``last_usage`` when a send's provider reported no usage: it neither resets
nor calibrates. ``None`` means the same; a run starts only with ``new_run=True`` or
:meth:`~windowguard.ContextWindowManager.reset` (decision 0007)."""

_ANTHROPIC_CACHE_FIELDS = ("cache_creation_input_tokens", "cache_read_input_tokens")


def _usage_field(usage: object, name: str) -> object:
    if isinstance(usage, Mapping):
        return usage.get(name)
    return getattr(usage, name, None)


def _as_tokens(value: object, name: str, usage: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(
            f"usage field {name!r} must be a non-negative int, got {value!r} "
            f"(in a {type(usage).__name__})"
        )
    return value


_CACHED_FIELDS = ("prompt_tokens_details", "input_tokens_details")


def cached_tokens_from_usage(usage: object) -> int:
    """The cached prompt tokens a usage reports beside its prompt tokens: OpenAI Chat's
    ``prompt_tokens_details.cached_tokens``, Responses' ``input_tokens_details
    .cached_tokens`` (0 when absent, unreadable, or for Anthropic, whose cache reads and
    writes are separate fields :func:`prompt_tokens_from_usage` already adds)."""
    if usage is None or usage is NO_USAGE or isinstance(usage, (int, str, bytes, float)):
        return 0
    for name in _CACHED_FIELDS:
        details = _usage_field(usage, name)
        if details is None:
            continue
        value = _usage_field(details, "cached_tokens")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def prompt_tokens_from_usage(usage: object) -> int | None:
    """The provider-reported prompt tokens of a usage value, in any supported shape.

    Args:
        usage: an int; an OpenAI Chat usage (dict or SDK object with ``prompt_tokens``);
            an Anthropic usage (``input_tokens`` + ``cache_creation_input_tokens`` +
            ``cache_read_input_tokens``, None fields counting 0); a Responses usage
            (``input_tokens``); None or :data:`NO_USAGE`.

    Returns:
        The prompt tokens, or None for None / NO_USAGE.

    Raises:
        ConfigurationError: anything else, named with what was given.
    """
    if usage is None or usage is NO_USAGE:
        return None
    if isinstance(usage, int) and not isinstance(usage, bool):
        return _as_tokens(usage, "usage", usage)
    if isinstance(usage, (str, bytes, float, bool)):
        raise ConfigurationError(
            f"cannot read prompt tokens from a {type(usage).__name__} ({usage!r}); pass an int, "
            "an OpenAI/Anthropic/Responses usage (dict or SDK object), None or NO_USAGE"
        )
    prompt = _usage_field(usage, "prompt_tokens")
    if prompt is not None:
        return _as_tokens(prompt, "prompt_tokens", usage)
    input_tokens = _usage_field(usage, "input_tokens")
    if input_tokens is not None:
        total = _as_tokens(input_tokens, "input_tokens", usage)
        for name in _ANTHROPIC_CACHE_FIELDS:
            value = _usage_field(usage, name)
            if value is not None:
                total += _as_tokens(value, name, usage)
        return total
    keys = sorted(map(str, usage)) if isinstance(usage, Mapping) else None
    described = f"a dict with keys {keys}" if keys is not None else f"a {type(usage).__name__}"
    raise ConfigurationError(
        f"cannot read prompt tokens from {described}: expected 'prompt_tokens' (OpenAI Chat) "
        "or 'input_tokens' (Anthropic, Responses)"
    )
