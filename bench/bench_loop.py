"""Per-iteration overhead of the tool loop's guarding (issue 5).

A long coding-agent run is replayed through ``windowguard.ToolLoop`` with a scripted
``FakeProvider`` (no I/O): each iteration the "model" calls one tool whose result is a
real tool result from the corpus (cycled), so the transcript grows as a real run's
does. The same run is timed with a ``ContextWindowManager`` (fit + shrink + events +
bookkeeping on every send) and with ``manager=None`` (the loop alone); the difference
per iteration is the cost of guarding.

Run: ``bench/run bench/bench_loop.py`` (or ``python bench/bench_loop.py`` in an env
with windowguard installed).
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import windowguard as wg
from _corpus import _head, _turn_pool, environment
from windowguard.run.providers.fake import FakeCalls, FakeProvider


def _results() -> list[str]:
    out = []
    for turn in _turn_pool():
        for message in turn:
            if message.get("role") == "tool" and isinstance(message.get("content"), str):
                out.append(message["content"])
    return out


RESULTS = _results()


@wg.tool
def observe(i: int) -> str:
    """Return a real tool result from the corpus."""
    return RESULTS[i % len(RESULTS)]


def _run(iterations: int, manager: wg.ContextWindowManager | None) -> tuple[float, wg.RunResult]:
    script = [FakeCalls(("observe", {"i": i})) for i in range(iterations)] + ["done"]
    provider = FakeProvider(script, usage=lambda request: None)
    loop = wg.ToolLoop(provider, tools=[observe], manager=manager, max_iterations=iterations + 1)
    messages: list[Any] = [dict(m) for m in _head()]
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        result = loop.run(messages)
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    return elapsed, result


def main() -> None:
    print("## Tool-loop guarding overhead per iteration\n")
    print(environment())
    print()
    print(
        "| iterations | window | loop alone (µs/iter) | loop + manager (µs/iter) "
        "| guarding (µs/iter) | prunes | final transcript (msgs) | max sent (msgs) |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for iterations in (100, 1_000, 3_000):
        for window in (32_768, 131_072):
            alone, guarded, prunes, sent = [], [], 0, 0
            for _ in range(3):
                t0, _r0 = _run(iterations, None)
                manager = wg.ContextWindowManager(
                    model_info=wg.ModelInfo(window, tokenizer="o200k")
                )
                t1, r1 = _run(iterations, manager)
                alone.append(t0)
                guarded.append(t1)
                prunes = sum(1 for e in r1.events if e.kind == "transcript_pruned" and e.new_cut)  # type: ignore[attr-defined]
                sent = max(
                    (e.kept_messages for e in r1.events if e.kind == "transcript_pruned"),  # type: ignore[attr-defined]
                    default=len(r1.messages),
                )
                final = len(r1.messages)
            a = statistics.median(alone) / iterations * 1e6
            g = statistics.median(guarded) / iterations * 1e6
            print(
                f"| {iterations:,} | {window:,} | {a:.0f} | {g:.0f} | {g - a:.0f} | {prunes} "
                f"| {final:,} | {sent:,} |"
            )
    print(
        "\nMedian of 3 runs each. 'guarding' = (loop + manager) - (loop alone): fit, shrink, "
        "events and calibration bookkeeping per send. Tools return real corpus tool results "
        f"({len(RESULTS)} distinct, cycled); no I/O."
    )


if __name__ == "__main__":
    main()
