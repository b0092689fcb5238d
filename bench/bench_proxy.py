"""Load through ``windowguard proxy`` and LiteLLM's proxy, side by side, against the emulator.

Starts the emulator (vLLM flavour, 16k window, exact counting, ``/tokenize``; in
``bench/_proxy_emulator.py``, which also tallies what reaches it) and, one after the
other, each proxy in its own process as users run it: ``windowguard proxy``, and
LiteLLM's proxy (``litellm --config``: one worker, no database, no UI, telemetry off,
its logging quiet) when its binary is found. The same workload then runs three times
from one asyncio client: straight to the emulator, through windowguard's proxy, and
through LiteLLM's. Each of ``--conversations`` conversations (the even ones streamed,
the odd ones not) sends ``--turns`` Chat Completions requests, re-sending its whole
transcript every time: a system prompt, the task, then per turn a fixed ~60-token reply
and a ~700-token file the agent "read". The replies kept are fixed, so all three paths
are sent the same requests, and the transcripts grow past the window: what a proxy
does not fit overflows.

The first turns are *far from the edge*: the whole request's JSON is shorter in bytes
than the window less ``max_tokens`` and the proxy's 500-token safety margin, so no
count can put a decision near the edge. Every phase waits there until all its
conversations have sent those turns (the same in all three, so the load stays the
same), and windowguard's ``/metrics`` histogram is read at that point, which tells its
own time on those sends apart from the rest.

Reported (one markdown table, a column per path):

- requests, requests/s over the phase, latency p50 / p99 of the answered requests (sent
  to the last byte);
- added latency: per request, its time through the proxy minus the same request's time
  sent directly (same conversation and turn), over the requests both answered 200,
  p50 / p99, for all of them and for the far sends alone;
- windowguard's own time before it forwards (read + fit + count), and its fit time
  alone (from the whole body read: parse + fit + count), p50 / p99 from its
  ``/metrics`` histogram (interpolated within its buckets, as Prometheus's
  ``histogram_quantile``), for the far sends and for the rest, and the share of far
  sends within 10 ms (a bucket bound, so exact);
- the proxy's peak resident memory (``VmHWM`` of its process and any children, Linux);
- errors: any status but 200, a stream without ``[DONE]``, or a broken connection, the
  context-overflow 400s counted apart;
- what reached the upstream, from the emulator's tally: model calls served, calls
  refused because prompt + ``max_tokens`` exceeded the window (the overflows that
  reached it; windowguard's target is 0), and counts asked of ``/tokenize``.

Run: ``bench/run bench_proxy.py`` (``--quick``: 20 conversations). LiteLLM's proxy is
installed in an environment of its own, from ``bench/requirements-litellm-proxy.txt``;
``bench/run`` builds it in ``bench/.venv-litellm-proxy`` and sets
``WINDOWGUARD_BENCH_LITELLM``. ``--litellm PATH`` or that variable names its binary;
otherwise ``/work/bench-venv-litellm/bin/litellm``, then ``litellm`` on ``PATH``, is
used. Without one, or when it does not start, its phase is skipped with the reason
printed. The load generator, the emulator and the proxy share this machine's cores, so
the absolute numbers are an upper bound on what a proxy adds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

try:
    import httpx2
except ImportError:  # pragma: no cover
    sys.exit('bench_proxy.py needs httpx2: pip install "windowguard[proxy]"')

from windowguard import FailureKind, classify_failure

BENCH = Path(__file__).resolve().parent
MODEL = "emulated-model"
WINDOW = 16_384
SAFETY = 500  # the tokens windowguard proxy keeps free by default (--safety)
SYSTEM = "You are a careful coding agent. Read files, then fix what the task asks. " * 8
LITELLM_VENV_BINARY = Path("/work/bench-venv-litellm/bin/litellm")
OVERFLOW = "context overflow"
ALONE = 4  # conversations sent through windowguard one at a time, after its phase


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_http(url: str, process: subprocess.Popen[bytes], timeout: float = 30.0) -> str | None:
    """Wait until ``url`` answers below 500; None then, else why not."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx2.get(url, timeout=2).status_code < 500:
                return None
        except httpx2.HTTPError:
            pass
        if process.poll() is not None:
            return f"it exited with status {process.returncode} before {url} answered"
        if time.monotonic() > deadline:
            return f"nothing answered at {url} within {timeout:.0f} s"
        time.sleep(0.1)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


