"""The SQLite lease survives wall-clock jumps: a lease of this process is timed on its
monotonic clock, a holder whose process still runs on this machine is never taken over
whatever the wall clocks say, and a holder whose process is gone, or that runs on
another machine, is taken over as before. Clocks are injected (``clock=``), 40 s ahead
or behind; holders in other processes are real processes."""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import windowguard as wg
import windowguard.run.journal.base as journal_base
from windowguard.run.journal.lease import machine_id, process_started
from windowguard.run.providers.base import ModelResponse
from windowguard.run.providers.fake import AsyncFakeProvider, FakeCalls, FakeProvider, ScriptItem

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process ids are checked on POSIX")

SRC = str(Path(__file__).resolve().parents[1] / "src")
ENV = {**os.environ, "PYTHONPATH": SRC}
TASK = [{"role": "user", "content": "Work on a."}]
RUN = "run-1"


def shifted(seconds: float) -> Callable[[], float]:
    """A wall clock ``seconds`` ahead of this machine's (behind when negative)."""
    return lambda: time.time() + seconds


class Clock:
    """A wall clock that a test moves."""

    def __init__(self) -> None:
        self.shift = 0.0

    def __call__(self) -> float:
        return time.time() + self.shift


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


# -- this process -------------------------------------------------------------------------


def test_a_lease_of_this_process_is_timed_on_its_monotonic_clock(db: Path) -> None:
    holder_clock, taker_clock = Clock(), Clock()
    holder = wg.SqliteJournal(db, clock=holder_clock)
    taker = wg.SqliteJournal(db, clock=taker_clock)
    lease = holder.acquire(RUN)
    for holder_shift, taker_shift in [(0, 40), (0, -40), (-40, 0), (-40, 40), (40, -40)]:
        holder_clock.shift, taker_clock.shift = holder_shift, taker_shift
        lease = holder.renew(lease)  # written by the holder's clock
        with pytest.raises(wg.RunLockedError) as caught:
            taker.acquire(RUN)
        assert caught.value.holder == lease.holder and not caught.value.lost
        claim = taker.lease(RUN)
        assert claim is not None and claim.live and claim.holder == lease.holder
        assert 0 < claim.seconds_left <= 30  # by the monotonic clock, not the wall
    holder.record_model_call(RUN, 0, _response("ok"))
    holder.release(lease)
    assert taker.acquire(RUN).holder != lease.holder
    holder.close()
    taker.close()


def test_a_lease_of_this_process_expires_on_its_monotonic_clock(db: Path) -> None:
    # its wall-clock expiry is an hour away, as a clock set ahead wrote it
    stale = wg.SqliteJournal(db, lease_seconds=0.3, clock=shifted(3600))
    fresh = wg.SqliteJournal(db)
    stale.begin_run(RUN, "d")
    stale.hold(RUN)  # taken, never driven nor renewed: as if its runner hung
    lease = fresh.acquire(RUN, wait=60)
    with pytest.raises(wg.RunLockedError) as caught:
        stale.record_model_call(RUN, 0, _response("stale"))
    assert caught.value.lost and caught.value.holder == lease.holder
    stale.close()
    fresh.close()


def _response(text: str) -> ModelResponse:
    return ModelResponse(message={"role": "assistant", "content": text}, text=text)


