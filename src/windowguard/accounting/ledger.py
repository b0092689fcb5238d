"""The usage ledger: provider-reported prompt sizes, attributed to what they measured.

The prompt tokens a provider reports are exact for the request just sent. A request is
a *base* (the per-request framing, the system argument, the tool block and the head,
none of which is ever pruned; one base per distinct tools/system/head, its *key*) plus
the kept turns' messages. When a report comes in for a request whose parts are partly
known exactly already, the difference is the exact cost of the rest: usually the turn
appended since the previous send. That rest becomes a **span**: a contiguous run of
messages (and the base, when it was not known yet) with a measured total.

Every message (an :class:`Entry`) carries three costs that never depend on what was
measured: the heuristic's raw estimate, a **guaranteed bound** (no byte-level BPE emits
more tokens than the bytes it is shown, plus bounded framing) and, once counted, the
local exact tokenizer's count. A request's count has two readings:

* **upper**: exact where measured (a span kept whole, a base measured), the local count
  (times its calibration factor) or the bound elsewhere. It is never below the request's
  real size while the local counts are not, which is what decisions near the edge rest
  on (decision 0004, "the edge rule");
* **best**: exact where measured, a proportional share of a cut span's total for its kept
  members, the calibrated estimate elsewhere: the number reported, and what decides when
  no exact source exists at all (the tool-loop design).

Spans are kept as a sorted list of ranges, not written into their messages: recording
one, and counting any request, costs O(log spans), so a report that covers a thousand
messages (a run's first report of a long transcript) costs what one covering a single
turn does. A span's total is split among its members only when a request keeps part of
it (the span is *cut*): in proportion to their local counts or estimates, which is only
ever the *best* reading; the *upper* reading of a cut span's members is their local count
or bound, so no split can make an upper count fall short.

Tokens a request holds that its visible content cannot account for — Responses reasoning
items passed by id, encrypted reasoning the server expands, anything over the span's
guaranteed bound — are *hidden*: kept as their own component on the span (charged to the
item that holds them, or the newest message), never fed to calibration, and part of the
upper count wherever that item is kept.

Invariants:
    * a request's count is exact when its base is exactly known and every kept message
      lies in a span kept whole (one measured together with a base: beside that base
      only, since its total is what the base's share of the report left); its upper
      count is an upper bound whenever the local counts are (the tests check both on
      every corpus request);
    * a report for a request known exactly already is a consistency check: a larger
      report raises the base by the difference (templates are not perfectly additive),
      a smaller one is kept as an upper bound;
    * where a family's template rewrites earlier turns once a new user message arrives
      (Qwen3 drops older reasoning, Anthropic drops older thinking blocks), the measured
      parts may have shrunk within the same report, so the rest is taken as at least its
      upper count, never below;
    * entries are only ever appended; spans and bases survive a rebuild only while their
      messages are all still there, contiguous and in order.

Layout: this module holds :class:`Ledger`'s readings of a request (:meth:`Ledger.count`,
:meth:`Ledger.members`, :meth:`Ledger.gap`) and its attribution of reports
(:meth:`Ledger.observe`); the values they work with (:class:`Entry`, :class:`Span`, a
base's key, costs and value, what a count and a report return) are in
:mod:`._ledger_types`, and the bookkeeping (the entries, the sorted spans, the bases
and the prefix sums over them) in :mod:`._ledger_book`.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left, bisect_right
from collections.abc import Hashable
from typing import Final

from ._ledger_book import LedgerBook
from ._ledger_book import leave_room as leave_room
from ._ledger_types import BaseCosts as BaseCosts
from ._ledger_types import BaseKey as BaseKey
from ._ledger_types import BaseValue as BaseValue
from ._ledger_types import Entry as Entry
from ._ledger_types import Factors as Factors
from ._ledger_types import Observation as Observation
from ._ledger_types import RequestCount as RequestCount
from ._ledger_types import Span as Span

__all__ = [
    "REWRITES_HISTORY",
    "BaseCosts",
    "BaseKey",
    "BaseValue",
    "Entry",
    "Factors",
    "Ledger",
    "Observation",
    "RequestCount",
    "Span",
    "leave_room",
]

REWRITES_HISTORY: Final = frozenset({"qwen", "claude"})
"""Families whose templates shorten earlier turns when a new user message arrives."""


class Ledger(LedgerBook):
    """Per-run measured costs, aligned with the manager's entries.

    Its entries, spans and bases, and the prefix sums over them, are kept by
    :class:`~windowguard.accounting._ledger_book.LedgerBook`; a ledger reads requests'
    counts off them and attributes reports to them.
    """

    __slots__ = ()

    # -- queries -----------------------------------------------------------------------

    def base_parts(
        self,
        key: Hashable,
        head_stop: int,
        costs: BaseCosts,
        kept_from: int,
        factors: Factors,
        end: int | None = None,
    ) -> tuple[int, int, int, bool, int, int]:
        """The base's (best, upper, measured, exact, raw, local) in the request keeping
        messages from ``kept_from`` to ``end`` (None: every entry).

        A measured base is its tokens: exact when measured alone or with a span the
        request keeps whole; a share (its best reading) otherwise, whose upper reading is
        the estimate's bound. An unmeasured base is estimated from ``costs`` and the head;
        or, when a base with the same head and summary but other tools or system was
        measured, that base plus this one's framing, system and tools, whichever is
        smaller.
        """
        head_raw, head_bound, head_local = self.head_costs(head_stop, costs)
        raw = costs.fixed_raw if costs.fixed_local is None else 0
        counted = costs.fixed_local or 0
        best = factors.apply(raw + head_raw, counted + head_local)
        fixed_bound = costs.fixed_bound if costs.fixed_local is None else 0
        upper = head_bound + fixed_bound + math.ceil((counted + head_local) * factors.local)
        value = self.bases.get(key)
        if value is not None:
            span = value.span
            if span is None:
                return value.tokens, value.tokens, value.tokens, True, 0, 0
            listed = self._is_listed(span)
            stop = len(self.entries) if end is None else end
            if listed and span.start >= kept_from and span.stop <= stop:
                return value.tokens, value.tokens, value.tokens, True, 0, 0
            if listed:  # the base, with what it was measured with, cost that much at most
                upper = min(upper, value.tokens + span.total)
            upper = max(upper, value.tokens)
            return value.tokens, upper, 0, False, raw + head_raw, counted + head_local
        other = None
        if isinstance(key, BaseKey):
            other = min(
                (
                    v.tokens
                    for k, v in self.bases.items()
                    if v.span is None
                    and isinstance(k, BaseKey)
                    and k.head == key.head
                    and k.summary == key.summary
                ),
                default=None,
            )
        if other is not None:
            fixed_best = factors.apply(raw, counted)
            fixed_upper = fixed_bound + math.ceil(counted * factors.local)
            best = min(best, other + fixed_best)
            upper = min(upper, other + fixed_upper)
        return best, max(upper, best), 0, False, raw + head_raw, counted + head_local

    def head_costs(self, head_stop: int, costs: BaseCosts) -> tuple[int, int, int]:
        """What the head and the summary after it cost unmeasured, as
        :meth:`unmeasured_raw` sums entries: (heuristic raw, bound) of what was not
        counted locally, and the local counts of what was."""
        raw, bound, local = self.unmeasured_raw(0, head_stop)
        if costs.summary_local is None:
            return raw + costs.summary_raw, bound + costs.summary_bound, local
        return raw, bound, local + costs.summary_local

    def count(
        self,
        *,
        key: Hashable,
        head_stop: int,
        kept_from: int,
        end: int,
        costs: BaseCosts,
        factors: Factors,
    ) -> RequestCount:
        """What is known of the request holding the base and ``entries[kept_from:end]``.

        Args:
            key: the request's base key (framing, system, tools and head).
            head_stop: the head is ``entries[:head_stop]``.
            kept_from: the first kept message after the head.
            end: one past the last message (the transcript's end).
            costs: the base's costs besides the head.
            factors: the calibration factors.
        """
        base_best, base_upper, base_measured, base_exact, base_raw, base_local = self.base_parts(
            key, head_stop, costs, kept_from, factors, end
        )
        part = self.members(kept_from, end, factors, key)
        return RequestCount(
            best=base_best + part.best,
            upper=max(base_upper + part.upper, base_best + part.best),
            measured=base_measured + part.measured,
            exact=base_exact and part.exact,
            raw=base_raw + part.raw,
            local=base_local + part.local,
        )

    def members(
        self, kept_from: int, end: int, factors: Factors, key: Hashable = None
    ) -> RequestCount:
        """What is known of ``entries[kept_from:end]`` alone, in a request whose base is
        ``key`` (None: no base), in O(log spans).

        A span the request keeps whole is exact, unless it was measured together with
        another base (its total is what that base's share of the report left: exact only
        beside that base). Such a span, a span cut at ``kept_from`` and one reaching past
        ``end`` are read in part: their kept members get a proportional share of the total
        (best) and their local counts or bounds, never more than the span and its base's
        share were measured at (upper). Unmeasured entries get their calibrated
        estimates (best) and local counts or bounds (upper)."""
        self._span_prefixes()
        spans, starts = self.spans, self.span_starts
        j0 = bisect_left(starts, kept_from)
        j1 = max(bisect_left(starts, end), j0)  # the spans from j0 on that start before end
        parts: list[tuple[Span, int, int]] = []
        if j0 > 0 and spans[j0 - 1].stop > kept_from and kept_from < end:
            cut = spans[j0 - 1]
            parts.append((cut, kept_from, min(cut.stop, end)))
        if j1 > j0 and spans[j1 - 1].stop > end:
            j1 -= 1  # it reaches past the request (the transcript grew since)
            parts.append((spans[j1], spans[j1].start, end))
        whole_total = self.span_total[j1] - self.span_total[j0]
        whole_n = self.span_n[j1] - self.span_n[j0]
        inexact = self.span_inexact[j1] - self.span_inexact[j0]
        e_raw, e_bnd, e_loc = self._raw, self._bnd, self._loc
        raw = e_raw[end] - e_raw[kept_from] - (self.span_raw[j1] - self.span_raw[j0])
        bnd = e_bnd[end] - e_bnd[kept_from] - (self.span_bnd[j1] - self.span_bnd[j0])
        loc = e_loc[end] - e_loc[kept_from] - (self.span_loc[j1] - self.span_loc[j0])
        for _, first, stop in parts:  # their members are not in the whole spans' sums
            raw -= e_raw[stop] - e_raw[first]
            bnd -= e_bnd[stop] - e_bnd[first]
            loc -= e_loc[stop] - e_loc[first]
        for j in self._foreign(j0, j1, key):  # (their members are not in raw, bnd, loc)
            span = spans[j]
            whole_total -= span.total
            whole_n -= span.stop - span.start
            inexact -= not span.exact
            parts.append((span, span.start, span.stop))
        part_best = part_upper = 0
        for span, first, stop in parts:
            hidden = span.hidden if first <= span.holder < stop else 0
            part_best += self._share(span, first, stop) + hidden
            p_bnd = e_bnd[stop] - e_bnd[first]
            p_loc = e_loc[stop] - e_loc[first]
            # never more than the span and its base's share cost together: the upper
            # count stays non-increasing as oldest turns go (the pruning search relies on
            # it), and no split of a report between a base and its span can fall short
            limit = span.total + span.share
            part_upper += min(p_bnd + math.ceil(p_loc * factors.local) + hidden, limit)
        best = (
            whole_total
            + part_best
            + math.ceil(raw * factors.heuristic)
            + math.ceil(loc * factors.local)
        )
        upper = whole_total + part_upper + bnd + math.ceil(loc * factors.local)
        exact = not parts and whole_n == end - kept_from and inexact == 0
        return RequestCount(
            best=best,
            upper=max(upper, best),
            measured=whole_total,
            exact=exact,
            raw=raw,
            local=loc,
        )

    def _share(self, span: Span, first: int, stop: int) -> int:
        """The best reading of a span's members ``[first, stop)`` read in part: its
        visible total split in proportion to their local counts or estimates."""
        visible = span.total - span.hidden
        raw, loc = self._raw, self._loc
        whole = (raw[span.stop] - raw[span.start]) + (loc[span.stop] - loc[span.start])
        part = (raw[stop] - raw[first]) + (loc[stop] - loc[first])
        if whole <= 0:
            return visible * (stop - first) // max(span.stop - span.start, 1)
        return math.ceil(visible * part / whole)

    def gap(self, kept_from: int, end: int, key: Hashable = None) -> int:
        """The first index at or after ``kept_from`` not covered by spans a request with
        base ``key`` keeps whole and counts exactly (not one cut, reaching past ``end``
        or measured together with another base)."""
        spans, starts = self.spans, self.span_starts
        j0 = bisect_left(starts, kept_from)
        if j0 > 0 and spans[j0 - 1].stop > kept_from:
            return kept_from  # a cut span: measured again with everything after it
        if j0 >= len(spans) or starts[j0] != kept_from:
            return kept_from
        run = self.span_run
        last = bisect_right(run, run[j0]) - 1
        stop = min(spans[last].stop, end)
        crossing = bisect_left(starts, end) - 1
        if j0 <= crossing <= last and spans[crossing].stop > end:
            stop = starts[crossing]
        foreign = self._foreign(j0, last + 1, key)
        if foreign:
            stop = min(stop, starts[foreign[0]])
        return stop

    def typical(self, first: int, end: int, factors: Factors, turns: int) -> int:
        """The mean best count of ``turns`` turns spanning ``[first, end)``."""
        if turns <= 0:
            return 0
        return self.members(first, end, factors).best // turns

    def forget_measurements(self) -> None:
        """Forget every span and base (reports that turned out not to mean what they
        seemed: a provider whose prompt tokens leave cached ones out)."""
        self._truncate_spans(0)
        self.bases.clear()
        self.version += 1

    # -- learning ----------------------------------------------------------------------

    def observe(
        self,
        *,
        total: int,
        key: Hashable,
        head_stop: int,
        kept_from: int,
        end: int,
        costs: BaseCosts,
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
            costs: the base's costs besides the head.
            factors: the run's calibration factors.
            rewrites_history: the family's template may have shortened measured turns.

        Returns:
            What was learnt. The caller calibrates from it when ``calibrates``.
        """
        self._span_prefixes()
        base = self.base_parts(key, head_stop, costs, kept_from, factors, end)
        gap = self.gap(kept_from, end, key)
        base_exact = base[3]
        spans = self.spans
        j0 = bisect_left(self.span_starts, kept_from)
        jg = bisect_left(self.span_starts, gap)
        # One unmeasured stretch followed by whole spans to the end (a wider request
        # counted after a narrower one): those spans are known too, and only the stretch
        # is new. Anything else is measured again from the gap on, as one span.
        stop = end
        tail = 0
        cut = jg > 0 and spans[jg - 1].stop > gap
        if base_exact and not cut and jg < len(spans) and gap < spans[jg].start:
            run = self.span_run
            last = bisect_right(run, run[jg]) - 1
            if (
                spans[last].stop == end
                and self.span_inexact[last + 1] == self.span_inexact[jg]
                and not self._foreign(jg, last + 1, key)
            ):
                stop = spans[jg].start
                tail = self.span_total[last + 1] - self.span_total[jg]
        own = self.bases[key].span if base_exact else None
        if own is not None and gap < own.stop and own.start < stop:
            # A base measured with a span is exact only beside that whole span, and this
            # report measures the span's messages again: the base with them.
            base_exact, stop, tail = False, end, 0
        known = (base[0] if base_exact else 0) + (self.span_total[jg] - self.span_total[j0])
        known += tail
        if base_exact and gap >= end:
            drift = total - known
            if drift > 0:
                old_base = self.bases[key]
                self.bases[key] = BaseValue(old_base.tokens + drift, old_base.span)
                if old_base.span is not None:  # they cost that much more together
                    old_base.span.share += drift
                self.version += 1
            return Observation(
                total=total,
                known=known,
                measured=0,
                hidden=0,
                estimate_raw=0,
                estimate_local=0,
                calibrates=False,
                messages=0,
                with_base=False,
                drift=drift,
            )
        with_base = not base_exact
        rest_raw, rest_bound, rest_local = self.unmeasured_raw(gap, stop)
        head_raw, head_bound, head_local = self.head_costs(head_stop, costs)
        base_raw = base_bound = base_local = 0
        if with_base:
            counted = costs.fixed_local is not None
            base_raw = head_raw + (0 if counted else costs.fixed_raw)
            base_local = head_local + (costs.fixed_local or 0)
            base_bound = head_bound + (0 if counted else costs.fixed_bound)
        raw, counted_local = rest_raw + base_raw, rest_local + base_local
        visible_upper = rest_bound + base_bound + math.ceil(counted_local * factors.local)
        value = total - known
        exact = True
        rewritten = rewrites_history and self._has_user_text(gap, stop)
        if (value < 0 or rewritten) and value < visible_upper:
            value, exact = max(value, min(total, visible_upper)), False
        opaque = self.opaque_in(gap, stop)
        estimate = factors.apply(raw, counted_local)
        hidden = max(0, value - visible_upper)
        if opaque and raw == 0:  # every visible part counted exactly
            hidden = max(hidden, value - math.ceil(counted_local * factors.local))
        elif opaque:
            hidden = max(hidden, value - estimate)
        holder = self._holder(gap, stop) if hidden and gap < stop else -1
        visible = value - hidden
        share = 0
        if with_base:
            weight_base = base_raw + base_local
            weight_rest = rest_raw + rest_local
            weights = weight_base + weight_rest
            share = visible * weight_base // weights if weights > 0 else visible
            if gap >= stop:
                share = value  # nothing else to hold what the base does not show
        if stop < end:
            # Between spans that stay: inserted in its place.
            stretch = Span(gap, stop, value, hidden=hidden, holder=holder, exact=exact)
            self._insert_span(jg, stretch)
            self.version += 1
            return Observation(
                total=total,
                known=known,
                measured=value,
                hidden=hidden,
                estimate_raw=raw,
                estimate_local=counted_local,
                calibrates=exact and not opaque and hidden == 0,
                messages=stop - gap,
                with_base=False,
            )
        # What the new span replaces: every span from the gap on, and a span cut by it.
        if jg > 0 and spans[jg - 1].stop > gap:
            jg -= 1
        self._truncate_spans(jg)
        if with_base:
            old = self.bases.get(key)
            if old is not None and old.span is not None and self._is_listed(old.span):
                j = bisect_left(self.span_starts, old.span.start)
                self._remove_span(j)  # its members' share no longer adds up with the base
        span: Span | None = None
        if gap < end:
            span = Span(
                gap,
                end,
                value - share,
                hidden=hidden,
                holder=holder,
                base_key=key if with_base else None,
                share=share,
                exact=exact,
            )
            self._push(span)
        if with_base:
            self.bases[key] = BaseValue(share, span)
        self.version += 1
        return Observation(
            total=total,
            known=known,
            measured=value,
            hidden=hidden,
            estimate_raw=raw,
            estimate_local=counted_local,
            calibrates=exact and not opaque and hidden == 0,
            messages=end - gap,
            with_base=with_base,
        )

    def _holder(self, start: int, stop: int) -> int:
        """Where hidden tokens of ``[start, stop)`` are charged: its last opaque entry,
        else its newest."""
        entries = self.entries
        for index in range(stop - 1, start - 1, -1):
            if entries[index].opaque:
                return index
        return stop - 1

    def _has_user_text(self, start: int, stop: int) -> bool:
        """Whether a new user query is among them (not a message of tool results only)."""
        return any(
            e.shape.kind == "user" and not e.shape.results_only
            for e in itertools.islice(self.entries, start, stop)
        )
