"""Benchmark (issue 20, item 3): the proxy's memory under many distinct conversations.

The emulator (vLLM flavour, 32k window) runs in this process; the proxy runs alone in a
process of its own for each ``--max-state-mb`` value, so its resident memory is its
own. ``--conversations`` distinct agent conversations (a system prompt, a task and four
tool calls with results of ~3.6 KB: a ~16 KB request each) are sent through it by four
client threads, one request each: every one is new to the proxy, which remembers it.

For each budget the table gives the proxy's peak RSS (``VmHWM``), its RSS at the end,
the state it accounts (``windowguard_proxy_state_bytes``), the conversations it kept
and evicted, and requests/s. ``unbounded`` is a budget no run reaches (the proxy before
issue 20 kept up to ``--max-conversations`` per model, 1,024 by default; here that is
raised so the count bound does not stop it either).

    bench/run bench_proxy_memory.py [--quick] [--conversations 4000]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2

from windowguard.emulator import Emulator

SERVER = """
import sys
from windowguard.proxy import ProxyConfig, ProxyServer
upstream, mb = sys.argv[1], float(sys.argv[2])
config = ProxyConfig(upstream=upstream, port=0, max_state_mb=mb, max_conversations=10**6)
with ProxyServer(config) as proxy:
    print(proxy.base_url, flush=True)
    sys.stdin.read()
"""

MODEL = "emulated-model"


def _body(n: int) -> bytes:
    rng = random.Random(n)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": f"task number {n}: read the files and report"},
    ]
    for turn in range(4):
        call = f"call_{turn}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "read", "arguments": json.dumps({"n": turn})},
                    }
                ],
            }
        )
        text = " ".join(rng.choice(("alpha", "beta", "gamma", "delta")) for _ in range(600))
        messages.append({"role": "tool", "tool_call_id": call, "content": text})
    return json.dumps({"model": MODEL, "messages": messages, "max_tokens": 8}).encode()


def _status(pid: int) -> dict[str, int]:
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmHWM", "VmRSS"):
            fields[name] = int(value.split()[0]) * 1024
    return fields


def _metric(text: str, pattern: str) -> int:
    found = re.search(pattern, text, re.M)
    return int(float(found.group(1))) if found else -1


def run(upstream: str, mb: float, conversations: int) -> str:
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, upstream, repr(mb)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        url = base_url + "/chat/completions"
        headers = {"content-type": "application/json"}
        errors = 0
        with httpx2.Client(timeout=120) as client:

            def send(n: int) -> int:
                return client.post(url, content=_body(n), headers=headers).status_code

            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=4) as pool:
                errors = sum(status != 200 for status in pool.map(send, range(conversations)))
            elapsed = time.perf_counter() - started
            metrics = client.get(base_url.removesuffix("/v1") + "/metrics").text
        memory = _status(server.pid)
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=60)
    state = _metric(metrics, r"^windowguard_proxy_state_bytes (\S+)$")
    kept = _metric(metrics, r"^windowguard_proxy_state_conversations (\S+)$")
    evicted = _metric(metrics, r"^windowguard_proxy_state_evictions_total\{[^}]*\} (\S+)$")
    label = "unbounded" if mb >= 10**5 else f"{mb:g}"
    mib = 1024 * 1024
    return (
        f"| {label} | {conversations} | {memory['VmHWM'] / mib:.0f} | {memory['VmRSS'] / mib:.0f}"
        f" | {max(state, 0) / mib:.1f} | {kept} | {max(evicted, 0)} | {errors}"
        f" | {conversations / elapsed:.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 conversations")
    parser.add_argument("--conversations", type=int, default=None)
    args = parser.parse_args()
    conversations = args.conversations or (1_000 if args.quick else 4_000)
    print(
        "| --max-state-mb | conversations | peak RSS MiB | RSS at end MiB | state MiB "
        "(accounted) | kept | evicted | errors | requests/s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with Emulator(flavor="vllm", context_window=32_768) as emu:
        for mb in (8.0, 32.0, 256.0, 10.0**6):
            print(run(emu.root_url, mb, conversations), flush=True)


if __name__ == "__main__":
    main()
