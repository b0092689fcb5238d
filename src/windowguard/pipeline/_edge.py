"""The decision near the edge: the pruning policy, whether a send is near the edge
by the guaranteed bound, and which candidate the fit keeps.

:class:`~windowguard.pipeline.manager.ContextWindowManager` methods kept in a room of their
own (bound in the class body); the pure choice is :mod:`._decide`.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any

from ..core.events import (
    Event,
)
from ._decide import Policy, candidate, choose, near_edge
from ._fitting import FitContext
from ._settings import (
    Query,
)

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
    dropped = choose(ctx, self._factors, self._policy)
    if not ctx.use_upper or not (distrust or self._near_edge(ctx, dropped)):
        return dropped, calls
    if self._count_locally(ctx):
        dropped = choose(ctx, self._factors, self._policy)
    first = calls
    counted: int | None = None
    while calls < self.max_remote_counts and self.remote is not None:
        if not (distrust and calls == first) and not self._near_edge(ctx, dropped):
            break
        guess = choose(ctx, self._factors, self._policy, best=True)
        kept_from = candidate(ctx, dropped, self._factors, guess, counted)
        if kept_from is None:
            break
        counted = kept_from if counted is None else min(counted, kept_from)
        answer = yield ctx.query(kept_from, system, self.model or "")
        calls += 1
        if not self._counted(ctx, kept_from, answer, events, "confirm"):
            break
        dropped = choose(ctx, self._factors, self._policy)
    return dropped, calls


# -- edit stages -------------------------------------------------------------------


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
