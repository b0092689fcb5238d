"""The usage ledger: provider-reported prompt sizes, attributed to what they measured.

The prompt tokens a provider reports are exact for the request just sent. A request is
a *base* (the per-request framing, the system argument, the tool block and the head,
none of which is ever pruned; one base per distinct tools/system/head, its *key*) plus
the kept turns' messages. When a report comes in for a request whose parts are partly
known exactly already, the difference is the exact cost of the rest: usually the turn
appended since the previous send. That rest becomes a **span**: a contiguous run of
messages (and the base, when it was not known yet) with a measured total.

Spans are stored per message as values that sum to the span's total, *back-filled*
from the newest message: each message gets its calibrated estimate until the total is
used up, the oldest ones what is left. Pruning only ever drops the oldest turns, so
what stays of a span is a suffix of it, and a suffix's values add up to
``min(total, estimate of the suffix)``: never below its real cost while the estimate is
not. A span that is kept whole is counted at exactly its total. A base measured
together with messages gets ``min(total, its estimate)`` first; that keeps every
"base + suffix" an upper bound too.

Invariants:
    * a request's count is exact when its base is exactly known and every kept message
      lies in a span kept whole; otherwise every unmeasured part is an estimate and every
      cut span an upper bound;
    * a report for a request known exactly already is a consistency check: a larger
      report raises the base by the difference (templates are not perfectly additive),
      a smaller one is kept as an upper bound;
    * where a family's template rewrites earlier turns once a new user message arrives
      (Qwen3 drops older reasoning, Anthropic drops older thinking blocks), the measured
      parts may have shrunk within the same report, so the rest is taken as at least its
      estimate, never below (an upper bound, not a guess);
    * entries are only ever appended; spans and bases survive a rebuild only while their
      messages are all still there, in order.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..shapes import Shape

__all__ = [
    "REWRITES_HISTORY",
    "BaseValue",
    "Entry",
    "Factors",
    "Ledger",
    "Observation",
    "RequestCount",
    "Span",
]

REWRITES_HISTORY: Final = frozenset({"qwen", "claude"})
"""Families whose templates shorten earlier turns when a new user message arrives."""


_RAW: Final = operator.attrgetter("raw")
_MEASURED: Final = operator.attrgetter("measured")
_LOCAL: Final = operator.attrgetter("local")


def leave_room(items: list[Any]) -> None:
    """Give a list that was just extended at once room to grow.

    ``list.extend`` by many items allocates exactly, so the next send's append would
    copy the whole list; one append (which over-allocates by an eighth) and a pop leave
    the room, once per rebuild.
    """
    if items:
        items.append(items[-1])
        items.pop()


def _nothing_known(entries: Sequence[Entry]) -> bool:
    """Whether none of ``entries`` is measured or counted locally (checked at C speed)."""
    measured = list(map(_MEASURED, entries))
    if measured.count(None) != len(measured):
        return False
    local = list(map(_LOCAL, entries))
    return local.count(None) == len(local)


class Entry:
    """One message of the transcript with everything known about its cost.

    Attributes:
        message: the caller's own message object (kept so its id stays valid).
        shape: its shape.
        raw: the heuristic's raw estimate (always known, cheap).
        local: the exact local template count, once asked for.
        measured: its back-filled share of a measured span, when measured.
        span: that span.
        index: its position in the current transcript.
    """

    __slots__ = ("index", "local", "measured", "message", "raw", "shape", "span")

    def __init__(self, message: object, shape: Shape, raw: int) -> None:
        self.message = message
        self.shape = shape
        self.raw = raw
        self.local: int | None = None
        self.measured: int | None = None
        self.span: Span | None = None
        self.index = -1

    @property
    def estimate(self) -> int:
        """The best raw estimate: the local exact count when known, else the heuristic."""
        return self.raw if self.local is None else self.local

    def calibrated(self, factors: Factors) -> int:
        """The best estimate, scaled by the factor of the source that made it."""
        if self.local is None:
            return math.ceil(self.raw * factors.heuristic)
        return math.ceil(self.local * factors.local)


class Span:
    """Messages ``[start, stop)`` (and a base, when ``base_key`` is set) measured together."""

    __slots__ = ("base_key", "start", "stop", "total")

    def __init__(self, start: int, stop: int, total: int, base_key: Hashable | None) -> None:
        self.start = start
        self.stop = stop
        self.total = total
        self.base_key = base_key


@dataclass(frozen=True, slots=True)
class Factors:
    """The run's calibration factors: one for heuristic estimates (ADR-107's, seeded
    above 1) and one for local exact counts (seeded at 1): each grows only from what the
    reports say about its own estimates, so a heuristic under-count never inflates what
    an exact tokenizer counted."""

    heuristic: float
    local: float

    def apply(self, heuristic_raw: int, local_raw: int) -> int:
        """The calibrated tokens of a heuristic and a local estimate."""
        return math.ceil(heuristic_raw * self.heuristic) + math.ceil(local_raw * self.local)

    def at_least(self, ratio: float) -> Factors:
        """Both factors raised to ``ratio`` where they are below it."""
        return Factors(max(self.heuristic, ratio), max(self.local, ratio))


@dataclass(frozen=True, slots=True)
class BaseValue:
    """A base's tokens: exact when ``span`` is None; else its share of a span measured
    together with messages (an upper bound alone, exact with the whole span)."""

    tokens: int
    span: Span | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestCount:
    """What the ledger knows of one request: ``measured`` tokens, the raw estimates of
    the rest (heuristic and local, to calibrate), and whether ``measured`` is all of it,
    exactly."""

    measured: int
    raw: int
    local: int
    exact: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """What one report or remote count taught the ledger.

    Attributes:
        total: the reported (or counted) prompt tokens.
        known: how much of it was known exactly before.
        measured: the tokens newly attributed (``total - known``, or the upper bound
            taken instead when the template may have rewritten history).
        estimate_raw: the heuristic's raw estimate of what was newly measured.
        estimate_local: the local exact count of what was newly measured.
        messages: how many messages the new span holds.
        with_base: whether the base was measured in it.
        drift: for a request known exactly already, ``total - known``.
    """

    total: int
    known: int
    measured: int
    estimate_raw: int
    estimate_local: int
    messages: int
    with_base: bool
    drift: int = 0


class Ledger:
    """Per-run measured costs, aligned with the manager's entries.

    The ledger holds the entries (one per message, in order) and keeps three prefix
    sums over them, rebuilt lazily from the first changed index: the measured values,
    the raw estimates of the unmeasured entries, and how many entries are unmeasured.
    """

    __slots__ = (
        "_dirty",
        "_est",
        "_local",
        "_measured",
        "_unmeasured",
        "_walks",
        "bases",
        "entries",
        "version",
    )

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.bases: dict[Hashable, BaseValue] = {}
        self._measured: list[int] = [0]
        self._est: list[int] = [0]
        self._local: list[int] = [0]
        self._unmeasured: list[int] = [0]
        self._dirty = 0
        # kept_from -> how far spans are whole from it: a walk resumes where the last
        # one stopped, so a send that appends one turn walks one span, not all of them.
        self._walks: dict[int, int] = {}
        self.version = 0
        """Grows whenever anything counted changes (entries, measurements, bases)."""

    # -- building ----------------------------------------------------------------------

    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries (new messages) in transcript order."""
        start = len(self.entries)
        for offset, entry in enumerate(entries):
            entry.index = start + offset
        self.entries.extend(entries)
        if len(entries) > 32:
            leave_room(self.entries)
        self.version += 1

    def adopt(self, entries: Sequence[Entry], bases: dict[Hashable, BaseValue]) -> None:
        """Take over ``entries`` (a rebuilt transcript) and the previous run's bases.

        Spans whose messages are no longer all present, contiguous and in order are
        forgotten (their entries become unmeasured again).
        """
        self.append(entries)
        self.bases = dict(bases)
        seen: dict[int, tuple[Span, list[Entry]]] = {}
        for entry in entries:
            span = entry.span
            if span is not None:
                seen.setdefault(id(span), (span, []))[1].append(entry)
        for span, members in seen.values():
            first = members[0].index
            contiguous = all(m.index == first + i for i, m in enumerate(members))
            if contiguous and len(members) == span.stop - span.start:
                span.start, span.stop = first, first + len(members)
            else:
                for member in members:
                    member.measured = member.span = None
        self._dirty = 0

    def changed(self, index: int) -> None:
        """Entries from ``index`` on changed (measured or locally counted)."""
        self.version += 1
        self._dirty = min(self._dirty, index)
        walks = self._walks
        for kept_from, reached in list(walks.items()):
            if index < reached:  # a span it walked over may have changed
                del walks[kept_from]

    def prefixes(self) -> tuple[list[int], list[int], list[int], list[int]]:
        """Prefix sums over the entries: measured values; heuristic estimates and local
        counts of the unmeasured ones; how many are unmeasured."""
        entries = self.entries
        measured, est, local, unmeasured = self._measured, self._est, self._local, self._unmeasured
        start = self._dirty
        if start < len(entries) or len(measured) != len(entries) + 1:
            del measured[start + 1 :], est[start + 1 :], local[start + 1 :]
            del unmeasured[start + 1 :]
            m, e, c, u = measured[start], est[start], local[start], unmeasured[start]
            new = entries[start:]
            if len(new) > 32 and _nothing_known(new):  # a cold fit: all heuristic estimates
                count = len(new)
                est.extend(
                    itertools.islice(itertools.accumulate(map(_RAW, new), initial=e), 1, None)
                )
                measured.extend(itertools.repeat(m, count))
                local.extend(itertools.repeat(c, count))
                unmeasured.extend(range(u + 1, u + count + 1))
                for prefix in (measured, est, local, unmeasured):
                    leave_room(prefix)
                self._dirty = len(entries)
                return measured, est, local, unmeasured
            for entry in new:
                value = entry.measured
                if value is not None:
                    m += value
                else:
                    u += 1
                    if entry.local is None:
                        e += entry.raw
                    else:
                        c += entry.local
                measured.append(m)
                est.append(e)
                local.append(c)
                unmeasured.append(u)
            self._dirty = len(entries)
        return measured, est, local, unmeasured

    # -- queries -----------------------------------------------------------------------

    def whole_spans_from(self, kept_from: int, end: int) -> int:
        """The first index at or after ``kept_from`` not covered by whole kept spans.

        Messages ``[kept_from, result)`` all lie in spans that start at or after
        ``kept_from`` and end by ``end``: their measured values add up exactly.
        """
        entries = self.entries
        index = self._walks.get(kept_from, kept_from)
        if index > end:
            index = kept_from
        while index < end:
            span = entries[index].span
            if span is None or span.start != index or span.stop > end:
                break
            index = span.stop
        if len(self._walks) > 64:
            self._walks.clear()
        self._walks[kept_from] = index
        return index

    def base(self, key: Hashable, kept_from: int, end: int) -> tuple[BaseValue | None, bool]:
        """The base measured for ``key`` and whether it is exact in this request (it is
        when measured alone, or when the span it was measured with is kept whole)."""
        value = self.bases.get(key)
        if value is None:
            return None, False
        span = value.span
        if span is None:
            return value, True
        whole = span.start >= kept_from and self.whole_spans_from(kept_from, end) >= span.stop
        return value, whole

    def base_part(
        self, key: Hashable, head_stop: int, fixed: tuple[int, int], factors: Factors
    ) -> tuple[int, int, int]:
        """The base's (measured tokens, heuristic raw, local raw) still to calibrate.

        A measured base is its tokens. An unmeasured one is estimated: framing, system
        and tools (``fixed``: heuristic, local) plus the head; or, when a base with the
        same head but other tools or system was measured, that base plus this one's
        framing, system and tools (base = fixed + head), whichever is smaller.
        """
        value = self.bases.get(key)
        if value is not None:
            return value.tokens, 0, 0
        _, est, local, _ = self.prefixes()
        raw, counted = fixed[0] + est[head_stop], fixed[1] + local[head_stop]
        head = key[1] if isinstance(key, tuple) else None
        bound = min(
            (v.tokens for k, v in self.bases.items() if isinstance(k, tuple) and k[1] == head),
            default=None,
        )
        if bound is not None and bound + factors.apply(*fixed) < factors.apply(raw, counted):
            return bound, fixed[0], fixed[1]
        return 0, raw, counted

    def count(
        self,
        *,
        key: Hashable,
        head_stop: int,
        kept_from: int,
        end: int,
        fixed: tuple[int, int],
        factors: Factors,
    ) -> RequestCount:
        """What is known of the request holding the base and ``entries[kept_from:end]``.

        Args:
            key: the request's base key (framing, system, tools and head).
            head_stop: the head is ``entries[:head_stop]``.
            kept_from: the first kept message after the head.
            end: one past the last message.
            fixed: the raw estimate of framing, system and tools: (heuristic, local).
            factors: the calibration factors (to compare estimates with bounds).
        """
        measured, est, local, unmeasured = self.prefixes()
        base_tokens, base_raw, base_local = self.base_part(key, head_stop, fixed, factors)
        _, base_exact = self.base(key, kept_from, end)
        exact = (
            base_exact
            and unmeasured[end] == unmeasured[kept_from]
            and self.whole_spans_from(kept_from, end) == end
        )
        return RequestCount(
            measured=base_tokens + measured[end] - measured[kept_from],
            raw=base_raw + est[end] - est[kept_from],
            local=base_local + local[end] - local[kept_from],
            exact=exact,
        )

    # -- learning ----------------------------------------------------------------------

    def observe(
        self,
        *,
        total: int,
        key: Hashable,
        head_stop: int,
        kept_from: int,
        end: int,
        base_estimate: tuple[int, int],
        factors: Factors,
        rewrites_history: bool,
    ) -> Observation:
        """Attribute the exact prompt size of one request to what it held.

        Args:
            total: the exact prompt tokens of the request (reported or counted).
            key: the request's base key (framing, system, tools and head).
            head_stop: the head is ``entries[:head_stop]`` (inside the base).
            kept_from: the request held the head and ``entries[kept_from:end]``.
            end: see ``kept_from``.
            base_estimate: the raw estimate of the base (framing, system, tools, head):
                (heuristic, local).
            factors: the run's calibration factors; back-filling scales estimates by
                them, or by ``measured / estimate`` where that is higher (the caller then
                raises its calibration to the same ratio).
            rewrites_history: the family's template may have shortened measured turns.

        Returns:
            What was learnt. The caller calibrates from ``measured`` against the
            estimates.
        """
        base, base_known = self.base(key, kept_from, end)
        measured_prefix = self.prefixes()[0]
        stop = self.whole_spans_from(kept_from, end)
        known = (base.tokens if base is not None and base_known else 0) + (
            measured_prefix[stop] - measured_prefix[kept_from]
        )
        rest = list(range(stop, end))
        if stop < end:
            # Keep spans contiguous: a cut span before later unmeasured messages is
            # measured again together with everything after it.
            first = self.entries[stop]
            if first.span is not None and first.span.start < kept_from:
                rest = list(range(kept_from, end))
                known -= measured_prefix[stop] - measured_prefix[kept_from]
        if base_known and not rest:
            assert base is not None
            drift = total - known
            if drift > 0:
                self.bases[key] = BaseValue(base.tokens + drift, base.span)
                self.version += 1
            return Observation(
                total=total,
                known=known,
                measured=0,
                estimate_raw=0,
                estimate_local=0,
                messages=0,
                with_base=False,
                drift=drift,
            )
        with_base = not base_known
        entries = self.entries
        raw = (base_estimate[0] if with_base else 0) + sum(
            entries[i].raw for i in rest if entries[i].local is None
        )
        counted = (base_estimate[1] if with_base else 0) + sum(entries[i].local or 0 for i in rest)
        value = total - known
        upper = min(total, factors.apply(raw, counted))
        if value < 0 or (rewrites_history and self._has_user_text(rest)):
            value = max(value, upper)
        if raw + counted > 0:
            factors = factors.at_least(value / (raw + counted))
        self._record(
            rest=rest,
            value=value,
            key=key,
            with_base=with_base,
            base_estimate=factors.apply(*base_estimate),
            factors=factors,
            kept_from=kept_from,
        )
        del head_stop  # the head is inside the base; kept for the signature's clarity
        return Observation(
            total=total,
            known=known,
            measured=value,
            estimate_raw=raw,
            estimate_local=counted,
            messages=len(rest),
            with_base=with_base,
        )

    def _forget(self, span: Span) -> None:
        """Unmeasure the messages still holding ``span``'s shares."""
        entries = self.entries
        for index in range(span.start, min(span.stop, len(entries))):
            entry = entries[index]
            if entry.span is span:
                entry.measured = entry.span = None
        self.changed(span.start)

    def _has_user_text(self, indices: Sequence[int]) -> bool:
        """Whether a new user query is among them (not a message of tool results only)."""
        entries = self.entries
        return any(
            entries[i].shape.kind == "user" and not entries[i].shape.results_only for i in indices
        )

    def _record(
        self,
        *,
        rest: list[int],
        value: int,
        key: Hashable,
        with_base: bool,
        base_estimate: int,
        factors: Factors,
        kept_from: int,
    ) -> None:
        entries = self.entries
        remaining = value
        if not rest:
            self.bases[key] = BaseValue(remaining)
            self.version += 1
            return
        start, stop = rest[0], rest[-1] + 1
        span = Span(start, stop, value, key if with_base else None)
        if with_base:
            # A base measured together with messages only adds up with them: its share and
            # theirs were split from one total. Its old messages lose their share when it
            # is measured again (they are estimated again), or the old messages plus the
            # new base could count less than they cost.
            old_base = self.bases.get(key)
            if old_base is not None and old_base.span is not None:
                self._forget(old_base.span)
            share = min(remaining, base_estimate)
            self.bases[key] = BaseValue(share, span)
            remaining -= share
        # A span cut by this request keeps nothing of its older, dropped part.
        old = entries[start].span
        if old is not None and old.start < start:
            for index in range(old.start, min(start, kept_from)):
                entry = entries[index]
                if entry.span is old:
                    entry.measured = entry.span = None
            self.changed(old.start)
        for index in reversed(rest):
            entry = entries[index]
            share = min(remaining, entry.calibrated(factors))
            entry.measured = share
            entry.span = span
            remaining -= share
        if remaining > 0:  # estimates below the measured total: the newest takes the rest
            newest = entries[stop - 1]
            assert newest.measured is not None
            newest.measured += remaining
        self.changed(start)
