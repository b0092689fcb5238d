"""Fault injection for the emulator: which model calls fail, and how.

A :class:`FaultPlan` answers one question, purely: "does model call number *n* fail,
and with which status?". Calls are numbered from 1 in the order the emulator receives
them (discovery requests are not calls). Two sources of faults combine:

* a **schedule** — explicit call numbers mapped to a fault ("fail calls 3 and 4 with
  429"), which always wins;
* a **probability** — every other call fails with ``probability``, decided by a random
  generator seeded with ``(seed, call number)``, so the same seed fails the same calls
  no matter how requests interleave across threads.

Invariant: ``plan.fault_for(n)`` depends only on the plan and ``n``.

The textual form (CLI ``--faults``) is a ``;``-separated list of clauses::

    3,4:429            calls 3 and 4 answer 429 (retry-after 1 s by default)
    5:429@2.5          call 5 answers 429 with retry-after 2.5 s
    7:500              call 7 answers 500
    p=0.1:503          every other call answers 503 with probability 0.1
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..core.exceptions import ConfigurationError

__all__ = ["Fault", "FaultPlan", "as_fault_plan", "parse_faults"]

#: statuses a fault may carry: rate limiting, server errors and Anthropic's "overloaded"
FAULT_STATUSES = frozenset({429, 500, 502, 503, 504, 529})


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """One injected failure.

    Attributes:
        status: the HTTP status to answer (429, 500, 502, 503, 504 or 529).
        retry_after_seconds: the ``retry-after`` header of a 429 (ignored otherwise).
    """

    status: int
    retry_after_seconds: float = 1.0

    def __post_init__(self) -> None:
        if self.status not in FAULT_STATUSES:
            raise ConfigurationError(
                f"fault status {self.status} is not one of {sorted(FAULT_STATUSES)}"
            )
        if self.retry_after_seconds < 0:
            raise ConfigurationError(
                f"retry_after_seconds must be >= 0, got {self.retry_after_seconds}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultPlan:
    """Which model calls fail: an explicit schedule plus a seeded probability.

    Attributes:
        schedule: ``(call_number, fault)`` pairs, call numbers counted from 1.
        probability: chance in 0..1 that a call not in the schedule fails.
        random_fault: the fault a probabilistic failure answers with.
        seed: seeds the per-call draw, so the same seed fails the same calls.
    """

    schedule: tuple[tuple[int, Fault], ...] = ()
    probability: float = 0.0
    random_fault: Fault = field(default_factory=lambda: Fault(status=503))
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.probability <= 1.0:
            raise ConfigurationError(f"fault probability must be in 0..1, got {self.probability}")
        for call_number, _ in self.schedule:
            if call_number < 1:
                raise ConfigurationError(f"fault call numbers start at 1, got {call_number}")

    @classmethod
    def at(cls, calls: Mapping[int, int | Fault], *, seed: int = 0) -> FaultPlan:
        """Build a schedule-only plan from ``{call_number: status_or_fault}``.

        Example: ``FaultPlan.at({3: 429, 4: 429})`` fails calls 3 and 4 with 429.
        """
        schedule = tuple(
            (number, fault if isinstance(fault, Fault) else Fault(status=fault))
            for number, fault in sorted(calls.items())
        )
        return cls(schedule=schedule, seed=seed)

    def fault_for(self, call_number: int) -> Fault | None:
        """Return the fault call ``call_number`` (from 1) answers with, or None."""
        for number, fault in self.schedule:
            if number == call_number:
                return fault
        if self.probability <= 0.0:
            return None
        draw = random.Random(f"windowguard-fault:{self.seed}:{call_number}").random()
        return self.random_fault if draw < self.probability else None


def parse_faults(spec: str, *, seed: int = 0) -> FaultPlan:
    """Parse the textual fault form (see the module docstring) into a plan.

    Args:
        spec: clauses such as ``"3,4:429;p=0.05:503"``; an empty string means no faults.
        seed: seeds the probabilistic clause.

    Returns:
        The plan.

    Raises:
        ConfigurationError: a clause that does not parse, names a status that cannot be
            injected, or gives a probability outside 0..1.
    """
    schedule: dict[int, Fault] = {}
    probability = 0.0
    random_fault = Fault(status=503)
    for raw_clause in spec.split(";"):
        clause = raw_clause.strip()
        if not clause:
            continue
        target, sep, outcome = clause.partition(":")
        if not sep:
            raise ConfigurationError(
                f"fault clause {clause!r} needs the form CALLS:STATUS or p=P:STATUS"
            )
        fault = _parse_outcome(outcome.strip(), clause)
        target = target.strip()
        if target.startswith("p="):
            probability = _parse_float(target[2:], clause)
            random_fault = fault
            continue
        for number_text in target.split(","):
            schedule[_parse_int(number_text, clause)] = fault
    return FaultPlan(
        schedule=tuple(sorted(schedule.items())),
        probability=probability,
        random_fault=random_fault,
        seed=seed,
    )


def as_fault_plan(faults: FaultPlan | str | Mapping[int, int] | None, seed: int) -> FaultPlan:
    """Any of the emulator's ``faults=`` forms as a plan (None: no faults).

    Raises:
        ConfigurationError: a form that is none of a plan, a spec string or a mapping.
    """
    if faults is None:
        return FaultPlan(seed=seed)
    if isinstance(faults, FaultPlan):
        return faults
    if isinstance(faults, str):
        return parse_faults(faults, seed=seed)
    if isinstance(faults, Mapping):
        return FaultPlan.at(faults, seed=seed)
    raise ConfigurationError(
        f"faults must be a FaultPlan, a spec string or a mapping, got {type(faults).__name__}"
    )


def _parse_outcome(outcome: str, clause: str) -> Fault:
    status_text, _, retry_text = outcome.partition("@")
    status = _parse_int(status_text, clause)
    if retry_text:
        return Fault(status=status, retry_after_seconds=_parse_float(retry_text, clause))
    return Fault(status=status)


def _parse_int(text: str, clause: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ConfigurationError(
            f"fault clause {clause!r}: {text.strip()!r} is not a whole number"
        ) from None


def _parse_float(text: str, clause: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise ConfigurationError(
            f"fault clause {clause!r}: {text.strip()!r} is not a number"
        ) from None