# -- another process on this machine -------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import sys, time
    import windowguard as wg
    from windowguard.run.providers.fake import FakeCalls, FakeProvider

    path, run_id, shift = sys.argv[1], sys.argv[2], float(sys.argv[3])

    @wg.tool
    def work(item: str) -> str:
        \"\"\"Work on an item.\"\"\"
        print("working", flush=True)
        sys.stdin.readline()  # until the test lets it finish
        return f"worked on {item}"

    journal = wg.SqliteJournal(path, lease_seconds=30, clock=lambda: time.time() + shift)
    script = [FakeCalls(("work", {"item": "a"})), "done"]
    loop = wg.ToolLoop(FakeProvider(script), tools=[work], journal=journal)
    result = loop.run([{"role": "user", "content": "Work on a."}], run_id=run_id)
    print(result.termination.name, flush=True)
    """
)


@pytest.mark.parametrize(
    ("holder_shift", "taker_shift"),
    [(0, 40), (-40, 0)],
    ids=["taker-40s-ahead", "holder-40s-behind"],
)
@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_running_holder_is_not_taken_over_whatever_the_clocks_say(
    db: Path, holder_shift: float, taker_shift: float, driver: str
) -> None:
    ran: list[str] = []

    @wg.tool
    def work(item: str) -> str:
        """Work on an item."""
        ran.append(item)
        return f"worked on {item}"

    with subprocess.Popen(
        [sys.executable, "-c", WORKER, str(db), RUN, str(holder_shift)],
        env=ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as worker:
        assert worker.stdin is not None and worker.stdout is not None
        assert worker.stdout.readline().strip() == "working"  # its tool is running
        journal = wg.SqliteJournal(db, clock=shifted(taker_shift))
        script: list[ScriptItem] = [FakeCalls(("work", {"item": "a"})), "done"]
        loop = wg.ToolLoop(FakeProvider(script), tools=[work], journal=journal)
        aloop = wg.AsyncToolLoop(AsyncFakeProvider(script), tools=[work], journal=journal)

        def run(*, run_id: str) -> wg.RunResult:
            if driver == "sync":
                return loop.run(TASK, run_id=run_id)
            return asyncio.run(aloop.run(TASK, run_id=run_id))

        with pytest.raises(wg.RunLockedError) as caught:
            run(run_id=RUN)
        assert caught.value.holder.startswith(f"{socket.gethostname()}:{worker.pid}:")
        assert caught.value.expires_at is None  # its wall-clock expiry has passed here
        claim = journal.lease(RUN)
        assert claim is not None and claim.running and claim.live and claim.seconds_left < 0
        assert claim.pid == worker.pid and claim.started == process_started(worker.pid)
        assert claim.started is not None  # Linux: its start is recorded beside its pid
        assert ran == []  # the tool did not run a second time here
        worker.stdin.write("go on\n")
        worker.stdin.flush()
        out, _ = worker.communicate(timeout=60)
    assert out.split() == ["COMPLETED"]
    replayed = run(run_id=RUN)  # finished: replayed from the journal
    assert replayed.termination is wg.TerminationReason.COMPLETED and ran == []
    result = journal.tool_result(RUN, 0, 0)
    assert result is not None and result.content == "worked on a"
    journal.close()


HOLDER = textwrap.dedent(
    """
    import os, sys, time
    import windowguard as wg
    import windowguard.run.journal.base as base

    path, run_id, shift, machine = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    if machine == "unknown":  # as without /proc: no boot id nor pid namespace
        base.machine_id = lambda: None
    journal = wg.SqliteJournal(path, lease_seconds=30, clock=lambda: time.time() + shift)
    journal.acquire(run_id)
    print("held", flush=True)
    if sys.argv[5] == "exit":
        os._exit(0)  # ends without giving the run back
    sys.stdin.readline()
    """
)


def _holder(db: Path, shift: float, *, machine: str, then: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db), RUN, str(shift), machine, then],
        env=ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_running_holder_is_known_by_host_name_without_a_machine_id(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_base, "machine_id", lambda: None)
    with _holder(db, 0, machine="unknown", then="wait") as proc:
        journal = wg.SqliteJournal(db, clock=shifted(40))
        claim = journal.lease(RUN)
        assert claim is not None and claim.machine is None and claim.running
        with pytest.raises(wg.RunLockedError, match=f":{proc.pid}:"):
            journal.acquire(RUN)
        proc.communicate("\n", timeout=60)
    journal.close()


@pytest.mark.parametrize("taker_shift", [40, -40])
@pytest.mark.parametrize("machine", ["known", "unknown"])
def test_a_holder_whose_process_ended_is_taken_over(
    db: Path, monkeypatch: pytest.MonkeyPatch, taker_shift: float, machine: str
) -> None:
    if machine == "unknown":
        monkeypatch.setattr(journal_base, "machine_id", lambda: None)
    with _holder(db, 0, machine=machine, then="exit") as proc:
        proc.wait(timeout=60)  # a finished process: its pid runs no more
    journal = wg.SqliteJournal(db, clock=shifted(taker_shift))
    claim = journal.lease(RUN)
    assert claim is not None and claim.pid == proc.pid and not claim.running
    lease = journal.acquire(RUN)
    assert lease.holder != claim.holder
    assert journal.lease(RUN) is not None
    journal.close()


# -- a pid given to a later process ----------------------------------------------------------

ALIVE = "import sys; print('up', flush=True); sys.stdin.readline()"


def _alive() -> subprocess.Popen[str]:
    """A process that runs until its stdin is closed: a live pid of this machine."""
    proc = subprocess.Popen(
        [sys.executable, "-c", ALIVE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
    return proc


def _lease_row(db: Path, pid: int, started: int | None, expires: float) -> str:
    """Write the run's lease row as a holder of this machine with ``pid`` would."""
    holder = f"{socket.gethostname()}:{pid}:f00d"
    other = sqlite3.connect(db, isolation_level=None)
    other.execute(
        "INSERT OR REPLACE INTO leases (run_id, holder, machine, pid, expires, started) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (RUN, holder, machine_id(), pid, expires, started),
    )
    other.close()
    return holder


needs_proc = pytest.mark.skipif(
    process_started(os.getpid()) is None, reason="process start times come from /proc"
)


