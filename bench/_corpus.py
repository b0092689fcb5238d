"""Shared loader for the bench scripts: real corpus runs and long synthetic transcripts.

The corpus (``../shared/corpus/*.jsonl``, OpenAI Chat Completions format) holds real
agent runs: tau-bench customer-service runs, OpenHands and SWE-agent coding runs.
Each run splits into a *head* (the leading system run plus everything up to and
including the first user message) and *turns* (one assistant message, every tool
result answering it, and any user messages before the next assistant message).

A synthetic transcript of N turns is one real head followed by N real turns taken
round-robin from every well-formed corpus turn (sources interleaved, so long
transcripts mix short customer-service turns with large coding-agent observations),
with the tool schemas of all three corpora. Invariants:

* every message of a built transcript is a fresh dict (a deep copy), so identity-keyed
  caches never see the same object twice and a cold fit does all its work;
* every turn is well-formed by :func:`pairing_problems` (each tool message answers a
  call of the nearest preceding assistant message, every call is answered);
* building is deterministic: the same N gives the same transcript.

This module lives in ``bench/`` and reads ``../shared`` at run time; the package never does.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CORPUS_DIR = SHARED / "corpus"
O200K_FILE = SHARED / "tokenizers" / "o200k_base.tiktoken"

Message = dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One real corpus run."""

    source: str
    id: str
    messages: tuple[Message, ...]
    tools: tuple[Message, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Transcript:
    """A transcript to fit: messages, tools, and where it came from."""

    name: str
    messages: list[Message]
    tools: list[Message]
    turns: int


@functools.cache
def load_runs() -> tuple[Run, ...]:
    """Every corpus run, in file order (openhands, swe-agent, tau-bench)."""
    runs = []
    for path in sorted(CORPUS_DIR.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            runs.append(
                Run(
                    source=row["source"],
                    id=row["id"],
                    messages=tuple(row["messages"]),
                    tools=tuple(row.get("tools") or ()),
                )
            )
    return tuple(runs)


def split_head(messages: Sequence[Message]) -> int:
    """Index just past the head: leading system messages up to the first user message."""
    for index, message in enumerate(messages):
        if message.get("role") == "user":
            return index + 1
        if message.get("role") not in ("system", "developer"):
            return index
    return len(messages)


def split_turns(messages: Sequence[Message]) -> list[list[Message]]:
    """The turns after the head; each starts at an assistant message."""
    turns: list[list[Message]] = []
    for message in messages[split_head(messages) :]:
        if message.get("role") == "assistant" or not turns:
            turns.append([message])
        else:
            turns[-1].append(message)
    return turns


def pairing_problems(messages: Sequence[Message]) -> tuple[int, int]:
    """Count (orphaned tool results, unanswered tool calls) in an OpenAI chat transcript.

    A tool message must answer a ``tool_call_id`` of the nearest preceding assistant
    message, once; a call is answered when some tool message before the next assistant
    message carries its id. A tool message with no assistant before it is an orphan.
    """
    orphans = 0
    unanswered = 0
    open_ids: list[str] | None = None  # calls of the nearest assistant not yet answered

    def close() -> None:
        nonlocal unanswered
        if open_ids:
            unanswered += len(open_ids)

    for message in messages:
        role = message.get("role")
        if role == "assistant":
            close()
            open_ids = [call.get("id") for call in message.get("tool_calls") or ()]
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if open_ids is not None and call_id in open_ids:
                open_ids.remove(call_id)
            else:
                orphans += 1
    close()
    return orphans, unanswered


@functools.cache
def _turn_pool() -> tuple[tuple[Message, ...], ...]:
    """Every well-formed corpus turn, sources interleaved round-robin."""
    by_source: dict[str, list[tuple[Message, ...]]] = {}
    for run in load_runs():
        for turn in split_turns(run.messages):
            if turn[0].get("role") == "assistant" and pairing_problems(turn) == (0, 0):
                by_source.setdefault(run.source, []).append(tuple(turn))
    pool: list[tuple[Message, ...]] = []
    queues = [list(turns) for _, turns in sorted(by_source.items())]
    while any(queues):
        for queue in queues:
            if queue:
                pool.append(queue.pop(0))
    return tuple(pool)


@functools.cache
def all_tools() -> tuple[Message, ...]:
    """The tool schemas the corpus runs were sent with, unique by name, in run order."""
    tools: list[Message] = []
    names: set[str] = set()
    for run in load_runs():
        for tool in run.tools:
            name = tool.get("function", {}).get("name")
            if name not in names:
                names.add(name)
                tools.append(tool)
    return tuple(tools)


def _head() -> tuple[Message, ...]:
    """The head of the first OpenHands run: its system prompt and task."""
    run = next(r for r in load_runs() if r.source == "openhands" and r.tools)
    return run.messages[: split_head(run.messages)]


def synthetic(turns: int) -> Transcript:
    """A transcript of one real head and ``turns`` real turns (fresh dicts).

    Args:
        turns: how many turns after the head.

    Returns:
        The transcript, with the corpora's tool schemas.
    """
    pool = _turn_pool()
    messages = [copy.deepcopy(m) for m in _head()]
    for index in range(turns):
        messages.extend(copy.deepcopy(m) for m in pool[index % len(pool)])
    return Transcript(
        name=f"synthetic {turns:,} turns",
        messages=messages,
        tools=copy.deepcopy(list(all_tools())),
        turns=turns,
    )


def extra_turn(index: int) -> list[Message]:
    """A fresh copy of the pool turn a transcript of ``index`` turns would add next."""
    pool = _turn_pool()
    return [copy.deepcopy(m) for m in pool[index % len(pool)]]


def real_runs(min_messages: int = 0) -> list[Transcript]:
    """The corpus runs themselves (fresh copies) with at least ``min_messages`` messages."""
    out = []
    for run in load_runs():
        if len(run.messages) < min_messages:
            continue
        out.append(
            Transcript(
                name=f"{run.source}/{run.id}",
                messages=copy.deepcopy(list(run.messages)),
                tools=copy.deepcopy(list(run.tools)),
                turns=len(split_turns(run.messages)),
            )
        )
    return out


def turn_pool() -> tuple[tuple[Message, ...], ...]:
    """Every well-formed corpus turn (shared, not copied: copy before changing one)."""
    return _turn_pool()


def pool_size() -> int:
    """How many distinct real turns the synthetic transcripts cycle through."""
    return len(_turn_pool())


@functools.cache
def o200k_counter() -> Any:
    """windowguard's exact o200k_base counter, from the offline vocabulary file."""
    from windowguard.accounting.counters import TiktokenCounter

    return TiktokenCounter.from_file(O200K_FILE, "o200k_base")


def exact_tokens(messages: Sequence[Message], tools: Sequence[Message] | None) -> int:
    """Exact o200k prompt tokens of a request (messages + tools, OpenAI's accounting)."""
    from windowguard.accounting.templates import count_prompt

    return count_prompt(o200k_counter(), list(messages), list(tools or ()), template="openai")


def environment(*packages: str) -> str:
    """One markdown line naming the date, machine, Python and package versions."""
    import datetime
    import importlib.metadata
    import os
    import platform
    import subprocess

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        commit = "?"
    versions = []
    for name in ("windowguard", *packages):
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name} (not installed)")
    try:
        load = "load average {:.1f} / {:.1f} / {:.1f} (1/5/15 min)".format(*os.getloadavg())
    except OSError:
        load = "load average unknown"
    return (
        f"{datetime.date.today().isoformat()} · {cpu}, {os.cpu_count()} cores, {load} · "
        f"Python {platform.python_version()} on {platform.system()} · "
        f"{', '.join(versions)} · commit {commit or '?'}"
    )
