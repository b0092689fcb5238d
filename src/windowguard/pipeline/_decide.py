"""The decisions of one fit: what to drop, whether the send is near the edge, what to
count remotely, and when to refuse.

Each is a pure function of the fit's :class:`~windowguard.pipeline._fitting.FitContext` (the
transcript's view, its counts and the budget) and the manager's policy; the manager
(:mod:`windowguard.pipeline.manager`) calls them in order and does the counting they ask for.

**The edge rule** (decision 0004, revision 2). When an exact source exists (a caller's
counter, the family's local tokenizer, the endpoint's count API), every decision rests
on the *upper* count: exact where measured or counted, a guaranteed bound elsewhere. A
send is *near the edge* when that count leaves the decision open: it would prune anew,
refuse, shrink ``max_tokens``, or (with no ``max_tokens``) leave the reply less than it
could be. Near the edge the unmeasured part is counted exactly and the decision is made
again; far from it nothing is counted, and the send fits for certain, because the upper
count does. With no exact source at all, the heuristic's best estimate decides
(the tool-loop design's rule) and the reactive refit is the net.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from ..accounting.bounds import unbounded_media
from ..accounting.catalog import ModelInfo
from ..accounting.ledger import Factors
from ..core.exceptions import ContextTruncatedError
from ..core.prune import PruningPolicy, choose_drop, turns_to_drop
from ._fitting import Count, FitContext

__all__ = ["Policy", "candidate", "choose", "near_edge", "refuse_or_keep"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """How the manager drops whole turns (decision 0003)."""

    pruning: PruningPolicy
    low_water: float
    hold_turns: int


def choose(ctx: FitContext, factors: Factors, policy: Policy, *, best: bool = False) -> int | None:
    """How many oldest whole turns to drop, or None when head + newest turn cannot fit
    (by the decision count: upper with an exact source, best without; ``best``: by the
    best estimate whatever the sources, to pick what is worth counting exactly)."""
    first = ctx.count(ctx.kept_from(0), factors)
    if (first.best if best else first.tokens) <= ctx.budget.input_tokens:
        return 0  # everything fits: no policy has anything to decide (the count is kept)
    return choose_drop(
        cost=ctx.cost_function(factors, upper=False if best else None),
        turn_starts=ctx.seg.turn_starts,
        budget=ctx.budget.input_tokens,
        policy=policy.pruning,
        low_water=policy.low_water,
        anchor=ctx.run.anchor,
        turn_tokens=ctx.typical_turn(factors) if policy.hold_turns else 0,
        hold_turns=policy.hold_turns,
        low_cost=ctx.cost_function(factors, upper=False),
    )


def near_edge(
    ctx: FitContext,
    dropped: int | None,
    factors: Factors,
    info: ModelInfo,
    *,
    cheap_exact: bool,
    counts_media: bool = False,
) -> bool:
    """Whether the decision is open on the upper count: a refusal, a new cut, a reply
    that does not fit beside it, or (with no ``max_tokens``) a reply the window limits.

    Args:
        cheap_exact: a local exact count is at hand (a tokenizer, not a round trip):
            with no ``max_tokens`` and no output cap, the reply fills the window, so the
            send is always counted exactly then.
        counts_media: the count API counts media as the provider charges them: a
            request holding a media item nothing measured is then always near the edge
            (media have no bound, only an allowance: :mod:`windowguard.accounting.bounds`).
    """
    if dropped is None:
        return True
    kept = ctx.kept_from(dropped)
    if dropped and kept != ctx.run.anchor:
        return True
    count = ctx.count(kept, factors)
    if count.exact:
        return False
    if counts_media and unbounded_media(ctx.run.ledger, ctx.key, ctx.seg.head_stop, kept, ctx.end):
        return True
    budget = ctx.budget
    cap = info.max_output_tokens
    requested = ctx.requested
    if requested is None:
        if cap is None:
            return cheap_exact
        reply = cap
    else:
        reply = min(requested, cap) if cap is not None else requested
    return count.upper + reply + budget.safety > budget.context_window


def candidate(
    ctx: FitContext,
    dropped: int | None,
    factors: Factors,
    guess: int | None = None,
    counted: int | None = None,
) -> int | None:
    """Where the request to count remotely keeps turns from, or None (all exact).

    The least-pruned request the policy could keep (the previous cut, else every turn),
    unless its best estimate is past twice the budget: then the fewest drops that bring
    the estimate there, so a huge transcript is never sent to be counted. Once that one
    is exact: ``guess`` (what the best estimates would keep: the request between the two
    that is most likely to fit), when it keeps more than ``dropped`` and is not exact;
    else the decision's own request. ``counted``: the request this send counted already
    (a later count is never wider than it).
    """
    anchor = ctx.run.anchor
    starts = ctx.seg.turn_starts
    least = 0
    if anchor is not None:
        position = bisect_left(starts, anchor)
        if position < len(starts) and starts[position] == anchor:
            least = position
    if dropped is not None:
        least = min(least, dropped)
    best = ctx.cost_function(factors, upper=False)
    if best(least) > 2 * ctx.budget.input_tokens:
        found = turns_to_drop(
            cost=lambda d: best(least + d),
            turns=len(starts) - least,
            budget=2 * ctx.budget.input_tokens,
        )
        least = len(starts) - 1 if found is None else least + found
    kept_from = ctx.kept_from(max(least, 0))
    if counted is not None:
        kept_from = max(kept_from, counted)
    if not ctx.count(kept_from, factors).exact and kept_from != counted:
        return kept_from
    if guess is not None and (dropped is None or guess < dropped):
        guessed = ctx.kept_from(guess)
        if not ctx.count(guessed, factors).exact:
            return guessed
    if dropped is None or ctx.count(ctx.kept_from(dropped), factors).exact:
        return None
    return ctx.kept_from(dropped)


def refuse_or_keep(
    ctx: FitContext, count: Count, *, floor: int, source: str, damage: str = ""
) -> None:
    """Head + newest turn exceed the budget: refuse only when the decision count of them
    plus the smallest reply exceeds the window (with an exact source, the upper count:
    exact where measured or counted; with reports only, the ledger's measured part plus
    the estimate); else they are sent with ``max_tokens`` shrunk to fit. With nothing
    measured and no exact source at all, the tool-loop design's rule: refuse when the estimate
    exceeds the input budget.

    Raises:
        ContextTruncatedError: nothing that fits can be sent.
    """
    budget = ctx.budget
    window = budget.context_window
    if count.exact or ctx.use_upper or ctx.run.ledger.bases:
        # an exact source, or reports that measured part of it: the window decides
        refuse = count.tokens + floor > window
    else:
        refuse = count.tokens > budget.input_tokens
    if refuse:
        raise ContextTruncatedError(
            estimated_tokens=count.tokens,
            budget=budget.input_tokens,
            context_window=window,
            exact=count.exact,
            source=source,
            floor=floor,
            damage=damage,
        )
