"""The run journal in one SQLite file: the embedded default.

Stdlib ``sqlite3`` in WAL mode, one row per model call and per tool result, each
committed on its own, so a crash loses at most the call in flight. Processes on one
machine share the file; every write and every lease change is one ``BEGIN IMMEDIATE``
transaction, so they serialise across processes. Lease expiry uses this machine's clock,
which every process sharing the file reads.

The file holds whole transcripts and tool output: it is created ``0600`` (owner only),
and so are its ``-wal`` and ``-shm`` files (SQLite gives them the database's mode); an
existing file readable by others is tightened to ``0600``, with a log line saying so.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from ..exceptions import JournalError
from .base import Journal
from .lease import Claim

__all__ = ["SqliteJournal"]

logger = logging.getLogger("windowguard")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    digest TEXT NOT NULL,
    termination TEXT,
    state TEXT
);
CREATE TABLE IF NOT EXISTS model_calls (
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    response TEXT NOT NULL,
    PRIMARY KEY (run_id, step)
);
CREATE TABLE IF NOT EXISTS tool_results (
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    position INTEGER NOT NULL,
    result TEXT NOT NULL,
    PRIMARY KEY (run_id, step, position)
);
CREATE TABLE IF NOT EXISTS leases (
    run_id TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    machine TEXT,
    pid INTEGER,
    expires REAL NOT NULL
);
"""

_PRIVATE = stat.S_IRUSR | stat.S_IWUSR


def _utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=timezone.utc)


