"""End to end: the tool loop through the official SDKs against the emulator over HTTP.

The emulator counts prompts exactly with o200k_base and refuses what the real servers
refuse, so these runs show what the loop does against a real window.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import windowguard as wg
from windowguard.core.failures import FailureKind
from windowguard.emulator import Emulator
from windowguard.run.providers.base import StreamDelta

from .exact_tokenizers import require, vocabulary
from .journal_backends import BACKENDS, Backend, backend_for, new_run_id


@pytest.fixture(autouse=True)
def _o200k() -> None:
    require("o200k")  # skips with the reason outside CI when the vocabulary is missing


_OPEN: list[Any] = []


@pytest.fixture(autouse=True)
def _close_providers() -> Any:
    yield
    while _OPEN:
        _OPEN.pop().close()


FILES = {
    f"src/module_{i}.py": "\n".join(
        f"def f{i}_{j}(x):\n    return x * {j}  # line {j}" for j in range(60)
    )
    for i in range(8)
}


@wg.tool
def read_file(path: str) -> str:
    """Read a file of the project.

    Args:
        path: the file's path.
    """
    return FILES.get(path, f"no such file: {path}; files: {', '.join(sorted(FILES))}")


@wg.tool
def search(pattern: str, max_results: int = 20) -> str:
    """Search the project for a pattern.

    Args:
        pattern: text to look for.
        max_results: at most this many hits.
    """
    hits = [
        f"{p}:{n}: {line}"
        for p, body in FILES.items()
        for n, line in enumerate(body.splitlines())
        if pattern in line
    ]
    return "\n".join(hits[:max_results]) or "no hits"


@wg.tool
def list_files() -> str:
    """List the project's files."""
    return "\n".join(sorted(FILES))


TOOLS = [read_file, search, list_files]
TASK = [
    {
        "role": "system",
        "content": "You are a careful coding agent. Use the tools to inspect the project.",
    },
    {"role": "user", "content": "Find why f3_7 returns the wrong value and propose a fix."},
]


def _provider(emu: Emulator) -> Any:
    provider = wg.OpenAIChatProvider("Qwen/Qwen3-8B", base_url=emu.base_url, api_key="k")
    _OPEN.append(provider)
    return provider


def _overflows(result: wg.RunResult) -> int:
    return sum(
        1
        for e in result.events
        if e.kind == "provider_error" and e.failure_kind == FailureKind.CONTEXT_OVERFLOW.value
    )  # type: ignore[attr-defined]


def test_300_iterations_in_16k_with_manager_never_overflow() -> None:
    with Emulator(
        flavor="vllm",
        context_window=16_384,
        tokenizer=str(vocabulary("o200k")),
        scenario="coding-agent:1000",
        model="Qwen/Qwen3-8B",
        seed=7,
    ) as emu:
        provider = _provider(emu)
        assert provider.model_info().context_window == 16_384  # discovered from the server
        manager = wg.ContextWindowManager(model_info=provider.model_info())
        loop = wg.ToolLoop(
            provider, tools=TOOLS, manager=manager, max_iterations=300, max_tokens=1024
        )
        result = loop.run(TASK)
        assert result.termination in (
            wg.TerminationReason.COMPLETED,
            wg.TerminationReason.MAX_ITERATIONS,
        )
        assert result.iterations == 300
        assert _overflows(result) == 0
        assert all(r.status == 200 for r in emu.records)
        assert max(r.prompt_tokens for r in emu.records) + 1024 <= 16_384
        assert sum(1 for e in result.events if e.kind == "transcript_pruned") > 0
        # the run keeps the full transcript, never the pruned view
        assert len(result.messages) > 600
        pressures = [e for e in result.events if e.kind == "context_pressure"]
        assert len(pressures) == len(emu.records)
        assert all(p.tokens == r.prompt_tokens for p, r in zip(pressures, emu.records))  # type: ignore[attr-defined]


def test_the_same_run_without_the_manager_overflows_at_the_provider() -> None:
    with Emulator(
        flavor="vllm",
        context_window=16_384,
        tokenizer=str(vocabulary("o200k")),
        scenario="coding-agent:1000",
        model="Qwen/Qwen3-8B",
        seed=7,
    ) as emu:
        with _provider(emu) as provider:
            result = wg.ToolLoop(provider, tools=TOOLS, max_iterations=300, max_tokens=1024).run(
                TASK
            )
        assert result.termination is wg.TerminationReason.PROVIDER_ERROR
        assert result.failure is not None
        assert result.failure.kind is FailureKind.CONTEXT_OVERFLOW
        assert result.failure.context_window == 16_384
        assert emu.records[-1].status == 400


