"""No ``sqlite3`` error leaves a SqliteJournal: a read-only file, a file of another schema
version, a file that is not a database, a folder, a file another process keeps locked.
Each is a ``JournalError`` naming the file and the problem, with the ``sqlite3`` error as
its cause, out of ``ToolLoop.run`` as out of the journal's own methods.

Every case raises a real ``sqlite3`` error when the tests run as root (as in CI), where
file modes stop nothing: the read-only file is one whose header says it was written by a
newer SQLite, which SQLite itself then only reads."""

from __future__ import annotations

import os
import random
import re
import sqlite3
from pathlib import Path

import pytest

import windowguard as wg
from windowguard.run.journal.sqlite import SCHEMA_VERSION
from windowguard.run.providers.fake import FakeCalls, FakeProvider, ScriptItem

TASK = [{"role": "user", "content": "Read a."}]


@wg.tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


def _run(journal: wg.Journal, run_id: str) -> wg.RunResult:
    script: list[ScriptItem] = [FakeCalls(("read_file", {"path": "a"})), "done"]
    loop = wg.ToolLoop(FakeProvider(script), tools=[read_file], journal=journal)
    return loop.run(TASK, run_id=run_id)


def _journal_file(path: Path) -> Path:
    """A journal file holding one finished run ``"done"``, closed (its WAL folded in)."""
    with wg.SqliteJournal(path) as journal:
        assert _run(journal, "done").termination is wg.TerminationReason.COMPLETED
    return path


