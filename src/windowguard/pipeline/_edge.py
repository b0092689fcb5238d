"""The edge: what to drop, decided on the guaranteed bound, and the guard after it.

* :func:`_decide` chooses the turns to drop; near the edge (or after a refusal) it counts
  exactly first and chooses again. The edit stage asks it after each edit.
* :func:`guard`, the stage after the edits: after a refusal without numbers it assumes a
  smaller window (:func:`_shrink_below`), after a refusal of a request counted to fit it
  sends less, and when nothing fits it counts the minimal request once more before
  refusing.

Functions of the manager's run state, bound into
:class:`~windowguard.pipeline.manager.ContextWindowManager`'s class body; the pure choice
is :mod:`._decide`.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..core.events import Event, RemoteCountFailed
from ._decide import Policy, candidate, choose, near_edge, refuse_or_keep
from ._fitting import Composition, FitContext
from ._settings import Query, logger

if TYPE_CHECKING:
    from .manager import ContextWindowManager


def _decide(
    self: ContextWindowManager,
    ctx: FitContext,
    messages: Sequence[object],
    system: object,
    events: list[Event],
    distrust: bool,
    calls: int,
) -> Generator[Query, Any, tuple[int | None, int]]:
    """Choose what to drop; near the edge (or after a refusal), count exactly first
    and choose again. Returns the choice and the remote counts made so far."""
    dropped = choose(ctx, self._factors, _policy(self))
    if not ctx.use_upper or not (distrust or _near_edge(self, ctx, dropped)):
        return dropped, calls
    if self._count_locally(ctx):
        dropped = choose(ctx, self._factors, _policy(self))
    first = calls
    counted: int | None = None
    while calls < self.max_remote_counts and self.remote is not None:
        if not (distrust and calls == first) and not _near_edge(self, ctx, dropped):
            break
        guess = choose(ctx, self._factors, _policy(self), best=True)
        kept_from = candidate(ctx, dropped, self._factors, guess, counted)
        if kept_from is None:
            break
        counted = kept_from if counted is None else min(counted, kept_from)
        answer = yield ctx.query(kept_from, system, self.model or "")
        calls += 1
        if not self._counted(ctx, kept_from, answer, events, "confirm"):
            break
        dropped = choose(ctx, self._factors, _policy(self))
    return dropped, calls


def guard(
    self: ContextWindowManager,
    ctx: FitContext,
    system: object,
    events: list[Event],
    dropped: int | None,
    calls: int,
    refused: tuple[Composition, int | None] | None,
    distrust: bool,
    max_tokens: int | None,
    safety: int | None,
) -> Generator[Query, Any, tuple[int, int]]:
    """The guard after the edits: after a refusal without numbers, assume a smaller
    window and send less; after a refusal of a request counted to fit, send less than
    that count allows; and when nothing fits, count the minimal request exactly once
    more before refusing (:class:`~windowguard.ContextTruncatedError`) or keeping it.
    Returns what to drop and the remote counts made."""
    if refused is not None and _shrink_below(self, ctx, refused, max_tokens, safety):
        if not ctx.use_upper:
            # With only the heuristic, its error may be more than the token the new
            # window takes off: send less again, down to the low-water mark.
            lowered = int(ctx.budget.input_tokens * self.low_water)
            ctx.budget = replace(ctx.budget, input_tokens=lowered)
        dropped = choose(ctx, self._factors, _policy(self))
    elif (
        distrust
        and not ctx.use_upper
        and dropped is not None
        and not ctx.count(ctx.kept_from(dropped), self._factors).exact
    ):
        # The provider refused the last request although it was counted to fit, and
        # nothing exact says otherwise now: send less than that count allows, down to
        # the low-water mark, rather than the same request again.
        lowered = int(ctx.budget.input_tokens * self.low_water)
        ctx.budget = replace(ctx.budget, input_tokens=lowered)
        dropped = choose(ctx, self._factors, _policy(self))
    if dropped is None:
        starts = ctx.seg.turn_starts
        minimal = len(starts) - 1 if starts else 0
        count = ctx.count(ctx.kept_from(minimal), self._factors)
        if not count.exact and self.remote is not None and calls < self.max_remote_counts:
            answer = yield ctx.query(ctx.kept_from(minimal), system, self.model or "")
            calls += 1
            if self._counted(ctx, ctx.kept_from(minimal), answer, events, "refusal check"):
                dropped = choose(ctx, self._factors, _policy(self))
                count = ctx.count(ctx.kept_from(minimal), self._factors)
        if (
            dropped is None
            and not count.exact
            and count.tokens + self.floor > ctx.budget.context_window
            and self.local is None
            and any(isinstance(event, RemoteCountFailed) for event in events)
        ):
            # The bound would refuse, and the count API, the only exact source, failed
            # for this send: the ledger and the estimates decide (decision 0004), as
            # with no exact source, rather than a refusal resting on the bound alone.
            ctx.use_upper = False
            ctx.refresh()
            dropped = choose(ctx, self._factors, _policy(self))
            count = ctx.count(ctx.kept_from(minimal), self._factors)
        if dropped is None:
            refuse_or_keep(ctx, count, floor=self.floor, source=self._source_of(count))
            dropped = minimal
    return dropped, calls


def _policy(self: ContextWindowManager) -> Policy:
    return Policy(pruning=self.pruning, low_water=self.low_water, hold_turns=self.hold_turns)


def _near_edge(self: ContextWindowManager, ctx: FitContext, dropped: int | None) -> bool:
    remote = self.remote
    media = remote is not None and ctx.run.format in getattr(remote, "media_formats", ())
    return near_edge(
        ctx,
        dropped,
        self._factors,
        self.model_info,
        cheap_exact=self.local is not None,
        counts_media=media,
    )


def _shrink_below(
    self: ContextWindowManager,
    ctx: FitContext,
    refused: tuple[Composition, int | None],
    max_tokens: int | None,
    safety: int | None,
) -> bool:
    """A provider refused the last request without numbers: assume a window below
    what that request is now counted to need (exactly, when it could be counted, else
    its decision count) plus its reply, so the next request is strictly smaller: at
    least one whole turn fewer, or a smaller ``max_tokens``. Returns whether the
    window changed (the budget is made again)."""
    sent, reply = refused
    if sent.run is ctx.run and sent.end <= ctx.end:
        found = ctx.run.ledger.count(
            key=sent.key,
            head_stop=sent.head_stop,
            kept_from=sent.kept_from,
            end=sent.end,
            costs=ctx.costs,
            factors=self._factors,
        )
        tokens = found.best if found.exact or not ctx.use_upper else found.upper
    else:
        tokens = sent.upper if ctx.use_upper else sent.best
    needed = tokens + (reply or 0)
    window = max(needed - 1, self.floor + 1)
    if not 0 < window < self.model_info.context_window:
        return False
    self._assume_window(window, "a provider's overflow error without numbers")
    logger.warning(
        "the provider refused a request counted at %d tokens (+%d reply) as too long, "
        "without saying its window: assuming %d",
        tokens,
        reply or 0,
        window,
    )
    ctx.budget = self._budget(max_tokens, self.safety if safety is None else safety)
    return True
