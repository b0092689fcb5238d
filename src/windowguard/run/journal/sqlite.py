"""The run journal in one SQLite file: the embedded default.

Stdlib ``sqlite3`` in WAL mode, one row per model call and per tool result, each
committed on its own, so a crash loses at most the call in flight. Processes on one
machine share the file; every write and every lease change is one ``BEGIN IMMEDIATE``
transaction, so they serialise across processes.

The file holds whole transcripts and tool output: it is created ``0600`` (owner only),
and so are its ``-wal`` and ``-shm`` files (SQLite gives them the database's mode); an
existing file readable by others is tightened to ``0600``, with a log line saying so.

**Schema version.** The file records the layout of its tables in ``PRAGMA user_version``
(:data:`SCHEMA_VERSION`). A file without one (written by windowguard 0.1, or 0.2 before
versions were recorded) has its tables checked, brought up to date and stamped when it
is opened; a file of another version, or whose tables windowguard did not lay out, is
refused with a :class:`~windowguard.core.exceptions.JournalError` naming both versions.

**Errors.** No ``sqlite3`` exception leaves the journal: opening it, every read and
write, the lease and closing raise ``JournalError`` naming the file and the problem
(read-only, not a SQLite database, damaged, another schema version, locked, disk full),
with the ``sqlite3`` error, when one was raised, as its ``__cause__``. A read-only file
can still be opened and read; its first write says it is read-only.

**The lease and the clocks.** A lease's expiry is stored as a wall-clock time, and each
process sharing the file reads its own wall clock, which may be wrong or jump (NTP, a
resumed laptop). So the wall clock decides only where nothing better is known:

- a lease held by this process is timed on its monotonic clock (renewals and expiry):
  another journal object of the same process takes it only after ``lease_seconds``
  without renewal, whatever the wall clock did;
- a holder whose process still runs on this machine (the same kernel boot and pid
  namespace; the same host name where those are unknown) is never taken over, whatever
  the wall clocks say: its pid is checked with ``os.kill(pid, 0)``, a process of
  another user counting as running, and its start time (``/proc/<pid>/stat``, kept in
  the row's ``started``) against the row's, so a later process given the same pid is
  not taken for it. It keeps the run until it gives it back (it does when the run
  ends, and gives back a lease it holds without driving it after ``lease_seconds``
  without renewal) or its process ends;
- a holder on this machine whose process is gone is taken over at once;
- a holder on another machine is taken over when its lease expires by this process's
  wall clock: across machines the clocks must agree to within two thirds of
  ``lease_seconds`` (a holder renews every third), which is why fleets sharing runs use
  :class:`~windowguard.run.journal.postgres.PostgresJournal` and its server's clock.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from typing import Any

from ...core.exceptions import ConfigurationError, JournalError
from .base import Journal
from .lease import Claim, holder_host, process_gone, process_started

__all__ = ["SCHEMA_VERSION", "SqliteJournal"]

logger = logging.getLogger("windowguard")

SCHEMA_VERSION = 1
"""The layout of the journal's tables, recorded in the file's ``PRAGMA user_version``
(0, SQLite's default, is a file written before versions were recorded)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    digest TEXT NOT NULL,
    termination TEXT,
    state TEXT,
    tools TEXT
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
    expires REAL NOT NULL,
    started INTEGER
);
"""

_COLUMNS = {
    "runs": {"run_id", "digest", "termination", "state"},  # tools: added to 0.1's
    "model_calls": {"run_id", "step", "response"},
    "tool_results": {"run_id", "step", "position", "result"},
    "leases": {"run_id", "holder", "machine", "pid", "expires"},  # started: added to 1's
}

# SQLite's primary result codes (``sqlite3`` errors carry them from Python 3.11 on), and
# the words of their messages for older Pythons
_KINDS = {3: "perm", 5: "busy", 6: "busy", 8: "readonly", 10: "io", 11: "corrupt"}
_KINDS.update({13: "full", 14: "cantopen", 23: "perm", 26: "notadb"})
_WORDS = (
    ("readonly", "readonly"),
    ("not a database", "notadb"),
    ("malformed", "corrupt"),
    ("unable to open", "cantopen"),
    ("is full", "full"),
    ("locked", "busy"),
    ("disk i/o", "io"),
    ("closed database", "closed"),
    ("no such table", "schema"),
    ("no such column", "schema"),
    ("has no column", "schema"),
)
_MESSAGES = {
    "readonly": "{file} is read-only: {cause}. A journal is written as its runs go: make "
    "the file and its folder writable (SQLite writes {path}-wal and {path}-shm beside "
    "it), or use another file",
    "notadb": "{file} is not a SQLite database: {cause}. Point the journal at a new file "
    "(it is created), or restore this one from a backup",
    "corrupt": "{file} is damaged: {cause}. Restore it from a backup, or start the run "
    "again in a new file",
    "cantopen": "{file} cannot be opened: {cause}. Check that its folder exists and may "
    "be written, and that the path is not a folder",
    "perm": "{file} may not be read or written by this process: {cause}",
    "full": "the disk holding {file} is full: {cause}",
    "io": "{file} could not be read or written: {cause}",
    "busy": "{file} stayed locked by another process for longer than timeout={timeout:g} "
    "s: {cause}",
    "schema": "{file} does not hold the tables of windowguard's journal schema version "
    "{version}: {cause}. Was it changed by another program?",
    "closed": "{file} was closed (journal.close(), or the end of its with block): "
    "{cause}. Open a new SqliteJournal on the file",
    "other": "{file}: {cause}",
}


def _kind(exc: sqlite3.Error) -> str:
    """What went wrong, as a key of ``_MESSAGES``."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and (code & 0xFF) in _KINDS:
        return _KINDS[code & 0xFF]
    text = str(exc).lower()
    return next((kind for word, kind in _WORDS if word in text), "other")


