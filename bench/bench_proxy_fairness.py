"""Benchmark (issue 20, item 1): does one large request stall the proxy's other clients?

The proxy and its upstream (the emulator, vLLM flavour, 32k window) run in a process of
their own; this process runs ``--clients`` small clients (one-line chat requests, in a
loop) and, after a second of that, one large request: a tool result of ``--mb`` MiB
(one long line of prose and numbers, the shape that costs the most to estimate). The
table gives the large request's status and time, and the small clients' latency while
it was in flight: how much the large request's parsing, shaping, estimating, counting
and clamping held the proxy's event loop.

Two rows: ``inline`` (every fit on the event loop, the proxy before issue 20) and
``offload`` (bodies of ``OFFLOAD_BYTES`` or more parsed, fitted and re-encoded on a
worker thread). Times are wall clock on this machine, clients and proxy sharing its
cores.

    bench/run bench_proxy_fairness.py [--mb 30] [--clients 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2

SERVER = """
import sys, time
import windowguard.proxy.app as app
if sys.argv[1] == "inline":
    app.OFFLOAD_BYTES = 10**15
from windowguard.emulator import Emulator
from windowguard.proxy import ProxyConfig, ProxyServer
with Emulator(flavor="vllm", context_window=32768) as emu:
    with ProxyServer(ProxyConfig(upstream=emu.root_url, port=0)) as proxy:
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


def run(mode: str, mb: int, clients: int) -> str:
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip() + "/chat/completions"
        small = json.dumps(
            {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
        ).encode()
        headers = {"content-type": "application/json"}
        latencies: list[tuple[float, float]] = []  # (end time, seconds)
        stop = threading.Event()

        def client() -> None:
            with httpx2.Client(timeout=600) as session:
                while not stop.is_set():
                    start = time.perf_counter()
                    session.post(url, content=small, headers=headers)
                    end = time.perf_counter()
                    latencies.append((end, end - start))

        threads = [threading.Thread(target=client) for _ in range(clients)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        body = _big_body(mb)
        began = time.perf_counter()
        answer = httpx2.post(url, content=body, headers=headers, timeout=600)
        ended = time.perf_counter()
        stop.set()
        for thread in threads:
            thread.join()
        during = sorted(s * 1e3 for end, s in latencies if began <= end <= ended + 0.001)
        before = sorted(s * 1e3 for end, s in latencies if end < began)
        p99 = during[min(len(during) - 1, int(len(during) * 0.99))] if during else float("nan")
        return (
            f"| {mode} | {mb} | {answer.status_code} | {ended - began:.1f} "
            f"| {statistics.median(before):.0f} | {len(during)} "
            f"| {statistics.median(during):.0f} | {p99:.0f} | {during[-1]:.0f} |"
        )
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=30)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="4 MiB, 5 clients")
    args = parser.parse_args()
    mb, clients = (4, 5) if args.quick else (args.mb, args.clients)
    print(f"{clients} small clients; one request with a {mb} MiB tool result\n")
    print(
        "| mode | MiB | large: status | large: s | small p50 before (ms) | small requests "
        "during | small p50 during (ms) | p99 | max |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for mode in ("inline", "offload"):
        print(run(mode, mb, clients), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
