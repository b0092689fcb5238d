"""Turn-atomic pruning: which oldest whole turns to drop so a request fits.

Pruning drops the oldest WHOLE turns — an assistant response with ALL its tool calls,
together with ALL the results answering them — so the call/result pairing providers
require is never broken (ADR-107). The head (instructions and task) and the newest
turn are never dropped, so the output is a valid, non-empty transcript that still
carries the task and the most recent context. Summarisation is not done: it costs a
provider call per prune and is not deterministic; dropping is cheap and provably safe.

The decision works on prefix sums of per-message raw estimates, so it costs
O(log turns) once the sums exist; the sums grow by O(new messages) per send.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["calibrated", "turns_to_drop"]


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
