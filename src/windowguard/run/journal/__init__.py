"""The durable run journal: replay instead of redoing, one runner per run.

A durable loop: every model call and every tool result is written to the
journal *before* the loop moves on. A run killed at any point and started again with
the same journal and run id replays the journalled model calls without calling the
provider, never re-runs a tool whose result was journalled, and continues from there.
Events are emitted for live calls only. The journal is authoritative and never pruned:
it holds every response in full, whatever the manager dropped from the requests.

A run is driven by one runner at a time: the runner holds a lease on it in the journal,
renewed while the run is alive; a second runner gets
:class:`~windowguard.core.exceptions.RunLockedError` (or waits ``wait=`` seconds), and a
runner that died is replaced once its lease expires (see :mod:`.base`).

Backends share one contract, :class:`Journal`: :class:`SqliteJournal` (one file, the
embedded default) and :class:`PostgresJournal` (psycopg 3, for fleets of workers
resuming each other's runs; ``pip install "windowguard[postgres]"``). The backends are
imported on first use, so a loop without a journal never loads ``sqlite3``.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from ...core.exceptions import JournalError, JournalMismatchError, RunLockedError
from .base import Journal
from .lease import Claim, Lease
from .state import (
    RunState,
    jsonable,
    response_from_dict,
    response_to_dict,
    result_from_dict,
    result_to_dict,
    tool_digest,
    transcript_digest,
)

if _TYPE_CHECKING:
    from .postgres import PostgresJournal as PostgresJournal
    from .sqlite import SqliteJournal as SqliteJournal

_BACKENDS = {"PostgresJournal": ".postgres", "SqliteJournal": ".sqlite"}


def __getattr__(name: str) -> _Any:
    """A backend class, imported on first use (``SqliteJournal`` loads ``sqlite3``)."""
    module = _BACKENDS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "Claim",
    "Journal",
    "JournalError",
    "JournalMismatchError",
    "Lease",
    "PostgresJournal",
    "RunLockedError",
    "RunState",
    "SqliteJournal",
    "jsonable",
    "response_from_dict",
    "response_to_dict",
    "result_from_dict",
    "result_to_dict",
    "tool_digest",
    "transcript_digest",
]
