"""Benchmark (issue 19): how often each edit policy rewrites the prompt in a long loop.

A 300-send coding loop, as in ``tests/test_edits_e2e.py`` but without HTTP: one
assistant step ("Step n: reading src/module_x/file_n.py next.") and one ``read_file``
call per send, each result appended whole; every send is fitted by a
``ContextWindowManager(model_info=ModelInfo(window, tokenizer="o200k"), edits=...)`` with
``max_tokens=1024`` and the exact prompt tokens of the previous send as ``last_usage``
(o200k, OpenAI's accounting: ``windowguard.accounting.templates.count_prompt``). Two workloads:

* **corpus**: each read returns the next real observation of the OpenHands and SWE-agent
  runs in ``../shared/corpus`` (155 outputs, mean 430 tokens, median 80, largest 7,079);
* **heavy**: synthetic file reads of 20, 60, 140 or 300 lines (mean about 1,900 tokens,
  four times the corpus's mean; a 300-line read is a quarter of a 16k budget).

Columns: *filled at*: the first send that does not extend the previous one byte for byte
(the window is full); *extends*: the share of later sends that do (what a prefix cache
reuses whole); *rewrites by*: what changed the prefix on the other sends (a new cut of
whole turns, a block of clears, a clamp); *kept turns*: the turns the last request kept
(whole or cleared); *mean prompt / budget* after the window filled; *overflows*:
prompt + ``max_tokens`` > window (must be 0).

    bench/run bench_prefix.py [--sends 300]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import windowguard as wg
from _corpus import CORPUS_DIR
from windowguard.accounting.local import local_tokenizer
from windowguard.accounting.templates import count_prompt

Message = dict[str, Any]
MAX_TOKENS = 1_024
TOOLS: list[Message] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "the file's path"}},
                "required": ["path"],
            },
        },
    }
]
TASK: list[Message] = [
    {"role": "system", "content": "You are a careful coding agent. Use the tools."},
    {"role": "user", "content": "TASK-e2e: run the test suite and report every failure."},
]


def observations() -> list[str]:
    """Every tool output of the OpenHands and SWE-agent runs, in file order."""
    found: list[str] = []
    for name in ("openhands", "swe-agent"):
        path = CORPUS_DIR / f"{name}.jsonl"
        if not path.exists():
            raise SystemExit(f"no corpus at {path}: the corpus workload needs ../shared")
        for line in path.read_text(encoding="utf-8").splitlines():
            for message in json.loads(line).get("messages") or []:
                content = message.get("content") if message.get("role") == "tool" else None
                if isinstance(content, list):
                    content = "".join(str(p.get("text", "")) for p in content)
                if isinstance(content, str) and content:
                    found.append(content)
    return found


def heavy(path: str) -> str:
    rng = random.Random(path)
    lines = rng.choice([20, 60, 140, 300])
    return "\n".join(
        f"{n:4d}  def f_{rng.randrange(10**5)}(x): return x * {n}" for n in range(lines)
    )


POLICIES: dict[str, Callable[[], Any]] = {
    "drop only (edits=())": lambda: (),
    "default (wg.DEFAULT_EDITS)": lambda: None,
    "the default without its trigger (clear only when turns would be lost)": lambda: [
        wg.ClampToolResults(max_tokens=0.25),
        wg.ClearToolResults(keep=1, clear_inputs=True, low_water=0.3),
    ],
    "clamp + clear(keep=3)": lambda: [
        wg.ClampToolResults(max_tokens=0.25),
        wg.ClearToolResults(keep=3),
    ],
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    workload: str
    window: int
    policy: str
    filled_at: int | None
    extends: float
    rewrites: Counter[str]
    kept_turns: int
    use: float
    overflows: int
    seconds: float


def run(workload: str, window: int, policy: str, sends: int, outputs: Sequence[str]) -> Row:
    counter = local_tokenizer("o200k")
    if counter is None:
        raise SystemExit("no exact o200k tokenizer is installed (pip install bpe-openai)")
    manager = wg.ContextWindowManager(
        model_info=wg.ModelInfo(window, tokenizer="o200k"), edits=POLICIES[policy]()
    )
    history: list[Message] = list(TASK)
    requests: list[list[Message]] = []
    kinds: list[set[str]] = []
    usage: int | None = None
    overflows = 0
    uses: list[float] = []
    kept_turns = 0
    started = time.perf_counter()
    for n in range(sends):
        fit = manager.fit(history, tools=TOOLS, max_tokens=MAX_TOKENS, last_usage=usage)
        sent = [dict(m) for m in fit.messages]
        usage = count_prompt(counter, sent, TOOLS, template="openai")
        overflows += usage + MAX_TOKENS > window
        uses.append(usage / fit.budget)
        requests.append(sent)
        kinds.append({r.kind for r in fit.edits})
        kept_turns = sum(1 for m in sent if m["role"] == "assistant")
        path = f"src/module_{n % 97}/file_{n}.py"
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": path})},
        }
        history.append(
            {
                "role": "assistant",
                "content": f"Step {n}: reading {path} next.",
                "tool_calls": [call],
            }
        )
        text = outputs[n % len(outputs)] if workload == "corpus" else heavy(path)
        history.append({"role": "tool", "tool_call_id": f"call_{n}", "content": text})
    seconds = time.perf_counter() - started
    filled_at = next(
        (
            i
            for i in range(1, len(requests))
            if requests[i][: len(requests[i - 1])] != requests[i - 1]
        ),
        None,
    )
    rewrites: Counter[str] = Counter()
    extends = 1.0
    if filled_at is not None:
        later = range(filled_at, len(requests))
        same = 0
        for i in later:
            if requests[i][: len(requests[i - 1])] == requests[i - 1]:
                same += i > filled_at
                continue
            edits = kinds[i] - {"clear_inputs"}
            rewrites["/".join(sorted(edits)) or "moved back"] += 1
        extends = same / max(1, len(later) - 1)
    after = uses[filled_at:] if filled_at is not None else uses
    return Row(
        workload=workload,
        window=window,
        policy=policy,
        filled_at=filled_at,
        extends=extends,
        rewrites=rewrites,
        kept_turns=kept_turns,
        use=statistics.mean(after) if after else 0.0,
        overflows=overflows,
        seconds=seconds,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sends", type=int, default=300)
    args = parser.parse_args()
    outputs = observations()
    print("### Prompt stability in a 300-send loop (bench/bench_prefix.py)\n")
    print(
        "| workload | window | policy | filled at send | extends the previous | rewrites by "
        "| kept turns (last send) | mean prompt / budget | overflows | s |"
    )
    print("| --- | ---: | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for workload in ("corpus", "heavy"):
        for window in (16_384, 32_768):
            for policy in POLICIES:
                row = run(workload, window, policy, args.sends, outputs)
                said = ", ".join(f"{k} {v}" for k, v in sorted(row.rewrites.items())) or "-"
                print(
                    f"| {row.workload} | {row.window:,} | {row.policy} | {row.filled_at} | "
                    f"{row.extends:.0%} | {said} | {row.kept_turns} | {row.use:.2f} | "
                    f"{row.overflows} | {row.seconds:.0f} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
