"""The usage ledger's values (see :mod:`windowguard.accounting.ledger`).

One message of the transcript with what is known about its cost (:class:`Entry`), a run
of messages measured together (:class:`Span`), the run's calibration factors
(:class:`Factors`), a request's base (its :class:`BaseKey`, its :class:`BaseCosts` besides
what was measured, and its measured :class:`BaseValue`), and what the ledger answers: what
it knows of one request (:class:`RequestCount`) and what one report taught it
(:class:`Observation`). The ledger keeps and reads them; they hold no bookkeeping of
their own.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

from ..core.shapes import Shape

__all__ = [
    "BaseCosts",
    "BaseKey",
    "BaseValue",
    "Entry",
    "Factors",
    "Observation",
    "RequestCount",
    "Span",
]


class Entry:
    """One message of the transcript with what is known about its cost.

    Attributes:
        message: the caller's own message object (kept so its id stays valid).
        shape: its shape.
        raw: the heuristic's raw estimate (always known, cheap).
        bound: a guaranteed upper bound of the tokens it adds to a prompt.
        local: the exact local template count, once asked for.
        opaque: it may stand for tokens it does not show (a reasoning item, an item
            reference): reports over it never calibrate, and their excess is hidden.
    """

    __slots__ = ("bound", "local", "message", "opaque", "origin", "raw", "shape")

    def __init__(self, message: object, shape: Shape, raw: int, bound: int) -> None:
        self.message = message
        self.origin = message
        """The caller's own message this entry stands for (``message`` is an edited copy
        of it when an edit stage replaced its content)."""
        self.shape = shape
        self.raw = raw
        self.bound = max(bound, raw) if bound >= 0 else raw
        self.local: int | None = None
        self.opaque = shape.reasoning or shape.kind == "other"

    @property
    def estimate(self) -> int:
        """The best raw estimate: the local exact count when known, else the heuristic."""
        return self.raw if self.local is None else self.local


class Span:
    """Messages ``[start, stop)`` measured together.

    Attributes:
        total: the measured tokens of the members (a base's share, when the base was
            measured with them, is kept apart in its :class:`BaseValue`).
        hidden: the part of ``total`` their visible content cannot account for.
        holder: the member that holds ``hidden`` (-1: none).
        base_key: the base measured together with them, if any.
        share: the base's share of that report (0 without a base): ``total`` is the
            members' cost only together with that base, and ``total + share`` the most
            they can cost whatever the request holds besides.
        exact: False when ``total`` is an upper bound taken instead of the report's
            difference (a template that rewrites history).
    """

    __slots__ = ("base_key", "exact", "hidden", "holder", "share", "start", "stop", "total")

    def __init__(
        self,
        start: int,
        stop: int,
        total: int,
        *,
        hidden: int = 0,
        holder: int = -1,
        base_key: Hashable | None = None,
        share: int = 0,
        exact: bool = True,
    ) -> None:
        self.start = start
        self.stop = stop
        self.total = total
        self.hidden = hidden
        self.holder = holder
        self.base_key = base_key
        self.share = share
        self.exact = exact

    def __repr__(self) -> str:
        return f"Span([{self.start}, {self.stop}), total={self.total}, hidden={self.hidden})"


@dataclass(frozen=True, slots=True)
class Factors:
    """The run's calibration factors: one for heuristic estimates (seeded
    above 1) and one for local exact counts (seeded at 1): each grows only from what the
    reports say about its own estimates, so a heuristic under-count never inflates what
    an exact tokenizer counted."""

    heuristic: float
    local: float

    def apply(self, heuristic_raw: int, local_raw: int) -> int:
        """The calibrated tokens of a heuristic and a local estimate."""
        return math.ceil(heuristic_raw * self.heuristic) + math.ceil(local_raw * self.local)


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseCosts:
    """What a request's base costs besides what the ledger measured: framing, system and
    tools (``fixed_*``, from :class:`~windowguard.pipeline._transcript.Fixed`; ``fixed_local`` None
    until counted exactly), the head's messages (taken from the entries) and the summary
    sent after the head, if any (``summary_*``: its estimate, bound and local count, like
    a head message's)."""

    fixed_raw: int
    fixed_bound: int
    fixed_local: int | None = None
    summary_raw: int = 0
    summary_bound: int = 0
    summary_local: int | None = None


@dataclass(frozen=True, slots=True)
class BaseKey:
    """Names a request's base.

    Attributes:
        fixed: the framing, system argument and tools, by content.
        head: the head's entries themselves: compared by identity, and kept alive by the
            key, so no later entry can take an address a measured head had (an ``id``
            would be reused once its entry was freed, and a different head would inherit
            the old one's measurement).
        summary: the summary sent after the head, by its text (None without one).
    """

    fixed: Hashable
    head: tuple[Entry, ...]
    summary: Hashable = None


@dataclass(frozen=True, slots=True)
class BaseValue:
    """A base's tokens: exact when ``span`` is None; else its share of a span measured
    together with messages (exact with the whole span, a share alone)."""

    tokens: int
    span: Span | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestCount:
    """What the ledger knows of one request.

    Attributes:
        best: exact where measured, estimates elsewhere (calibrated).
        upper: exact where measured, local counts (calibrated) or bounds elsewhere.
        measured: the part counted exactly (whole spans, an exact base).
        exact: ``measured`` is the whole request.
        raw: the heuristic's raw estimate of the unmeasured part.
        local: the local counts of the unmeasured part.
    """

    best: int
    upper: int
    measured: int
    exact: bool
    raw: int
    local: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """What one report or remote count taught the ledger.

    Attributes:
        total: the reported (or counted) prompt tokens.
        known: how much of it was known exactly before.
        measured: the tokens newly attributed (``total - known``, or the upper bound
            taken instead when the template may have rewritten history).
        hidden: the part of ``measured`` the visible content cannot account for.
        estimate_raw: the heuristic's raw estimate of what was newly measured.
        estimate_local: the local exact count of what was newly measured.
        calibrates: whether calibration may learn from it (no opaque item, nothing
            hidden, not an upper bound).
        messages: how many messages the new span holds.
        with_base: whether the base was measured in it.
        drift: for a request known exactly already, ``total - known``.
    """

    total: int
    known: int
    measured: int
    hidden: int
    estimate_raw: int
    estimate_local: int
    calibrates: bool
    messages: int
    with_base: bool
    drift: int = 0
