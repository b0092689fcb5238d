"""Concurrent branched sends of one conversation through one async guarded client.

Starts the emulator (vLLM flavour, exact counting, its ``/tokenize`` count API) in its
own process, then sends ``--rounds`` x ``--branches`` requests through one
``wg.guard(openai.AsyncOpenAI(...))``: each round, ``--branches`` asyncio tasks send
``history + [new]`` at once (the history's message objects shared by every branch,
each with its own new user message); then the history grows by one tool-call turn. The
history starts past the window (``--prefill`` turns), so every branch is near the edge:
the guard must prune, and asks the count API.

Reported (a markdown table row):

- sends, refusals (``ContextTruncatedError``, nothing sent), wrong refusals (a refusal
  although the smallest request the guard may send, head + newest turn counted by the
  emulator's own ``/tokenize``, plus the smallest reply fits the window), overflows
  (the emulator's 400: the request did not fit);
- window use: the mean prompt tokens / window of the sends that went through, and of
  three sequential sends afterwards (the bug left those with head + newest turn only);
- remote counts per send (``remote_count`` events);
- added latency p50 / p99: from the call to the moment the request leaves for the
  server (an httpx request hook), minus the same for the unguarded client's median: the
  guard's fit, its remote counts and its wait for the conversation's other fits (the
  fits of one conversation run one at a time).

Run: ``bench/run bench_concurrency.py`` (or ``python bench/bench_concurrency.py``);
``--label`` names the row, ``--no-header`` leaves the header out, so rows from two
checkouts (``PYTHONPATH=<other>/src python bench/bench_concurrency.py --no-header``)
line up in one table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai

import windowguard as wg
from windowguard.core.events import Event, RemoteCounted

MODEL = "emulated-model"
MAX_TOKENS = 256
FLOOR = 200  # the manager's smallest reply (wg.shrink.DEFAULT_FLOOR)
SYSTEM = "You are a careful coding agent."
TASK = "TASK-c0n: find the bug and fix it."

_started: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar(
    "started", default=None
)


def _code(n: int, lines: int = 20) -> str:
    return "\n".join(f"def f{n}_{j}(x):\n    return x * {j}  # line {j}" for j in range(lines))


def _turn(history: list[dict[str, Any]], n: int) -> None:
    call = {"name": "read_file", "arguments": json.dumps({"path": f"src/m{n}.py"})}
    history.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": f"call_{n}", "type": "function", "function": call}],
        }
    )
    history.append({"role": "tool", "tool_call_id": f"call_{n}", "content": _code(n)})


def _branch(history: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [*history, {"role": "user", "content": f"branch {name}: " + _code(len(name), 3)}]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"nothing answered at {url} within {timeout} s")
        time.sleep(0.1)


@dataclass
class Result:
    """What the sends of one run did."""

    ok_tokens: list[int] = field(default_factory=list)
    refused: list[list[dict[str, Any]]] = field(default_factory=list)
    overflows: int = 0
    to_wire: list[float] = field(default_factory=list)  # seconds from call to the wire
    after: list[int] = field(default_factory=list)


async def _on_request(request: httpx.Request) -> None:
    # Runs in the sending task's context: the time its chat request leaves.
    started = _started.get()
    if started is not None and request.url.path.endswith("/chat/completions"):
        started.append(time.perf_counter())


async def _send(client: Any, messages: list[dict[str, Any]], result: Result) -> int | None:
    marks = [time.perf_counter()]
    _started.set(marks)
    try:
        reply = await client.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=MAX_TOKENS
        )
    except wg.ContextTruncatedError:
        result.refused.append(messages)
        return None
    except openai.BadRequestError:
        result.overflows += 1
        return None
    finally:
        _started.set(None)
    if len(marks) > 1:
        result.to_wire.append(marks[1] - marks[0])
    tokens = reply.usage.prompt_tokens if reply.usage is not None else 0
    result.ok_tokens.append(tokens)
    return tokens


async def _run(args: argparse.Namespace, root: str, events: list[Event]) -> tuple[Result, float]:
    http = httpx.AsyncClient(event_hooks={"request": [_on_request]}, timeout=120)
    raw = openai.AsyncOpenAI(base_url=root + "/v1", api_key="k", max_retries=0, http_client=http)
    history: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    for n in range(10_000, 10_000 + args.prefill):
        _turn(history, n)
    # The SDK's own time to the wire, unguarded, on a request that fits as it is.
    direct = Result()
    for k in range(20):
        await _send(raw, [*history[:2], {"role": "user", "content": f"ping {k}"}], direct)
    sdk = statistics.median(direct.to_wire)
    client = wg.guard(raw, sinks=[events.append])
    result = Result()
    for r in range(args.rounds):
        branches = [_branch(history, f"{r}-{i}") for i in range(args.branches)]
        await asyncio.gather(*(_send(client, b, result) for b in branches))
        _turn(history, r)
    for k in range(3):
        tokens = await _send(client, _branch(history, f"after-{k}"), Result())
        result.after.append(tokens or 0)
    await raw.close()
    return result, sdk


def _wrong(result: Result, root: str, window: int) -> int:
    wrong = 0
    for messages in result.refused:
        minimal = [*messages[:2], *messages[-3:]]  # head, last call, its result, the branch
        body = {"model": MODEL, "messages": minimal}
        count = httpx.post(root + "/tokenize", json=body, timeout=60).json()["count"]
        wrong += count + FLOOR <= window
    return wrong


def _ms(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--branches", type=int, default=20)
    parser.add_argument("--window", type=int, default=16_384)
    parser.add_argument("--prefill", type=int, default=52, help="turns before the first round")
    parser.add_argument("--label", default="this checkout")
    parser.add_argument("--no-header", action="store_true")
    args = parser.parse_args()

    port = _free_port()
    root = f"http://127.0.0.1:{port}"
    emulator = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "windowguard.emulator.cli",
            "--flavor=vllm",
            f"--window={args.window}",
            f"--port={port}",
            "--scenario=echo",
        ],
        env=os.environ.copy(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(root + "/v1/models")
        events: list[Event] = []
        started = time.perf_counter()
        result, sdk = asyncio.run(_run(args, root, events))
        seconds = time.perf_counter() - started
        wrong = _wrong(result, root, args.window)
    finally:
        emulator.terminate()
        emulator.wait(10)
    sends = args.rounds * args.branches
    counts = sum(isinstance(e, RemoteCounted) for e in events)
    use = statistics.mean(result.ok_tokens) / args.window if result.ok_tokens else 0.0
    after = statistics.mean(result.after) / args.window
    added = [t - sdk for t in result.to_wire]
    if not args.no_header:
        print(
            f"{sends} branched sends ({args.rounds} rounds x {args.branches} asyncio tasks), "
            f"window {args.window}, one async guarded client, emulator vLLM /tokenize\n"
        )
        print(
            "| code | sends | refusals | wrong refusals | overflows | window use "
            "(concurrent / after) | remote counts per send | added latency p50 / p99 (ms) "
            "| wall (s) |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    print(
        f"| {args.label} | {sends} | {len(result.refused)} | {wrong} | {result.overflows} "
        f"| {use:.2f} / {after:.2f} | {counts / sends:.2f} "
        f"| {_ms(added, 0.5):.1f} / {_ms(added, 0.99):.1f} | {seconds:.1f} |"
    )


if __name__ == "__main__":
    main()
