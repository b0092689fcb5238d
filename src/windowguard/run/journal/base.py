"""The run journal's contract, shared by every backend, and the run lease.

A journal keeps, per run id: the run's starting digest and one digest per tool, every
model call's response, every tool result, how the run ended (and its state when
suspended), and a *lease*: which runner holds the run, until when.

**One runner at a time.** A runner (a ``ToolLoop`` run, resume or stream) takes the
run's lease before it replays or runs anything (``ToolLoop`` does it in ``_start``) and
gives it back when the run finishes or suspends (:meth:`Journal.finish_run` ends it), or
when the driver exits any other way. While the run is driven the lease is renewed on a
timer (a third of ``lease_seconds``) and by every journal write, in the write's own
transaction: a write is refused with :class:`~windowguard.core.exceptions.RunLockedError` once
another runner holds the run, so a runner that stalled past its lease cannot overwrite
the journal of the runner that took over.

A second runner gets ``RunLockedError`` (naming the run, the holder and its expiry) at
once, or after waiting up to ``wait`` seconds. A holder that dies (kill -9, a lost
machine) stops renewing, and its lease expires after ``lease_seconds``; a holder on the
same machine whose process is gone is seen at once (its process id no longer runs), so a
restart after a crash needs no wait. Expiry is by PostgreSQL's server clock, or by each
process's own wall clock for SQLite, which therefore never takes a run from a holder
whose process still runs on this machine (see :mod:`.sqlite`); so a SQLite journal
gives back on its timer a lease held but not driven (:meth:`Journal.hold`,
:meth:`Journal.acquire`) after ``lease_seconds`` unrenewed, by the monotonic clock.

Backends implement a handful of storage primitives (rows in, rows out, compare-and-set
on the lease row); every rule above lives here, once.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import json
import logging
import math
import os
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from ...core.exceptions import (
    ConfigurationError,
    JournalError,
    JournalMismatchError,
    RunLockedError,
)
from ..providers.base import ModelResponse, ToolResult, ToolSpec
from .lease import Claim, Lease, machine_id, process_gone
from .state import (
    RunState,
    decode_row,
    response_from_dict,
    response_to_dict,
    result_from_dict,
    result_to_dict,
    summary_from_row,
    tool_changes,
    tool_digest,
    tool_digests,
)

__all__ = ["Journal"]

logger = logging.getLogger("windowguard")

_POLL_SECONDS = 0.1
_SUMMARY_POSITION = -1
"""Summaries are kept as a row of their model call at this position (a tool result's is
>= 0), so no backend needs a table of its own."""
_T = TypeVar("_T")


@dataclass(slots=True)
class _Held:
    lease: Lease
    driving: bool  # False: taken by ToolLoop._start (or acquire), not driven by a timer
    renewed: float = field(default_factory=time.monotonic)  # when last taken or renewed
    lapsed: bool = False  # not driven, not renewed for lease_seconds: given back


class Journal(abc.ABC):
    """The contract of a run journal (:class:`SqliteJournal`, :class:`PostgresJournal`).

    Args:
        lease_seconds: how long a runner's hold on a run lasts without renewal; a
            runner that dies is replaced after this long at most.
        wait: how long a second runner waits for the run before ``RunLockedError``
            (0: refuse at once).

    Every method may raise :class:`~windowguard.core.exceptions.JournalError` when the
    storage fails or holds a damaged row.
    """

    where: str
    """The journal, as messages name it (a path; a PostgreSQL address, never a password)."""
    _keeps_while_running = False  # a holder running here keeps its runs: see _renew_all

    def __init__(self, *, lease_seconds: float = 30.0, wait: float = 0.0) -> None:
        if not isinstance(lease_seconds, (int, float)) or not lease_seconds > 0:
            raise ConfigurationError(f"lease_seconds must be > 0, got {lease_seconds!r}")
        if not isinstance(wait, (int, float)) or not wait >= 0:
            raise ConfigurationError(f"wait must be >= 0 seconds, got {wait!r}")
        self.lease_seconds = float(lease_seconds)
        self.wait = float(wait)
        self._machine = machine_id()
        self._held: dict[str, _Held] = {}
        self._held_lock = threading.Lock()
        self._renewer: threading.Thread | None = None
        self._stop = threading.Event()

    # -- storage primitives, one set per backend ------------------------------------------

    @abc.abstractmethod
    def _read_run(self, run_id: str) -> tuple[str, Any, Any, Any] | None:
        """(digest, tools JSON, termination, state JSON) of a run, or None."""

    @abc.abstractmethod
    def _create_run(self, run_id: str, digest: str, tools: str) -> None:
        """Insert the run's row unless it exists."""

    @abc.abstractmethod
    def _write_tools(self, run_id: str, tools: str) -> None:
        """Set the tool digests of a run journalled before they were kept."""

    @abc.abstractmethod
    def _read_row(self, table: str, run_id: str, step: int, position: int) -> Any:
        """A ``model_calls`` (position -1) or ``tool_results`` row's JSON, or None."""

    @abc.abstractmethod
    def _write_row(
        self, table: str, run_id: str, step: int, position: int, text: str, holder: str | None
    ) -> None:
        """Insert or replace a row, renewing ``holder``'s lease in the same transaction
        (None: no lease of ours; refused while another runner holds one)."""

    @abc.abstractmethod
    def _write_end(
        self, run_id: str, termination: str, state: str | None, holder: str | None
    ) -> None:
        """Record how the run ended and end ``holder``'s lease, in one transaction."""

    @abc.abstractmethod
    def _count_rows(self, run_id: str) -> tuple[int, int]:
        """(model calls, tool results) of a run."""

    @abc.abstractmethod
    def _claim(
        self, run_id: str, holder: str, *, steal: str | None
    ) -> tuple[datetime | None, Claim | None]:
        """Take the lease when free, expired, ours, or held by ``steal``: its new expiry;
        otherwise (None, the claim that holds it)."""

    @abc.abstractmethod
    def _extend(self, run_id: str, holder: str) -> datetime | None:
        """Renew ``holder``'s lease; None when it holds it no more."""

    @abc.abstractmethod
    def _drop(self, run_id: str, holder: str) -> None:
        """End ``holder``'s lease (nothing when it holds it no more)."""

    @abc.abstractmethod
    def _read_claim(self, run_id: str) -> Claim | None:
        """The run's lease row, if any."""

    @abc.abstractmethod
    def _close(self) -> None:
        """Close the storage."""

    # -- the contract ---------------------------------------------------------------------

    def begin_run(self, run_id: str, digest: str, *, tools: Sequence[ToolSpec] = ()) -> bool:
        """Register a run; True when the journal already holds it (a restart).

        Args:
            run_id: the run.
            digest: :func:`~windowguard.run.journal.transcript_digest` of its start.
            tools: the tools it runs with; each one's schema is kept as a digest.

        Raises:
            JournalMismatchError: ``run_id`` was started with a different digest, or a
                tool of the same name now has a different schema (named).
        """
        mine = {spec.name: tool_digest(spec) for spec in tools}
        row = self._read_run(run_id)
        if row is None:
            self._create_run(run_id, digest, json.dumps(mine, sort_keys=True))
            row = self._read_run(run_id)  # a runner starting the same run at the same time
            if row is None:  # pragma: no cover - a row just inserted is there
                raise JournalError(f"run {run_id!r} could not be registered in {self.where}")
            if row[0] == digest and self._decode_tools(run_id, row[1]) == mine:
                return False
        known_digest, known_tools = row[0], self._decode_tools(run_id, row[1])
        if known_tools is None:  # journalled before tool schemas were kept
            self._write_tools(run_id, json.dumps(mine, sort_keys=True))
        else:
            changes, names = tool_changes(mine, known_tools)
            if names:
                raise JournalMismatchError(
                    f"run {run_id!r} in {self.where} was started with {changes}: its "
                    "journalled model calls answered other tools. Use a new run id, or "
                    "run it with the tools it was started with",
                    run_id=run_id,
                    tools=names,
                )
        if known_digest != digest:
            raise JournalMismatchError(
                f"run {run_id!r} in {self.where} was started with a different transcript, "
                "system prompt, tools or model; use a new run id",
                run_id=run_id,
            )
        return True

    def model_call(self, run_id: str, step: int) -> ModelResponse | None:
        """The journalled response of model call ``step``, if any."""
        text = self._read_row("model_calls", run_id, step, -1)
        if text is None:
            return None
        what = f"model call {step} of run {run_id!r}"
        return decode_row(text, response_from_dict, what, self.where)

    def record_model_call(self, run_id: str, step: int, response: ModelResponse) -> None:
        """Journal a model call's response (before the loop acts on it).

        Raises:
            RunLockedError: another runner holds the run (this runner's lease was lost).
        """
        text = json.dumps(response_to_dict(response), ensure_ascii=False)
        self._write("model_calls", run_id, step, -1, text)

    def tool_result(self, run_id: str, step: int, position: int) -> ToolResult | None:
        """The journalled result of call ``position`` of model call ``step``, if any."""
        text = self._read_row("tool_results", run_id, step, position)
        if text is None:
            return None
        what = f"tool result {position} of model call {step} of run {run_id!r}"
        return decode_row(text, result_from_dict, what, self.where)

    def record_tool_result(self, run_id: str, step: int, position: int, result: ToolResult) -> None:
        """Journal a tool result (before the loop moves on).

        Raises:
            RunLockedError: another runner holds the run (this runner's lease was lost).
        """
        text = json.dumps(result_to_dict(result), ensure_ascii=False)
        self._write("tool_results", run_id, step, position, text)

    def summary(self, run_id: str, step: int, key: str) -> str | None:
        """The summary journalled before model call ``step`` for what ``key`` names, if
        any (a replayed or resumed run uses it instead of calling the summarizer)."""
        text = self._read_row("tool_results", run_id, step, _SUMMARY_POSITION)
        what = f"the summary before model call {step} of run {run_id!r}"
        return None if text is None else summary_from_row(text, key, what)

    def record_summary(self, run_id: str, step: int, key: str, text: str) -> None:
        """Journal a summary made before model call ``step``.

        Raises:
            RunLockedError: another runner holds the run (this runner's lease was lost).
        """
        row = json.dumps({"key": key, "text": text}, ensure_ascii=False)
        self._write("tool_results", run_id, step, _SUMMARY_POSITION, row)

    def finish_run(self, run_id: str, termination: str, state: RunState | None = None) -> None:
        """Record how a run ended (and its state when suspended); ends this runner's lease.

        Raises:
            RunLockedError: another runner holds the run (this runner's lease was lost).
        """
        holder = self._holder(run_id)
        self._write_end(run_id, termination, None if state is None else state.to_json(), holder)
        if holder is not None:
            self._forget(run_id, holder)

    def termination(self, run_id: str) -> str | None:
        """How the run ended, if it has."""
        row = self._read_run(run_id)
        return None if row is None or row[2] is None else str(row[2])

    def run_state(self, run_id: str) -> RunState | None:
        """The state of a run that ended SUSPENDED (for ``loop.resume``), if any."""
        row = self._read_run(run_id)
        if row is None or row[3] is None:
            return None
        what = f"the suspended state of run {run_id!r}"
        return decode_row(row[3], RunState.from_dict, what, self.where)

    def counts(self, run_id: str) -> tuple[int, int]:
        """(model calls, tool results) journalled for ``run_id``."""
        return self._count_rows(run_id)

    def close(self) -> None:
        """Stop renewing, release the leases this journal holds, close the storage."""
        self._stop.set()
        with self._held_lock:
            held = list(self._held.items())
            self._held.clear()
        for run_id, entry in held:
            with contextlib.suppress(JournalError):
                self._drop(run_id, entry.lease.holder)
        self._close()

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the lease ------------------------------------------------------------------------

    def lease(self, run_id: str) -> Claim | None:
        """Who holds ``run_id`` now, if anyone (an expired claim has ``live`` False)."""
        return self._read_claim(run_id)

    def acquire(self, run_id: str, *, wait: float | None = None) -> Lease:
        """Take ``run_id``'s lease, waiting up to ``wait`` seconds (default: the journal's).

        This journal's writes for the run then go under the lease (renew it with
        :meth:`renew`; a ``ToolLoop`` renews the leases it drives on a timer).

        Raises:
            RunLockedError: another runner still holds it after the wait.
        """
        deadline = time.monotonic() + (self.wait if wait is None else wait)
        while True:
            lease, claim = self._try_acquire(run_id)
            if lease is not None:
                return self._took(lease)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._locked(run_id, claim)
            time.sleep(min(_POLL_SECONDS, remaining))

    async def aacquire(self, run_id: str, *, wait: float | None = None) -> Lease:
        """:meth:`acquire` for async code: waits with ``asyncio.sleep``."""
        deadline = time.monotonic() + (self.wait if wait is None else wait)
        while True:
            lease, claim = self._try_acquire(run_id)
            if lease is not None:
                return self._took(lease)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._locked(run_id, claim)
            await asyncio.sleep(min(_POLL_SECONDS, remaining))

    def renew(self, lease: Lease) -> Lease:
        """Extend ``lease`` by ``lease_seconds`` from now.

        Raises:
            RunLockedError: another runner took the run over (``lost`` is True).
        """
        expires_at = self._extend(lease.run_id, lease.holder)
        if expires_at is None:
            self._forget(lease.run_id, lease.holder)
            raise self._locked(lease.run_id, self._read_claim(lease.run_id), lost=True)
        self._renewed(lease.run_id, lease.holder)
        return Lease(run_id=lease.run_id, holder=lease.holder, expires_at=expires_at)

    def release(self, lease: Lease) -> None:
        """Give ``lease`` back (nothing happens when it was lost)."""
        self._forget(lease.run_id, lease.holder)
        self._drop(lease.run_id, lease.holder)

    # -- what the tool loop calls ---------------------------------------------------------

    def hold(self, run_id: str) -> None:
        """Take ``run_id``'s lease for a runner about to drive it (``ToolLoop._start``).

        The lease is handed to the next :meth:`keep` / :meth:`akeep` of the run. Inside
        a running event loop it does not wait: when the run is held and ``wait`` is set,
        :meth:`akeep` waits for it without blocking the loop.

        Raises:
            RunLockedError: another runner holds the run (after ``wait``).
        """
        with self._held_lock:
            entry = self._held.get(run_id)
            if entry is not None and not entry.driving:
                return  # taken by an earlier start that was never driven: hand it on
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.acquire(run_id)
            return
        found, claim = self._try_acquire(run_id)
        if found is not None:
            self._took(found)
        elif self.wait == 0:
            raise self._locked(run_id, claim)

    @contextlib.contextmanager
    def keep(self, run_id: str) -> Iterator[Lease]:
        """Hold ``run_id`` while a runner drives it: the lease :meth:`hold` took (or a new
        one, waiting up to ``wait``), renewed on a timer, released on any exit."""
        lease = self._adopt(run_id)
        if lease is None:
            lease = self._took(self.acquire(run_id), driving=True)
        try:
            yield lease
        finally:
            self._let_go(lease)

    @contextlib.asynccontextmanager
    async def akeep(self, run_id: str) -> AsyncIterator[Lease]:
        """:meth:`keep` for async drivers: waits for the run without blocking the loop."""
        lease = self._adopt(run_id)
        if lease is None:
            lease = self._took(await self.aacquire(run_id), driving=True)
        try:
            yield lease
        finally:
            self._let_go(lease)

    # -- internals ------------------------------------------------------------------------

    def _took(self, lease: Lease, *, driving: bool = False) -> Lease:
        with self._held_lock:
            self._held[lease.run_id] = _Held(lease=lease, driving=driving)
        if driving or self._keeps_while_running:
            self._start_renewer()  # renews it when driven, gives it back when left
        return lease

    def _write(self, table: str, run_id: str, step: int, position: int, text: str) -> None:
        """Write a row under this journal's lease on the run (renewed by the write)."""
        holder = self._holder(run_id)
        self._write_row(table, run_id, step, position, text, holder)
        if holder is not None:
            self._renewed(run_id, holder)

    def _renewed(self, run_id: str, holder: str) -> None:
        with self._held_lock:
            entry = self._held.get(run_id)
            if entry is not None and entry.lease.holder == holder and not entry.lapsed:
                entry.renewed = time.monotonic()

    def _new_holder(self) -> str:
        return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"

    def _try_acquire(self, run_id: str) -> tuple[Lease | None, Claim | None]:
        holder = self._new_holder()
        for _ in range(3):  # a claim released between the two statements: try again
            expires_at, claim = self._claim(run_id, holder, steal=None)
            if expires_at is None and claim is not None and self._gone(claim):
                dead = claim
                expires_at, claim = self._claim(run_id, holder, steal=dead.holder)
                if expires_at is not None:
                    logger.warning(
                        "run %r in %s: its holder %s is no longer running; taking it over "
                        "without waiting for its lease to expire (%.1f s left)",
                        run_id,
                        self.where,
                        dead.holder,
                        dead.seconds_left,
                    )
            if expires_at is not None:
                return Lease(run_id=run_id, holder=holder, expires_at=expires_at), None
            if claim is not None:
                return None, claim
        return None, None

    def _local(self, claim: Claim) -> bool:
        """Whether the claim's holder is a process of this machine (its pid means one)."""
        return self._machine is not None and claim.machine == self._machine

    def _gone(self, claim: Claim) -> bool:
        """Whether the claim's holder is a process on this machine that no longer runs
        (its pid is free, or was given to a process that started later)."""
        return (
            claim.pid is not None
            and claim.pid != os.getpid()
            and self._local(claim)
            and process_gone(claim.pid, claim.started)
        )

    def _locked(self, run_id: str, claim: Claim | None, *, lost: bool = False) -> RunLockedError:
        # a holder seen running here holds the run whatever its (past) expiry says
        until = claim is not None and not (claim.running and claim.seconds_left <= 0)
        return RunLockedError(
            run_id,
            holder=claim.holder if claim is not None else "another runner",
            expires_at=claim.expires_at if claim is not None and until else None,
            seconds_left=claim.seconds_left if claim is not None and until else None,
            where=self.where,
            lost=lost,
        )

    def _holder(self, run_id: str) -> str | None:
        with self._held_lock:
            entry = self._held.get(run_id)
        return None if entry is None else entry.lease.holder

    def _forget(self, run_id: str, holder: str) -> None:
        with self._held_lock:
            entry = self._held.get(run_id)
            if entry is not None and entry.lease.holder == holder:
                del self._held[run_id]

    def _adopt(self, run_id: str) -> Lease | None:
        """The lease :meth:`hold` took for this run, now driven (renewed at once, so one
        that lapsed while nobody drove it is known lost, or taken again)."""
        with self._held_lock:
            entry = self._held.get(run_id)
            if entry is None or entry.driving:
                return None
            if entry.lapsed:  # given back by the timer: take the run again
                del self._held[run_id]
                return None
            entry.driving = True
        lease = entry.lease
        if self._extend(run_id, lease.holder) is None:
            self._forget(run_id, lease.holder)
            return None
        self._start_renewer()
        return lease

    def _let_go(self, lease: Lease) -> None:
        with self._held_lock:
            entry = self._held.get(lease.run_id)
            mine = entry is not None and entry.lease.holder == lease.holder
            if mine:
                del self._held[lease.run_id]
        if entry is not None and mine:
            self._give_back(entry)

    def _give_back(self, entry: _Held) -> None:
        """End the lease's row; when that fails, the timer tries again (a holder running
        on this machine keeps a SQLite run whatever its row's expiry says)."""
        try:
            self._drop(entry.lease.run_id, entry.lease.holder)
        except JournalError as exc:
            logger.warning(
                "could not give back run %r in %s (%s)", entry.lease.run_id, self.where, exc
            )
            if not self._keeps_while_running:
                return  # its lease expires by itself
            with self._held_lock:
                if self._held.setdefault(entry.lease.run_id, entry) is entry:
                    entry.driving, entry.lapsed, entry.renewed = False, False, -math.inf
            self._start_renewer()

    def _start_renewer(self) -> None:
        with self._held_lock:
            if self._renewer is not None or self._stop.is_set():
                return
            self._renewer = threading.Thread(
                target=self._renew_all, name="windowguard-journal-lease", daemon=True
            )
            self._renewer.start()

    def _renew_all(self) -> None:
        """Renew every driven lease a third of ``lease_seconds`` apart; end when none is
        held. With ``_keeps_while_running`` (SQLite) also give back a lease neither driven
        nor renewed for ``lease_seconds`` (monotonic clock), or whose release failed."""
        while not self._stop.wait(self.lease_seconds / 3):
            now = time.monotonic()
            with self._held_lock:
                driven = [e.lease for e in self._held.values() if e.driving]
                idle = [e for e in self._held.values() if not (e.driving or e.lapsed)]
                idle = idle if self._keeps_while_running else []
                if not driven and not idle:
                    self._renewer = None
                    return
                left = [e for e in idle if now - e.renewed >= self.lease_seconds]
                for entry in left:
                    entry.lapsed = True  # later writes under it are refused as lost
            for entry in left:
                logger.warning(
                    "run %r in %s was held, neither driven nor renewed, for %.0f s or more; "
                    "giving it back",
                    entry.lease.run_id,
                    self.where,
                    self.lease_seconds,
                )
                self._give_back(entry)
            for lease in driven:
                try:
                    if self._extend(lease.run_id, lease.holder) is None:
                        self._forget(lease.run_id, lease.holder)
                        logger.error(
                            "lost the lease on run %r in %s to another runner; this "
                            "runner's next journal write will be refused",
                            lease.run_id,
                            self.where,
                        )
                except JournalError as exc:
                    logger.warning(
                        "could not renew the lease on run %r in %s: %s",
                        lease.run_id,
                        self.where,
                        exc,
                    )
        with self._held_lock:
            self._renewer = None

    def _decode_tools(self, run_id: str, text: Any) -> dict[str, str] | None:
        if text is None:
            return None
        return decode_row(text, tool_digests, f"the tool digests of run {run_id!r}", self.where)
