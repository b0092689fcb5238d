"""Load through ``windowguard proxy``: 100 concurrent streaming conversations.

Starts the emulator (vLLM flavour, 16k window, exact counting, ``/tokenize``) and the
proxy (``windowguard proxy`` in its own process, as users run it) as subprocesses, then
runs the same workload twice from one asyncio client: straight to the emulator, then
through the proxy. Each of ``--conversations`` conversations sends ``--turns`` streamed
Chat Completions requests, re-sending its whole transcript every time (a system prompt,
the task, then per turn the streamed reply and a ~700-token file the agent "read"), so
the proxy fits transcripts of up to ~8k tokens.

Reported (a markdown table):

- latency per request, p50 / p99 (request sent to the stream's last byte), both paths;
- added latency: per request, its time through the proxy minus the same request's time
  sent directly (same conversation and turn, same transcript, same reply), p50 / p99;
  and the proxy's own time before it forwards (read + fit + count), from its
  ``/metrics`` histogram;
- requests per second over each phase;
- the proxy process's peak resident memory (``VmHWM``, Linux);
- errors: any status but 200, a stream without ``[DONE]``, or a broken connection.

Run: ``.venv/bin/python bench/bench_proxy.py`` (or ``bench/run bench_proxy.py``).
The load generator, the emulator and the proxy share this machine's cores, so the
absolute numbers are an upper bound on what the proxy adds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

try:
    import httpx2
except ImportError:  # pragma: no cover
    sys.exit('bench_proxy.py needs httpx2: pip install "windowguard[proxy]"')

MODEL = "emulated-model"
WINDOW = 16_384
SYSTEM = "You are a careful coding agent. Read files, then fix what the task asks. " * 8


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_http(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx2.get(url, timeout=2).status_code < 500:
                return
        except httpx2.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"nothing answered at {url} within {timeout} s")
        time.sleep(0.1)


def _python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


def file_text(conversation: int, turn: int) -> str:
    """A ~700-token file, different per conversation and turn."""
    return "\n".join(
        f"def handler_{conversation}_{turn}_{j}(request):  # route {j}\n"
        f"    return respond(request, status={200 + j % 5})"
        for j in range(28)
    )


@dataclass
class Phase:
    """One phase's measurements, by (conversation, turn)."""

    name: str
    latency: dict[tuple[int, int], float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def requests(self) -> int:
        return len(self.latency) + len(self.errors)


async def conversation(
    client: httpx2.AsyncClient, url: str, index: int, turns: int, max_tokens: int, phase: Phase
) -> None:
    transcript: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Task {index}: find why handler {index} returns 500."},
    ]
    for turn in range(turns):
        body = {
            "model": MODEL,
            "messages": transcript,
            "max_tokens": max_tokens,
            "stream": True,
        }
        started = time.perf_counter()
        text: list[str] = []
        done = False
        try:
            async with client.stream("POST", url, json=body) as answer:
                if answer.status_code != 200:
                    await answer.aread()
                    phase.errors.append(f"status {answer.status_code}: {answer.text[:200]}")
                    return
                async for line in answer.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    data = line[6:]
                    if data == "[DONE]":
                        done = True
                        continue
                    chunk = json.loads(data)
                    for choice in chunk.get("choices") or []:
                        text.append((choice.get("delta") or {}).get("content") or "")
        except httpx2.HTTPError as exc:
            phase.errors.append(f"{type(exc).__name__}: {exc}")
            return
        if not done:
            phase.errors.append("a stream ended without [DONE]")
            return
        phase.latency[(index, turn)] = time.perf_counter() - started
        transcript.append({"role": "assistant", "content": "".join(text)})
        transcript.append(
            {"role": "user", "content": "Here is the file:\n" + file_text(index, turn)}
        )


