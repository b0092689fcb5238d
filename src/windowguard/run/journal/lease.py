"""The run lease as values: who holds a run until when, and whether a holder still runs.

A lease row names its holder (``host:pid:token``, one token per acquisition: the
holder's host name and process id), the holder's machine (this kernel boot and
process-id namespace, so that two processes whose pids can be compared know it) and its
expiry. A runner that finds the run held by a process of its own machine that no longer
runs takes it over at once instead of waiting for the lease to expire; any other holder
is waited for. A SQLite journal goes further (its expiry is a wall-clock time, which
two processes may read differently): a holder whose process still runs on this machine
keeps the run whatever the clocks say (:attr:`Claim.running`). Its row also records
when the holder's process started (:func:`process_started`), so that a later process
that was given the dead holder's pid is not taken for it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime

__all__ = ["Claim", "Lease", "holder_host", "machine_id", "process_gone", "process_started"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    """A runner's hold on a run.

    Attributes:
        run_id: the run.
        holder: who holds it: ``host:pid:token``, one token per acquisition.
        expires_at: when it expires unless renewed (UTC, the journal's clock).
    """

    run_id: str
    holder: str
    expires_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """A lease row as stored: who holds the run, from which process, until when.

    Attributes:
        holder: ``host:pid:token``.
        machine: the holder's machine and process namespace (None when unknown), so a
            runner on the same machine can tell that the holder's process is gone.
        pid: the holder's process id.
        expires_at: the expiry (UTC).
        seconds_left: seconds until it expires, by the journal's clock (negative:
            expired); a SQLite lease held by this very process counts them on its
            monotonic clock, which wall-clock jumps do not move.
        running: True when a SQLite journal saw the holder's process running on this
            machine: the lease then holds whatever the clocks say, until that process
            gives it back or ends (False: not checked, or not running).
        started: when the holder's process started (:func:`process_started`; None when
            unknown), so that another process given the same pid later is not taken
            for the holder.
    """

    holder: str
    machine: str | None
    pid: int | None
    expires_at: datetime
    seconds_left: float
    running: bool = False
    started: int | None = None

    @property
    def live(self) -> bool:
        """Whether the lease still holds: not expired, or its holder still runs here."""
        return self.running or self.seconds_left > 0


def holder_host(holder: str) -> str:
    """The host name in a holder ``host:pid:token``."""
    return holder.rsplit(":", 2)[0]


def machine_id() -> str | None:
    """This kernel boot and process-id namespace: equal for processes whose pids compare."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None
    return f"{boot}/{namespace}"


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (which may hold spaces
    and parentheses): the process state first; None without ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()
    except OSError:
        return None


def process_started(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat``
    field 22); None where that is not known. With the boot in :func:`machine_id`, the
    pid and this, a process is told from a later one given the same pid."""
    return _start(_stat_fields(pid))


def _start(fields: list[str] | None) -> int | None:
    try:
        return None if fields is None else int(fields[19])
    except (IndexError, ValueError):
        return None


def process_gone(pid: int, started: int | None = None) -> bool:
    """True when no process ``pid`` runs (or only its zombie, waiting to be reaped), or
    when the process ``pid`` that runs is not the one that started at ``started``
    (:func:`process_started`; None: any process with that pid counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OSError):
        pass  # another user's process runs with that pid: its stat tells which one
    fields = _stat_fields(pid)
    if not fields:
        return False
    if fields[0] in ("Z", "X"):
        return True
    return started is not None and _start(fields) not in (None, started)
