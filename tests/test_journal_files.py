"""The files a run writes hold whole transcripts and tool output: the SQLite journal (with
its ``-wal`` and ``-shm`` files) and the JSONL event file are created ``0600`` whatever
the umask, and an existing one that others may read is tightened, with a log line."""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import windowguard as wg
from windowguard.run.providers.fake import FakeCalls, FakeProvider

pytestmark = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")


@wg.tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"secret contents of {path}"


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("umask_022")
def test_a_run_writes_its_journal_and_events_owner_only(tmp_path: Path) -> None:
    db, events = tmp_path / "runs.db", tmp_path / "events.jsonl"
    with wg.SqliteJournal(db) as journal, wg.JsonlSink(events) as sink:
        provider = FakeProvider([FakeCalls(("read_file", {"path": "a"})), "done"])
        loop = wg.ToolLoop(provider, tools=[read_file], journal=journal, sinks=[sink])
        assert loop.run([{"role": "user", "content": "go"}], run_id="r").text == "done"
        written = [db, Path(f"{db}-wal"), Path(f"{db}-shm"), events]
        assert all(p.exists() for p in written)  # the -wal/-shm files live while it is open
        assert {p.name: _mode(p) for p in written} == {p.name: 0o600 for p in written}
    assert '"event": "tool_result"' in events.read_text()
    with wg.SqliteJournal(db) as journal:
        result = journal.tool_result("r", 0, 0)
    assert result is not None and "secret contents" in result.content


@pytest.mark.usefixtures("umask_022")
def test_existing_files_that_others_may_read_are_tightened_and_said_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db, events = tmp_path / "runs.db", tmp_path / "events.jsonl"
    wg.SqliteJournal(db).close()
    for path in (db, Path(f"{db}-wal"), events):
        path.touch()
        path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="windowguard"):
        wg.SqliteJournal(db).close()
        wg.JsonlSink(events).close()
    assert _mode(db) == _mode(events) == 0o600
    said = " ".join(r.getMessage() for r in caplog.records)
    assert f"run journal {db} was readable by others (mode 0644); made it 0600" in said
    assert f"{db}-wal private" in said
    assert f"event file {events} was readable by others (mode 0644); made it 0600" in said


@pytest.mark.usefixtures("umask_022")
def test_a_private_file_is_left_alone_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    events = tmp_path / "events.jsonl"
    events.touch(mode=0o600)
    events.chmod(0o400 | 0o200)
    with caplog.at_level(logging.WARNING, logger="windowguard"):
        wg.JsonlSink(events).close()
    assert _mode(events) == 0o600 and not caplog.records


def test_an_event_stream_that_is_not_a_file_keeps_its_mode(tmp_path: Path) -> None:
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo, 0o644)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        wg.JsonlSink(fifo).close()
    finally:
        os.close(reader)
    assert _mode(fifo) == 0o644 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class _LockedAtFirst:
    """A connection whose journal-mode switch finds the file locked ``times`` times, as
    SQLite answers (without waiting) a process opening a new file another one is
    creating at that moment."""

    def __init__(self, real: Any, times: int) -> None:
        self.real, self.times, self.switches = real, times, 0

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "PRAGMA journal_mode=WAL":
            self.switches += 1
            if self.switches <= self.times:
                raise sqlite3.OperationalError("database is locked")
        return self.real.execute(sql, *args)


def test_a_new_journal_file_locked_by_another_opener_is_waited_for(tmp_path: Path) -> None:
    # CI saw 1 of 2 processes opening one new runs.db fail with "database is locked".
    journal = wg.SqliteJournal(tmp_path / "other.db")
    own = journal._db
    fresh = sqlite3.connect(tmp_path / "runs.db", isolation_level=None)
    locked = _LockedAtFirst(fresh, times=3)
    journal._db = locked  # type: ignore[assignment]
    journal._use_wal(timeout=5.0)
    assert locked.switches == 4
    assert fresh.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    stuck = _LockedAtFirst(sqlite3.connect(tmp_path / "stuck.db"), times=10**6)
    journal._db = stuck  # type: ignore[assignment]
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        journal._use_wal(timeout=0.05)  # gives up once its timeout has passed
    fresh.close()
    stuck.real.close()
    journal._db = own
    journal.close()
