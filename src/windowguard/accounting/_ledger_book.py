"""The usage ledger's bookkeeping: entries, spans, bases and the prefix sums over them.

:class:`LedgerBook` is the base of :class:`~windowguard.accounting.ledger.Ledger`. It
holds the run's entries (only ever appended), the bases measured and the sorted list of
spans, and keeps their prefix sums consistent as entries are appended, adopted from a
rebuilt transcript, replaced by edited copies or counted locally, and as spans are
pushed, inserted, removed or forgotten; the prefixes are brought up to date lazily, from
the first entry or span that changed. It answers the sums and lookups the ledger's
readings and its attribution of reports are made of.

:func:`leave_room` gives a list that was just extended at once room to grow (the
transcript's lists use it too).
"""

from __future__ import annotations

import itertools
import operator
from bisect import bisect_left, bisect_right
from collections.abc import Hashable, Sequence
from typing import Any, Final

from ._ledger_types import BaseKey, BaseValue, Entry, Span

__all__ = ["LedgerBook", "leave_room"]


def leave_room(items: list[Any]) -> None:
    """Give a list that was just extended at once room to grow.

    ``list.extend`` by many items allocates exactly, so the next send's append would
    copy the whole list; one append (which over-allocates by an eighth) and a pop leave
    the room, once per rebuild.
    """
    if items:
        items.append(items[-1])
        items.pop()


_RAW: Final = operator.attrgetter("raw")
_BOUND: Final = operator.attrgetter("bound")


