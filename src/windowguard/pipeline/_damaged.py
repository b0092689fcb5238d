"""Fitting a damaged transcript: keep the damaged stretch whole, prune whole turns around it.

Damage (an orphaned result, an unanswered call, an unknown role, content of a wrong
type) is never repaired and never split. The *damaged stretch* — from the first turn
holding damage to the end of the last one (or the head, when the damage is there) — is
kept as one unit, like the head. Everything else is still made of whole turns, and
those are pruned as usual, oldest first:

1. whole turns before the stretch: the request stays head + a contiguous run of
   messages to the end, so it is counted like any other (the ledger measures it);
2. then whole turns after the stretch, never the newest: the request is head + stretch +
   the newest turns; its count is every kept message's estimate (an upper bound), and
   the provider's report of it is not attributed.

When even head + stretch + newest turn cannot fit, the send is refused, naming the
damage ("never makes a transcript worse" does not mean "sends a certain 400").
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from ..accounting.ledger import Factors
from ..core.turns import Problem
from ._fitting import Count, FitContext

__all__ = ["DamagedPlan", "damaged_stretch", "plan_damaged"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DamagedPlan:
    """What to send of a damaged transcript.

    Attributes:
        kept: the message indices to send, in order.
        dropped_turns: whole turns left out.
        count: the best count of what is sent.
        kept_from: when the request is head + ``[kept_from, end)``, that index (the
            ledger can attribute its report); None otherwise.
        fits: whether it fits the input budget.
    """

    kept: tuple[int, ...]
    dropped_turns: int
    count: Count
    kept_from: int | None
    fits: bool


def damaged_stretch(ctx: FitContext, problems: Sequence[Problem]) -> tuple[int, int]:
    """``[start, stop)``: the first damaged turn through the end of the last one; within
    the head (``stop <= head_stop``) when all damage is there."""
    seg = ctx.seg
    starts = seg.turn_starts
    first = min(p.index for p in problems)
    last = max(p.index for p in problems)
    opening = bisect_right(starts, first) - 1
    closing = bisect_right(starts, last) - 1
    start = starts[opening] if opening >= 0 else seg.head_stop
    stop = starts[closing + 1] if 0 <= closing < len(starts) - 1 else seg.length
    if closing < 0:  # all the damage is in the head, which is kept anyway
        stop = seg.head_stop
    return start, stop


def plan_damaged(ctx: FitContext, problems: Sequence[Problem], factors: Factors) -> DamagedPlan:
    """The request keeping the most whole turns around the damaged stretch that fits the
    budget; or, when none does, the smallest one (head + stretch + newest turn) with
    ``fits=False`` for the caller to send shrunk or refuse. The turns a summary stands
    for (before ``ctx.first_turn``, the stretch after them) are never kept, and count as
    dropped."""
    seg = ctx.seg
    budget = ctx.budget.input_tokens
    start, stop = damaged_stretch(ctx, problems)
    head = tuple(range(seg.head_stop))
    folded = ctx.first_turn
    if stop <= seg.head_stop:  # all the damage is in the head: no stretch of turns
        start = stop = ctx.kept_from(0)
    before = [t for t in seg.turn_starts[folded:] if t < start]
    # 1. drop whole turns before the stretch, oldest first: head + [kept_from, end)
    candidates = [*before, start] if before else [start]
    for dropped, kept_from in enumerate(candidates, start=folded):
        count = ctx.count(kept_from, factors)
        if count.tokens <= budget or (stop >= seg.length and kept_from == candidates[-1]):
            fits = count.tokens <= budget
            return DamagedPlan(
                kept=head + tuple(range(kept_from, seg.length)),
                dropped_turns=dropped,
                count=count,
                kept_from=kept_from,
                fits=fits,
            )
    # 2. then whole turns after it, oldest first, never the newest
    after = [t for t in seg.turn_starts if t >= stop]
    best_sums, upper_sums = _estimates(ctx, factors)
    base = ctx.run.ledger.base_parts(ctx.key, seg.head_stop, ctx.costs, start, factors)
    base_best, base_upper, base_measured = base[0], base[1], base[2]
    smallest: DamagedPlan | None = None
    for dropped, kept_from in enumerate(after[1:] if after else [], start=1):
        best = base_best + best_sums[stop] - best_sums[start]
        best += best_sums[seg.length] - best_sums[kept_from]
        upper = base_upper + upper_sums[stop] - upper_sums[start]
        upper += upper_sums[seg.length] - upper_sums[kept_from]
        tokens = upper if ctx.use_upper else best
        smallest = DamagedPlan(
            kept=head + tuple(range(start, stop)) + tuple(range(kept_from, seg.length)),
            dropped_turns=folded + len(before) + dropped,
            count=Count(
                tokens=tokens,
                best=best,
                upper=max(upper, best),
                measured=base_measured,
                exact=False,
            ),
            kept_from=None,
            fits=tokens <= budget,
        )
        if smallest.fits:
            return smallest
    if smallest is None:  # nothing after the stretch to drop: head + [start, end)
        count = ctx.count(start, factors)
        return DamagedPlan(
            kept=head + tuple(range(start, seg.length)),
            dropped_turns=folded + len(before),
            count=count,
            kept_from=start,
            fits=count.tokens <= budget,
        )
    return smallest


def _estimates(ctx: FitContext, factors: Factors) -> tuple[list[int], list[int]]:
    """Prefix sums of every message's calibrated estimate and of its upper count (its
    local count, calibrated, or its bound), measured or not, whatever the ledger's
    spans: such a request is never attributed a report."""
    best_sums, upper_sums = [0], [0]
    best = upper = 0
    for entry in ctx.run.ledger.entries:
        if entry.local is None:
            best += math.ceil(entry.raw * factors.heuristic)
            upper += entry.bound
        else:
            best += math.ceil(entry.local * factors.local)
            upper += math.ceil(entry.local * factors.local)
        best_sums.append(best)
        upper_sums.append(upper)
    return best_sums, upper_sums