_OWN: dict[str, float] = {}
"""The SQLite leases this process holds, whichever journal object holds them: holder to
expiry on the monotonic clock. Another journal of this process goes by these."""
_OWN_LOCK = threading.Lock()


def _own_renewed(holder: str, seconds: float) -> None:
    now = time.monotonic()
    with _OWN_LOCK:
        for ended in [h for h, until in _OWN.items() if until <= now]:
            del _OWN[ended]  # expired: as good as given back
        _OWN[holder] = now + seconds


def _own_ended(holder: str) -> None:
    with _OWN_LOCK:
        _OWN.pop(holder, None)


def _own_left(holder: str) -> float | None:
    """Seconds left of this process's lease ``holder`` (monotonic), None if it holds none."""
    with _OWN_LOCK:
        until = _OWN.get(holder)
    return None if until is None else until - time.monotonic()


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
        lease_seconds: how long a runner's hold on a run lasts without renewal; a holder
            whose process still runs on this machine keeps the run whatever the clocks
            say (see the module's documentation).
        wait: how long a second runner waits for a held run before ``RunLockedError``.
        timeout: seconds to wait for another process's write transaction.
        clock: the wall clock lease expiries are written and compared with (epoch
            seconds, default :func:`time.time`); for tests.

    Raises:
        JournalError: the file cannot be opened, is not a SQLite database, or holds
            the tables of another schema version (named).
    """

    _keeps_while_running = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lease_seconds: float = 30.0,
        wait: float = 0.0,
        timeout: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(lease_seconds=lease_seconds, wait=wait)
        self.path = os.fspath(path)
        if not isinstance(self.path, str) or "\0" in self.path:
            raise ConfigurationError(f"a journal's path is a str without NUL, got {path!r}")
        self.where = self.path
        memory = self.path in ("", ":memory:")
        self._file = "the in-memory journal" if memory else f"the journal file {self.path}"
        self._timeout = timeout
        self._clock = clock
        self._started = (os.getpid(), process_started(os.getpid()))  # again after a fork
        self._started_column = "started"  # "NULL" in a read-only file laid out without it
        self._lock = threading.RLock()
        if not memory:
            make_private(self.path)
        try:
            self._db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=timeout
            )
        except sqlite3.Error as exc:
            raise self._error(exc, "opening it") from exc
        try:
            try:
                self._use_wal(timeout)
                self._db.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.Error as exc:
                raise self._error(exc, "opening it") from exc
            self._prepare()
        except JournalError:
            with suppress(sqlite3.Error):
                self._db.close()
            raise

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

    def _prepare(self) -> None:
        """Check the file's schema version and tables; create, bring up to date and
        stamp them (a file without a version)."""
        with self._transaction("checking its tables") as db:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            if version not in (0, SCHEMA_VERSION):
                raise JournalError(self._other_version(version))
            found: dict[str, set[str]] = {}
            for table in _COLUMNS:
                columns = {str(row[1]) for row in db.execute(f"PRAGMA table_info({table})")}
                if columns:
                    found[table] = columns
            wrong = [
                f"table {table} lacks {', '.join(sorted(_COLUMNS[table] - columns))}"
                for table, columns in found.items()
                if _COLUMNS[table] - columns
            ]
            if wrong:
                raise JournalError(
                    f"{self._file} holds tables that windowguard did not lay out ("
                    + "; ".join(wrong)
                    + f"): it is not a windowguard journal of schema version {SCHEMA_VERSION}"
                    " or older; use a new file"
                )
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            if "tools" not in found.get("runs", {"tools"}):  # a journal of windowguard 0.1
                db.execute("ALTER TABLE runs ADD COLUMN tools TEXT")
            if "started" not in found.get("leases", {"started"}):  # before starts were kept
                try:
                    db.execute("ALTER TABLE leases ADD COLUMN started INTEGER")
                except sqlite3.Error as exc:
                    if _kind(exc) != "readonly":
                        raise
                    self._started_column = "NULL"  # read-only: no lease is written to it
            if version != SCHEMA_VERSION:
                try:
                    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                except sqlite3.Error as exc:
                    if _kind(exc) != "readonly":
                        raise  # a read-only file stays unversioned: it can be read

    def _other_version(self, version: int) -> str:
        return (
            f"{self._file} was written by schema version {version}, this windowguard "
            f"reads version {SCHEMA_VERSION}: open it with the windowguard that wrote it, "
            "or use a new file"
        )

    def _version_on_disk(self) -> int | None:
        db = getattr(self, "_db", None)
        if db is None:
            return None
        with self._lock, suppress(sqlite3.Error, TypeError, ValueError):
            return int(db.execute("PRAGMA user_version").fetchone()[0])
        return None

    def _error(self, exc: sqlite3.Error, doing: str) -> JournalError:
        """``exc`` as a JournalError naming the file and what is wrong with it."""
        kind = _kind(exc)
        cause = f"{exc} (while {doing})" if kind != "other" else f"{exc!r} (while {doing})"
        if kind == "schema":
            version = self._version_on_disk()
            if version is not None and version not in (0, SCHEMA_VERSION):
                return JournalError(f"{self._other_version(version)} (SQLite: {cause})")
        return JournalError(
            _MESSAGES[kind].format(
                file=self._file,
                path=self.path,
                cause=cause,
                timeout=self._timeout,
                version=SCHEMA_VERSION,
            )
        )

    @contextmanager
    def _transaction(self, doing: str) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction (the write lock across processes); a
        ``sqlite3`` error in it is rolled back and raised as a JournalError."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._error(exc, doing) from exc
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException as exc:
                with suppress(sqlite3.Error):
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self._error(exc, doing) from exc
                raise

    def _one(self, sql: str, params: tuple[Any, ...], doing: str) -> Any:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchone()
            except sqlite3.Error as exc:
                raise self._error(exc, doing) from exc

    def _start(self) -> int | None:
        """When this process started (:func:`process_started`), written beside its pid."""
        pid = os.getpid()
        if self._started[0] != pid:  # a child forked with this journal
            self._started = (pid, process_started(pid))
        return self._started[1]

    def _local(self, claim: Claim) -> bool:
        if self._machine is not None or claim.machine is not None:
            return super()._local(claim)
        # neither side knows its boot and pid namespace (no /proc): the host name says
        return os.name == "posix" and holder_host(claim.holder) == socket.gethostname()

    def _claim_row(self, db: sqlite3.Connection, run_id: str) -> Claim | None:
        """The run's lease row, judged as the module says: a lease of this process by
        its monotonic clock, a holder running on this machine as ``running``."""
        row = db.execute(
            f"SELECT holder, machine, pid, expires, {self._started_column} FROM leases "
            "WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        if row is None:
            return None
        try:
            expires = float(row[3])
            expires_at = _utc(expires)
        except (TypeError, ValueError, OverflowError, OSError) as exc:
            raise JournalError(
                f"{self._file} holds a damaged lease of run {run_id!r} (expires={row[3]!r}); "
                "delete that row of table leases once no runner drives the run"
            ) from exc
        claim = Claim(
            holder=str(row[0]),
            machine=None if row[1] is None else str(row[1]),
            pid=row[2] if isinstance(row[2], int) and row[2] > 0 else None,
            expires_at=expires_at,
            seconds_left=expires - self._clock(),
            started=row[4] if isinstance(row[4], int) else None,
        )
        if claim.pid is None or not self._local(claim):
            return claim
        if claim.pid == os.getpid():
            own = _own_left(claim.holder)  # None: not a lease this process holds
            left = min(claim.seconds_left, 0.0) if own is None else own
            return dataclasses.replace(claim, seconds_left=left)
        return dataclasses.replace(claim, running=not process_gone(claim.pid, claim.started))

    def _fence(self, db: sqlite3.Connection, run_id: str, holder: str | None) -> None:
        """Inside a write: renew ``holder``'s lease, or refuse while another holds it."""
        if holder is not None:
            renewed = db.execute(
                "UPDATE leases SET expires = ? WHERE run_id = ? AND holder = ?",
                (self._clock() + self.lease_seconds, run_id, holder),
            ).rowcount
            if renewed == 1:
                _own_renewed(holder, self.lease_seconds)
                return
            _own_ended(holder)
            self._forget(run_id, holder)
            raise self._locked(run_id, self._claim_row(db, run_id), lost=True)
        claim = self._claim_row(db, run_id)
        if claim is not None and claim.live:
            raise self._locked(run_id, claim)

    # -- storage primitives ---------------------------------------------------------------

    def _read_run(self, run_id: str) -> tuple[str, Any, Any, Any] | None:
        row = self._one(
            "SELECT digest, tools, termination, state FROM runs WHERE run_id = ?",
            (run_id,),
            f"reading run {run_id!r}",
        )
        return None if row is None else (str(row[0]), row[1], row[2], row[3])

    def _create_run(self, run_id: str, digest: str, tools: str) -> None:
        with self._transaction(f"registering run {run_id!r}") as db:
            db.execute(
                "INSERT OR IGNORE INTO runs (run_id, digest, tools) VALUES (?, ?, ?)",
                (run_id, digest, tools),
            )

    def _write_tools(self, run_id: str, tools: str) -> None:
        with self._transaction(f"writing the tool digests of run {run_id!r}") as db:
            db.execute("UPDATE runs SET tools = ? WHERE run_id = ?", (tools, run_id))

    def _read_row(self, table: str, run_id: str, step: int, position: int) -> Any:
        doing = f"reading model call {step} of run {run_id!r}"
        if table == "model_calls":
            row = self._one(
                "SELECT response FROM model_calls WHERE run_id = ? AND step = ?",
                (run_id, step),
                doing,
            )
        else:
            row = self._one(
                "SELECT result FROM tool_results WHERE run_id = ? AND step = ? AND position = ?",
                (run_id, step, position),
                f"reading result {position} of model call {step} of run {run_id!r}",
            )
        return None if row is None else row[0]

    def _write_row(
        self, table: str, run_id: str, step: int, position: int, text: str, holder: str | None
    ) -> None:
        if table == "model_calls":
            doing = f"writing model call {step} of run {run_id!r}"
        else:
            doing = f"writing result {position} of model call {step} of run {run_id!r}"
        with self._transaction(doing) as db:
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
        with self._transaction(f"writing the end of run {run_id!r}") as db:
            self._fence(db, run_id, holder)
            db.execute(
                "UPDATE runs SET termination = ?, state = ? WHERE run_id = ?",
                (termination, state, run_id),
            )
            if holder is not None:
                db.execute("DELETE FROM leases WHERE run_id = ? AND holder = ?", (run_id, holder))
                _own_ended(holder)

    def _count_rows(self, run_id: str) -> tuple[int, int]:
        doing = f"counting the rows of run {run_id!r}"
        calls = self._one("SELECT COUNT(*) FROM model_calls WHERE run_id = ?", (run_id,), doing)
        results = self._one(
            "SELECT COUNT(*) FROM tool_results WHERE run_id = ? AND position >= 0",
            (run_id,),
            doing,
        )
        return int(calls[0]), int(results[0])

    def _claim(
        self, run_id: str, holder: str, *, steal: str | None
    ) -> tuple[datetime | None, Claim | None]:
        with self._transaction(f"taking the lease on run {run_id!r}") as db:
            claim = self._claim_row(db, run_id)
            if claim is not None and claim.live and claim.holder not in (holder, steal):
                return None, claim
            expires = self._clock() + self.lease_seconds
            db.execute(
                "INSERT OR REPLACE INTO leases (run_id, holder, machine, pid, expires, started) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, holder, self._machine, os.getpid(), expires, self._start()),
            )
            if claim is not None and claim.holder != holder:
                _own_ended(claim.holder)
            _own_renewed(holder, self.lease_seconds)
            return _utc(expires), None

    def _extend(self, run_id: str, holder: str) -> datetime | None:
        with self._transaction(f"renewing the lease on run {run_id!r}") as db:
            expires = self._clock() + self.lease_seconds
            renewed = db.execute(
                "UPDATE leases SET expires = ? WHERE run_id = ? AND holder = ?",
                (expires, run_id, holder),
            ).rowcount
            if renewed == 1:
                _own_renewed(holder, self.lease_seconds)
            else:
                _own_ended(holder)
        return _utc(expires) if renewed == 1 else None

    def _drop(self, run_id: str, holder: str) -> None:
        with self._transaction(f"giving back the lease on run {run_id!r}") as db:
            db.execute("DELETE FROM leases WHERE run_id = ? AND holder = ?", (run_id, holder))
            _own_ended(holder)

    def _read_claim(self, run_id: str) -> Claim | None:
        with self._lock:
            try:
                return self._claim_row(self._db, run_id)
            except sqlite3.Error as exc:
                raise self._error(exc, f"reading the lease on run {run_id!r}") from exc

    def _close(self) -> None:
        with self._lock:
            try:
                self._db.close()
            except sqlite3.Error as exc:
                raise self._error(exc, "closing it") from exc