def file_text(conversation: int, turn: int) -> str:
    """A ~700-token file, different per conversation and turn."""
    return "\n".join(
        f"def handler_{conversation}_{turn}_{j}(request):  # route {j}\n"
        f"    return respond(request, status={200 + j % 5})"
        for j in range(28)
    )


def reply_text(conversation: int, turn: int) -> str:
    """The assistant's reply the client keeps (~60 tokens): fixed, not what it was
    answered, so that every path is sent the same transcripts."""
    return (
        f"I read the file for handler {conversation}.{turn}. The route returns 500 when "
        "the status is left unset; the next file should show where it is set. "
    ) * 2


def opening(conversation: int) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Task {conversation}: find why handler {conversation} 500s."},
    ]


def extend(messages: list[dict[str, Any]], conversation: int, turn: int) -> None:
    """Append turn ``turn``'s reply and the file the agent read after it."""
    messages.append({"role": "assistant", "content": reply_text(conversation, turn)})
    messages.append(
        {"role": "user", "content": "Here is the file:\n" + file_text(conversation, turn)}
    )


def request_body(messages: list[dict[str, Any]], max_tokens: int, stream: bool) -> dict[str, Any]:
    return {"model": MODEL, "messages": messages, "max_tokens": max_tokens, "stream": stream}


def far_turns(conversations: int, turns: int, max_tokens: int, window: int) -> int:
    """How many first turns are far from the edge in every conversation: the request's
    JSON (spaced, as ``json.dumps`` writes it) has fewer bytes than the window less
    ``max_tokens`` and the safety margin. A token is at least one byte and the JSON's
    punctuation outweighs a template's few tokens per message, so no count of the
    request can come near the edge."""
    longest = conversations - 1  # the largest number spells the longest names
    messages = opening(longest)
    for turn in range(turns):
        size = len(json.dumps(request_body(messages, max_tokens, True)).encode())
        if size + max_tokens + SAFETY > window:
            return turn
        extend(messages, longest, turn)
    return turns


