"""Runners in separate processes on one run id, on every journal backend: no tool runs
twice while its runner lives, and a runner killed with SIGKILL is replaced with nothing
lost. Tool runs are counted by their side effect (lines the tool appends to a file).

The worker is ``bench/_journal_worker.py`` (``bench_journal_kill.py`` runs it for the
20-trial numbers)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .journal_backends import BACKENDS, Backend, backend_for, new_run_id

ROOT = Path(__file__).resolve().parents[1]
WORKER = str(ROOT / "bench" / "_journal_worker.py")
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backend_for(request.param, tmp_path)


def _worker(
    backend: Backend,
    run_id: str,
    log: Path,
    *,
    n_calls: int,
    wait: float,
    start_at: float,
    tool_seconds: float,
) -> subprocess.Popen[str]:
    args = [
        WORKER,
        backend.spec(),
        run_id,
        str(log),
        str(n_calls),
        str(wait),
        str(start_at),
        str(tool_seconds),
    ]
    return subprocess.Popen(
        [sys.executable, *args], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _outcome(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _runs(log: Path, kind: str) -> Counter[int]:
    lines = log.read_text().splitlines() if log.exists() else []
    return Counter(int(line.split()[1]) for line in lines if line.startswith(kind))


@pytest.mark.parametrize(("processes", "wait"), [(2, 0.0), (3, 30.0), (4, 0.0)])
def test_processes_on_one_run_id_never_run_a_tool_twice(
    backend: Backend, tmp_path: Path, processes: int, wait: float
) -> None:
    run_id, log, n_calls = new_run_id("race"), tmp_path / "tools.log", 8
    start_at = time.time() + 2.5  # every worker imported and waiting, then all at once
    workers = [
        _worker(
            backend, run_id, log, n_calls=n_calls, wait=wait, start_at=start_at, tool_seconds=0.05
        )
        for _ in range(processes)
    ]
    outcomes = [_outcome(proc) for proc in workers]
    started, ended = _runs(log, "start"), _runs(log, "end")
    assert started == ended == Counter(range(n_calls))  # each tool ran exactly once
    ran = [o for o in outcomes if o.get("live_model_calls")]
    assert len(ran) == 1 and ran[0]["termination"] == "COMPLETED"
    assert ran[0]["live_model_calls"] == n_calls + 1
    others = [o for o in outcomes if o is not ran[0]]
    if wait:  # the others waited, then replayed the finished run from the journal
        assert all(o["termination"] == "COMPLETED" for o in others)
        assert all(o["tool_results"] == ran[0]["tool_results"] for o in others)
    else:  # refused at once (a worker that came after the end would replay it instead)
        locked = [o for o in others if o.get("error") == "RunLockedError"]
        assert len(locked) == len(others) or all("termination" in o for o in others)
        assert all(
            run_id in o["message"] and "held by another runner" in o["message"] for o in locked
        )
    assert backend.open().counts(run_id) == (n_calls + 1, n_calls)


def _kill_when_started(proc: subprocess.Popen[str], log: Path, tools: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sum(_runs(log, "start").values()) < tools:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)  # while that tool sleeps, before it ends
    proc.communicate(timeout=30)


@pytest.mark.parametrize("kill_at", [1, 4, 7])
def test_a_killed_runner_is_resumed_with_nothing_lost(
    backend: Backend, tmp_path: Path, kill_at: int
) -> None:
    run_id, log, n_calls = new_run_id("kill"), tmp_path / "tools.log", 8
    first = _worker(backend, run_id, log, n_calls=n_calls, wait=0, start_at=0, tool_seconds=0.1)
    _kill_when_started(first, log, kill_at)
    calls_before, results_before = backend.open().counts(run_id)
    assert results_before < n_calls
    # restarted at once: the dead holder's lease is not waited for on its own machine
    began = time.monotonic()
    second = _outcome(
        _worker(backend, run_id, log, n_calls=n_calls, wait=0, start_at=0, tool_seconds=0.1)
    )
    assert second["termination"] == "COMPLETED", second
    assert time.monotonic() - began < 20
    assert second["tool_results"] == [f"worked on item {n}" for n in range(n_calls)]
    ended = _runs(log, "end")
    # nothing lost, nothing finished twice; only the tool in flight at the kill ran again
    assert ended == Counter(range(n_calls))
    assert sum(_runs(log, "start").values()) - n_calls <= 1
    # journalled model calls were replayed, not sent again
    assert second["live_model_calls"] == n_calls + 1 - calls_before
    assert backend.open().counts(run_id) == (n_calls + 1, n_calls)


def test_a_fleet_takes_over_from_a_killed_worker(backend: Backend, tmp_path: Path) -> None:
    run_id, log, n_calls = new_run_id("fleet"), tmp_path / "tools.log", 8
    holder = _worker(backend, run_id, log, n_calls=n_calls, wait=0, start_at=0, tool_seconds=0.3)
    while sum(_runs(log, "start").values()) < 1:
        time.sleep(0.005)
    waiting = [
        _worker(backend, run_id, log, n_calls=n_calls, wait=60, start_at=0, tool_seconds=0.3)
        for _ in range(2)
    ]
    time.sleep(0.8)  # both waiting for the live holder
    started = sum(_runs(log, "start").values())
    assert started < n_calls - 1
    _kill_when_started(holder, log, started + 1)
    outcomes = [_outcome(proc) for proc in waiting]
    assert all(o["termination"] == "COMPLETED" for o in outcomes), outcomes
    assert _runs(log, "end") == Counter(range(n_calls))
    assert sum(_runs(log, "start").values()) - n_calls <= 1
    assert backend.open().counts(run_id) == (n_calls + 1, n_calls)
