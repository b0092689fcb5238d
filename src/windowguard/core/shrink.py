"""The max_tokens shrink guard (the shrink guard, docs/background.md).

The provider rejects a request when ``input + tools + max_tokens > context_window``.
Before each call the guard fits the reply budget into what the window leaves::

    estimated_input  = (len(messages_json) + len(tools_json)) / 3
    available        = context_window - estimated_input - safety_buffer
    max_tokens       = min(requested, max(available, floor))

Tool schemas always count: a guard that counts only messages under-reserves by
exactly the tool budget and causes a tight 400-loop. Below the floor the guard clamps
to the floor (the provider gets something to answer with) and reports an emergency.
There is no defensive cap: a 96k output budget on a 128k model is kept while it fits.
A model's own output cap (``max_output_tokens``) is respected.

:func:`shrink_max_tokens` is exactly the seed's arithmetic (``json.dumps`` with
Python's defaults, chars/3); :func:`fit_max_tokens` is the same rule on any input
estimate, which the manager feeds with its calibrated estimate so the two agree.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

from .events import ContextEmergencyShrink, MaxTokensShrunk
from .exceptions import ConfigurationError

__all__ = [
    "DEFAULT_FLOOR",
    "DEFAULT_SAFETY_BUFFER",
    "ShrinkResult",
    "fit_max_tokens",
    "shrink_max_tokens",
]

DEFAULT_SAFETY_BUFFER = 500
DEFAULT_FLOOR = 200

logger = logging.getLogger("windowguard")


@dataclass(frozen=True, slots=True, kw_only=True)
class ShrinkResult:
    """The reply budget that fits, and the numbers behind it.

    Attributes:
        max_tokens: the value to send.
        requested: what the caller asked for (None: as much as fits).
        shrunk: ``max_tokens`` is below ``requested``.
        emergency: nothing was left for the reply; clamped to ``floor``.
        estimated_input_tokens: prompt + tools estimate the decision used.
        available: ``context_window - estimated_input_tokens - safety_buffer``.
        event: the ``max_tokens_shrunk`` / ``context_emergency_shrink`` event, if any.
    """

    max_tokens: int
    requested: int | None
    shrunk: bool
    emergency: bool
    estimated_input_tokens: int
    available: int
    context_window: int
    safety_buffer: int
    floor: int
    event: MaxTokensShrunk | ContextEmergencyShrink | None


def fit_max_tokens(
    *,
    estimated_input_tokens: int,
    context_window: int,
    requested: int | None,
    safety_buffer: int = DEFAULT_SAFETY_BUFFER,
    floor: int = DEFAULT_FLOOR,
    max_output_tokens: int | None = None,
) -> ShrinkResult:
    """Fit a reply budget to what the window leaves after an input estimate.

    Args:
        estimated_input_tokens: tokens of messages plus tool schemas.
        context_window: the model's window.
        requested: the caller's ``max_tokens``; None asks for as much as fits.
        safety_buffer: tokens kept free.
        floor: the smallest reply budget ever sent.
        max_output_tokens: the model's output cap, if any.

    Raises:
        ConfigurationError: a non-positive window, requested or floor.
    """
    for name, value in (("context_window", context_window), ("floor", floor)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigurationError(f"{name} must be a positive int, got {value!r}")
    if requested is not None and (
        not isinstance(requested, int) or isinstance(requested, bool) or requested <= 0
    ):
        raise ConfigurationError(f"requested max_tokens must be a positive int, got {requested!r}")
    available = context_window - estimated_input_tokens - safety_buffer
    fitted = max(available, floor)
    reason = "window"
    if max_output_tokens is not None and fitted > max_output_tokens:
        fitted = max_output_tokens
        reason = "output_cap"
    if requested is not None and requested <= fitted:
        fitted, reason = requested, ""
    shrunk = requested is not None and fitted < requested
    # An emergency is a reply that eats into the safety buffer (the floor sent where
    # less is left), not a room below the floor: a caller asking for 8 tokens where 49
    # are left gets its 8, with no shrink to report.
    emergency = fitted > available
    event: MaxTokensShrunk | ContextEmergencyShrink | None = None
    if emergency:
        event = ContextEmergencyShrink(
            requested=requested,
            max_tokens=fitted,
            estimated_input_tokens=estimated_input_tokens,
            context_window=context_window,
            safety_buffer=safety_buffer,
            floor=floor,
        )
        logger.warning(
            "context emergency: ~%d input tokens leave %d of a %d window; max_tokens clamped to %d",
            estimated_input_tokens,
            available,
            context_window,
            fitted,
        )
    elif shrunk:
        event = MaxTokensShrunk(
            requested=requested,
            max_tokens=fitted,
            estimated_input_tokens=estimated_input_tokens,
            context_window=context_window,
            safety_buffer=safety_buffer,
            reason=reason,
        )
        logger.info("max_tokens shrunk from %s to %d (%s)", requested, fitted, reason)
    return ShrinkResult(
        max_tokens=fitted,
        requested=requested,
        shrunk=shrunk,
        emergency=emergency,
        estimated_input_tokens=estimated_input_tokens,
        available=available,
        context_window=context_window,
        safety_buffer=safety_buffer,
        floor=floor,
        event=event,
    )


def shrink_max_tokens(
    messages: Sequence[object],
    *,
    tools: Sequence[object] | None = None,
    context_window: int,
    requested: int,
    safety_buffer: int = DEFAULT_SAFETY_BUFFER,
    floor: int = DEFAULT_FLOOR,
    max_output_tokens: int | None = None,
) -> ShrinkResult:
    """Seed 003's shrink guard: chars/3 of the JSON request, tools included.

    Examples:
        >>> r = shrink_max_tokens([{"role": "user", "content": "hi"}],
        ...                       context_window=131_072, requested=131_072)
        >>> r.shrunk, r.max_tokens
        (True, 130560)

    Args:
        messages: the request's messages (dicts or SDK objects).
        tools: the request's tool schemas; always counted when given.
        context_window: the model's window.
        requested: the configured ``max_tokens``.
        safety_buffer: 500 proactively (the seed's reactive retry uses 100).
        floor: the smallest reply budget ever sent (200).
        max_output_tokens: the model's output cap, if any.
    """
    messages_json = json.dumps(messages, default=_jsonable)
    tools_json = json.dumps(tools, default=_jsonable) if tools else ""
    estimated_input = math.ceil((len(messages_json) + len(tools_json)) / 3)
    return fit_max_tokens(
        estimated_input_tokens=estimated_input,
        context_window=context_window,
        requested=requested,
        safety_buffer=safety_buffer,
        floor=floor,
        max_output_tokens=max_output_tokens,
    )


def _jsonable(value: object) -> object:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)
    raise ConfigurationError(f"cannot serialise a {type(value).__name__} in a request")