def test_head_alone_too_big_ends_truncated_with_no_provider_call() -> None:
    with Emulator(flavor="openai", context_window=8192, tokenizer=str(vocabulary("o200k"))) as emu:
        provider = _provider(emu)
        manager = wg.ContextWindowManager(model_info=wg.ModelInfo(8192, tokenizer="o200k"))
        huge = [TASK[0], {"role": "user", "content": "review this:\n" + "x = 1\n" * 9000}]
        result = wg.ToolLoop(provider, tools=TOOLS, manager=manager).run(huge)
        assert result.termination is wg.TerminationReason.CONTEXT_TRUNCATED
        assert len(emu.records) == 0


def test_injected_rate_limits_and_server_errors_are_retried() -> None:
    sleeps: list[float] = []
    with Emulator(
        flavor="vllm",
        context_window=16_384,
        tokenizer=str(vocabulary("o200k")),
        scenario="coding-agent:4",
        model="Qwen/Qwen3-8B",
        faults="2,3:429@1.5;5:503",
    ) as emu:
        provider = _provider(emu)
        loop = wg.ToolLoop(
            provider,
            tools=TOOLS,
            manager=wg.ContextWindowManager(model_info=provider.model_info()),
            sleep=sleeps.append,
        )
        result = loop.run(TASK)
        assert result.termination is wg.TerminationReason.COMPLETED
        statuses = [r.status for r in emu.records]
        assert statuses.count(429) == 2 and statuses.count(503) == 1
        assert sleeps[0] >= 1.5 and len(sleeps) == 3
        assert [e.kind for e in result.events].count("retry_scheduled") == 3


def test_anthropic_run_with_manager_through_the_sdk() -> None:
    with Emulator(
        flavor="anthropic",
        context_window=12_000,
        max_output_tokens=2048,
        tokenizer=str(vocabulary("o200k")),
        scenario="coding-agent:60",
    ) as emu:
        provider = wg.AnthropicProvider("claude-sonnet-4-6", base_url=emu.root_url, api_key="k")
        _OPEN.append(provider)
        manager = wg.ContextWindowManager(model_info=provider.model_info())
        loop = wg.ToolLoop(
            provider, tools=TOOLS, manager=manager, max_iterations=60, max_tokens=1024
        )
        result = loop.run(
            [{"role": "user", "content": TASK[1]["content"]}], system=TASK[0]["content"]
        )
        assert result.termination in (
            wg.TerminationReason.COMPLETED,
            wg.TerminationReason.MAX_ITERATIONS,
        )
        assert _overflows(result) == 0
        assert all(r.status == 200 for r in emu.records)


def test_async_loop_matches_sync_against_the_emulator() -> None:
    def sync_run() -> list[Any]:
        with Emulator(
            flavor="vllm",
            context_window=8192,
            tokenizer=str(vocabulary("o200k")),
            scenario="coding-agent:25",
            model="Qwen/Qwen3-8B",
            seed=3,
        ) as emu:
            provider = _provider(emu)
            return (
                wg.ToolLoop(
                    provider,
                    tools=TOOLS,
                    manager=wg.ContextWindowManager(model_info=provider.model_info()),
                )
                .run(TASK)
                .messages
            )

    async def async_run() -> list[Any]:
        with Emulator(
            flavor="vllm",
            context_window=8192,
            tokenizer=str(vocabulary("o200k")),
            scenario="coding-agent:25",
            model="Qwen/Qwen3-8B",
            seed=3,
        ) as emu:
            async with wg.AsyncOpenAIChatProvider(
                "Qwen/Qwen3-8B", base_url=emu.base_url, api_key="k"
            ) as provider:
                info = await provider.amodel_info()
                result = await wg.AsyncToolLoop(
                    provider, tools=TOOLS, manager=wg.ContextWindowManager(model_info=info)
                ).run(TASK)
                return result.messages

    strip = lambda ms: [{k: v for k, v in m.items() if k != "id"} for m in ms]  # noqa: E731
    assert strip(sync_run()) == strip(asyncio.run(async_run()))


WORKER = textwrap.dedent(
    """
    import json, sys, time
    import windowguard as wg
    base_url, journal_spec, log_path, run_id = sys.argv[1:5]

    @wg.tool
    def work(path: str) -> str:
        '''Do slow work on a file.

        Args:
            path: the file.
        '''
        with open(log_path, "a") as log:
            log.write("start\\n")
        time.sleep(0.15)
        with open(log_path, "a") as log:
            log.write("end " + path + "\\n")
        return "worked on " + path + " " + "y" * 200

    provider = wg.OpenAIChatProvider("m", base_url=base_url, api_key="k", discover=False,
                                     model_info=wg.ModelInfo(16384, tokenizer="o200k"))
    journal = (wg.SqliteJournal(journal_spec[7:]) if journal_spec.startswith("sqlite:")
               else wg.PostgresJournal(journal_spec))
    loop = wg.ToolLoop(provider, tools=[work], manager=wg.ContextWindowManager(model_info=provider.model_info()),
                       journal=journal, max_iterations=40)
    result = loop.run([{"role": "user", "content": "work on everything"}], run_id=run_id)
    print(json.dumps({"termination": result.termination.name, "messages": len(result.messages),
                      "tool_results": sum(1 for m in result.messages if m.get("role") == "tool")}))
    """
)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backend_for(request.param, tmp_path)