@needs_proc
@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    expires_in=st.floats(min_value=-7200, max_value=7200),
    taker_shift=st.floats(min_value=-7200, max_value=7200),
    same_process=st.booleans(),
)
def test_only_the_process_that_took_the_lease_holds_it_by_its_pid(
    tmp_path_factory: pytest.TempPathFactory,
    expires_in: float,
    taker_shift: float,
    same_process: bool,
) -> None:
    """Whatever the row's expiry and the taker's clock: a running holder keeps the run;
    a later process given its pid (another start time) does not, and it is taken at once."""
    db = tmp_path_factory.mktemp("pid") / "runs.db"
    wg.SqliteJournal(db).close()
    with _alive() as proc:
        started = process_started(proc.pid)
        assert started is not None
        row_start = started if same_process else started - 1  # its pid, an earlier start
        holder = _lease_row(db, proc.pid, row_start, time.time() + expires_in)
        journal = wg.SqliteJournal(db, clock=shifted(taker_shift))
        claim = journal.lease(RUN)
        assert claim is not None and claim.started == row_start
        assert claim.running is same_process
        if same_process:
            with pytest.raises(wg.RunLockedError) as caught:
                journal.acquire(RUN)
            assert caught.value.holder == holder
        else:
            lease = journal.acquire(RUN)  # at once: no waiting for the row's expiry
            assert lease.holder != holder
            claim = journal.lease(RUN)
            assert claim is not None and claim.started == process_started(os.getpid())
        journal.close()
        proc.communicate("", timeout=60)


@needs_proc
def test_a_row_without_a_start_time_goes_by_the_pid_alone(db: Path) -> None:
    wg.SqliteJournal(db).close()
    with _alive() as proc:
        holder = _lease_row(db, proc.pid, None, time.time() - 60)  # as 0.1 wrote it
        journal = wg.SqliteJournal(db, clock=shifted(40))
        claim = journal.lease(RUN)
        assert claim is not None and claim.started is None and claim.running
        with pytest.raises(wg.RunLockedError, match=holder):
            journal.acquire(RUN)
        proc.communicate("", timeout=60)
    assert journal.acquire(RUN).holder != holder  # its process ended
    journal.close()


# -- another machine ------------------------------------------------------------------------


def test_a_holder_on_another_machine_goes_by_the_wall_clock(db: Path) -> None:
    wg.SqliteJournal(db).close()
    holder = "elsewhere:4242:beef"
    other = sqlite3.connect(db, isolation_level=None)
    other.execute(  # a runner on another machine sharing the file (a network disk)
        "INSERT INTO leases (run_id, holder, machine, pid, expires) VALUES (?, ?, ?, ?, ?)",
        (RUN, holder, "another-boot/4026531836", 4242, time.time() + 30),
    )
    other.close()
    on_time = wg.SqliteJournal(db)
    with pytest.raises(wg.RunLockedError, match=holder):
        on_time.acquire(RUN)
    claim = on_time.lease(RUN)
    assert claim is not None and claim.live and not claim.running
    ahead = wg.SqliteJournal(db, clock=shifted(40))
    assert ahead.acquire(RUN).holder != holder  # expired by its clock: taken over
    on_time.close()
    ahead.close()


# -- a run held and left ----------------------------------------------------------------------

TAKER = textwrap.dedent(
    """
    import sys
    import windowguard as wg

    journal = wg.SqliteJournal(sys.argv[1])
    lease = journal.acquire(sys.argv[2], wait=float(sys.argv[3]))
    print("took", lease.holder, flush=True)
    """
)


def test_a_run_held_but_left_is_given_back_to_other_processes(db: Path) -> None:
    journal = wg.SqliteJournal(db, lease_seconds=0.3)
    journal.begin_run(RUN, "d")
    journal.hold(RUN)  # this process runs on, never driving the run
    taker = subprocess.run(
        [sys.executable, "-c", TAKER, str(db), RUN, "60"],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert taker.returncode == 0, taker.stderr
    assert taker.stdout.startswith("took ")
    with pytest.raises(wg.RunLockedError) as caught:
        journal.record_model_call(RUN, 0, _response("late"))
    assert caught.value.lost
    journal.close()


def test_a_run_whose_release_failed_is_given_back_later(db: Path) -> None:
    journal = wg.SqliteJournal(db, lease_seconds=0.3, timeout=0.05)
    other = sqlite3.connect(db, isolation_level=None)
    with journal.keep(RUN):
        other.execute("BEGIN IMMEDIATE")  # another process keeps the file locked...
    other.execute("ROLLBACK")  # ...while the run is given back, then lets go
    other.close()
    claim = journal.lease(RUN)
    assert claim is not None and claim.pid == os.getpid()  # still there: release failed
    taker = subprocess.run(
        [sys.executable, "-c", TAKER, str(db), RUN, "60"],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert taker.returncode == 0, taker.stderr  # the journal's timer gave it back
    journal.close()