def _sql(path: Path, *statements: str) -> None:
    """Run statements on the file from a connection of its own, as another program."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for statement in statements:
            db.execute(statement)
    finally:
        db.close()


def _user_version(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def _journal_error(caught: pytest.ExceptionInfo[wg.JournalError], sqlite_cause: bool) -> str:
    """The message of a plain JournalError (not a lease refusal), its cause checked."""
    assert type(caught.value) is wg.JournalError
    if sqlite_cause:
        assert isinstance(caught.value.__cause__, sqlite3.Error)
    return str(caught.value)


@pytest.mark.parametrize("how", ["header", "mode"])
def test_a_read_only_file_is_a_journal_error_out_of_the_run(tmp_path: Path, how: str) -> None:
    path = _journal_file(tmp_path / "runs.db")
    if how == "header":  # "written by a newer SQLite": read-only to SQLite, for root too
        data = bytearray(path.read_bytes())
        data[18] = 3  # the file format's write version
        path.write_bytes(bytes(data))
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes a 0400 file anyway; the header case runs as root")
        path.chmod(0o400)
    journal = wg.SqliteJournal(path)  # opened to be read: that works
    done = journal.tool_result("done", 0, 0)
    assert done is not None and done.content == "contents of a"
    with pytest.raises(wg.JournalError) as caught:
        _run(journal, "new")
    message = _journal_error(caught, sqlite_cause=True)
    assert message.startswith(f"the journal file {path} is read-only: ")
    assert "while registering run 'new'" in message
    assert journal.lease("new") is None
    journal.close()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a 0500 folder anyway")
def test_a_file_in_a_read_only_folder_is_a_journal_error(tmp_path: Path) -> None:
    folder = tmp_path / "journals"
    folder.mkdir()
    path = _journal_file(folder / "runs.db")
    folder.chmod(0o500)  # SQLite cannot make the file's -wal and -shm beside it
    try:
        with pytest.raises(wg.JournalError) as caught:
            _run(wg.SqliteJournal(path), "new")
    finally:
        folder.chmod(0o700)
    message = _journal_error(caught, sqlite_cause=True)
    assert message.startswith(f"the journal file {path} is read-only: ")
    assert f"SQLite writes {path}-wal and {path}-shm beside it" in message


def test_a_file_of_another_schema_version_is_refused_when_opened(tmp_path: Path) -> None:
    path = _journal_file(tmp_path / "runs.db")
    assert _user_version(path) == SCHEMA_VERSION
    newer = SCHEMA_VERSION + 1
    _sql(path, f"PRAGMA user_version = {newer}")
    with pytest.raises(wg.JournalError) as caught:
        _run(wg.SqliteJournal(path), "new")
    assert _journal_error(caught, sqlite_cause=False).startswith(
        f"the journal file {path} was written by schema version {newer}, this windowguard "
        f"reads version {SCHEMA_VERSION}: "
    )


def test_a_file_another_version_lays_out_anew_mid_use_is_named(tmp_path: Path) -> None:
    path = _journal_file(tmp_path / "runs.db")
    journal = wg.SqliteJournal(path)
    # a newer windowguard, sharing the file, lays the leases out its own way
    _sql(
        path,
        "BEGIN",
        "DROP TABLE leases",
        "CREATE TABLE leases (run_id TEXT PRIMARY KEY, owner TEXT, until_ns INTEGER)",
        f"PRAGMA user_version = {SCHEMA_VERSION + 1}",
        "COMMIT",
    )
    said = (
        f"the journal file {path} was written by schema version {SCHEMA_VERSION + 1}, "
        f"this windowguard reads version {SCHEMA_VERSION}"
    )
    with pytest.raises(wg.JournalError) as caught:
        _run(journal, "new")
    assert _journal_error(caught, sqlite_cause=True).startswith(said)
    for call in (lambda: journal.lease("new"), lambda: journal.acquire("other")):
        with pytest.raises(wg.JournalError, match=re.escape(said)):
            call()
    journal.close()


def test_a_damaged_lease_row_is_named(tmp_path: Path) -> None:
    path = _journal_file(tmp_path / "runs.db")
    _sql(
        path,
        "INSERT INTO leases (run_id, holder, machine, pid, expires) "
        "VALUES ('new', 'h:1:x', NULL, 1, 'soon')",
    )
    with pytest.raises(wg.JournalError) as caught:
        _run(wg.SqliteJournal(path), "new")
    assert _journal_error(caught, sqlite_cause=False).startswith(
        f"the journal file {path} holds a damaged lease of run 'new' (expires='soon')"
    )


@pytest.mark.parametrize("what", ["random bytes", "a folder", "another program's tables"])
def test_a_file_that_is_not_a_journal_is_a_journal_error(tmp_path: Path, what: str) -> None:
    path = tmp_path / "runs.db"
    if what == "random bytes":
        path.write_bytes(random.Random(7).randbytes(64 * 1024))
        said = f"the journal file {path} is not a SQLite database: "
    elif what == "a folder":
        path.mkdir()
        said = f"the journal file {path} cannot be opened: "
    else:
        _sql(path, "CREATE TABLE runs (id INTEGER PRIMARY KEY, started TEXT)")
        said = (
            f"the journal file {path} holds tables that windowguard did not lay out "
            "(table runs lacks digest, run_id, state, termination)"
        )
    with pytest.raises(wg.JournalError) as caught:
        _run(wg.SqliteJournal(path), "new")
    assert _journal_error(caught, sqlite_cause=what != "another program's tables").startswith(said)


def test_a_file_another_process_keeps_locked_is_named(tmp_path: Path) -> None:
    path = _journal_file(tmp_path / "runs.db")
    journal = wg.SqliteJournal(path, timeout=0.05)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process writing, and not letting go
    try:
        with pytest.raises(wg.JournalError) as caught:
            _run(journal, "new")
    finally:
        other.execute("ROLLBACK")
        other.close()
    message = _journal_error(caught, sqlite_cause=True)
    assert message.startswith(
        f"the journal file {path} stayed locked by another process for longer than "
        "timeout=0.05 s: database is locked (while registering run 'new')"
    )
    assert _run(journal, "new").termination is wg.TerminationReason.COMPLETED
    journal.close()


@pytest.mark.parametrize("layout", ["0.1", "0.2"])
def test_a_journal_written_before_versions_is_adopted(tmp_path: Path, layout: str) -> None:
    path = _journal_file(tmp_path / "runs.db")
    _sql(path, "PRAGMA user_version = 0")  # as windowguard 0.1 and 0.2 left their files
    if layout == "0.1":  # no tool digests yet
        _sql(
            path,
            "CREATE TABLE runs01 (run_id TEXT PRIMARY KEY, digest TEXT NOT NULL, "
            "termination TEXT, state TEXT)",
            "INSERT INTO runs01 SELECT run_id, digest, termination, state FROM runs",
            "DROP TABLE runs",
            "ALTER TABLE runs01 RENAME TO runs",
        )
    with wg.SqliteJournal(path) as journal:
        assert _user_version(path) == SCHEMA_VERSION
        replay = wg.ToolLoop(FakeProvider([]), tools=[read_file], journal=journal)
        assert replay.run(TASK, run_id="done").text == "done"  # replayed, not re-run
        assert _run(journal, "new").termination is wg.TerminationReason.COMPLETED
    with wg.SqliteJournal(path) as journal:
        assert journal.counts("done") == journal.counts("new") == (2, 1)


def _leases_columns(path: Path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        return {str(row[1]) for row in db.execute("PRAGMA table_info(leases)")}
    finally:
        db.close()


def _leases_as_01(path: Path) -> None:
    """Lay the leases table out as windowguard 0.1 did: no holder start times."""
    _sql(
        path,
        "DROP TABLE leases",
        "CREATE TABLE leases (run_id TEXT PRIMARY KEY, holder TEXT NOT NULL, machine TEXT, "
        "pid INTEGER, expires REAL NOT NULL)",
    )


@pytest.mark.parametrize("writable", [True, False], ids=["writable", "read-only"])
def test_a_lease_table_without_start_times_is_given_them(tmp_path: Path, writable: bool) -> None:
    path = _journal_file(tmp_path / "runs.db")
    _leases_as_01(path)
    _sql(
        path,
        "INSERT INTO leases (run_id, holder, machine, pid, expires) "
        "VALUES ('done', 'elsewhere:1:x', NULL, 1, 0)",
    )
    if not writable:  # "written by a newer SQLite": read-only, for root too
        data = bytearray(path.read_bytes())
        data[18] = 3
        path.write_bytes(bytes(data))
    with wg.SqliteJournal(path) as journal:
        claim = journal.lease("done")  # read, whether or not the column could be added
        assert claim is not None and claim.holder == "elsewhere:1:x" and claim.started is None
        assert ("started" in _leases_columns(path)) is writable
        if writable:
            assert _run(journal, "new").termination is wg.TerminationReason.COMPLETED
        else:
            with pytest.raises(wg.JournalError, match="is read-only: "):
                _run(journal, "new")


def test_a_closed_journal_says_so(tmp_path: Path) -> None:
    path = _journal_file(tmp_path / "runs.db")
    journal = wg.SqliteJournal(path)
    journal.close()
    said = f"the journal file {path} was closed (journal.close(), or the end of its with block)"
    with pytest.raises(wg.JournalError) as caught:
        _run(journal, "new")
    assert _journal_error(caught, sqlite_cause=True).startswith(said)
    with pytest.raises(wg.JournalError, match=re.escape(said)):
        journal.lease("done")
    journal.close()  # closing twice is harmless


def test_a_path_that_cannot_name_a_file_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(wg.ConfigurationError, match="a journal's path is a str without NUL"):
        wg.SqliteJournal(f"{tmp_path}/runs\0.db")
    assert list(tmp_path.iterdir()) == []
