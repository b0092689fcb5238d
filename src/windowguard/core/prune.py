"""Turn-atomic pruning: which oldest whole turns to drop so a request fits.

Pruning drops the oldest WHOLE turns — an assistant response with ALL its tool calls,
together with ALL the results answering them — so the call/result pairing providers
require is never broken (the tool-loop design). The head (instructions and task) and the newest
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
  again (Anthropic's context editing has ``clear_at_least`` for the same reason). It does
  so only when the room it frees holds several typical turns (``hold_turns``): where
  turns are large against the window, the cut would move again within a send or two
  anyway, so it drops just enough, as ``"minimal"`` does.
Both are turn-atomic, keep the head and the newest turn, are deterministic for the
same sequence of calls, and fit or raise.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import Literal

__all__ = ["POLICIES", "PruningPolicy", "calibrated", "choose_drop", "turns_to_drop"]

PruningPolicy = Literal["minimal", "low_water"]
POLICIES: tuple[PruningPolicy, ...] = ("minimal", "low_water")

Cost = Callable[[int], int]
"""``cost(dropped)``: the best count of the request after dropping that many oldest
turns; never rises as ``dropped`` grows."""


def calibrated(raw_tokens: int, factor: float) -> int:
    """A raw estimate scaled by the calibration factor, rounded up."""
    return math.ceil(raw_tokens * factor)


def turns_to_drop(*, cost: Cost, turns: int, budget: int, hint: int | None = None) -> int | None:
    """The fewest oldest turns to drop so the request fits ``budget``.

    Args:
        cost: the request's count after dropping ``n`` oldest turns (non-increasing).
        turns: how many turns the transcript has (the newest is never dropped).
        budget: the input budget.
        hint: a likely answer (the previous send's): the search starts there, so a send
            whose cut moves by a turn costs two or three counts, not ``log2(turns)``.

    Returns:
        How many oldest turns to drop (0 when everything fits), or None when even the
        head plus the newest turn does not fit.
    """
    if cost(0) <= budget:
        return 0
    if turns < 2:
        return None
    low, high = 1, turns - 1  # cost(high) fits, cost(low - 1) does not
    if hint is not None and low <= hint <= high:
        if cost(hint) <= budget:
            if hint == low or cost(hint - 1) > budget:
                return hint
            high = hint - 1
        else:
            low = hint + 1
            if low <= high and cost(low) <= budget:
                return low
            low += 1
            if low > high:
                return None if cost(high) > budget else high
    if cost(high) > budget:
        return None
    while low < high:
        middle = (low + high) // 2
        if cost(middle) <= budget:
            high = middle
        else:
            low = middle + 1
    return low


def choose_drop(
    *,
    cost: Cost,
    turn_starts: Sequence[int],
    budget: int,
    policy: PruningPolicy = "low_water",
    low_water: float = 0.7,
    anchor: int | None = None,
    turn_tokens: int = 0,
    hold_turns: int = 0,
    low_cost: Cost | None = None,
) -> int | None:
    """How many oldest turns to drop under ``policy``.

    Args:
        cost: as for :func:`turns_to_drop`.
        turn_starts: the first message of each turn, ascending.
        budget: the input budget.
        policy: ``"minimal"`` or ``"low_water"``.
        low_water: the fraction of the budget a ``low_water`` prune drops down to.
        anchor: the message index where the previous send's kept turns began; a
            ``low_water`` policy keeps it while the request still fits.
        turn_tokens: what a typical recent turn costs.
        hold_turns: a ``low_water`` prune drops below what fits only when the room it
            frees holds at least this many typical turns; otherwise the cut would move
            again within a send or two anyway, and the context would be lost for
            nothing, so it drops just enough. Nor does it keep less than the mark minus
            that room: a large turn straddling the mark is kept when the cut before it
            still frees the room (0: always drop to the mark, whatever it costs).
        low_cost: the count the low-water search uses below the minimal cut (default
            ``cost``). Whether a request fits is decided on ``cost`` (the manager's
            guaranteed upper count); how far below that to drop for the cache is a
            policy, and may follow the best estimate (never dropping less than minimal,
            so the request still fits by ``cost``).

    Returns:
        The number of oldest turns to drop, or None when head + newest turn cannot fit.
    """
    turns = len(turn_starts)
    previous: int | None = None
    if anchor is not None:
        at = bisect_left(turn_starts, anchor)
        if at < turns and turn_starts[at] == anchor:
            previous = at
    if (
        policy == "low_water"
        and previous is not None
        and cost(0) > budget
        and cost(previous) <= budget
    ):
        return previous  # the previous cut still fits (so minimal <= it): keep it
    minimal = turns_to_drop(cost=cost, turns=turns, budget=budget, hint=previous)
    if policy == "minimal" or not minimal:
        return minimal
    mark = math.floor(budget * low_water)
    hold = hold_turns * turn_tokens
    if hold_turns and budget - mark < hold:
        return minimal
    low = cost if low_cost is None else low_cost
    lower = turns_to_drop(cost=low, turns=turns, budget=mark)
    if lower is None or lower <= minimal:
        return minimal
    if hold_turns and low(lower) < mark - hold:
        # A large turn straddles the mark: dropping it would throw away far more than
        # the mark asks. Keep it when the cut before it still frees room for the turns
        # the mark is for; else drop just enough.
        before = lower - 1
        if before > minimal and low(before) <= budget - hold:
            return before
        return minimal
    return lower
