"""The view stage: what this send's transcript is, sized.

The first room a send walks after the report is learned: the transcript's view
(:mod:`._transcript`: only appended messages are shaped, estimated and segmented), the
fixed parts (framing, system, tools), the budget, the family's tokenizer inferred from a
first exact base, the run's summary sent again, and the caller's own counter over
everything unmeasured. It returns the :class:`~windowguard.pipeline._fitting.FitContext`
the next stages read.
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import replace
from itertools import repeat
from typing import TYPE_CHECKING

from ..accounting import infer_family
from ..accounting.local import TemplateAccounting
from ..core.budget import Budget, compute_budget
from ..core.events import Event, TokenizerInferred
from ..core.shapes import Format
from ._fitting import FitContext
from ._settings import logger
from ._transcript import Fixed, Transcript, same_message, update_transcript

if TYPE_CHECKING:
    from .manager import ContextWindowManager


def view(
    self: ContextWindowManager,
    messages: Sequence[object],
    explicit: Format | None,
    system: object,
    tools: Sequence[object] | None,
    max_tokens: int | None,
    safety: int | None,
    events: list[Event],
) -> FitContext:
    """The view of ``messages`` for this send, its fixed parts and budget counted."""
    run = self._run = update_transcript(self._run, messages, explicit, system, self.estimator)
    seg = run.index.segmentation()
    fixed = self._parts.fixed(run.format, system, tools)
    budget = self._budget(max_tokens, self.safety if safety is None else safety)
    _infer_tokenizer_from_base(self, run, seg.head_stop, fixed, events)
    ctx = FitContext(
        run=run,
        seg=seg,
        fixed=fixed,
        budget=budget,
        requested=max_tokens,
        use_upper=self.has_exact_source,
    )
    if self._stages.summarize is not None:
        _resume_summary(self, ctx)
    if self._local_name is not None:
        self._count_locally(ctx)  # a caller's counter counts everything unmeasured
    return ctx


def _budget(self: ContextWindowManager, max_tokens: int | None, safety: int) -> Budget:
    """The input budget, made again only when what it depends on changes."""
    info = self.model_info
    key = (info.context_window, max_tokens, info.max_output_tokens, info.max_input_tokens)
    cached = self._budget_cache
    plain = type(safety) is int and (max_tokens is None or type(max_tokens) is int)
    if plain and cached is not None and cached[0] == key and cached[1] == safety:
        return cached[2]  # (a bool or a float is validated again, never equal to a hit)
    budget = compute_budget(
        context_window=info.context_window,
        max_tokens=max_tokens,
        max_output_tokens=info.max_output_tokens,
        max_input_tokens=info.max_input_tokens,
        safety=safety,
    )
    self._budget_cache = (key, safety, budget)
    return budget


def _infer_tokenizer_from_base(
    self: ContextWindowManager, run: Transcript, head_stop: int, fixed: Fixed, events: list[Event]
) -> None:
    """For a model of unknown family, name its tokenizer from the first exact base
    (framing + tools + head, reported alone), once per run."""
    if not self._auto_local or self.local is not None:
        return
    key = run.base_key[2] if run.base_key is not None else None
    base = run.ledger.bases.get(key) if key is not None else None
    if base is None or base.span is not None:
        return
    self._auto_local = False
    head = [e.shape for e in run.ledger.entries[:head_stop]]
    tools, system_shapes = fixed.tools, fixed.system_shapes

    def count_with(accounting: TemplateAccounting) -> int:
        counted = accounting.fixed_tokens(tools)
        counted += sum(accounting.message_tokens(shape) for shape in system_shapes)
        return counted + sum(accounting.message_tokens(shape) for shape in head)

    found = infer_family(base.tokens, count_with)
    if found is not None:
        self.local, counted = found
        events.append(
            TokenizerInferred(
                family=self.local.family, reported_tokens=base.tokens, counted_tokens=counted
            )
        )
        family = self.local.family
        logger.info("the model counts like %s (%d of %d tokens)", family, counted, base.tokens)


def _resume_summary(self: ContextWindowManager, ctx: FitContext) -> None:
    """Send the run's summary again, after the head, if the turns it stands for are
    still where they were (a transcript that changed under it loses it: the turns
    after it are then counted and dropped as without one)."""
    summary = self._edit_state.summary
    if summary is None:
        return
    seg = ctx.seg
    starts = seg.turn_starts
    at = seg.head_stop + len(summary.covers)  # where the kept turns begin again
    turn = bisect_left(starts, at)
    if turn >= len(starts) or starts[turn] != at or not _still_there(self, ctx, at):
        logger.warning("the summarized turns changed; the summary is no longer sent")
        self._edit_state.summary = None
        return
    resumed = self._edit_state.summary  # (with this send's objects)
    assert resumed is not None
    ctx.summarize(self._summarized(ctx, resumed), turn)


def _still_there(self: ContextWindowManager, ctx: FitContext, at: int) -> bool:
    """Whether the messages the run's summary folded, and the one it resumes at
    (``at``), are where they were: the same objects, or equal ones (in the Anthropic
    format, apart from ``cache_control``), as a proxy parsing each request or a
    client copying its history sends them. The summary then remembers this send's
    objects, found by identity again while they are sent. A message the caller
    changed after it was folded is not in the summary, which must not stand for it."""
    state = self._edit_state
    summary = state.summary
    assert summary is not None
    now = ctx.run.seen[ctx.seg.head_stop : at + 1]
    then = [*summary.covers, summary.resumes_at]
    if len(now) != len(then):
        return False
    if all(map(operator.is_, now, then)):
        return True
    try:
        same = now == then  # at C speed; each pair compared by identity first
    except Exception:  # a message whose == raises (arrays in its content)
        same = False
    if not same and not all(map(same_message, now, then, repeat(ctx.run.format))):
        return False
    state.summary = replace(summary, covers=tuple(now[:-1]), resumes_at=now[-1])
    return True
