"""One fit's view of the transcript: the best count of every request it could send.

A candidate request keeps the head (inside the *base*, with the framing, the system
argument and the tools) and the turns from some message on. :class:`FitContext` counts
any such candidate from the ledger's measured values plus the calibrated estimate of
the rest, says whether that count is exact, counts the not-yet-measured messages with
a local exact tokenizer on request, and builds the composition a report (or a remote
count) will be attributed to. :func:`learn` attributes it.

Invariant: the cost of a candidate never rises as more of its oldest turns are dropped
(every part is non-negative), which the pruning search relies on.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from ._transcript import Fixed, Transcript
from .accounting.ledger import REWRITES_HISTORY, Factors
from .accounting.local import TemplateAccounting
from .accounting.remote import CountQuery
from .accounting.usage import Calibration
from .budget import Budget
from .catalog import ModelInfo
from .events import (
    ContextEmergencyShrink,
    ContextEstimate,
    Event,
    MaxTokensShrunk,
    UsageMeasured,
)
from .shapes import Format
from .shrink import fit_max_tokens
from .turns import Problem, Segmentation

__all__ = ["Composition", "Count", "Fit", "FitContext", "build_fit", "learn"]

logger = logging.getLogger("windowguard")


@dataclass(frozen=True, slots=True, kw_only=True)
class Fit:
    """What to send.

    Attributes:
        messages: the caller's own message objects to send, in order.
        estimated_tokens: the best count of the fitted request (messages, the separate
            system argument, tool schemas and framing): exact where measured,
            calibrated estimates elsewhere.
        budget: the input budget, ``min(window - reserve - safety, max_input_tokens)``.
        context_window: the window the budget came from.
        dropped_turns: oldest whole turns dropped.
        dropped_messages: messages those turns held.
        pressure: ``estimated_tokens / context_window``.
        max_tokens: the reply budget that fits (shrink guard applied).
        deferred: damaged input was passed on unchanged.
        problems: the damage found, if any.
        format: the wire format the transcript was read in.
        events: what happened (``usage_measured``, ``remote_count``, ``context_estimate``,
            ``transcript_pruned``, ``max_tokens_shrunk`` / ``context_emergency_shrink``,
            ``transcript_deferred``).
        measured_tokens: the part of ``estimated_tokens`` counted exactly.
        exact: the whole of ``estimated_tokens`` was counted exactly.
        sources: what counted the rest (``"ledger"``, ``"remote:..."``, ``"local:..."``,
            ``"heuristic:..."``).
        remote_counts: how many remote counts this send asked for.
    """

    messages: list[object]
    estimated_tokens: int
    budget: int
    context_window: int
    dropped_turns: int
    dropped_messages: int
    pressure: float
    max_tokens: int
    deferred: bool
    problems: tuple[Problem, ...]
    format: Format
    events: tuple[Event, ...]
    measured_tokens: int = 0
    exact: bool = False
    sources: tuple[str, ...] = ()
    remote_counts: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Composition:
    """What one request held, for the report (or remote count) about it."""

    run: Transcript
    key: Hashable
    head_stop: int
    kept_from: int
    end: int
    base_raw: tuple[int, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Count:
    """The best count of one candidate request.

    Attributes:
        tokens: measured tokens plus the calibrated estimate of the rest.
        measured: the part the ledger measured (exact, or a cut span's upper bound).
        exact: ``tokens`` is exact.
    """

    tokens: int
    measured: int
    exact: bool


class FitContext:
    """One fit's inputs and the counts of its candidate requests."""

    __slots__ = ("_counts", "_key", "budget", "fixed", "local_fixed", "requested", "run", "seg")

    def __init__(
        self,
        *,
        run: Transcript,
        seg: Segmentation,
        fixed: Fixed,
        budget: Budget,
        requested: int | None,
    ) -> None:
        self.run = run
        self.seg = seg
        self.fixed = fixed
        self.budget = budget
        self.requested = requested
        self.local_fixed: int | None = None
        self._key: Hashable | None = None
        # Counts made in this fit, by what they depend on.
        self._counts: dict[tuple[int, float, float, int | None, int | None], Count] = {}

    @property
    def end(self) -> int:
        """One past the last message."""
        return self.seg.length

    @property
    def newest(self) -> int:
        """The first message of the newest turn (the end when there is no turn)."""
        seg = self.seg
        return seg.turn_starts[-1] if seg.turn_starts else seg.length

    def kept_from(self, dropped: int) -> int:
        """The first message kept after the head when ``dropped`` oldest turns go."""
        seg = self.seg
        return seg.turn_starts[dropped] if dropped else seg.head_stop

    @property
    def key(self) -> Hashable:
        """The base's key: the fixed parts' content and the head messages' identity."""
        if self._key is None:
            run, fixed_key, head_stop = self.run, self.fixed.key, self.seg.head_stop
            known = run.base_key
            if known is not None and known[0] is fixed_key and known[1] == head_stop:
                self._key = known[2]
            else:
                entries = run.ledger.entries
                head = tuple(id(entries[i]) for i in range(head_stop))
                self._key = (fixed_key, head)
                run.base_key = (fixed_key, head_stop, self._key)
        return self._key

    @property
    def fixed_raw(self) -> tuple[int, int]:
        """Framing, system and tools as (heuristic, local): the local exact count once
        made, else the heuristic's."""
        if self.local_fixed is None:
            return self.fixed.raw, 0
        return 0, self.local_fixed

    def cost_function(self, factors: Factors) -> Callable[[int], int]:
        """``cost(dropped)``: the best count after dropping that many oldest turns."""
        ledger = self.run.ledger
        measured, est, local, _ = ledger.prefixes()
        base = ledger.base_part(self.key, self.seg.head_stop, self.fixed_raw, factors)
        starts, head_stop, end = self.seg.turn_starts, self.seg.head_stop, self.end
        m_end, e_end, l_end = base[0] + measured[end], base[1] + est[end], base[2] + local[end]
        f_raw, f_local = factors.heuristic, factors.local

        def cost(dropped: int) -> int:
            at = starts[dropped] if dropped else head_stop
            return (
                m_end
                - measured[at]
                + math.ceil((e_end - est[at]) * f_raw)
                + math.ceil((l_end - local[at]) * f_local)
            )

        return cost

    def typical_turn(self, factors: Factors, recent: int = 8) -> int:
        """The mean best count of the newest ``recent`` turns (0 without turns)."""
        starts = self.seg.turn_starts
        if not starts:
            return 0
        first = starts[max(0, len(starts) - recent)]
        measured, est, local, _ = self.run.ledger.prefixes()
        end = self.end
        tokens = measured[end] - measured[first]
        tokens += factors.apply(est[end] - est[first], local[end] - local[first])
        return tokens // min(recent, len(starts))

    def count(self, kept_from: int, factors: Factors) -> Count:
        """The best count of the request keeping turns from ``kept_from``."""
        key = (
            kept_from,
            factors.heuristic,
            factors.local,
            self.run.ledger.version,
            self.local_fixed,
        )
        known = self._counts.get(key)
        if known is not None:
            return known
        found = self.run.ledger.count(
            key=self.key,
            head_stop=self.seg.head_stop,
            kept_from=kept_from,
            end=self.end,
            fixed=self.fixed_raw,
            factors=factors,
        )
        tokens = found.measured + factors.apply(found.raw, found.local)
        count = self._counts[key] = Count(tokens=tokens, measured=found.measured, exact=found.exact)
        return count

    def count_locally(self, local: TemplateAccounting) -> None:
        """Count what nothing measured with the local exact tokenizer: the fixed parts,
        the head, and messages newest first until their count passes the budget (older
        turns could not be kept anyway).

        Raises:
            Exception: whatever the tokenizer raised (the caller falls back).
        """
        ledger = self.run.ledger
        entries = ledger.entries
        head_stop = self.seg.head_stop
        self.local_fixed = local.fixed_tokens(self.fixed.tools) + self.fixed.system_raw
        if entries and entries[-1].shape.kind == "assistant":
            self.local_fixed += local.final_assistant_tokens
        first_changed = len(entries)
        total = 0
        for index in range(len(entries) - 1, head_stop - 1, -1):
            entry = entries[index]
            if entry.measured is None and entry.local is None:
                entry.local = local.message_tokens(entry.shape)
                first_changed = index
            total += entry.measured if entry.measured is not None else entry.estimate
            if total > self.budget.input_tokens and index <= self.newest:
                break
        for index in range(head_stop):
            entry = entries[index]
            if entry.measured is None and entry.local is None:
                entry.local = local.message_tokens(entry.shape)
                first_changed = min(first_changed, index)
        ledger.changed(first_changed)

    def composition(self, kept_from: int) -> Composition:
        """The composition of the request keeping turns from ``kept_from``."""
        _, est, local, _ = self.run.ledger.prefixes()
        head_stop = self.seg.head_stop
        fixed_raw, fixed_local = self.fixed_raw
        return Composition(
            run=self.run,
            key=self.key,
            head_stop=head_stop,
            kept_from=kept_from,
            end=self.end,
            base_raw=(fixed_raw + est[head_stop], fixed_local + local[head_stop]),
        )

    def query(
        self, kept_from: int, messages: Sequence[object], system: object, model: str
    ) -> CountQuery:
        """The remote count query of the request keeping turns from ``kept_from``."""
        head_stop = self.seg.head_stop
        kept = [*messages[:head_stop], *messages[kept_from : self.end]]
        return CountQuery(
            format=self.run.format,
            model=model,
            messages=tuple(kept),
            system=system,
            tools=self.fixed.tools,
        )


def learn(
    composition: Composition,
    total: int,
    *,
    calibration: Calibration,
    local_calibration: Calibration,
    family: str,
    origin: str,
) -> UsageMeasured:
    """Attribute the exact prompt size of one request to what it held, and grow the
    calibration of whatever estimated what it newly measured (ADR-107's only rises).

    Returns:
        The ``usage_measured`` event saying what was learnt.
    """
    observation = composition.run.ledger.observe(
        total=total,
        key=composition.key,
        head_stop=composition.head_stop,
        kept_from=composition.kept_from,
        end=composition.end,
        base_estimate=composition.base_raw,
        factors=Factors(calibration.factor, local_calibration.factor),
        rewrites_history=family in REWRITES_HISTORY,
    )
    raw, counted, measured = observation.estimate_raw, observation.estimate_local, 0
    measured = observation.measured
    if measured > 0 and raw + counted > 0:
        # A span estimated by one source calibrates that source; a mixed one both.
        if raw:
            calibration.observe(measured, raw + counted)
        if counted:
            local_calibration.observe(measured, raw + counted)
    return UsageMeasured(
        origin=origin,
        total_tokens=observation.total,
        known_tokens=observation.known,
        measured_tokens=observation.measured,
        estimated_tokens=raw + counted,
        messages=observation.messages,
        with_base=observation.with_base,
        drift=observation.drift,
    )


def build_fit(
    kept: list[object],
    ctx: FitContext,
    count: Count,
    *,
    dropped_turns: int,
    dropped_messages: int,
    problems: tuple[Problem, ...],
    events: list[Event],
    remote_counts: int,
    model_info: ModelInfo,
    floor: int,
    factors: Factors,
    counter_sources: tuple[str, ...],
) -> Fit:
    """The :class:`Fit` of what will be sent: ``max_tokens`` fitted by the shrink guard
    (with no safety buffer when the count is exact), and the ``context_estimate``
    event first."""
    budget = ctx.budget
    window = budget.context_window
    estimated = count.tokens
    shrink = fit_max_tokens(
        estimated_input_tokens=estimated,
        context_window=window,
        requested=ctx.requested,
        safety_buffer=0 if count.exact else budget.safety,
        floor=floor,
        max_output_tokens=model_info.max_output_tokens,
    )
    if isinstance(shrink.event, (MaxTokensShrunk, ContextEmergencyShrink)):
        events.append(shrink.event)
    if count.exact:
        sources: tuple[str, ...] = ("ledger",) if count.measured else ()
    else:
        sources = ("ledger", *counter_sources) if count.measured else counter_sources
    estimate = ContextEstimate(
        estimated_tokens=estimated,
        window=window,
        budget=budget.input_tokens,
        pressure=estimated / window,
        calibration=factors.heuristic,
        source=model_info.source,
        measured_tokens=count.measured,
        exact=count.exact,
        sources=sources,
    )
    return Fit(
        messages=kept,
        estimated_tokens=estimated,
        budget=budget.input_tokens,
        context_window=window,
        dropped_turns=dropped_turns,
        dropped_messages=dropped_messages,
        pressure=estimated / window,
        max_tokens=shrink.max_tokens,
        deferred=bool(problems),
        problems=problems,
        format=ctx.run.format,
        events=(estimate, *events),
        measured_tokens=count.measured,
        exact=count.exact,
        sources=sources,
        remote_counts=remote_counts,
    )
