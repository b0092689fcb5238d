"""The run lease as values: who holds a run until when, and whether a holder still runs.

A lease row names its holder (``host:pid:token``, one token per acquisition), the
holder's machine (this kernel boot and process-id namespace, so that two processes
whose pids can be compared know it) and its expiry. A runner that finds the run held
by a process of its own machine that no longer runs takes it over at once instead of
waiting for the lease to expire; any other holder is waited for.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime

__all__ = ["Claim", "Lease", "machine_id", "process_gone"]


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
        seconds_left: seconds until it expires, by the journal's clock (negative: expired).
    """

    holder: str
    machine: str | None
    pid: int | None
    expires_at: datetime
    seconds_left: float

    @property
    def live(self) -> bool:
        """Whether the lease has not expired yet."""
        return self.seconds_left > 0


def machine_id() -> str | None:
    """This kernel boot and process-id namespace: equal for processes whose pids compare."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None
    return f"{boot}/{namespace}"


def process_gone(pid: int) -> bool:
    """True when no process ``pid`` runs (or only its zombie, waiting to be reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OSError):
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rpartition(")")[2].split()
    except OSError:
        return False
    return bool(state) and state[0] in ("Z", "X")
