"""Learning from what the provider reported: usage that leaves cached tokens out,
the overflow a provider refused, and the calibration and ledger updates a report brings.

These are :class:`~windowguard.pipeline.manager.ContextWindowManager` methods kept in a
room of their own (bound in the class body): they read and write the manager's run state.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..accounting.ledger import Factors
from ..core.events import Event, UsageExcludesCached, UsageMismatch
from ._fitting import Composition, learn
from ._settings import MISMATCH_TOLERANCE, logger

if TYPE_CHECKING:
    from .manager import ContextWindowManager


def _check_cached_apart(self: ContextWindowManager, reported: int, cached: int) -> None:
    """Whether ``reported`` leaves out the ``cached`` tokens reported beside it: it
    does when it is below them, or below what is already known exactly of the same
    request, or when adding them brings it closer to a local exact count of the whole
    request. Once that is believed, every later report is checked again: when adding
    them would overshoot what the request can hold (its local count, else its
    guaranteed bound), they were inside ``prompt_tokens`` after all, and the belief is
    dropped.

    Only what is certain is evidence. Fewer prompt tokens than cached ones always
    is. A local count of a request holding media (an allowance each) is not, nor is
    a caller's counter's (it may count high). Reasoning is what a template may show
    less of than was counted or measured (Qwen3 drops it before the last user query,
    the Llama 3 and Mistral templates always), so with reasoning in the request
    neither a count nor a measurement it falls short of is evidence."""
    sent = self._sent
    if sent is None or sent.run is not self._run:
        return
    counted = sent.counted
    tolerance = max(8, int(MISMATCH_TOLERANCE * counted)) if counted is not None else 0
    if self._cached_apart:
        total = reported + cached
        if counted is not None and total > counted + tolerance:
            if abs(reported - counted) < total - counted and not _request_holds(sent)[0]:
                _cached_counted_in(self, reported, cached, f"its local count is {counted}")
            return
        if counted is None:
            costs, entries = sent.costs, sent.run.ledger.entries
            bound = costs.fixed_bound + costs.summary_bound
            bound += sum(e.bound for e in entries[: sent.head_stop])
            bound += sum(e.bound for e in entries[sent.kept_from : sent.end])
            if total > bound and not _request_holds(sent)[0]:
                _cached_counted_in(self, reported, cached, f"it can hold at most {bound}")
        return
    known = sent.measured
    evidence = ""
    if reported < cached:
        evidence = "fewer than the cached tokens, which a prompt count includes"
    elif reported + 8 < known <= reported + cached + 8:
        if not _request_holds(sent)[1]:
            evidence = f"below the {known} tokens already measured of the same request"
    elif (
        counted is not None
        and self._local_name is None
        and abs(reported - counted) > tolerance
        and abs(reported + cached - counted) < abs(reported - counted)
        and not any(_request_holds(sent))
    ):
        evidence = f"the local exact count of the request is {counted}"
    if not evidence:
        return
    self._cached_apart = True
    self._pending.append(
        UsageExcludesCached(reported_tokens=reported, cached_tokens=cached, evidence=evidence)
    )
    logger.warning(
        "the provider's prompt_tokens (%d) leave out the %d cached tokens (%s); adding them",
        reported,
        cached,
        evidence,
    )
    # Earlier reports may have left them out too: what they measured is forgotten.
    run = self._run
    if run is not None:
        run.ledger.forget_measurements()


def _cached_counted_in(self: ContextWindowManager, reported: int, cached: int, why: str) -> None:
    """The provider's ``prompt_tokens`` include its cached tokens after all: stop
    adding them, and forget what the reports they were added to measured."""
    self._cached_apart = False
    logger.warning(
        "the provider's prompt_tokens (%d) include the %d cached tokens after all "
        "(adding them overshoots the request: %s); no longer adding them",
        reported,
        cached,
        why,
    )
    run = self._run
    if run is not None:
        run.ledger.forget_measurements()


def _request_holds(sent: Composition) -> tuple[bool, bool]:
    """Whether the request holds what no count or bound covers (media, items that
    stand for tokens they do not show), and whether it holds reasoning."""
    entries = sent.run.ledger.entries
    unbounded = reasoning = False
    for entry in (*entries[: sent.head_stop], *entries[sent.kept_from : sent.end]):
        shape = entry.shape
        unbounded = unbounded or shape.media_items > 0 or entry.opaque
        reasoning = reasoning or shape.reasoning or any(p.reasoning for p in shape.segments)
    return unbounded, reasoning


def _assume_window(self: ContextWindowManager, window: int, origin: str) -> None:
    info = self.model_info
    self.model_info = replace(
        info,
        context_window=window,
        max_output_tokens=_at_most(info.max_output_tokens, window),
        max_input_tokens=_at_most(info.max_input_tokens, window),
        source="discovered",
        origin=origin,
    )


def _learn_sent(self: ContextWindowManager, total: int, origin: str) -> None:
    sent = self._sent
    if sent is None or sent.run is not self._run:
        return
    counted = sent.counted
    if counted is not None and origin == "usage":
        tolerance = 8 + int(MISMATCH_TOLERANCE * counted)
        if abs(total - counted) > tolerance:
            name = self._local_name or (
                f"local:{self.local.family}" if self.local is not None else "local"
            )
            self._pending.append(
                UsageMismatch(reported_tokens=total, counted_tokens=counted, counter=name)
            )
    self._learn(sent, total, origin, self._pending)


def _factors(self: ContextWindowManager) -> Factors:
    heuristic, local = self.calibration.factor, self.local_calibration.factor
    cached = self._factors_cache
    if cached.heuristic != heuristic or cached.local != local:
        cached = self._factors_cache = Factors(heuristic, local)
    return cached


def _learn(
    self: ContextWindowManager, sent: Composition, total: int, origin: str, events: list[Event]
) -> None:
    event = learn(
        sent,
        total,
        calibration=self.calibration,
        local_calibration=self.local_calibration,
        family=self.local.family if self.local is not None else self.estimator.tokenizer,
        origin=origin,
        factors=self._factors,
        events=events,
    )
    events.append(event)


def _at_most(value: int | None, limit: int) -> int | None:
    return None if value is None else min(value, limit)
