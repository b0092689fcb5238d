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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Generic

from ..accounting.catalog import ModelInfo
from ..accounting.ledger import REWRITES_HISTORY, BaseCosts, BaseKey, Entry, Factors
from ..accounting.local import TemplateAccounting
from ..accounting.remote import CountQuery
from ..accounting.usage import Calibration
from ..core.budget import Budget
from ..core.edits.records import EditRecord
from ..core.events import (
    CalibrationCapped,
    ContextEmergencyShrink,
    ContextEstimate,
    Event,
    MaxTokensShrunk,
    UsageMeasured,
)
from ..core.shapes import Format, Shape
from ..core.shrink import fit_max_tokens
from ..core.turns import Problem, Segmentation
from ._transcript import Fixed, Transcript

__all__ = ["Composition", "Count", "Fit", "FitContext", "M", "Summarized", "build_fit", "learn"]

logger = logging.getLogger("windowguard")

if TYPE_CHECKING:
    # A bare ``Fit`` means ``Fit[object]`` to a type checker (PEP 696), as before Fit
    # was generic; typing_extensions is needed for that only, never at run time.
    from typing_extensions import TypeVar

    from ..core.edits.parts import CallRef, ResultRef

    M = TypeVar("M", default=object)
else:
    from typing import TypeVar

    M = TypeVar("M")
    """The caller's message type: ``fit(messages: Sequence[M]) -> Fit[M]``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Fit(Generic[M]):
    """What to send.

    Generic over the caller's message type: fitting a ``list[ChatCompletionMessageParam]``
    gives a ``Fit[ChatCompletionMessageParam]``, whose ``messages`` go straight back to
    the SDK's ``create`` under ``mypy --strict``. A bare ``Fit`` is ``Fit[object]``.

    Attributes:
        messages: the caller's own message objects to send, in order (edited ones are
            new objects of the caller's own type).
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
        upper_tokens: when an exact source exists, a guaranteed upper count of the
            request (exact where measured or counted, bounded elsewhere; images, audio
            and documents nothing measured are at an allowance, which has no bound:
            decision 0004): what the edge rule decided on and ``max_tokens`` was fitted
            against; 0 otherwise.
        edits: what this send changed (``"clamp"``, ``"clear"``, ``"clear_inputs"``,
            ``"summarize"``, ``"drop"``), each with the caller's message indices and the
            tokens freed; edits made by earlier sends are still in effect (their copies
            are sent again, byte for byte) and not listed again.
    """

    messages: list[M]
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
    upper_tokens: int = 0
    edits: tuple[EditRecord, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Composition:
    """What one request held, for the report (or remote count) about it."""

    run: Transcript
    key: Hashable
    head_stop: int
    kept_from: int
    end: int
    costs: BaseCosts
    upper: int
    """The request's upper count when it was fitted (what a refused request held)."""
    best: int
    measured: int
    """What of it was known exactly when it was fitted."""
    counted: int | None
    """Its local exact count, when every part of it was counted locally (to cross-check
    the provider's report); None otherwise."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Summarized:
    """A summary message as the fit counts it: a part of the base, after the head.

    Attributes:
        message: what is sent.
        key: names its text (part of the base's key).
        raw: the heuristic's estimate of it.
        bound: its guaranteed bound.
        local: its local exact count, when counted.
    """

    message: object
    key: str
    shape: Shape
    raw: int
    bound: int
    local: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Count:
    """The best count of one candidate request.

    Attributes:
        tokens: the count decisions rest on: the upper count when the manager has an
            exact source (every unmeasured part bounded, or counted exactly near the
            edge), else the best estimate (the tool-loop design).
        best: measured tokens plus the calibrated estimate of the rest.
        upper: measured tokens plus local counts or guaranteed bounds of the rest.
        measured: the part the ledger measured exactly.
        exact: the whole request was measured or counted exactly.
    """

    tokens: int
    best: int
    upper: int
    measured: int
    exact: bool


class FitContext:
    """One fit's inputs and the counts of its candidate requests.

    Args:
        use_upper: decide on upper counts (an exact source exists) rather than on the
            heuristic's best estimate.
    """

    __slots__ = (
        "_counts",
        "_key",
        "budget",
        "first_turn",
        "fixed",
        "local_fixed",
        "refs",
        "requested",
        "run",
        "seg",
        "summary",
        "use_upper",
    )

    def __init__(
        self,
        *,
        run: Transcript,
        seg: Segmentation,
        fixed: Fixed,
        budget: Budget,
        requested: int | None,
        use_upper: bool = False,
    ) -> None:
        self.run = run
        self.seg = seg
        self.fixed = fixed
        self.budget = budget
        self.requested = requested
        self.use_upper = use_upper
        self.local_fixed: int | None = None
        self._key: Hashable | None = None
        # A summary sent after the head, standing for the turns before ``first_turn``:
        # its message and costs (raw, bound, local count once made). Every candidate
        # request then keeps turns from ``first_turn`` on at least.
        self.summary: Summarized | None = None
        self.first_turn = 0
        # Counts made in this fit, by what they depend on.
        self._counts: dict[tuple[int, float, float, int, int | None], Count] = {}
        # The edit stages' reading of the tool calls and results (``_editing._refs``),
        # by whether it read the caller's own messages: (the messages read, the first
        # message read, the calls, the results). Forgotten when a message is replaced
        # (:meth:`refresh`).
        self.refs: dict[bool, tuple[list[object], int, list[CallRef], list[ResultRef]]] = {}

    @property
    def end(self) -> int:
        """One past the last message."""
        return self.seg.length

    def refresh(self) -> None:
        """Messages were replaced by edited copies: count again (the head's may be among
        them, so the base's key is made again too)."""
        self._counts.clear()
        self._key = None
        self.refs.clear()

    @property
    def newest(self) -> int:
        """The first message of the newest turn (the end when there is no turn)."""
        seg = self.seg
        return seg.turn_starts[-1] if seg.turn_starts else seg.length

    def kept_from(self, dropped: int) -> int:
        """The first message kept after the head when ``dropped`` oldest turns go (at
        least the turns a summary stands for)."""
        seg = self.seg
        dropped = max(dropped, self.first_turn)
        return seg.turn_starts[dropped] if dropped else seg.head_stop

    def summarize(self, summary: Summarized | None, first_turn: int) -> None:
        """Send ``summary`` after the head, standing for the turns before ``first_turn``."""
        self.summary = summary
        self.first_turn = first_turn if summary is not None else 0
        self.refresh()

    @property
    def key(self) -> Hashable:
        """The base's key: the fixed parts' content, the head's entries themselves (by
        identity: :class:`~windowguard.accounting.ledger.BaseKey`) and the summary's
        text."""
        if self._key is None:
            run, fixed_key, head_stop = self.run, self.fixed.key, self.seg.head_stop
            known = run.base_key
            key: Hashable
            if known is not None and known[0] is fixed_key and known[1] == head_stop:
                key = known[2]
            else:
                key = BaseKey(fixed_key, tuple(run.ledger.entries[:head_stop]))
                run.base_key = (fixed_key, head_stop, key)
            if self.summary is not None and isinstance(key, BaseKey):
                key = replace(key, summary=self.summary.key)  # never the plain head's
            self._key = key
        return self._key

    @property
    def costs(self) -> BaseCosts:
        """Framing, system and tools, and the summary after the head: the heuristic's
        estimates and bounds, and the local exact counts once made."""
        fixed, summary = self.fixed, self.summary
        costs = BaseCosts(
            fixed_raw=fixed.raw, fixed_bound=fixed.bound, fixed_local=self.local_fixed
        )
        if summary is None:
            return costs
        return replace(
            costs, summary_raw=summary.raw, summary_bound=summary.bound, summary_local=summary.local
        )

    def cost_function(self, factors: Factors, *, upper: bool | None = None) -> Callable[[int], int]:
        """``cost(dropped)``: the decision count (or, with ``upper`` given, the upper or
        best count) after dropping that many oldest turns."""
        use_upper = self.use_upper if upper is None else upper

        def cost(dropped: int) -> int:
            count = self.count(self.kept_from(dropped), factors)
            return count.upper if use_upper else count.best

        return cost

    def typical_turn(self, factors: Factors, recent: int = 8) -> int:
        """The mean best count of the newest ``recent`` turns (0 without turns)."""
        starts = self.seg.turn_starts
        if not starts:
            return 0
        turns = min(recent, len(starts))
        first = starts[len(starts) - turns]
        return self.run.ledger.typical(first, self.end, factors, turns)

    def count(self, kept_from: int, factors: Factors) -> Count:
        """The counts of the request keeping turns from ``kept_from``."""
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
            costs=self.costs,
            factors=factors,
        )
        upper = found.best if found.exact else found.upper
        count = self._counts[key] = Count(
            tokens=upper if self.use_upper else found.best,
            best=found.best,
            upper=upper,
            measured=found.measured,
            exact=found.exact,
        )
        return count

    def count_locally(self, local: TemplateAccounting, factors: Factors) -> int:
        """Count exactly, with the local tokenizer, what it has not counted yet: the
        fixed parts, the head, and messages newest first until their count passes the
        budget (older turns could not be kept anyway).

        Returns:
            How many messages were counted now.

        Raises:
            Exception: whatever the tokenizer raised (the caller falls back).
        """
        ledger = self.run.ledger
        entries = ledger.entries
        head_stop = self.seg.head_stop
        if self.local_fixed is None:
            system = sum(local.message_tokens(shape) for shape in self.fixed.system_shapes)
            self.local_fixed = local.fixed_tokens(self.fixed.tools) + system
            if entries and entries[-1].shape.kind == "assistant":
                self.local_fixed += local.final_assistant_tokens
        summary = self.summary
        if summary is not None and summary.local is None:
            self.summary = replace(summary, local=local.message_tokens(summary.shape))
            self._counts.clear()
        head = [i for i in range(head_stop) if entries[i].local is None]
        counted = list(head)
        if head:
            _count_into(local, entries, head)
        budget = self.budget.input_tokens
        chunk = max(budget // 4, 2_048)
        newest = self.newest
        total = sum(math.ceil((entries[i].local or 0) * factors.local) for i in range(head_stop))
        if self.summary is not None:
            total += math.ceil((self.summary.local or 0) * factors.local)
        pending: list[int] = []
        pending_raw = 0
        for index in range(len(entries) - 1, head_stop - 1, -1):
            entry = entries[index]
            if entry.local is None:
                pending.append(index)
                pending_raw += entry.raw
            else:
                total += math.ceil(entry.local * factors.local)
            if pending and (pending_raw >= chunk or index == head_stop):
                _count_into(local, entries, pending)
                total += sum(math.ceil((entries[i].local or 0) * factors.local) for i in pending)
                counted += pending
                pending, pending_raw = [], 0
            if total > budget and index <= newest:
                break  # older turns could not be kept anyway
        if pending:
            _count_into(local, entries, pending)
            counted += pending
        if counted:
            ledger.counted_locally(min(counted))
        return len(counted)

    def composition(self, kept_from: int, factors: Factors) -> Composition:
        """The composition of the request keeping turns from ``kept_from``."""
        count = self.count(kept_from, factors)
        return Composition(
            run=self.run,
            key=self.key,
            head_stop=self.seg.head_stop,
            kept_from=kept_from,
            end=self.end,
            costs=self.costs,
            upper=count.upper,
            best=count.best,
            measured=count.measured,
            counted=self.local_count(kept_from),
        )

    def local_count(self, kept_from: int) -> int | None:
        """The local exact count of the whole request keeping turns from ``kept_from``,
        when every part of it was counted locally; else None."""
        if self.local_fixed is None:
            return None
        raw, _, local = self.run.ledger.unmeasured_raw(kept_from, self.end)
        head_raw, _, head_local = self.run.ledger.unmeasured_raw(0, self.seg.head_stop)
        summary = 0
        if self.summary is not None:
            if self.summary.local is None:
                return None
            summary = self.summary.local
        if raw or head_raw:
            return None
        return self.local_fixed + local + head_local + summary

    def query(self, kept_from: int, system: object, model: str) -> CountQuery:
        """The remote count query of the request keeping turns from ``kept_from`` (what
        is sent: edited copies where there are some)."""
        head_stop = self.seg.head_stop
        messages = self.run.effective
        summary = [self.summary.message] if self.summary is not None else []
        kept = [*messages[:head_stop], *summary, *messages[kept_from : self.end]]
        return CountQuery(
            format=self.run.format,
            model=model,
            messages=tuple(kept),
            system=system,
            tools=self.fixed.tools,
        )


def _count_into(
    local: TemplateAccounting, entries: Sequence[Entry], indices: Sequence[int]
) -> None:
    counts = count_shapes(local, [entries[i].shape for i in indices])
    for index, tokens in zip(indices, counts, strict=True):
        entries[index].local = tokens


def count_shapes(local: TemplateAccounting, shapes: Sequence[Shape]) -> list[int]:
    """Each shape's local exact count, batched when the accounting can."""
    batch = getattr(local, "messages_tokens", None)
    if callable(batch):
        return list(batch(shapes))
    return [local.message_tokens(shape) for shape in shapes]


MAX_GROWTH: Final = 1.5
"""How much one report may raise a calibration factor (a ``calibration_capped`` event
says when it would have risen more)."""


def learn(
    composition: Composition,
    total: int,
    *,
    calibration: Calibration,
    local_calibration: Calibration,
    family: str,
    origin: str,
    factors: Factors,
    events: list[Event],
) -> UsageMeasured:
    """Attribute the exact prompt size of one request to what it held, and grow the
    calibration of whatever estimated what it newly measured (which only rises),
    by at most :data:`MAX_GROWTH` per report, and only from what the request showed
    (hidden tokens are their own component).

    Returns:
        The ``usage_measured`` event saying what was learnt.
    """
    observation = composition.run.ledger.observe(
        total=total,
        key=composition.key,
        head_stop=composition.head_stop,
        kept_from=composition.kept_from,
        end=composition.end,
        costs=composition.costs,
        factors=factors,
        rewrites_history=family in REWRITES_HISTORY,
    )
    raw, counted = observation.estimate_raw, observation.estimate_local
    measured = observation.measured - observation.hidden
    if observation.calibrates and measured > 0 and raw + counted > 0:
        # A span estimated by one source calibrates that source; a mixed one both.
        for source, used, name in (
            (calibration, raw, "heuristic"),
            (local_calibration, counted, "local"),
        ):
            if not used:
                continue
            before = source.factor
            ratio = measured / (raw + counted)
            limit = before * MAX_GROWTH
            source.observe(measured, raw + counted, limit=limit)
            if ratio > limit:
                events.append(
                    CalibrationCapped(
                        source=name, factor=source.factor, observed=round(ratio, 4), origin=origin
                    )
                )
    return UsageMeasured(
        origin=origin,
        total_tokens=observation.total,
        known_tokens=observation.known,
        measured_tokens=observation.measured,
        estimated_tokens=raw + counted,
        messages=observation.messages,
        with_base=observation.with_base,
        drift=observation.drift,
        hidden_tokens=observation.hidden,
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
    edits: tuple[EditRecord, ...] = (),
) -> Fit[Any]:
    """The :class:`Fit` of what will be sent: ``max_tokens`` fitted by the shrink guard
    (with no safety buffer when the count is exact), and the ``context_estimate``
    event first."""
    budget = ctx.budget
    window = budget.context_window
    estimated = count.best
    shrink = fit_max_tokens(
        estimated_input_tokens=count.tokens,
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
        upper_tokens=count.upper if ctx.use_upper else 0,
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
        upper_tokens=count.upper if ctx.use_upper else 0,
        edits=edits,
    )