async def run_phase(
    name: str, base_url: str, conversations: int, turns: int, max_tokens: int
) -> Phase:
    phase = Phase(name)
    limits = httpx2.Limits(
        max_connections=conversations * 2, max_keepalive_connections=conversations
    )
    timeout = httpx2.Timeout(120.0)
    async with httpx2.AsyncClient(limits=limits, timeout=timeout) as client:
        url = base_url + "/chat/completions"
        started = time.perf_counter()
        await asyncio.gather(
            *(conversation(client, url, i, turns, max_tokens, phase) for i in range(conversations))
        )
        phase.seconds = time.perf_counter() - started
    return phase


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def peak_rss_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def proxy_own_time(metrics: str) -> tuple[float, int]:
    total = count = 0.0
    for line in metrics.splitlines():
        match = re.match(
            r'windowguard_proxy_added_latency_seconds_(sum|count)\{api="chat"\} (\S+)', line
        )
        if match:
            if match[1] == "sum":
                total = float(match[2])
            else:
                count = float(match[2])
    return total, int(count)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()

    emu_port, proxy_port = _free_port(), _free_port()
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    emulator = subprocess.Popen(
        _python(
            "from windowguard.emulator.cli import main; raise SystemExit(main())",
            "--flavor",
            "vllm",
            "--port",
            str(emu_port),
            "--window",
            str(WINDOW),
            "--scenario",
            "echo",
            "--model",
            MODEL,
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    proxy: subprocess.Popen[str] | None = None
    try:
        emu_root = f"http://127.0.0.1:{emu_port}"
        _wait_http(emu_root + "/v1/models")
        proxy = subprocess.Popen(
            _python(
                "from windowguard.cli import main; raise SystemExit(main())",
                "proxy",
                "--upstream",
                emu_root,
                "--port",
                str(proxy_port),
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        proxy_root = f"http://127.0.0.1:{proxy_port}"
        _wait_http(proxy_root + "/healthz")

        direct = asyncio.run(
            run_phase("direct", emu_root + "/v1", args.conversations, args.turns, args.max_tokens)
        )
        through = asyncio.run(
            run_phase("proxy", proxy_root + "/v1", args.conversations, args.turns, args.max_tokens)
        )
        metrics = httpx2.get(proxy_root + "/metrics").text
        rss = peak_rss_mib(proxy.pid)
    finally:
        for process in (proxy, emulator):
            if process is not None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()

    paired = [
        through.latency[key] - direct.latency[key]
        for key in through.latency
        if key in direct.latency
    ]
    own_sum, own_count = proxy_own_time(metrics)
    ms = 1000.0

    def row(name: str, a: str, b: str) -> str:
        return f"| {name} | {a} | {b} |"

    lines = [
        f"{args.conversations} concurrent streaming conversations x {args.turns} turns "
        f"(max_tokens {args.max_tokens}, transcripts up to "
        f"~{len(SYSTEM) // 4 + args.turns * 720} tokens), window {WINDOW}, "
        f"{os.cpu_count()} CPUs shared by client, emulator and proxy",
        "",
        "| metric | direct to emulator | through windowguard proxy |",
        "| --- | --- | --- |",
        row(
            "latency p50 / p99 (ms)",
            f"{percentile(list(direct.latency.values()), 50) * ms:.1f} / "
            f"{percentile(list(direct.latency.values()), 99) * ms:.1f}",
            f"{percentile(list(through.latency.values()), 50) * ms:.1f} / "
            f"{percentile(list(through.latency.values()), 99) * ms:.1f}",
        ),
        row(
            "added latency per request p50 / p99 (ms)",
            "-",
            f"{percentile(paired, 50) * ms:.1f} / {percentile(paired, 99) * ms:.1f}",
        ),
        row(
            "proxy's own time before forwarding, mean (ms)",
            "-",
            f"{own_sum / own_count * ms:.2f}" if own_count else "-",
        ),
        row(
            "requests / s",
            f"{direct.requests / direct.seconds:.1f}",
            f"{through.requests / through.seconds:.1f}",
        ),
        row("requests", str(direct.requests), str(through.requests)),
        row("errors", str(len(direct.errors)), str(len(through.errors))),
        row("proxy peak RSS (MiB)", "-", f"{rss:.0f}" if rss is not None else "n/a"),
    ]
    print("\n".join(lines))
    for error in (direct.errors + through.errors)[:5]:
        print(f"error: {error}", file=sys.stderr)
    return 1 if direct.errors or through.errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
