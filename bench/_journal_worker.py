"""One journalled tool-loop run in its own process, for the kill -9 and concurrency trials.

    python _journal_worker.py JOURNAL RUN_ID LOG N_CALLS WAIT START_AT TOOL_SECONDS

JOURNAL is ``sqlite:PATH`` or a PostgreSQL URL. The scripted model asks for tool
``work(n)`` once per item, n = 0 .. N_CALLS-1, then answers; it reads how far the run got
from the transcript it is sent, so a restarted run carries on where the journal left it.
Every tool run appends ``start n PID`` and ``end n PID`` lines to LOG: the side effect
that counts tool runs. The worker sleeps until START_AT (epoch seconds) so several
workers race for the run. WAIT < 0 opens the journal without ``wait=`` (windowguard 0.1
has none). It prints one JSON line: the run's outcome, or the error that ended it.

Used by ``bench_journal_kill.py`` and ``tests/test_journal_processes.py``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import windowguard as wg
from windowguard.run.providers.base import ModelRequest
from windowguard.run.providers.fake import FakeCalls, FakeProvider, ScriptItem


def main(argv: list[str]) -> None:
    spec, run_id, log_path = argv[0], argv[1], argv[2]
    n_calls, wait, start_at, tool_seconds = (
        int(argv[3]),
        float(argv[4]),
        float(argv[5]),
        float(argv[6]),
    )
    options: dict[str, Any] = {} if wait < 0 else {"wait": wait}
    journal: Any
    if spec.startswith("sqlite:"):
        journal = wg.SqliteJournal(spec.removeprefix("sqlite:"), **options)
    else:
        journal = wg.PostgresJournal(spec, **options)

    @wg.tool
    def work(n: int) -> str:
        """Work on one item.

        Args:
            n: the item.
        """
        with open(log_path, "a") as log:
            log.write(f"start {n} {os.getpid()}\n")
        time.sleep(tool_seconds)
        with open(log_path, "a") as log:
            log.write(f"end {n} {os.getpid()}\n")
        return f"worked on item {n}"

    def script(request: ModelRequest) -> ScriptItem:
        done = sum(1 for m in request.messages if m.get("role") == "tool")
        return FakeCalls(("work", {"n": done})) if done < n_calls else "all items done"

    provider = FakeProvider(script)
    loop = wg.ToolLoop(provider, tools=[work], journal=journal, max_iterations=n_calls + 5)
    time.sleep(max(0.0, start_at - time.time()))
    try:
        result = loop.run([{"role": "user", "content": "work on every item"}], run_id=run_id)
    except Exception as exc:  # RunLockedError, named by class: windowguard 0.1 has none
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)
        return
    tool_results = [m["content"] for m in result.messages if m.get("role") == "tool"]
    print(
        json.dumps(
            {
                "termination": result.termination.name,
                "tool_results": tool_results,
                "live_model_calls": provider.calls,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
