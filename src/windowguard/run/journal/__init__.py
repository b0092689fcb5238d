"""The durable run journal: replay instead of redoing, one runner per run.

ADR 0020's durable loop: every model call and every tool result is written to the
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
resuming each other's runs; ``pip install "windowguard[postgres]"``).
"""

from ...core.exceptions import JournalError, JournalMismatchError, RunLockedError
from .base import Journal
from .lease import Claim, Lease
from .postgres import PostgresJournal
from .sqlite import SqliteJournal
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
