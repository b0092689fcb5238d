"""Turn-atomic pruning: which oldest whole turns to drop so a request fits.

Pruning drops the oldest WHOLE turns — an assistant response with ALL its tool calls,
together with ALL the results answering them — so the call/result pairing providers
require is never broken (ADR-107). The head (instructions and task) and the newest
turn are never dropped, so the output is a valid, non-empty transcript that still
carries the task and the most recent context. Summarisation is not done: it costs a
provider call per prune and is not deterministic; dropping is cheap and provably safe.

The decision works on prefix sums of per-message raw estimates, so it costs
O(log turns) once the sums exist; the sums grow by O(new messages) per send.

Two policies decide *how much* to drop once something must go:

* ``"minimal"`` drops just enough oldest turns to fit the budget. Once a long run
  reaches the window, that changes the prompt's prefix on every send, so every
  request after the head is new to the provider's prompt cache.
* ``"low_water"`` (the default, see ``docs/decisions/0003-cache-friendly-pruning.md``)
  drops down to a fraction of the budget (``low_water``, 0.7 by default) and then keeps
  that cut point while the requests still fit: the following sends append to an
  unchanged prefix, and the provider's prompt cache hits until the budget is reached
  again (Anthropic's context editing has ``clear_at_least`` for the same reason).
Both are turn-atomic, keep the head and the newest turn, are deterministic for the
same sequence of calls, and fit or raise.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from typing import Literal

__all__ = ["POLICIES", "PruningPolicy", "calibrated", "choose_drop", "turns_to_drop"]

PruningPolicy = Literal["minimal", "low_water"]
POLICIES: tuple[PruningPolicy, ...] = ("minimal", "low_water")


def calibrated(raw_tokens: int, factor: float) -> int:
    """A raw estimate scaled by the calibration factor, rounded up."""
    return math.ceil(raw_tokens * factor)


def turns_to_drop(
    *,
    prefix: Sequence[int],
    head_stop: int,
    turn_starts: Sequence[int],
    fixed_tokens: int,
    factor: float,
    budget: int,
) -> int | None:
    """The fewest oldest turns to drop so the request fits ``budget``.

    Args:
        prefix: ``prefix[i]`` is the raw estimate of messages ``[:i]``; its length is
            the number of messages plus one.
        head_stop: messages ``[:head_stop]`` are the head.
        turn_starts: the first message of each turn, ascending.
        fixed_tokens: raw tokens sent whatever is dropped (system argument, tool
            schemas, per-request framing).
        factor: the calibration factor.
        budget: the input budget.

    Returns:
        How many oldest turns to drop (0 when everything fits), or None when even the
        head plus the newest turn does not fit.
    """
    total = prefix[-1]
    head = prefix[head_stop]

    def fits(dropped: int) -> bool:
        kept = total - (prefix[turn_starts[dropped]] - head) if dropped else total
        return calibrated(fixed_tokens + kept, factor) <= budget

    if fits(0):
        return 0
    if len(turn_starts) < 2 or not fits(len(turn_starts) - 1):
        return None
    low, high = 1, len(turn_starts) - 1  # fits(high) holds, fits(low - 1) does not
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return low


def choose_drop(
    *,
    prefix: Sequence[int],
    head_stop: int,
    turn_starts: Sequence[int],
    fixed_tokens: int,
    factor: float,
    budget: int,
    policy: PruningPolicy = "low_water",
    low_water: float = 0.7,
    anchor: int | None = None,
) -> int | None:
    """How many oldest turns to drop under ``policy``.

    Args:
        prefix, head_stop, turn_starts, fixed_tokens, factor, budget: as for
            :func:`turns_to_drop`.
        policy: ``"minimal"`` or ``"low_water"``.
        low_water: the fraction of the budget a ``low_water`` prune drops down to.
        anchor: the message index where the previous send's kept turns began; a
            ``low_water`` policy keeps it while the request still fits.

    Returns:
        The number of oldest turns to drop, or None when head + newest turn cannot fit.
    """

    def drop_for(target: int) -> int | None:
        return turns_to_drop(
            prefix=prefix,
            head_stop=head_stop,
            turn_starts=turn_starts,
            fixed_tokens=fixed_tokens,
            factor=factor,
            budget=target,
        )

    minimal = drop_for(budget)
    if policy == "minimal" or not minimal:
        return minimal
    if anchor is not None:
        kept_from = bisect_left(turn_starts, anchor)
        if (
            kept_from < len(turn_starts)
            and turn_starts[kept_from] == anchor
            and kept_from >= minimal
        ):
            return kept_from
    target = math.floor(budget * low_water)
    lower = drop_for(target)
    return minimal if lower is None else max(lower, minimal)
