"""kill -9 trials on the run journals: a journalled run killed mid-tool and started again.

Each trial starts ``_journal_worker.py`` (a ToolLoop asking for ``--calls`` tool calls,
each tool appending ``start``/``end`` lines to a log and sleeping ``--tool-seconds``),
kills it with SIGKILL while its k-th tool sleeps (k cycles over the calls), and starts
it again on the same journal and run id, at once. It counts:

- **lost**: tool results missing from the restarted run's transcript or the journal;
- **finished twice**: tools whose ``end`` line appears twice (a finished tool run again);
- **in flight re-run**: tools started before the kill and run again (at-least-once:
  the one the kill interrupted);
- **re-sent calls**: model calls the restart sent although the journal held them;
- **restart s**: how long the restarted run took, lease hand-over included (the killed
  runner's process is gone, so its lease is not waited for).

    bench/run bench_journal_kill.py                      # SQLite, and PostgreSQL if reachable
    bench/run bench_journal_kill.py --journal postgres --trials 20

PostgreSQL is reached at ``--postgres`` (default: ``WINDOWGUARD_TEST_POSTGRES``;
``bash .ci/run`` shows how to start a private server).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WORKER = str(HERE / "_journal_worker.py")
ENV = {**os.environ, "PYTHONPATH": str(HERE.parent / "src")}


def _runs(log: Path, kind: str) -> Counter[int]:
    lines = log.read_text().splitlines() if log.exists() else []
    return Counter(int(line.split()[1]) for line in lines if line.startswith(kind))


def _start(
    spec: str, run_id: str, log: Path, calls: int, tool_seconds: float
) -> subprocess.Popen[str]:
    args = [WORKER, spec, run_id, str(log), str(calls), "0", "0", str(tool_seconds)]
    return subprocess.Popen(
        [sys.executable, *args], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _counts(spec: str, run_id: str) -> tuple[int, int]:
    sys.path.insert(0, str(HERE.parent / "src"))
    import windowguard as wg

    journal = wg.SqliteJournal(spec[7:]) if spec.startswith("sqlite:") else wg.PostgresJournal(spec)
    with journal:
        return journal.counts(run_id)


def trial(spec: str, kill_at: int, calls: int, tool_seconds: float, folder: Path) -> dict[str, Any]:
    run_id, log = f"kill-{uuid.uuid4().hex[:12]}", folder / f"{uuid.uuid4().hex}.log"
    first = _start(spec, run_id, log, calls, tool_seconds)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sum(_runs(log, "start").values()) < kill_at:
        time.sleep(0.002)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    calls_before, _ = _counts(spec, run_id)
    began = time.monotonic()
    out, err = _start(spec, run_id, log, calls, tool_seconds).communicate(timeout=120)
    restart_seconds = time.monotonic() - began
    outcome = json.loads(out.strip().splitlines()[-1]) if out.strip() else {"error": err[-500:]}
    results = outcome.get("tool_results", [])
    journal_calls, journal_results = _counts(spec, run_id)
    expected = [f"worked on item {n}" for n in range(calls)]
    started, ended = _runs(log, "start"), _runs(log, "end")
    return {
        "completed": outcome.get("termination") == "COMPLETED",
        "error": outcome.get("error"),
        "lost": sum(1 for r in expected if r not in results) + (calls - journal_results),
        "wrong": results != expected or journal_calls != calls + 1,
        "finished_twice": sum(c - 1 for c in ended.values()),
        "in_flight_rerun": sum(c - 1 for c in started.values()),
        "resent_calls": outcome.get("live_model_calls", 0) - (calls + 1 - calls_before),
        "restart_seconds": restart_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--journal", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--tool-seconds", type=float, default=0.1)
    parser.add_argument("--postgres", default=os.environ.get("WINDOWGUARD_TEST_POSTGRES"))
    args = parser.parse_args()
    kinds = ["sqlite", "postgres"] if args.journal == "both" else [args.journal]
    print(
        f"{args.trials} trials per journal, {args.calls} tool calls per run, "
        f"tools of {args.tool_seconds} s\n"
    )
    columns = [
        "journal",
        "trials",
        "completed",
        "lost",
        "finished twice",
        "in flight re-run",
        "re-sent calls",
        "restart s (median / max)",
    ]
    print("| " + " | ".join(columns) + " |")
    print("|" + " --- |" * len(columns))
    for kind in kinds:
        if kind == "postgres" and not args.postgres:
            print("| postgres | skipped: no server (--postgres URL, WINDOWGUARD_TEST_POSTGRES) |")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            spec = f"sqlite:{folder / 'runs.db'}" if kind == "sqlite" else args.postgres
            rows = [
                trial(spec, 1 + i % (args.calls - 1), args.calls, args.tool_seconds, folder)
                for i in range(args.trials)
            ]
        errors = [r["error"] for r in rows if r["error"]]
        seconds = [r["restart_seconds"] for r in rows]
        print(
            f"| {kind} | {len(rows)} | {sum(r['completed'] for r in rows)} "
            f"| {sum(r['lost'] for r in rows)} | {sum(r['finished_twice'] for r in rows)} "
            f"| {sum(r['in_flight_rerun'] for r in rows)} | {sum(r['resent_calls'] for r in rows)} "
            f"| {statistics.median(seconds):.2f} / {max(seconds):.2f} |"
        )
        if any(r["wrong"] for r in rows) or errors:
            print(f"{kind}: transcripts differ from the expected one; errors: {errors[:3]}")


if __name__ == "__main__":
    main()
