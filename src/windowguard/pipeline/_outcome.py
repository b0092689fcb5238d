"""The last stage of one fit (:func:`finish`): the
:class:`~windowguard.pipeline._fitting.Fit` with ``max_tokens`` shrunk to the room left,
its events and its receipts (:func:`_fitted`); and the fits of a damaged or a deferred
transcript.

Functions of the manager's run state, bound into
:class:`~windowguard.pipeline.manager.ContextWindowManager`'s class body.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any

from ..accounting.usage import NO_USAGE
from ..core.edits.records import EditRecord
from ..core.events import Event, TranscriptDeferred, TranscriptPruned
from ..core.turns import Problem, segment
from ._damaged import damaged_stretch, plan_damaged
from ._decide import refuse_or_keep
from ._fitting import Count, Fit, FitContext, build_fit
from ._settings import Query, logger

if TYPE_CHECKING:
    from .manager import ContextWindowManager


def finish(
    self: ContextWindowManager,
    messages: Sequence[object],
    ctx: FitContext,
    dropped: int,
    events: list[Event],
    calls: int,
    made: list[EditRecord],
    *,
    tools: Sequence[object] | None,
    max_tokens: int | None,
    system: object,
    format: str | None,
    safety: int | None,
) -> Generator[Query, Any, Fit[Any]]:
    """The last stage: the :class:`~windowguard.pipeline._fitting.Fit` of this send,
    or, when a message before the previous cut was replaced and this cut keeps it, the
    fit of a view rebuilt of every message."""
    kept_from = ctx.kept_from(dropped)
    run = ctx.run
    if not run.verify(messages, kept_from):
        # A message before the previous cut was replaced, and this cut keeps it: fit
        # again from a view rebuilt of every message (what was measured stays, and so
        # do the edits made and the previous cut, which the messages it kept still
        # place); the edits this pass made are receipted by the next.
        self._pending, self._pending_edits = events, made
        run.verified_from = len(run.seen) + 1  # compare everything next time
        fit: Fit[Any] = yield from self.fit_steps(
            messages,
            tools=tools,
            max_tokens=max_tokens,
            last_usage=NO_USAGE,
            system=system,
            format=format,
            safety=safety,
        )
        return fit
    return self._fitted(messages, ctx, dropped, events, calls, made)


def _fitted(
    self: ContextWindowManager,
    messages: Sequence[object],
    ctx: FitContext,
    dropped: int,
    events: list[Event],
    calls: int,
    made: list[EditRecord],
) -> Fit[Any]:
    run, seg = ctx.run, ctx.seg
    previous_cut = run.anchor
    dropped = max(dropped, ctx.first_turn)
    kept_from = ctx.kept_from(dropped)
    run.anchor = kept_from if dropped else None
    count = ctx.count(kept_from, self._factors)
    if dropped:
        cut_from, cut_to = seg.head_stop, kept_from
        kept = run.sent_from(messages, cut_from, cut_to)
        if ctx.summary is not None:
            kept.insert(cut_from, ctx.summary.message)
        new_cut = cut_to != previous_cut
        if new_cut:
            # The post-fit pairing guard: re-segment what will be sent. Whole turns
            # cannot orphan anything, so this only ever catches a bug of ours; it runs
            # when the cut moves (a kept cut only gains turns already validated).
            entries = run.ledger.entries
            shapes = [e.shape for e in entries[:cut_from]] + [e.shape for e in entries[cut_to:]]
            if ctx.summary is not None:
                shapes.insert(cut_from, ctx.summary.shape)
            guard = segment(shapes)
            if guard.problems:
                run.anchor = None
                return _deferred(self, messages, ctx, guard.problems, events)
        before = ctx.cost_function(self._factors)(0)
        events.append(
            TranscriptPruned(
                dropped_turns=dropped,
                dropped_messages=cut_to - cut_from,
                kept_messages=len(kept),
                tokens_before=before,
                tokens_after=count.tokens,
                budget=ctx.budget.input_tokens,
                new_cut=new_cut,
            )
        )
        if new_cut:
            newly_from = cut_from if previous_cut is None else min(previous_cut, cut_to)
            folded = [r for r in made if r.kind == "summarize"]
            if folded:  # what a summary stands for is not lost
                newly_from = max(newly_from, folded[-1].messages[-1] + 1)
            # An edit this send made to a message it then drops was never sent: its
            # receipt goes, and the drop's counts what the message was before it.
            moot = [
                r
                for r in made
                if r.kind != "summarize"
                and r.messages
                and r.messages[0] >= newly_from
                and r.messages[-1] < cut_to
            ]
            if moot:
                gone = {id(r) for r in moot}
                made[:] = [r for r in made if id(r) not in gone]
            if newly_from < cut_to:
                dropped_now = ctx.count(newly_from, self._factors).tokens - count.tokens
                dropped_now += sum(r.tokens_freed for r in moot)
                made.append(
                    EditRecord(
                        kind="drop",
                        messages=tuple(range(newly_from, cut_to)),
                        tokens_before=max(dropped_now, 0),
                        tokens_after=0,
                    )
                )
            logger.info(
                "pruned %d oldest turns (%d messages): ~%d -> ~%d tokens, budget %d",
                dropped,
                cut_to - cut_from,
                before,
                count.tokens,
                ctx.budget.input_tokens,
            )
    else:
        kept = run.take(messages)
    events.extend(record.event() for record in made)
    self._sent = ctx.composition(kept_from, self._factors)
    dropped_messages = len(messages) - len(kept)
    if dropped and ctx.summary is not None:
        dropped_messages += 1  # the summary is sent, but it is none of the caller's
    return _result(
        self, kept, ctx, count, dropped, dropped_messages, (), events, calls, tuple(made)
    )


def _result(
    self: ContextWindowManager,
    kept: list[object],
    ctx: FitContext,
    count: Count,
    dropped_turns: int,
    dropped_messages: int,
    problems: tuple[Problem, ...],
    events: list[Event],
    calls: int,
    edits: tuple[EditRecord, ...] = (),
) -> Fit[Any]:
    fit = build_fit(
        kept,
        ctx,
        count,
        dropped_turns=dropped_turns,
        dropped_messages=dropped_messages,
        problems=problems,
        events=events,
        remote_counts=calls,
        model_info=self.model_info,
        floor=self.floor,
        factors=self._factors,
        counter_sources=self._counter_sources,
        edits=edits,
    )
    self._sent_reply = fit.max_tokens
    return fit


def _fit_damaged(
    self: ContextWindowManager,
    messages: Sequence[object],
    ctx: FitContext,
    problems: tuple[Problem, ...],
    events: list[Event],
) -> Fit[Any]:
    """Keep the damaged stretch whole and prune whole turns around it (``_damaged``),
    with the run's summary after the head standing for the turns it folded (unless
    the damage lies among them: they are then sent, and the summary is not)."""
    if ctx.summary is not None:
        start, stop = damaged_stretch(ctx, problems)
        if stop > ctx.seg.head_stop and start < ctx.kept_from(0):
            ctx.summarize(None, 0)
    plan = plan_damaged(ctx, problems, self._factors)
    if not plan.fits and self._count_locally(ctx):
        plan = plan_damaged(ctx, problems, self._factors)
    described = tuple(str(p) for p in problems)
    if not plan.fits:
        refuse_or_keep(
            ctx,
            plan.count,
            floor=self.floor,
            source=self._source_of(plan.count),
            damage="; ".join(described[:3]),
        )
    ctx.run.anchor = None
    self._sent = (
        ctx.composition(plan.kept_from, self._factors) if plan.kept_from is not None else None
    )
    sent = ctx.run.patched(list(messages))
    kept = [sent[i] for i in plan.kept]
    dropped_messages = len(messages) - len(kept)
    if ctx.summary is not None:
        kept.insert(ctx.seg.head_stop, ctx.summary.message)
    logger.warning(
        "transcript is damaged (%s); the damaged stretch is sent whole%s",
        "; ".join(described[:3]),
        f", {plan.dropped_turns} whole turns around it pruned" if plan.dropped_turns else "",
    )
    events.append(
        TranscriptDeferred(
            reason="damaged input: the damaged stretch is kept whole"
            + (
                f"; {plan.dropped_turns} whole turns around it pruned" if plan.dropped_turns else ""
            ),
            problems=described,
        )
    )
    if plan.dropped_turns:
        events.append(
            TranscriptPruned(
                dropped_turns=plan.dropped_turns,
                dropped_messages=dropped_messages,
                kept_messages=len(kept),
                tokens_before=ctx.cost_function(self._factors)(0),
                tokens_after=plan.count.tokens,
                budget=ctx.budget.input_tokens,
            )
        )
    return _result(
        self, kept, ctx, plan.count, plan.dropped_turns, dropped_messages, problems, events, 0
    )


def _deferred(
    self: ContextWindowManager,
    messages: Sequence[object],
    ctx: FitContext,
    problems: tuple[Problem, ...],
    events: list[Event],
) -> Fit[Any]:
    count = ctx.count(ctx.seg.head_stop, self._factors)
    self._sent = ctx.composition(ctx.seg.head_stop, self._factors)
    described = tuple(str(p) for p in problems)
    logger.warning(
        "transcript is damaged (%s); sending it unchanged for the provider to judge",
        "; ".join(described[:3]),
    )
    events.append(TranscriptDeferred(reason="damaged input: not pruned", problems=described))
    return _result(self, ctx.run.patched(list(messages)), ctx, count, 0, 0, problems, events, 0)