def make_private(path: str) -> None:
    """Create ``path`` (and nothing else) ``0600`` if missing; tighten it, and its
    ``-wal``/``-shm`` files, when others may read them (saying so in a log line)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, _PRIVATE)
    except OSError:
        return  # sqlite reports what is wrong with the path when it opens it
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & 0o077:
            os.fchmod(fd, mode & 0o700)
            logger.warning(
                "run journal %s was readable by others (mode %04o); made it %04o, as it "
                "holds whole transcripts and tool output",
                path,
                mode,
                mode & 0o700,
            )
    except OSError as exc:
        logger.warning("could not make run journal %s private: %s", path, exc)
    finally:
        os.close(fd)
    for suffix in ("-wal", "-shm"):
        side = path + suffix
        try:
            mode = stat.S_IMODE(os.stat(side).st_mode)
            if mode & 0o077:
                os.chmod(side, mode & 0o700)
                logger.warning("made %s private (mode %04o, was %04o)", side, mode & 0o700, mode)
        except FileNotFoundError:
            continue
        except OSError as exc:
            logger.warning("could not make %s private: %s", side, exc)


class SqliteJournal(Journal):
    """A run journal in one SQLite file (WAL mode); safe to share between threads and
    between processes on one machine.

    Args:
        path: the database file (created ``0600`` if missing); ``":memory:"`` for a
            journal that lives as long as this object.
        lease_seconds: how long a runner's hold on a run lasts without renewal.
        wait: how long a second runner waits for a held run before ``RunLockedError``.
        timeout: seconds to wait for another process's write transaction.

    Raises:
        JournalError: the file cannot be opened or is not a database.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lease_seconds: float = 30.0,
        wait: float = 0.0,
        timeout: float = 30.0,
    ) -> None:
        super().__init__(lease_seconds=lease_seconds, wait=wait)
        self.path = os.fspath(path)
        self.where = self.path
        self._lock = threading.RLock()
        if self.path not in ("", ":memory:"):
            make_private(self.path)
        try:
            self._db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=timeout
            )
        except sqlite3.Error as exc:
            raise JournalError(f"cannot open run journal {self.path}: {exc}") from exc
        try:
            self._use_wal(timeout)
            self._db.execute("PRAGMA synchronous=NORMAL")
            with self._transaction():
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                columns = {row[1] for row in self._db.execute("PRAGMA table_info(runs)")}
                if "tools" not in columns:  # a journal of windowguard 0.1
                    self._db.execute("ALTER TABLE runs ADD COLUMN tools TEXT")
        except (sqlite3.Error, JournalError) as exc:
            self._db.close()
            raise JournalError(f"cannot open run journal {self.path}: {exc}") from exc

    def _use_wal(self, timeout: float) -> None:
        """Switch the file to write-ahead logging, once for all its users.

        Switching needs the file to itself, and SQLite answers "database is locked" at
        once (without waiting ``timeout``) when another process opens the same new file
        at that moment; so it is retried until the file is in WAL mode or ``timeout``
        has passed.
        """
        deadline = time.monotonic() + timeout
        delay = 0.005
        while True:
            try:
                mode = self._db.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() == "wal":
                    return
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() + delay > deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction (the write lock across processes)."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise JournalError(f"run journal {self.path}: {exc}") from exc
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise JournalError(f"run journal {self.path}: {exc}") from exc

    def _one(self, sql: str, params: tuple[Any, ...]) -> Any:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchone()
            except sqlite3.Error as exc:
                raise JournalError(f"run journal {self.path} cannot be read: {exc}") from exc

    def _fence(self, db: sqlite3.Connection, run_id: str, holder: str | None) -> None:
        """Inside a write: renew ``holder``'s lease, or refuse while another holds it."""
        now = time.time()
        if holder is not None:
            renewed = db.execute(
                "UPDATE leases SET expires = ? WHERE run_id = ? AND holder = ?",
                (now + self.lease_seconds, run_id, holder),
            ).rowcount
            if renewed == 1:
                return
            self._forget(run_id, holder)
            raise self._locked(run_id, self._claim_row(db, run_id, now), lost=True)
        claim = self._claim_row(db, run_id, now)
        if claim is not None and claim.live:
            raise self._locked(run_id, claim)

    @staticmethod
    def _claim_row(db: sqlite3.Connection, run_id: str, now: float) -> Claim | None:
        row = db.execute(
            "SELECT holder, machine, pid, expires FROM leases WHERE run_id = ?", (run_id,)
        ).fetchone()
        if row is None:
            return None
        return Claim(
            holder=str(row[0]),
            machine=row[1],
            pid=row[2],
            expires_at=_utc(float(row[3])),
            seconds_left=float(row[3]) - now,
        )

    # -- storage primitives ---------------------------------------------------------------

    def _read_run(self, run_id: str) -> tuple[str, Any, Any, Any] | None:
        row = self._one(
            "SELECT digest, tools, termination, state FROM runs WHERE run_id = ?", (run_id,)
        )
        return None if row is None else (str(row[0]), row[1], row[2], row[3])

    def _create_run(self, run_id: str, digest: str, tools: str) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO runs (run_id, digest, tools) VALUES (?, ?, ?)",
                (run_id, digest, tools),
            )

    def _write_tools(self, run_id: str, tools: str) -> None:
        with self._transaction() as db:
            db.execute("UPDATE runs SET tools = ? WHERE run_id = ?", (tools, run_id))

    def _read_row(self, table: str, run_id: str, step: int, position: int) -> Any:
        if table == "model_calls":
            row = self._one(
                "SELECT response FROM model_calls WHERE run_id = ? AND step = ?", (run_id, step)
            )
        else:
            row = self._one(
                "SELECT result FROM tool_results WHERE run_id = ? AND step = ? AND position = ?",
                (run_id, step, position),
            )
        return None if row is None else row[0]

    def _write_row(
        self, table: str, run_id: str, step: int, position: int, text: str, holder: str | None
    ) -> None:
        with self._transaction() as db:
            self._fence(db, run_id, holder)
            if table == "model_calls":
                db.execute(
                    "INSERT OR REPLACE INTO model_calls (run_id, step, response) VALUES (?, ?, ?)",
                    (run_id, step, text),
                )
            else:
                db.execute(
                    "INSERT OR REPLACE INTO tool_results (run_id, step, position, result) "
                    "VALUES (?, ?, ?, ?)",
                    (run_id, step, position, text),
                )

    def _write_end(
        self, run_id: str, termination: str, state: str | None, holder: str | None
    ) -> None:
        with self._transaction() as db:
            self._fence(db, run_id, holder)
            db.execute(
                "UPDATE runs SET termination = ?, state = ? WHERE run_id = ?",
                (termination, state, run_id),
            )
            if holder is not None:
                db.execute("DELETE FROM leases WHERE run_id = ? AND holder = ?", (run_id, holder))

    def _count_rows(self, run_id: str) -> tuple[int, int]:
        calls = self._one("SELECT COUNT(*) FROM model_calls WHERE run_id = ?", (run_id,))
        results = self._one(
            "SELECT COUNT(*) FROM tool_results WHERE run_id = ? AND position >= 0", (run_id,)
        )
        return int(calls[0]), int(results[0])

    def _claim(
        self, run_id: str, holder: str, *, steal: str | None
    ) -> tuple[datetime | None, Claim | None]:
        with self._transaction() as db:
            now = time.time()
            claim = self._claim_row(db, run_id, now)
            if claim is not None and claim.live and claim.holder not in (holder, steal):
                return None, claim
            expires = now + self.lease_seconds
            db.execute(
                "INSERT OR REPLACE INTO leases (run_id, holder, machine, pid, expires) "
                "VALUES (?, ?, ?, ?, ?)",
                (run_id, holder, self._machine, os.getpid(), expires),
            )
            return _utc(expires), None

    def _extend(self, run_id: str, holder: str) -> datetime | None:
        with self._transaction() as db:
            expires = time.time() + self.lease_seconds
            renewed = db.execute(
                "UPDATE leases SET expires = ? WHERE run_id = ? AND holder = ?",
                (expires, run_id, holder),
            ).rowcount
        return _utc(expires) if renewed == 1 else None

    def _drop(self, run_id: str, holder: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM leases WHERE run_id = ? AND holder = ?", (run_id, holder))

    def _read_claim(self, run_id: str) -> Claim | None:
        with self._lock:
            try:
                return self._claim_row(self._db, run_id, time.time())
            except sqlite3.Error as exc:
                raise JournalError(f"run journal {self.path} cannot be read: {exc}") from exc

    def _close(self) -> None:
        with self._lock:
            self._db.close()