class LedgerBook:
    """The entries, spans and bases of a :class:`~windowguard.accounting.ledger.Ledger`,
    and the prefix sums over them.

    Entry-level prefix sums (over every entry, measured or not) hold the heuristic raw
    estimates and bounds of entries not counted locally, and the local counts of those
    that were; they change only when an entry is counted locally. Spans are a sorted
    list with span-level prefix sums of their totals and sizes.
    """

    __slots__ = (
        "_bnd",
        "_dirty",
        "_loc",
        "_opq",
        "_raw",
        "_span_dirty",
        "bases",
        "entries",
        "keyed",
        "span_bnd",
        "span_inexact",
        "span_loc",
        "span_n",
        "span_raw",
        "span_run",
        "span_starts",
        "span_total",
        "spans",
        "version",
    )

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.bases: dict[Hashable, BaseValue] = {}
        # entry prefixes: raw / bound of entries without a local count, local counts,
        # opaque entries
        self._raw: list[int] = [0]
        self._bnd: list[int] = [0]
        self._loc: list[int] = [0]
        self._opq: list[int] = [0]
        self._dirty = 0
        self.spans: list[Span] = []
        self.span_starts: list[int] = []
        # span_run[j]: the first span of the contiguous run (stop == next start) holding j
        self.span_run: list[int] = []
        # span prefixes: totals, member counts, and the members' entry-prefix sums
        self.span_total: list[int] = [0]
        self.span_n: list[int] = [0]
        self.span_raw: list[int] = [0]
        self.span_bnd: list[int] = [0]
        self.span_loc: list[int] = [0]
        self.span_inexact: list[int] = [0]
        # the indices of the spans measured together with a base, ascending (few)
        self.keyed: list[int] = []
        self._span_dirty = 0
        self.version = 0
        """Grows whenever anything counted changes (entries, measurements, bases)."""

    # -- building ----------------------------------------------------------------------

    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries (new messages) in transcript order."""
        self.entries.extend(entries)
        if len(entries) > 32:
            leave_room(self.entries)
        self.version += 1

    def adopt(self, entries: Sequence[Entry], old: LedgerBook | None) -> None:
        """Take over ``entries`` (a rebuilt transcript) and what ``old`` measured.

        Spans whose messages are all still present, contiguous and in order are kept
        (re-indexed); the others are forgotten (their messages are unmeasured again), and
        so are bases measured together with a forgotten span, and bases whose head is not
        this transcript's (no request can hold them again).
        """
        self.append(entries)
        if old is None:
            return
        position = {id(entry): index for index, entry in enumerate(entries)}
        kept: list[Span] = []
        forgotten: set[int] = set()
        old_entries = old.entries
        for span in old.spans:
            first = position.get(id(old_entries[span.start]), -1)
            size = span.stop - span.start
            whole = first >= 0 and first + size <= len(entries)
            if whole:
                whole = all(
                    entries[first + offset] is old_entries[span.start + offset]
                    for offset in range(size)
                )
            if not whole:
                forgotten.add(id(span))
                continue
            holder = span.holder - span.start + first if span.holder >= 0 else -1
            moved = Span(
                first,
                first + size,
                span.total,
                hidden=span.hidden,
                holder=holder,
                base_key=span.base_key,
                share=span.share,
                exact=span.exact,
            )
            kept.append(moved)
            if span.base_key is not None and self._holds_head(span.base_key):
                value = old.bases.get(span.base_key)
                if value is not None and value.span is span:
                    self.bases[span.base_key] = BaseValue(value.tokens, moved)
        kept.sort(key=operator.attrgetter("start"))
        for span in kept:
            self._push(span)
        for key, value in old.bases.items():
            if key in self.bases:
                continue
            if value.span is None and self._holds_head(key):
                self.bases[key] = value
            # a base measured with a span that is gone no longer adds up with anything
        self.version += 1

    def _holds_head(self, key: Hashable) -> bool:
        """Whether the base ``key`` names can be a request's of these entries: its head
        entries are theirs, in their places."""
        if not isinstance(key, BaseKey):
            return True
        head, entries = key.head, self.entries
        return len(head) <= len(entries) and all(map(operator.is_, head, entries))

    def replaced(self, indices: Sequence[int]) -> None:
        """Entries at ``indices`` were replaced by edited ones: the spans holding them no
        longer measure what is sent, so they are forgotten (and a base measured with
        them)."""
        if not indices:
            return
        doomed = {
            j
            for index in indices
            if (j := bisect_right(self.span_starts, index) - 1) >= 0 and self.spans[j].stop > index
        }
        for j in sorted(doomed, reverse=True):
            self._remove_span(j)
        self.counted_locally(min(indices))

    def counted_locally(self, index: int) -> None:
        """Entries from ``index`` on got local counts."""
        self.version += 1
        self._dirty = min(self._dirty, index)
        # the spans holding entries at or after index have stale member sums
        at = bisect_right(self.span_starts, index) - 1
        self._span_dirty = min(self._span_dirty, max(at, 0))

    # -- prefix sums -------------------------------------------------------------------

    def _prefixes(self) -> None:
        entries = self.entries
        raw, bnd, loc, opq = self._raw, self._bnd, self._loc, self._opq
        start = self._dirty
        if start >= len(entries) and len(raw) == len(entries) + 1:
            return
        del raw[start + 1 :], bnd[start + 1 :], loc[start + 1 :], opq[start + 1 :]
        new = entries[start:]
        r, b, c, o = raw[start], bnd[start], loc[start], opq[start]
        if len(new) > 32 and all(e.local is None and not e.opaque for e in new):
            # A cold fit: nothing counted locally yet, at C speed.
            count = len(new)
            raw.extend(itertools.islice(itertools.accumulate(map(_RAW, new), initial=r), 1, None))
            bnd.extend(itertools.islice(itertools.accumulate(map(_BOUND, new), initial=b), 1, None))
            loc.extend(itertools.repeat(c, count))
            opq.extend(itertools.repeat(o, count))
            for prefix in (raw, bnd, loc, opq):
                leave_room(prefix)
        else:
            for entry in new:
                if entry.local is None:
                    r += entry.raw
                    b += entry.bound
                else:
                    c += entry.local
                o += entry.opaque
                raw.append(r)
                bnd.append(b)
                loc.append(c)
                opq.append(o)
        self._dirty = len(entries)
        self._span_dirty = min(self._span_dirty, self._first_span_from(start))

    def _first_span_from(self, index: int) -> int:
        """The first span whose members include an entry at or after ``index``."""
        at = bisect_right(self.span_starts, index) - 1
        if at >= 0 and self.spans[at].stop > index:
            return at
        return at + 1

    def _span_prefixes(self) -> None:
        self._prefixes()
        spans = self.spans
        start = self._span_dirty
        if start >= len(spans):
            return
        raw, bnd, loc = self._raw, self._bnd, self._loc
        s_raw, s_bnd, s_loc = self.span_raw, self.span_bnd, self.span_loc
        del s_raw[start + 1 :], s_bnd[start + 1 :], s_loc[start + 1 :]
        r, b, c = s_raw[start], s_bnd[start], s_loc[start]
        for span in spans[start:]:
            first, stop = span.start, span.stop
            r += raw[stop] - raw[first]
            b += bnd[stop] - bnd[first]
            c += loc[stop] - loc[first]
            s_raw.append(r)
            s_bnd.append(b)
            s_loc.append(c)
        self._span_dirty = len(spans)

    def _push(self, span: Span) -> None:
        """Append a span after every other one."""
        spans = self.spans
        j = len(spans)
        adjacent = j > 0 and spans[-1].stop == span.start
        spans.append(span)
        self.span_starts.append(span.start)
        self.span_run.append(self.span_run[-1] if adjacent else j)
        self.span_total.append(self.span_total[-1] + span.total)
        self.span_n.append(self.span_n[-1] + span.stop - span.start)
        self.span_inexact.append(self.span_inexact[-1] + (not span.exact))
        if span.base_key is not None:
            self.keyed.append(j)
        self._span_dirty = min(self._span_dirty, j)

    def _truncate_spans(self, keep: int, *, forget: bool = True) -> None:
        """Forget every span from index ``keep`` on (``forget=False``: take them off the
        list only, to push them again)."""
        spans = self.spans
        if keep >= len(spans):
            return
        dropped = spans[keep:]
        del spans[keep:], self.span_starts[keep:], self.span_run[keep:]
        del self.span_total[keep + 1 :], self.span_n[keep + 1 :], self.span_inexact[keep + 1 :]
        del self.span_raw[keep + 1 :], self.span_bnd[keep + 1 :], self.span_loc[keep + 1 :]
        del self.keyed[bisect_left(self.keyed, keep) :]
        self._span_dirty = min(self._span_dirty, keep)
        if forget:
            for span in dropped:
                self._forget_base_of(span)

    def _remove_span(self, j: int) -> None:
        """Forget span ``j`` (anywhere in the list): the rest are pushed again."""
        rest = self.spans[j + 1 :]
        self._forget_base_of(self.spans[j])
        self._truncate_spans(j, forget=False)
        for span in rest:
            self._push(span)

    def _insert_span(self, j: int, span: Span) -> None:
        """Put ``span`` at index ``j`` of the list (before the spans after it)."""
        rest = self.spans[j:]
        self._truncate_spans(j, forget=False)
        self._push(span)
        for later in rest:
            self._push(later)

    def _forget_base_of(self, span: Span) -> None:
        if span.base_key is not None:
            value = self.bases.get(span.base_key)
            if value is not None and value.span is span:
                del self.bases[span.base_key]

    # -- lookups -----------------------------------------------------------------------

    def unmeasured_raw(self, start: int, stop: int) -> tuple[int, int, int]:
        """Entry sums over ``[start, stop)`` regardless of spans: (heuristic raw, bound)
        of entries without a local count, and the local counts of the others."""
        self._prefixes()
        return (
            self._raw[stop] - self._raw[start],
            self._bnd[stop] - self._bnd[start],
            self._loc[stop] - self._loc[start],
        )

    def opaque_in(self, start: int, stop: int) -> bool:
        """Whether an opaque entry lies in ``[start, stop)``."""
        self._prefixes()
        return self._opq[stop] > self._opq[start]

    def _is_listed(self, span: Span) -> bool:
        j = bisect_left(self.span_starts, span.start)
        return j < len(self.spans) and self.spans[j] is span

    def _foreign(self, j0: int, j1: int, key: Hashable) -> list[int]:
        """The spans among ``spans[j0:j1]`` measured together with a base other than
        ``key``."""
        keyed, spans = self.keyed, self.spans
        found = []
        for at in range(bisect_left(keyed, j0), len(keyed)):
            j = keyed[at]
            if j >= j1:
                break
            base_key = spans[j].base_key
            if base_key is not key and base_key != key:
                found.append(j)
        return found
