"""The edit stage of one fit (:func:`edit_and_decide`): clamp what arrived, clear old
tool results, and fold dropped turns into a summary when :class:`~windowguard.Summarize`
is configured, each only when the decision after the last (:mod:`._edge`) still loses
context.

Functions of the manager's run state, bound into
:class:`~windowguard.pipeline.manager.ContextWindowManager`'s class body; the edits
themselves live in :mod:`._editing` and :mod:`windowguard.core.edits`.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any

from ..accounting.bounds import message_costs
from ..core.adapters import shaper
from ..core.edits.config import trigger_tokens
from ..core.edits.records import EditRecord
from ..core.edits.summary import render_turns, summary_message
from ..core.events import Event
from ..core.prune import turns_to_drop
from ._editing import (
    SummaryQuery,
    SummaryState,
    clamp_new,
    clamp_to_fit,
    clear_block,
    newest_results,
    summary_key,
)
from ._fitting import FitContext, Summarized
from ._settings import Query, logger

if TYPE_CHECKING:
    from .manager import ContextWindowManager


def edit_and_decide(
    self: ContextWindowManager,
    ctx: FitContext,
    messages: Sequence[object],
    system: object,
    events: list[Event],
    refitted: list[EditRecord],
    distrust: bool,
) -> Generator[Query, Any, tuple[int | None, int, list[EditRecord]]]:
    """The edit stage, cheapest first, each edit only when the decision after the last
    one still loses context: clamp what arrived; decide; clear old tool results (when
    turns would be lost, or past the clear trigger) and decide again; fold the turns
    dropped into the summary (when asked) and decide again. Returns what to drop, the
    remote counts made, and the edits made."""
    made = refitted + _clamp_arrivals(self, ctx)
    dropped, calls = yield from self._decide(ctx, messages, system, events, distrust, 0)
    if self._stages and (
        _loses_context(self, ctx, dropped) or _clear_triggered(self, ctx, dropped)
    ):
        edited = self._edit(ctx, dropped)
        if edited:
            made += edited
            dropped, calls = yield from self._decide(ctx, messages, system, events, False, calls)
    if self._stages.summarize is not None and dropped is not None:
        folded = yield from _fold(self, ctx, dropped)
        if folded is not None:
            made.append(folded)
            dropped, calls = yield from self._decide(ctx, messages, system, events, False, calls)
    return dropped, calls, made


def _clamp_arrivals(self: ContextWindowManager, ctx: FitContext) -> list[EditRecord]:
    """Clamp the tool results that arrived since the previous send."""
    clamp = self._stages.clamp
    run = ctx.run
    start, run.edits_checked = run.edits_checked, ctx.end
    if clamp is None or start >= ctx.end:
        return []
    return clamp_new(ctx, clamp, start, self._text_count(), self._edit_state, self.estimator)


def _loses_context(self: ContextWindowManager, ctx: FitContext, dropped: int | None) -> bool:
    """Whether the choice refuses, or drops turns the previous send kept."""
    if dropped is None:
        return True
    if not dropped:
        return False
    anchor = ctx.run.anchor
    return anchor is None or ctx.kept_from(dropped) > anchor


def _kept_whole(ctx: FitContext, keep: int) -> int:
    """Where the newest ``keep`` turns begin (their results are never cleared)."""
    starts = ctx.seg.turn_starts
    return starts[len(starts) - keep] if len(starts) > keep else ctx.seg.head_stop


def _clear_triggered(self: ContextWindowManager, ctx: FitContext, dropped: int | None) -> bool:
    """Whether the clear stage's ``trigger`` is passed by what this send keeps."""
    clear = self._stages.clear
    if clear is None or clear.trigger is None or dropped is None:
        return False
    limit = trigger_tokens(clear.trigger, ctx.budget.input_tokens)
    assert limit is not None
    # On the best count, not the guaranteed bound: the bound of a new turn's bytes
    # may be several times its tokens, and a policy is not a safety margin.
    return ctx.count(ctx.kept_from(dropped), self._factors).best > limit


