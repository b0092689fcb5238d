"""The journal contract, run against every backend (SQLite, PostgreSQL): rows, digests,
damaged rows, and the run lease (one runner at a time, waiting, expiry, renewal)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import windowguard as wg
from windowguard.run.journal import RunState, tool_digest, transcript_digest
from windowguard.run.providers.base import ModelResponse, ToolCall, ToolResult, ToolSpec, Usage
from windowguard.run.providers.fake import AsyncFakeProvider, FakeCalls, FakeProvider

from .journal_backends import BACKENDS, Backend, backend_for, new_run_id

TASK = [{"role": "user", "content": "Fix the bug."}]
SRC = str(Path(__file__).resolve().parents[1] / "src")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backend_for(request.param, tmp_path)


def _response(text: str = "ok", calls: int = 0) -> ModelResponse:
    return ModelResponse(
        message={"role": "assistant", "content": text},
        text=text,
        tool_calls=tuple(ToolCall(id=f"c{i}", name="t", arguments="{}") for i in range(calls)),
        usage=Usage(input_tokens=10, output_tokens=2),
        stop_reason="stop",
    )


def _tool(description: str = "Read a file.", *, extra: bool = False) -> wg.Tool:
    def read_file(path: str) -> str:
        return f"contents of {path}"

    read_file.__doc__ = description
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    }
    if extra:
        parameters["properties"]["encoding"] = {"type": "string"}
    return wg.Tool(fn=read_file, name="read_file", description=description, parameters=parameters)


# -- rows ---------------------------------------------------------------------------------


def test_rows_round_trip(backend: Backend) -> None:
    journal, run = backend.open(), new_run_id()
    assert journal.begin_run(run, "d1") is False
    assert journal.begin_run(run, "d1") is True
    assert journal.model_call(run, 0) is None and journal.tool_result(run, 0, 0) is None
    journal.record_model_call(run, 0, _response(calls=1))
    journal.record_tool_result(run, 0, 0, ToolResult(call_id="c0", name="t", content="r\x00é"))
    assert journal.model_call(run, 0) == _response(calls=1)
    assert journal.tool_result(run, 0, 0) == ToolResult(call_id="c0", name="t", content="r\x00é")
    journal.record_model_call(run, 0, _response("again"))  # a re-sent call replaces its row
    assert journal.model_call(run, 0) == _response("again")
    assert journal.counts(run) == (1, 1)
    assert journal.termination(run) is None and journal.run_state(run) is None
    state = RunState(
        run_id=run,
        messages=tuple(TASK),
        step=1,
        iteration=1,
        pending=(ToolCall(id="c0", name="t", arguments="{}"),),
        completed=(),
        suspended_call="c0",
        reason="approval",
        data={"k": [1, 2]},
    )
    journal.finish_run(run, "SUSPENDED", state)
    assert journal.termination(run) == "SUSPENDED"
    assert journal.run_state(run) == state
    other = backend.open()  # another runner, another process: the same rows
    assert other.model_call(run, 0) == _response("again") and other.counts(run) == (1, 1)


def test_a_reused_run_id_with_another_start_is_refused(backend: Backend) -> None:
    journal, run = backend.open(), new_run_id()
    journal.begin_run(run, "d1")
    with pytest.raises(wg.JournalMismatchError, match="different transcript") as caught:
        journal.begin_run(run, "d2")
    assert caught.value.run_id == run and isinstance(caught.value, wg.JournalError)


def test_a_tool_whose_schema_changed_is_named(backend: Backend) -> None:
    journal, run = backend.open(), new_run_id()
    old = _tool()
    digest = transcript_digest(TASK, None, ["read_file"], "m")
    journal.begin_run(run, digest, tools=[old.spec])
    assert journal.begin_run(run, digest, tools=[_tool().spec]) is True  # same schema
    for changed in (_tool("Read a file, fast."), _tool(extra=True)):
        with pytest.raises(wg.JournalMismatchError, match="tool 'read_file'") as caught:
            journal.begin_run(run, digest, tools=[changed.spec])
        assert caught.value.tools == ("read_file",)
        assert "different schema" in str(caught.value)
    extra = ToolSpec(name="grep", description="Search.", parameters={"type": "object"})
    with pytest.raises(wg.JournalMismatchError, match="without tool 'grep'"):
        journal.begin_run(run, digest, tools=[old.spec, extra])
    with pytest.raises(wg.JournalMismatchError, match="with tool 'read_file'"):
        journal.begin_run(run, digest, tools=[])


def test_the_loop_refuses_a_journalled_run_whose_tool_changed(backend: Backend) -> None:
    journal, run = backend.open(), new_run_id()
    first = wg.ToolLoop(FakeProvider(["done"]), tools=[_tool()], journal=journal)
    assert first.run(TASK, run_id=run).termination is wg.TerminationReason.COMPLETED
    again = wg.ToolLoop(FakeProvider([]), tools=[_tool(extra=True)], journal=journal)
    with pytest.raises(wg.JournalMismatchError, match=r"schema .* for tool 'read_file'"):
        again.run(TASK, run_id=run)
    assert journal.lease(run) is None  # refused before taking the run


def test_a_run_journalled_before_tool_digests_adopts_them(backend: Backend) -> None:
    journal, run = backend.open(), new_run_id()
    journal.begin_run(run, "d1")
    backend.execute(f"UPDATE {backend.table('runs')} SET tools = NULL WHERE run_id = ?", (run,))
    assert journal.begin_run(run, "d1", tools=[_tool().spec]) is True
    with pytest.raises(wg.JournalMismatchError, match="tool 'read_file'"):
        journal.begin_run(run, "d1", tools=[_tool(extra=True).spec])
    assert tool_digest(_tool().spec) != tool_digest(_tool(extra=True).spec)


@pytest.mark.parametrize(
    "damage",
    ["{not json", "[1, 2]", '{"text": "no message"}', '"a string"', ""],
)
def test_a_damaged_row_raises_a_journal_error_naming_it(backend: Backend, damage: str) -> None:
    journal, run = backend.open(), new_run_id()
    journal.begin_run(run, "d1")
    journal.record_model_call(run, 3, _response())
    journal.record_tool_result(run, 3, 1, ToolResult(call_id="c", name="t", content="x"))
    calls, results = backend.table("model_calls"), backend.table("tool_results")
    backend.execute(f"UPDATE {calls} SET response = ? WHERE run_id = ?", (damage, run))
    backend.execute(f"UPDATE {results} SET result = ? WHERE run_id = ?", (damage, run))
    with pytest.raises(wg.JournalError, match=f"model call 3 of run '{run}'") as caught:
        journal.model_call(run, 3)
    assert not isinstance(caught.value, json.JSONDecodeError)
    assert "damaged" in str(caught.value)
    with pytest.raises(wg.JournalError, match=f"tool result 1 of model call 3 of run '{run}'"):
        journal.tool_result(run, 3, 1)
    backend.execute(
        f"UPDATE {backend.table('runs')} SET state = ?, tools = ? WHERE run_id = ?",
        (damage, "{not json", run),
    )
    with pytest.raises(wg.JournalError, match="suspended state"):
        journal.run_state(run)
    with pytest.raises(wg.JournalError, match="tool digests"):
        journal.begin_run(run, "d1")


def test_a_replay_over_a_damaged_row_fails_with_the_journal_error(backend: Backend) -> None:
    journal, run = backend.open(), new_run_id()
    loop = wg.ToolLoop(
        FakeProvider([FakeCalls(("read_file", {"path": "a"})), "done"]),
        tools=[_tool()],
        journal=journal,
    )
    loop.run(TASK, run_id=run)
    backend.execute(
        f"UPDATE {backend.table('model_calls')} SET response = ? WHERE run_id = ?", ("{", run)
    )
    again = wg.ToolLoop(FakeProvider([]), tools=[_tool()], journal=backend.open())
    with pytest.raises(wg.JournalError, match="damaged row: model call 0"):
        again.run(TASK, run_id=run)
    assert journal.lease(run) is None  # the failed runner gave the run back


def test_a_file_that_is_not_a_database_is_a_journal_error(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(
        wg.JournalError, match=re.escape(f"the journal file {path} is not a SQLite")
    ):
        wg.SqliteJournal(path)


def test_an_unreachable_postgres_is_a_journal_error() -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(wg.JournalError, match="cannot reach") as caught:
        wg.PostgresJournal("postgresql://someone:s3cret@127.0.0.1:1/nowhere", connect_timeout=1)
    assert "s3cret" not in str(caught.value)
    assert "postgresql://someone@127.0.0.1:1/nowhere" in str(caught.value)


# -- the lease ----------------------------------------------------------------------------


def test_a_second_runner_is_refused_at_once_naming_holder_and_expiry(backend: Backend) -> None:
    first, second, run = backend.open(), backend.open(lease_seconds=5), new_run_id()
    held = first.acquire(run)
    assert held.holder.split(":")[1] == str(os.getpid())
    started = time.monotonic()
    with pytest.raises(wg.RunLockedError) as caught:
        second.acquire(run)
    assert time.monotonic() - started < 1.0
    error = caught.value
    assert error.run_id == run and error.holder == held.holder and not error.lost
    assert (
        error.expires_at is not None
        and abs((error.expires_at - held.expires_at).total_seconds()) < 1
    )
    assert run in str(error) and held.holder in str(error) and "wait=" in str(error)
    assert isinstance(error, wg.JournalError) and isinstance(error, wg.WindowGuardError)
    claim = second.lease(run)
    assert claim is not None and claim.holder == held.holder and 25 < claim.seconds_left <= 30
    first.release(held)
    assert second.lease(run) is None
    assert second.acquire(run).holder != held.holder


def test_a_second_runner_waits_for_the_run(backend: Backend) -> None:
    first, second, run = backend.open(), backend.open(wait=10), new_run_id()
    held = first.acquire(run)
    threading.Timer(0.4, first.release, args=(held,)).start()
    started = time.monotonic()
    lease = second.acquire(run)
    assert 0.3 < time.monotonic() - started < 5 and lease.holder != held.holder
    with pytest.raises(wg.RunLockedError):
        first.acquire(run, wait=0.3)


def test_an_expired_lease_is_taken_over_and_its_stale_writer_refused(backend: Backend) -> None:
    stale, fresh, run = backend.open(lease_seconds=0.3), backend.open(), new_run_id()
    stale.begin_run(run, "d")
    stale.hold(run)  # taken, never driven, so never renewed: as if the runner hung
    started = time.monotonic()
    lease = fresh.acquire(run, wait=5)
    assert 0.2 < time.monotonic() - started < 3
    fresh.record_model_call(run, 0, _response("fresh"))
    with pytest.raises(wg.RunLockedError, match=r"lease .* expired") as caught:
        stale.record_model_call(run, 0, _response("stale"))
    assert caught.value.lost and caught.value.holder == lease.holder
    assert fresh.model_call(run, 0) == _response("fresh")  # the stale write changed nothing
    with pytest.raises(wg.RunLockedError):
        stale.finish_run(run, "COMPLETED")
    assert fresh.termination(run) is None


def test_writes_without_a_lease_are_refused_while_someone_holds_the_run(backend: Backend) -> None:
    holder, outsider, run = backend.open(), backend.open(), new_run_id()
    holder.begin_run(run, "d")
    holder.acquire(run)
    with pytest.raises(wg.RunLockedError):
        outsider.record_tool_result(run, 0, 0, ToolResult(call_id="c", name="t", content="x"))


@wg.tool
def slow_tool(seconds: float) -> str:
    """Sleeps."""
    time.sleep(seconds)
    return "slept"


def test_a_long_tool_keeps_the_run_held_by_renewal(backend: Backend) -> None:
    journal, rival, run = backend.open(lease_seconds=0.4), backend.open(), new_run_id()
    provider = FakeProvider([FakeCalls(("slow_tool", {"seconds": 1.5})), "done"])
    loop = wg.ToolLoop(provider, tools=[slow_tool], journal=journal)
    refusals: list[wg.RunLockedError] = []
    result: list[wg.RunResult] = []
    worker = threading.Thread(target=lambda: result.append(loop.run(TASK, run_id=run)))
    worker.start()
    time.sleep(0.2)
    while worker.is_alive():
        try:
            rival.acquire(run)
        except wg.RunLockedError as exc:
            refusals.append(exc)
        else:  # pragma: no cover - the failure this test exists to catch
            pytest.fail("the run was taken while its long tool was running")
        time.sleep(0.1)
    worker.join()
    assert result[0].termination is wg.TerminationReason.COMPLETED
    assert len(refusals) >= 8  # 1.5 s of tool, ~4 lease lengths, never free
    assert journal.lease(run) is None  # finished: released


class Crash(BaseException):
    """The process dying mid-run, as far as the loop can tell."""


@wg.tool
def ask(question: str) -> str:
    """Needs a human."""
    raise wg.SuspendRun("needs a human", {"question": question})


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_lease_is_given_back_when_a_run_finishes_suspends_or_raises(
    backend: Backend, mode: str
) -> None:
    journal, other = backend.open(), backend.open()

    def run(script: list[Any], run_id: str) -> wg.RunResult:
        if mode == "sync":
            loop = wg.ToolLoop(FakeProvider(script), tools=[ask], journal=journal)
            return loop.run(TASK, run_id=run_id)
        aloop = wg.AsyncToolLoop(AsyncFakeProvider(script), tools=[ask], journal=journal)
        return asyncio.run(aloop.run(TASK, run_id=run_id))

    done, paused, crashed = new_run_id(), new_run_id(), new_run_id()
    assert run(["done"], done).termination is wg.TerminationReason.COMPLETED
    suspended = run([FakeCalls(("ask", {"question": "ok?"}))], paused)
    assert suspended.termination is wg.TerminationReason.SUSPENDED
    with pytest.raises(Crash):
        run([Crash()], crashed)
    for run_id in (done, paused, crashed):
        assert journal.lease(run_id) is None
        other.release(other.acquire(run_id))  # free for the next runner at once
    assert journal.run_state(paused) == suspended.state


def test_resume_takes_the_run_too(backend: Backend) -> None:
    journal, rival, run = backend.open(), backend.open(), new_run_id()
    loop = wg.ToolLoop(
        FakeProvider([FakeCalls(("ask", {"question": "ok?"})), "done"]),
        tools=[ask],
        journal=journal,
    )
    paused = loop.run(TASK, run_id=run)
    assert paused.state is not None
    held = rival.acquire(run)
    with pytest.raises(wg.RunLockedError, match=held.holder):
        loop.resume(paused.state, results={paused.state.suspended_call: "yes"})
    rival.release(held)
    done = loop.resume(paused.state, results={paused.state.suspended_call: "yes"})
    assert done.termination is wg.TerminationReason.COMPLETED
    assert journal.lease(run) is None


def test_two_loops_in_one_process_on_one_run_id(backend: Backend) -> None:
    journal, run = backend.open(), new_run_id()
    gate = threading.Event()
    ran: list[int] = []

    @wg.tool
    def work(n: int) -> str:
        """Works."""
        ran.append(n)
        gate.wait(5)
        return "done"

    script = [FakeCalls(("work", {"n": 1})), "finished"]
    first = wg.ToolLoop(FakeProvider(script), tools=[work], journal=journal)
    results: list[wg.RunResult] = []
    thread = threading.Thread(target=lambda: results.append(first.run(TASK, run_id=run)))
    thread.start()
    while not ran:
        time.sleep(0.01)
    # the same journal object, and the same loop object, are no way around the lease
    for loop in (wg.ToolLoop(FakeProvider(script), tools=[work], journal=journal), first):
        with pytest.raises(wg.RunLockedError, match=str(os.getpid())):
            loop.run(TASK, run_id=run)
    gate.set()
    thread.join()
    assert results[0].termination is wg.TerminationReason.COMPLETED and ran == [1]


def test_an_async_runner_waits_without_blocking_its_event_loop(backend: Backend) -> None:
    holder, run = backend.open(), new_run_id()
    journal = backend.open(wait=10)
    held = holder.acquire(run)

    async def main() -> tuple[wg.RunResult, int]:
        ticks = 0
        threading.Timer(0.5, holder.release, args=(held,)).start()
        loop = wg.AsyncToolLoop(AsyncFakeProvider(["done"]), journal=journal)
        task = asyncio.ensure_future(loop.run(TASK, run_id=run))
        while not task.done():
            ticks += 1
            await asyncio.sleep(0.02)
        return task.result(), ticks

    result, ticks = asyncio.run(main())
    assert result.termination is wg.TerminationReason.COMPLETED and ticks >= 10


def test_a_stream_holds_the_run_while_iterated(backend: Backend) -> None:
    journal, rival, run = backend.open(), backend.open(), new_run_id()
    loop = wg.ToolLoop(FakeProvider(["the answer"]), journal=journal)
    stream = loop.stream(TASK, run_id=run)
    with pytest.raises(wg.RunLockedError):
        rival.acquire(run)
    items = list(stream)
    assert items and stream.result is not None and journal.lease(run) is None


HOLDER = textwrap.dedent(
    """
    import sys, time
    import windowguard as wg
    spec, run_id = sys.argv[1:3]
    journal = (wg.SqliteJournal(spec[7:], lease_seconds=600) if spec.startswith("sqlite:")
               else wg.PostgresJournal(spec, lease_seconds=600))
    journal.acquire(run_id)
    print("held", flush=True)
    time.sleep(600)
    """
)


def test_a_dead_holder_on_this_machine_is_replaced_at_once(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    run = new_run_id()
    env = {**os.environ, "PYTHONPATH": SRC}
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, backend.spec(), run],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        journal = backend.open()
        with pytest.raises(wg.RunLockedError, match=f":{proc.pid}:"):
            journal.acquire(run)  # alive: refused, though it is a lease of 600 s
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    claim = journal.lease(run)
    assert claim is not None and claim.live and claim.pid == proc.pid
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="windowguard"):
        lease = journal.acquire(run)
    assert time.monotonic() - started < 1.0 and lease.holder != claim.holder
    assert any("no longer running" in r.getMessage() for r in caplog.records)


def test_bad_lease_settings_are_named(tmp_path: Path) -> None:
    with pytest.raises(wg.ConfigurationError, match="lease_seconds"):
        wg.SqliteJournal(tmp_path / "a.db", lease_seconds=0)
    with pytest.raises(wg.ConfigurationError, match="wait"):
        wg.SqliteJournal(tmp_path / "a.db", wait=-1)


def test_the_journal_module_keeps_its_names() -> None:
    from windowguard.run.journal import SqliteJournal as Sqlite
    from windowguard.run.journal import jsonable

    assert Sqlite is wg.SqliteJournal and jsonable((1, 2)) == [1, 2]
    assert issubclass(wg.PostgresJournal, wg.Journal) and issubclass(Sqlite, wg.Journal)
    assert issubclass(wg.RunLockedError, wg.JournalError)
    assert issubclass(wg.JournalMismatchError, wg.JournalError)
