"""Benchmark (issue 20, item 1): does one large request stall the proxy's other clients?

The emulator (vLLM flavour, 32k window) and the proxy each run in a process of their
own; this process runs ``--clients`` small clients on one asyncio loop, each an agent
with a conversation of its own sending a one-line request every ``--interval`` seconds
(their phases spread), and after three seconds one large request from a thread: a tool
result of ``--mb`` MiB (one long line of prose and numbers, the shape that costs the
most to estimate). The table gives the large request's status and time, the small
requests' latency before it (from the second second on), and that of every small
request in flight at some moment of it: how much its parsing, shaping, estimating,
counting and clamping held up the proxy's event loop.

Two rows: ``inline`` (every fit on the event loop, the proxy before issue 20) and
``offload`` (as shipped: bodies of ``OFFLOAD_BYTES`` or more parsed, fitted and
re-encoded on a worker thread, with quick GIL hand-overs meanwhile). Times are wall clock
on this machine, the clients, the emulator and the proxy sharing its cores.

    bench/run bench_proxy_fairness.py [--mb 30] [--clients 20] [--interval 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx2

EMULATOR = """
import sys
from windowguard.emulator import Emulator
with Emulator(flavor="vllm", context_window=32768) as emu:
    print(emu.root_url, flush=True)
    sys.stdin.read()
"""

PROXY = """
import sys
import windowguard.proxy.app as app
if sys.argv[1] == "inline":
    app.OFFLOAD_BYTES = 10**15
from windowguard.proxy import ProxyConfig, ProxyServer
with ProxyServer(ProxyConfig(upstream=sys.argv[2], port=0)) as proxy:
    print(proxy.base_url, flush=True)
    sys.stdin.read()
"""


def _big_body(mb: int) -> bytes:
    line = "lorem ipsum dolor sit amet, consectetur 12345 adipiscing; "
    text = line * (mb * 1024 * 1024 // len(line))
    call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "Read the log."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": text},
    ]
    return json.dumps({"model": "m", "messages": messages, "max_tokens": 256}).encode()


def _start(script: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def _stop(process: subprocess.Popen[str]) -> None:
    if process.stdin is not None:
        process.stdin.close()
    process.wait(timeout=60)


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(len(values) * q))]


async def _load(
    url: str, clients: int, interval: float, mb: int
) -> tuple[int, float, list[float], list[float]]:
    """Paced small clients (each an agent with a conversation of its own, one request
    every ``interval`` seconds, their phases spread), and after three seconds one large
    request from a thread; the small clients' latencies before it (from the second
    second on) and of every small request in flight at some moment of the large one."""
    headers = {"content-type": "application/json"}
    latencies: list[tuple[float, float]] = []  # (start, end)
    done = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def client(session: httpx2.AsyncClient, phase: float) -> None:
        message = {"role": "user", "content": f"hi from agent {phase:.4f}"}
        small = json.dumps({"model": "m", "messages": [message], "max_tokens": 5}).encode()
        due = time.perf_counter() + phase
        while not done.is_set():
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            start = time.perf_counter()
            await session.post(url, content=small, headers=headers)
            end = time.perf_counter()
            latencies.append((start, end))
            due = max(due + interval, end)

    body = _big_body(mb)
    limits = httpx2.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx2.AsyncClient(timeout=600, limits=limits) as session:
        tasks = [
            asyncio.create_task(client(session, interval * i / clients)) for i in range(clients)
        ]
        await asyncio.sleep(3.0)

        def large() -> tuple[int, float, float]:
            began = time.perf_counter()
            answer = httpx2.post(url, content=body, headers=headers, timeout=600)
            return answer.status_code, began, time.perf_counter()

        status, began, ended = await loop.run_in_executor(None, large)
        await asyncio.sleep(0.5)
        done.set()
        await asyncio.gather(*tasks)
    during = sorted((e - s) * 1e3 for s, e in latencies if e > began and s < ended)
    first = latencies[0][0] + 1.0 if latencies else 0.0
    before = sorted((e - s) * 1e3 for s, e in latencies if first <= s and e < began)
    return status, ended - began, before, during


def run(mode: str, mb: int, clients: int, interval: float) -> str:
    emulator, upstream = _start(EMULATOR)
    try:
        proxy, base = _start(PROXY, mode, upstream)
        try:
            status, took, before, during = asyncio.run(
                _load(base + "/chat/completions", clients, interval, mb)
            )
        finally:
            _stop(proxy)
    finally:
        _stop(emulator)
    return (
        f"| {mode} | {mb} | {status} | {took:.1f} "
        f"| {_quantile(before, 0.5):.0f} | {_quantile(before, 0.99):.0f} | {len(during)} "
        f"| {_quantile(during, 0.5):.0f} | {_quantile(during, 0.99):.0f} "
        f"| {during[-1] if during else float('nan'):.0f} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=30)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument(
        "--interval", type=float, default=0.5, help="seconds between one client's requests"
    )
    parser.add_argument("--quick", action="store_true", help="4 MiB, 5 clients")
    args = parser.parse_args()
    mb, clients = (4, 5) if args.quick else (args.mb, args.clients)
    print(
        f"{clients} small clients, each one request every {args.interval:g} s; "
        f"one request with a {mb} MiB tool result\n"
    )
    print(
        "| mode | MiB | large: status | large: s | small p50 before (ms) | p99 before "
        "| small requests during | small p50 during (ms) | p99 during | max during |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for mode in ("inline", "offload"):
        print(run(mode, mb, clients, args.interval), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