def _edit(self: ContextWindowManager, ctx: FitContext, dropped: int | None) -> list[EditRecord]:
    """Edit before dropping: clear a block of old results down to the low-water
    mark; when even head + newest turn cannot fit, clamp the newest turn's results
    to what fits."""
    stages, state, count = self._stages, self._edit_state, self._text_count()
    made: list[EditRecord] = []
    anchor = ctx.run.anchor
    least = ctx.seg.head_stop if anchor is None else anchor
    if stages.clear is not None:
        # Down to the low-water mark, and far enough below the budget to hold the
        # next few typical turns (as a low-water drop does): one block of clears
        # then lasts several sends, and each of them extends the previous request.
        budget = ctx.budget.input_tokens
        target = budget
        if self.pruning == "low_water" or stages.clear.low_water is not None:
            mark = stages.clear.low_water or self.low_water
            target = int(budget * mark)
            if self.hold_turns:
                hold = self.hold_turns * ctx.typical_turn(self._factors)
                target = max(min(target, budget - hold), budget // 4)
        kept = ctx.count(least, self._factors)
        forced = _loses_context(self, ctx, dropped)
        size = kept.tokens if forced else kept.best  # as _clear_triggered measures it
        need = size - target
        at_least = stages.clear.clear_at_least
        if not forced:
            # Cleared for the trigger alone: only a block that brings the request at
            # least halfway from the trigger down to the mark. Once the cleared turns'
            # placeholders alone come near the trigger, clearing each new result as
            # it ages would rewrite the prompt on every send; the request then grows
            # to the budget and drops old turns instead.
            limit = trigger_tokens(stages.clear.trigger, budget) or budget
            halfway = max(target, (limit + target) // 2)
            at_least = max(at_least, size - halfway)
            futile = state.futile_clear
            if futile is not None and futile[0] == anchor:
                _, then, reach = futile
                if reach + (size - then) < at_least:
                    need = 0  # nothing new could reach it: not worth a scan
        if need > 0:
            cleared = clear_block(
                ctx,
                stages.clear,
                least,
                need,
                count,
                state,
                self.estimator,
                at_least=at_least,
            )
            made += cleared
            state.futile_clear = None
            if not cleared and not forced:
                protected = ctx.count(_kept_whole(ctx, stages.clear.keep), self._factors)
                head = ctx.count(ctx.end, self._factors)
                reach = state.clear_reach + protected.best - head.best
                state.futile_clear = (anchor, size, reach)
    if stages.clamp is not None:
        factors = self._factors
        minimal = ctx.count(ctx.newest, factors) if ctx.seg.turn_starts else None
        if minimal is not None and minimal.tokens > ctx.budget.input_tokens:
            over = minimal.tokens - ctx.budget.input_tokens
            results = sum(count(r.text) for r in newest_results(ctx, stages.clamp.exclude_tools))
            room = max(results - over, 0)
            made += clamp_to_fit(ctx, stages.clamp, room, count, state, self.estimator)
    del dropped
    return made


def _summarized(self: ContextWindowManager, ctx: FitContext, summary: SummaryState) -> Summarized:
    shape = shaper(ctx.run.format)(summary.message)
    raw, bound = message_costs(self.estimator)(shape)
    key = summary_key(None, summary.text)
    return Summarized(message=summary.message, key=key, shape=shape, raw=raw, bound=bound)


def _fold(
    self: ContextWindowManager, ctx: FitContext, dropped: int
) -> Generator[Query, Any, EditRecord | None]:
    """Fold the whole turns this send would lose (or, once the request reaches the
    stage's ``trigger``, old turns) into the run's summary: the turns after the
    previous summary up to the cut and beyond, in one block down to the low-water
    mark (never the newest ``keep_turns``), with room kept for the summary itself.
    A summary that would not be smaller than what it stands for is not used (and the
    next send drops without asking again)."""
    config = self._stages.summarize
    state = self._edit_state
    assert config is not None
    budget = ctx.budget.input_tokens
    cost = ctx.cost_function(self._factors)
    limit = trigger_tokens(config.trigger, budget)
    if dropped <= ctx.first_turn and (limit is None or cost(ctx.first_turn) < limit):
        return None  # no turn would be lost and no trigger is reached: nothing to fold
    if state.barren:
        state.barren = False  # one send without a summary, then try again
        return None
    starts = ctx.seg.turn_starts
    last_foldable = len(starts) - config.keep_turns
    previous = state.summary
    reserve = (previous.tokens if previous is not None else 0) + min(1_024, budget // 10)
    target = dropped
    # Fold a block, down to the low-water mark of the budget (of the trigger, when it
    # is lower) and far enough below it to hold the next ``hold_turns`` typical turns
    # (as the clear stage does), with room kept for the summary: the summarizer is
    # then not asked again on the next few sends.
    ceiling = budget if limit is None else min(budget, limit)
    mark = int(ceiling * self.low_water)
    if self.hold_turns:
        hold = self.hold_turns * ctx.typical_turn(self._factors)
        mark = max(min(mark, ceiling - hold), ceiling // 4)
    threshold = mark - reserve
    if cost(target) > threshold:
        found = turns_to_drop(cost=cost, turns=len(starts), budget=threshold)
        target = len(starts) - 1 if found is None else max(found, target)
    new_first = min(target, last_foldable)
    if new_first <= ctx.first_turn:
        return None
    run = ctx.run
    fold_from = ctx.kept_from(ctx.first_turn)
    fold_to = starts[new_first]
    turns = tuple(run.effective[fold_from:fold_to])
    previous_text = previous.text if previous is not None else None
    key = summary_key(previous_text, render_turns(list(turns), run.format))
    text = state.summaries.get(key)
    if text is None:
        answer = yield SummaryQuery(config=config, turns=turns, previous=previous_text, key=key)
        if not isinstance(answer, str) or not answer.strip():
            logger.warning("the summarizer failed (%s); dropping the turns instead", answer)
            state.barren = True
            return None
        text = state.summaries[key] = answer
    count = self._text_count()
    tokens = count(text) + 8
    folded = ctx.count(fold_from, self._factors).best - ctx.count(fold_to, self._factors).best
    folded += previous.tokens if previous is not None else 0
    if tokens >= folded:
        logger.warning(
            "a summary of %d tokens would stand for %d: dropping the turns instead",
            tokens,
            folded,
        )
        state.barren = True
        return None
    head_last = run.effective[ctx.seg.head_stop - 1] if ctx.seg.head_stop else None
    message = summary_message(run.format, text, like=head_last)
    state.summary = SummaryState(
        text=text,
        message=message,
        resumes_at=run.seen[fold_to],
        tokens=tokens,
        covers=tuple(run.seen[ctx.seg.head_stop : fold_to]),
    )
    ctx.summarize(self._summarized(ctx, state.summary), new_first)
    return EditRecord(
        kind="summarize",
        messages=tuple(range(fold_from, fold_to)),
        tokens_before=folded,
        tokens_after=tokens,
    )