def test_killed_run_resumes_from_its_journal_with_nothing_lost_or_repeated(
    tmp_path: Path, backend: Backend
) -> None:
    # On both journals: the restart is not refused by the killed runner's lease (its
    # process is gone), replays the journalled calls and never re-runs a finished tool.
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    log, run_id = tmp_path / "tools.log", new_run_id("job")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    with Emulator(
        flavor="vllm",
        context_window=16_384,
        tokenizer=str(vocabulary("o200k")),
        scenario="coding-agent:12",
        seed=5,
    ) as emu:
        args = [sys.executable, str(script), emu.base_url, backend.spec(), str(log), run_id]
        with subprocess.Popen(
            args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ) as proc:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # kill it while its 6th tool call is running
                if log.exists() and log.read_text().count("start") >= 6:
                    break
                time.sleep(0.01)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        calls_before = len(emu.records)
        done_before = [line for line in log.read_text().splitlines() if line.startswith("end")]
        assert 4 <= len(done_before) < 12

        finished = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
        assert finished.returncode == 0, finished.stderr
        summary = json.loads(finished.stdout.strip().splitlines()[-1])

        ended = [line for line in log.read_text().splitlines() if line.startswith("end")]
        # every tool that finished did so exactly once: ends == results in the transcript
        model_calls, tool_results = backend.open().counts(run_id)
        assert summary["termination"] == "COMPLETED"
        assert summary["tool_results"] == tool_results == len(ended)
        # the restart replayed the journalled model calls instead of re-sending them
        assert (
            len(emu.records) - calls_before == model_calls - (calls_before - 1)
            or len(emu.records) - calls_before <= model_calls - calls_before + 1
        )
        assert len(emu.records) <= model_calls + 1


def test_anthropic_cap_hit_synthesis_sends_tools_with_tool_choice_none() -> None:
    # The Messages API refuses a history with tool blocks and no tool definitions, so the
    # synthesis call keeps the tools (counted by the fit) and forbids calling them.
    with Emulator(
        flavor="anthropic",
        context_window=16_000,
        max_output_tokens=2048,
        tokenizer=str(vocabulary("o200k")),
        scenario="coding-agent:50",
    ) as emu:
        provider = wg.AnthropicProvider("claude-sonnet-4-6", base_url=emu.root_url, api_key="k")
        _OPEN.append(provider)
        loop = wg.ToolLoop(
            provider,
            tools=TOOLS,
            manager=wg.ContextWindowManager(model_info=provider.model_info()),
            max_iterations=3,
            max_tokens=512,
        )
        result = loop.run(
            [{"role": "user", "content": TASK[1]["content"]}], system=TASK[0]["content"]
        )
        assert result.termination is wg.TerminationReason.MAX_ITERATIONS, result.failure
        assert all(r.status == 200 for r in emu.records)
        assert len(emu.records) == 4


def test_emulator_refuses_tool_blocks_without_tools_like_the_messages_api() -> None:
    anthropic = pytest.importorskip("anthropic")
    with (
        Emulator(
            flavor="anthropic", context_window=8000, tokenizer=str(vocabulary("o200k"))
        ) as emu,
        anthropic.Anthropic(base_url=emu.root_url, api_key="k", max_retries=0) as client,
    ):
        messages = [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "list_files", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}],
            },
        ]
        with pytest.raises(anthropic.BadRequestError, match="must define tools"):
            client.messages.create(model="claude-sonnet-4-6", max_tokens=100, messages=messages)


def test_streamed_run_is_fitted_and_takes_usage_from_the_stream() -> None:
    with Emulator(
        flavor="vllm",
        context_window=4096,
        tokenizer=str(vocabulary("o200k")),
        scenario="coding-agent:30",
        model="Qwen/Qwen3-8B",
        seed=11,
    ) as emu:
        provider = _provider(emu)
        loop = wg.ToolLoop(
            provider,
            tools=TOOLS,
            manager=wg.ContextWindowManager(model_info=provider.model_info()),
            max_iterations=40,
            max_tokens=512,
        )
        stream = loop.stream(TASK)
        items = list(stream)
        result = stream.result
        assert result is not None
        # the scenario counts the turns it is shown, and pruning hides old ones: it may
        # keep calling tools until the cap-hit synthesis call
        assert result.termination in (
            wg.TerminationReason.COMPLETED,
            wg.TerminationReason.MAX_ITERATIONS,
        )
        deltas = "".join(i.text for i in items if isinstance(i, StreamDelta))
        assert deltas and deltas == result.text
        pressures = [i for i in items if isinstance(i, wg.ContextPressure)]
        assert [p.tokens for p in pressures] == [r.prompt_tokens for r in emu.records]
        assert any(isinstance(i, wg.TranscriptPruned) for i in items)
        assert all(r.status == 200 for r in emu.records)