@dataclass
class Phase:
    """One phase's measurements, by (conversation, turn)."""

    name: str
    latency: dict[tuple[int, int], float] = field(default_factory=dict)
    overflows: list[tuple[int, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    requests: int = 0
    seconds: float = 0.0
    base_metrics: str = ""
    alone_far: Histogram = field(default_factory=list)
    alone_rest: Histogram = field(default_factory=list)
    far_metrics: str = ""
    end_metrics: str = ""
    upstream: dict[str, int] = field(default_factory=dict)
    peak_rss_mib: float | None = None
    cpu_seconds: float | None = None
    exited: str | None = None  # the proxy process ended during the phase: how, its log's end
    skipped: str | None = None


class Checkpoint:
    """Holds every conversation at its far-turn boundary until all are there, runs
    ``action`` once, then lets them all go on (``asyncio.Barrier`` is 3.11+)."""

    def __init__(self, parties: int, action: Any) -> None:
        self.parties = parties
        self.action = action
        self.arrived = 0
        self.open = asyncio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived < self.parties:
            await self.open.wait()
            return
        await self.action()
        self.open.set()


def _failure(status: int, body: bytes) -> str:
    """OVERFLOW for a context-overflow answer, else a short description."""
    if classify_failure(status=status, body=body).kind is FailureKind.CONTEXT_OVERFLOW:
        return OVERFLOW
    return f"status {status}: {body[:200]!r}"


async def _streamed(client: httpx2.AsyncClient, url: str, body: dict[str, Any]) -> str | None:
    done = False
    async with client.stream("POST", url, json=body) as answer:
        if answer.status_code != 200:
            return _failure(answer.status_code, await answer.aread())
        async for line in answer.aiter_lines():
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                done = True
                continue
            chunk = json.loads(data)
            if "error" in chunk:  # an error sent inside the stream
                return _failure(400, data.encode())
    return None if done else "a stream ended without [DONE]"


async def _plain(client: httpx2.AsyncClient, url: str, body: dict[str, Any]) -> str | None:
    answer = await client.post(url, json=body)
    if answer.status_code != 200:
        return _failure(answer.status_code, answer.content)
    choices = answer.json().get("choices") or [{}]
    return None if "message" in choices[0] else f"a reply without a message: {answer.text[:200]}"


async def conversation(
    client: httpx2.AsyncClient,
    url: str,
    index: int,
    turns: int,
    max_tokens: int,
    phase: Phase,
    checkpoint: Checkpoint | None,
    far: int,
) -> None:
    """One agent: the even ones stream, the odd ones do not; a failed turn is counted
    and the conversation goes on (its transcript does not depend on the answers)."""
    stream = index % 2 == 0
    messages = opening(index)
    for turn in range(turns):
        if turn == far and checkpoint is not None:
            await checkpoint.wait()
        body = request_body(messages, max_tokens, stream)
        phase.requests += 1
        started = time.perf_counter()
        try:
            failure = await (_streamed if stream else _plain)(client, url, body)
        except (httpx2.HTTPError, ValueError) as exc:
            failure = f"{type(exc).__name__}: {exc}"
        if failure is None:
            phase.latency[(index, turn)] = time.perf_counter() - started
        elif failure == OVERFLOW:
            phase.overflows.append((index, turn))
        else:
            phase.errors.append(failure)
        extend(messages, index, turn)


async def run_phase(
    phase: Phase, base_url: str, args: argparse.Namespace, key: str, metrics_url: str | None
) -> None:
    """Run the workload against ``base_url``; with ``metrics_url``, read windowguard's
    ``/metrics`` when every conversation has sent its far turns, and at the end."""
    limits = httpx2.Limits(
        max_connections=args.conversations * 2, max_keepalive_connections=args.conversations
    )
    headers = {"authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(
        limits=limits, timeout=httpx2.Timeout(120.0), headers=headers
    ) as client:

        async def at_far() -> None:
            if metrics_url is not None:
                phase.far_metrics = (await client.get(metrics_url)).text

        checkpoint = Checkpoint(args.conversations, at_far) if 0 < args.far < args.turns else None
        url = base_url + "/chat/completions"
        started = time.perf_counter()
        await asyncio.gather(
            *(
                conversation(
                    client, url, i, args.turns, args.max_tokens, phase, checkpoint, args.far
                )
                for i in range(args.conversations)
            )
        )
        phase.seconds = time.perf_counter() - started
        if metrics_url is not None:
            phase.end_metrics = (await client.get(metrics_url)).text
            if checkpoint is None:
                phase.far_metrics = phase.end_metrics if args.far >= args.turns else ""


async def alone(
    base_url: str, args: argparse.Namespace, key: str, metrics_url: str, count: int
) -> tuple[Histogram, Histogram]:
    """windowguard's own time with no other client: ``count`` fresh conversations one
    after another (half streamed), its histogram for their far sends and for the rest."""
    far: Histogram = []
    rest: Histogram = []
    phase = Phase("alone")
    headers = {"authorization": f"Bearer {key}"}
    snapshots: list[Histogram] = []
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(120.0), headers=headers) as client:

        async def snap() -> None:
            snapshots.append(histogram((await client.get(metrics_url)).text))

        for index in range(args.conversations, args.conversations + count):
            snapshots.clear()
            start = histogram((await client.get(metrics_url)).text)

            await conversation(
                client,
                base_url + "/chat/completions",
                index,
                args.turns,
                args.max_tokens,
                phase,
                Checkpoint(1, snap) if 0 < args.far < args.turns else None,
                args.far,
            )
            end = histogram((await client.get(metrics_url)).text)
            middle = snapshots[0] if snapshots else (end if args.far >= args.turns else start)
            far = histogram_plus(far, histogram_minus(middle, start))
            rest = histogram_plus(rest, histogram_minus(end, middle))
    return far, rest


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def _vm_hwm_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            listed = Path(f"/proc/{pid}/task/{task}/children").read_text(encoding="ascii")
        except OSError:
            continue
        for child in map(int, listed.split()):
            found += [child, *_children(child)]
    return found


def peak_rss_mib(pid: int) -> float | None:
    """The peak resident memory (VmHWM) of ``pid`` and its children, added up."""
    peaks = [kib for each in (pid, *_children(pid)) if (kib := _vm_hwm_kib(each)) is not None]
    return sum(peaks) / 1024 if peaks else None


def cpu_seconds(pid: int) -> float | None:
    """The CPU time (user + system) ``pid`` and its children have used so far."""
    ticks = 0
    for each in (pid, *_children(pid)):
        try:
            stat = Path(f"/proc/{each}/stat").read_text(encoding="ascii")
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state is fields[0]
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


Histogram = list[tuple[float, int]]  # (upper bound in seconds, cumulative count)


def histogram(metrics: str, name: str = "added_latency_seconds") -> Histogram:
    """windowguard's histogram ``name`` for chat requests, from ``/metrics``:
    ``added_latency_seconds`` (from the request's start, its body's reading included) or
    ``fit_seconds`` (from the whole body on)."""
    found = re.findall(
        rf'windowguard_proxy_{name}_bucket\{{api="chat",le="([^"]+)"\}} (\d+)', metrics
    )
    return [(float(bound), int(count)) for bound, count in found]


def histogram_minus(later: Histogram, earlier: Histogram) -> Histogram:
    if not later or not earlier:
        return later
    return [
        (bound, count - before) for (bound, count), (_, before) in zip(later, earlier, strict=True)
    ]


def histogram_plus(one: Histogram, other: Histogram) -> Histogram:
    if not one or not other:
        return one or other
    return [(bound, a + b) for (bound, a), (_, b) in zip(one, other, strict=True)]


def histogram_quantile(buckets: Histogram, q: float) -> float | None:
    """Prometheus's ``histogram_quantile``: linear within the bucket the rank falls in;
    ``inf`` when it falls beyond the last finite bound."""
    total = buckets[-1][1] if buckets else 0
    if total == 0:
        return None
    rank = q * total
    lower, below = 0.0, 0
    for bound, count in buckets:
        if count >= rank and count > below:
            if math.isinf(bound):
                return math.inf
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return math.inf


def share_within(buckets: Histogram, seconds: float) -> float | None:
    total = buckets[-1][1] if buckets else 0
    for bound, count in buckets:
        if total and math.isclose(bound, seconds):
            return count / total
    return None


def _start_emulator(port: int, window: int, log: IO[bytes]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            str(BENCH / "_proxy_emulator.py"),
            "--port",
            str(port),
            "--window",
            str(window),
            "--model",
            MODEL,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )


def _tally(emulator: subprocess.Popen[bytes]) -> dict[str, int]:
    """The emulator's tally so far (see ``_proxy_emulator.py``)."""
    assert emulator.stdin is not None and emulator.stdout is not None
    emulator.stdin.write(b"stats\n")
    emulator.stdin.flush()
    tally: dict[str, int] = json.loads(emulator.stdout.readline())
    return tally


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.stdin is not None:
        process.stdin.close()
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _measure(
    phase: Phase,
    base_url: str,
    args: argparse.Namespace,
    key: str,
    emulator: subprocess.Popen[bytes],
    metrics_url: str | None = None,
) -> None:
    warm_up(base_url, key)
    if metrics_url is not None:
        phase.base_metrics = httpx2.get(metrics_url, timeout=30).text
    before = _tally(emulator)
    asyncio.run(run_phase(phase, base_url, args, key, metrics_url))
    after = _tally(emulator)
    phase.upstream = {name: after.get(name, 0) - before.get(name, 0) for name in after}


def warm_up(base_url: str, key: str) -> None:
    """One small request each way, not measured: a server that has been up a while has
    imported and warmed what its first request needs."""
    for stream in (False, True):
        body = request_body([{"role": "user", "content": "Warm up."}], 8, stream)
        httpx2.post(
            base_url + "/chat/completions",
            json=body,
            headers={"authorization": f"Bearer {key}"},
            timeout=60,
        ).raise_for_status()


def _through(
    phase: Phase,
    command: list[str],
    env: dict[str, str],
    health_url: str,
    base_url: str,
    log: Path,
    measure: Any,
) -> str | None:
    """Start a proxy, wait for ``health_url``, run ``measure``, read its peak memory and
    stop it; the reason it did not start, or None."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=log.parent
        )
        try:
            reason = _wait_http(health_url, process, timeout=120.0)
            if reason is not None:
                return f"{reason}\n{_tail(log)}"
            before = cpu_seconds(process.pid)
            measure(phase, base_url)
            if process.poll() is not None:
                phase.exited = f"exit code {process.returncode}\n{_tail(log)}"
            after = cpu_seconds(process.pid)
            if before is not None and after is not None:
                phase.cpu_seconds = after - before
            phase.peak_rss_mib = peak_rss_mib(process.pid)
        finally:
            _stop(process)
    return None


def litellm_binary(option: str | None) -> tuple[str | None, str]:
    """The ``litellm`` binary to run, or None and why there is none."""
    if option:
        if os.access(option, os.X_OK):
            return option, ""
        return None, f"--litellm / WINDOWGUARD_BENCH_LITELLM {option}: not an executable file"
    for candidate in (str(LITELLM_VENV_BINARY), shutil.which("litellm")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate, ""
    return None, (
        f"no litellm binary ({LITELLM_VENV_BINARY} is missing and none is on PATH): "
        "install LiteLLM's proxy as bench/requirements-litellm-proxy.txt says, or pass "
        "--litellm PATH"
    )


def litellm_version(binary: str) -> str:
    """The litellm version beside ``binary`` (its script's interpreter), or '?'."""
    try:
        with open(binary, "rb") as script:
            first = script.readline().decode(errors="replace")
    except OSError:
        return "?"
    if not first.startswith("#!"):
        return "?"
    code = "import importlib.metadata as m; print(m.version('litellm'))"
    try:
        done = subprocess.run(
            [first[2:].strip(), "-c", code], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return done.stdout.strip() or "?"


def litellm_setup(emu_root: str, key: str, workdir: Path) -> tuple[Path, dict[str, str]]:
    """LiteLLM's proxy config and environment: the emulator as an OpenAI-compatible
    upstream, no database, no admin UI or docs, telemetry off, its logging quiet.

    The settings are LiteLLM's documented ones (docs.litellm.ai: proxy/configs,
    proxy/debugging, proxy/telemetry, proxy/ui), checked against its 1.108.7 source.
    """
    config = {
        "model_list": [
            {
                "model_name": MODEL,
                "litellm_params": {
                    "model": f"openai/{MODEL}",
                    "api_base": emu_root + "/v1",
                    "api_key": "dummy",
                },
            }
        ],
        "litellm_settings": {"set_verbose": False, "suppress_debug_info": True},
    }
    path = workdir / "litellm.yaml"
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")  # JSON is YAML
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("LITELLM_") and name not in ("DATABASE_URL", "DIRECT_URL")
    }
    env.update(
        # It refuses to start without a master key (UnsafeMasterKeyError); every path
        # is sent it, so all three see the same headers.
        LITELLM_MASTER_KEY=key,
        # Its loggers' level, and uvicorn's (so no access log): errors are tracebacks.
        LITELLM_LOG="CRITICAL",
        LITELLM_TELEMETRY_DISABLED="true",  # the veto; every group is off by default too
        DISABLE_ADMIN_UI="true",
        NO_DOCS="true",
        LITELLM_LOCAL_MODEL_COST_MAP="true",  # the bundled cost map: no fetch at start
        LITELLM_DONT_SHOW_FEEDBACK_BOX="true",
    )
    return path, env


def transcript_tokens(emu_root: str, args: argparse.Namespace) -> list[int]:
    """The emulator's exact prompt count of each turn's transcript (the longest
    conversation's), from its ``/tokenize``."""
    longest = args.conversations - 1
    messages = opening(longest)
    counts = []
    for turn in range(args.turns):
        body = {"model": MODEL, "messages": messages}
        counts.append(
            int(httpx2.post(emu_root + "/tokenize", json=body, timeout=30).json()["count"])
        )
        extend(messages, longest, turn)
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument(
        "--turns", type=int, default=26, help="requests per conversation (default 26)"
    )
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--window", type=int, default=WINDOW)
    parser.add_argument(
        "--litellm",
        metavar="PATH",
        default=os.environ.get("WINDOWGUARD_BENCH_LITELLM"),
        help="LiteLLM's litellm binary (default: $WINDOWGUARD_BENCH_LITELLM, else "
        f"{LITELLM_VENV_BINARY}, else litellm on PATH)",
    )
    parser.add_argument("--quick", action="store_true", help="20 conversations")
    args = parser.parse_args()
    if args.quick:
        args.conversations = min(args.conversations, 20)
    args.far = far_turns(args.conversations, args.turns, args.max_tokens, args.window)

    key = "sk-" + secrets.token_hex(32)
    workdir = Path(tempfile.mkdtemp(prefix="bench_proxy_"))
    direct, guarded, litellm = Phase("direct"), Phase("windowguard"), Phase("LiteLLM")
    emu_port = _free_port()
    with (workdir / "emulator.log").open("wb") as emulator_log:
        emulator = _start_emulator(emu_port, args.window, emulator_log)
    try:
        emu_root = f"http://127.0.0.1:{emu_port}"
        reason = _wait_http(emu_root + "/v1/models", emulator)
        if reason is not None:
            raise SystemExit(f"the emulator did not start: {reason}")
        tokens = transcript_tokens(emu_root, args)

        def measure(phase: Phase, base_url: str, metrics_url: str | None = None) -> None:
            _measure(phase, base_url, args, key, emulator, metrics_url)

        measure(direct, emu_root + "/v1")

        port = _free_port()
        root = f"http://127.0.0.1:{port}"
        metrics_url = root + "/metrics"

        def guarded_measure(phase: Phase, base_url: str) -> None:
            measure(phase, base_url, metrics_url)
            phase.alone_far, phase.alone_rest = asyncio.run(
                alone(base_url, args, key, metrics_url, ALONE)
            )

        reason = _through(
            guarded,
            _python(
                "from windowguard.cli import main; raise SystemExit(main())",
                "proxy",
                "--upstream",
                emu_root,
                "--port",
                str(port),
            ),
            {**os.environ, "PYTHONHASHSEED": "0"},
            root + "/healthz",
            root + "/v1",
            workdir / "windowguard.log",
            guarded_measure,
        )
        if reason is not None:
            raise SystemExit(f"windowguard proxy did not start: {reason}")

        binary, litellm.skipped = litellm_binary(args.litellm)
        version = "-"
        if binary is not None:
            version = litellm_version(binary)
            config, env = litellm_setup(emu_root, key, workdir)
            port = _free_port()
            root = f"http://127.0.0.1:{port}"
            command = [binary, "--config", str(config), "--host", "127.0.0.1"]
            command += ["--port", str(port), "--num_workers", "1"]
            litellm.skipped = _through(
                litellm,
                command,
                env,
                root + "/health/liveliness",
                root + "/v1",
                workdir / "litellm.log",
                measure,
            )
            if litellm.skipped is not None:
                litellm.skipped = f"LiteLLM's proxy ({binary}) did not start: {litellm.skipped}"
    finally:
        _stop(emulator)
        shutil.rmtree(workdir, ignore_errors=True)

    print(report(args, tokens, version, direct, guarded, litellm))
    if litellm.skipped is not None:
        print(f"\nLiteLLM phase skipped: {litellm.skipped}")
    for phase in (direct, guarded, litellm):
        for error in phase.errors[:3]:
            print(f"{phase.name} error: {error}", file=sys.stderr)
        if phase.exited is not None:
            print(f"{phase.name}'s proxy ended during the run: {phase.exited}", file=sys.stderr)
    unexpected = any(phase.errors for phase in (direct, guarded, litellm))
    guard_failed = guarded.overflows or guarded.upstream.get("context_overflow", 0)
    return 1 if unexpected or guard_failed else 0


def _ms(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return "> 2500" if math.isinf(value) else f"{value * 1000:.1f}"


def _p50_p99(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{_ms(percentile(values, 50))} / {_ms(percentile(values, 99))}"


def report(
    args: argparse.Namespace,
    tokens: list[int],
    litellm_version: str,
    direct: Phase,
    guarded: Phase,
    litellm: Phase,
) -> str:
    """The markdown table and the targets' reading."""
    from windowguard import __version__

    phases = (direct, guarded, litellm)
    ran = [phase.skipped is None for phase in phases]
    streamed = (args.conversations + 1) // 2
    over = next(
        (turn for turn, count in enumerate(tokens) if count + args.max_tokens > args.window),
        None,
    )
    far_keys = {(c, t) for c in range(args.conversations) for t in range(args.far)}

    def cells(make: Any, proxies_only: bool = False) -> list[str]:
        out = []
        for phase, done in zip(phases, ran, strict=True):
            if not done:
                out.append("skipped")
            elif proxies_only and phase is direct:
                out.append("-")
            else:
                out.append(make(phase))
        return out

    def added(phase: Phase, keys: set[tuple[int, int]] | None = None) -> list[float]:
        return [
            phase.latency[key] - direct.latency[key]
            for key in phase.latency
            if key in direct.latency and (keys is None or key in keys)
        ]

    far_hist = histogram_minus(histogram(guarded.far_metrics), histogram(guarded.base_metrics))
    rest_hist = histogram_minus(histogram(guarded.end_metrics), histogram(guarded.far_metrics))
    fit_far = histogram_minus(
        histogram(guarded.far_metrics, "fit_seconds"),
        histogram(guarded.base_metrics, "fit_seconds"),
    )
    fit_rest = histogram_minus(
        histogram(guarded.end_metrics, "fit_seconds"),
        histogram(guarded.far_metrics, "fit_seconds"),
    )

    def own(buckets: Histogram) -> str:
        return f"{_ms(histogram_quantile(buckets, 0.5))} / {_ms(histogram_quantile(buckets, 0.99))}"

    def windowguard_only(value: str) -> Any:
        return lambda phase: value if phase is guarded else "not measured"

    within = share_within(far_hist, 0.01)
    fit_within = share_within(fit_far, 0.01)
    rows = [
        ("requests", cells(lambda p: str(p.requests))),
        ("requests / s", cells(lambda p: f"{p.requests / p.seconds:.1f}")),
        (
            "latency p50 / p99, answered 200 (ms)",
            cells(lambda p: _p50_p99(list(p.latency.values()))),
        ),
        (
            "added latency p50 / p99 vs direct, requests both answered 200 (ms)",
            cells(lambda p: _p50_p99(added(p)), proxies_only=True),
        ),
        (
            f"added latency p50 / p99 vs direct, far sends (turns 1-{args.far}) (ms)",
            cells(lambda p: _p50_p99(added(p, far_keys)), proxies_only=True),
        ),
        (
            f"own time before forwarding p50 / p99, far sends (turns 1-{args.far}) (ms)",
            cells(windowguard_only(own(far_hist)), proxies_only=True),
        ),
        (
            "own time before forwarding p50 / p99, later sends (ms)",
            cells(windowguard_only(own(rest_hist)), proxies_only=True),
        ),
        (
            f"fit time (from the whole body read) p50 / p99, far sends (turns 1-{args.far}) (ms)",
            cells(windowguard_only(own(fit_far)), proxies_only=True),
        ),
        (
            "fit time (from the whole body read) p50 / p99, later sends (ms)",
            cells(windowguard_only(own(fit_rest)), proxies_only=True),
        ),
        (
            f"own time p50 / p99 with one client alone ({ALONE} conversations one after "
            f"another), far / later sends (ms)",
            cells(
                windowguard_only(f"{own(guarded.alone_far)} ; {own(guarded.alone_rest)}"),
                proxies_only=True,
            ),
        ),
        (
            "far sends whose own time was within 10 ms",
            cells(windowguard_only("-" if within is None else f"{within:.1%}"), proxies_only=True),
        ),
        (
            "far sends whose fit time was within 10 ms",
            cells(
                windowguard_only("-" if fit_within is None else f"{fit_within:.1%}"),
                proxies_only=True,
            ),
        ),
        (
            "proxy CPU time per request, mean (ms)",
            cells(
                lambda p: (
                    "-" if p.cpu_seconds is None else f"{p.cpu_seconds / p.requests * 1e3:.1f}"
                ),
                proxies_only=True,
            ),
        ),
        (
            "peak RSS of the proxy process (MiB)",
            cells(lambda p: "-" if p.peak_rss_mib is None else f"{p.peak_rss_mib:.0f}", True),
        ),
        ("answered 200", cells(lambda p: str(len(p.latency)))),
        (
            "errors: context-overflow 400s / other",
            cells(lambda p: f"{len(p.overflows)} / {len(p.errors)}"),
        ),
        (
            "overflows that reached the upstream (emulator refused: prompt + max_tokens > window)",
            cells(lambda p: str(p.upstream.get("context_overflow", 0))),
        ),
        (
            "upstream model calls served / /tokenize counts",
            cells(lambda p: f"{p.upstream.get('served', 0)} / {p.upstream.get('count_calls', 0)}"),
        ),
    ]
    first = f"~{tokens[0]:,}" if tokens else "?"
    last = f"~{tokens[-1]:,}" if tokens else "?"
    lines = [
        f"{args.conversations} concurrent conversations ({streamed} streamed, "
        f"{args.conversations - streamed} not) x {args.turns} turns, max_tokens "
        f"{args.max_tokens}, window {args.window:,}: transcripts of {first} to {last} tokens "
        f"(the emulator's count), past the window from turn "
        f"{'-' if over is None else over + 1}; turns 1-{args.far} far from the edge. "
        f"{os.cpu_count()} CPUs shared by the client, the emulator and the proxy. "
        f"windowguard {__version__}, LiteLLM {litellm_version}.",
        "",
        "| metric | direct to emulator | through windowguard proxy | through LiteLLM proxy |",
        "| --- | --- | --- | --- |",
        *(f"| {name} | {' | '.join(values)} |" for name, values in rows),
        "",
    ]
    p99 = histogram_quantile(far_hist, 0.99)
    fit_p99 = histogram_quantile(fit_far, 0.99)
    if p99 is not None and fit_p99 is not None:
        met = "met" if fit_within is not None and fit_within >= 0.99 else "missed"
        lines.append(
            f"Target: windowguard's own time before forwarding p99 < 10 ms for sends far "
            f"from the edge: {met} on the fit time, from the whole body read to forwarding "
            f"(p99 {_ms(fit_p99)} ms; {fit_within or 0:.1%} within 10 ms). From the "
            f"request's start, the body's reading (and the loop's queue behind the other "
            f"clients) included: p99 {_ms(p99)} ms; {within or 0:.1%} within 10 ms."
        )
    if guarded.skipped is None and litellm.skipped is None and litellm.seconds:
        ratio = (guarded.requests / guarded.seconds) / (litellm.requests / litellm.seconds)
        met = "met" if ratio >= 0.8 else "missed"
        lines.append(
            f"Target: throughput within 20% of LiteLLM's proxy: {met} "
            f"(windowguard / LiteLLM requests/s = {ratio:.2f})."
        )
    overflowed = guarded.upstream.get("context_overflow", 0)
    lines.append(
        f"Target: 0 overflows reaching the upstream through windowguard: "
        f"{'met' if overflowed == 0 else 'missed'} ({overflowed})."
    )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
