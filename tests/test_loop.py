"""The tool loop: every scenario runs through both drivers (sync/async parity)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import windowguard as wg
from windowguard.core.failures import Failure, FailureKind
from windowguard.run.providers.base import ModelRequest, StreamDelta
from windowguard.run.providers.fake import AsyncFakeProvider, FakeCalls, FakeProvider, ScriptItem
from windowguard.run.tools import ToolThreads

TASK = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the bug."},
]


@wg.tool
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: which file.
    """
    return f"contents of {path}: " + "x" * 300


@wg.tool
def explode(reason: str = "boom") -> str:
    """Always fails."""
    raise RuntimeError(reason)


@wg.tool(timeout=0.05)
def slow() -> str:
    """Takes too long (its own timeout, so a loaded machine cannot time out the others)."""
    time.sleep(1.0)
    return "late"


APPROVALS: list[str] = []


@wg.tool
def deploy(target: str) -> str:
    """Deploy, after a human approves."""
    if target not in APPROVALS:
        raise wg.SuspendRun("needs approval", {"target": target})
    return f"deployed {target}"


TOOLS = [read_file, explode, slow, deploy]


def _overflow(prompt: int | None = None, window: int | None = None) -> Failure:
    return Failure(
        kind=FailureKind.CONTEXT_OVERFLOW,
        retryable=False,
        status=400,
        message="context_length_exceeded",
        prompt_tokens=prompt,
        context_window=window,
    )


def _rate_limited(after: float = 2.0) -> Failure:
    return Failure(
        kind=FailureKind.RATE_LIMIT,
        retryable=True,
        retry_after=after,
        status=429,
        message="slow down",
    )


class Harness:
    """Runs one scenario with either driver and reports what happened."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sleeps: list[float] = []

    def provider(
        self, script: Sequence[ScriptItem] | Callable[[ModelRequest], ScriptItem], **kw: Any
    ) -> Any:
        cls = FakeProvider if self.mode == "sync" else AsyncFakeProvider
        return cls(script, **kw)

    def loop(self, provider: Any, **kw: Any) -> Any:
        if self.mode == "sync":
            return wg.ToolLoop(provider, sleep=self.sleeps.append, **kw)

        async def sleep(seconds: float) -> None:
            self.sleeps.append(seconds)

        return wg.AsyncToolLoop(provider, sleep=sleep, **kw)

    def run(self, loop: Any, messages: Any, **kw: Any) -> wg.RunResult:
        if self.mode == "sync":
            return loop.run(messages, **kw)  # type: ignore[no-any-return]
        return asyncio.run(loop.run(messages, **kw))  # type: ignore[no-any-return]

    def resume(self, loop: Any, state: wg.RunState, **kw: Any) -> wg.RunResult:
        if self.mode == "sync":
            return loop.resume(state, **kw)  # type: ignore[no-any-return]
        return asyncio.run(loop.resume(state, **kw))  # type: ignore[no-any-return]


@pytest.fixture(params=["sync", "async"])
def h(request: pytest.FixtureRequest) -> Harness:
    return Harness(request.param)


def _manager(window: int = 8192) -> wg.ContextWindowManager:
    return wg.ContextWindowManager(model_info=wg.ModelInfo(window, tokenizer="o200k"))


def kinds(result: wg.RunResult) -> list[str]:
    return [e.kind for e in result.events]


def test_tool_call_then_answer_completes(h: Harness) -> None:
    provider = h.provider(
        [FakeCalls(("read_file", {"path": "a.py"}), ("read_file", {"path": "b.py"})), "fixed"]
    )
    result = h.run(h.loop(provider, tools=TOOLS, manager=_manager()), TASK)
    assert result.termination is wg.TerminationReason.COMPLETED
    assert result.text == "fixed"
    roles = [m["role"] for m in result.messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert result.messages[3]["content"].startswith("contents of a.py")
    assert provider.requests[0].site == "tool_send" and provider.requests[0].tools
    assert result.usage.model_calls == 2
    assert kinds(result)[0] == "run_started" and kinds(result)[-1] == "run_finished"
    assert kinds(result).count("tool_call") == 2 and kinds(result).count("tool_result") == 2
    assert kinds(result).count("model_call") == 2


def test_context_pressure_after_each_live_call_from_reported_tokens(h: Harness) -> None:
    provider = h.provider([FakeCalls(("read_file", {"path": "a"})), "ok"], usage=lambda r: 4000)
    result = h.run(h.loop(provider, tools=TOOLS, manager=_manager(8192)), TASK)
    pressure = [e.to_dict() for e in result.events if e.kind == "context_pressure"]
    assert (
        pressure
        == [{"event": "context_pressure", "tokens": 4000, "window": 8192, "pressure": 4000 / 8192}]
        * 2
    )
    estimates = [e for e in result.events if e.kind == "context_estimate"]
    assert len(estimates) == 2


def test_plain_completion_site_sends_no_tools(h: Harness) -> None:
    provider = h.provider(["hello"])
    result = h.run(h.loop(provider, manager=_manager()), TASK)
    assert result.termination is wg.TerminationReason.COMPLETED
    assert provider.requests[0].site == "plain" and provider.requests[0].tools == ()


def test_cap_hit_synthesis_call_without_tools(h: Harness) -> None:
    provider = h.provider([FakeCalls(("read_file", {"path": "a"}))] * 3 + ["final answer"])
    result = h.run(h.loop(provider, tools=TOOLS, manager=_manager(), max_iterations=3), TASK)
    assert result.termination is wg.TerminationReason.MAX_ITERATIONS
    assert result.text == "final answer"
    last = provider.requests[-1]
    assert last.site == "synthesis" and last.tools == ()
    assert "final answer now" in result.messages[-2]["content"]
    assert provider.calls == 4


def test_tool_failures_become_results_the_model_sees(h: Harness) -> None:
    script = [
        FakeCalls(
            ("explode", {"reason": "disk full"}),
            ("nope", {}),
            ("read_file", "{not json"),
            ("read_file", {"wrong": 1}),
            ("slow", {}),
        ),
        "ok",
    ]
    provider = h.provider(script)
    result = h.run(h.loop(provider, tools=TOOLS, tool_timeout=30.0), TASK)
    assert result.termination is wg.TerminationReason.COMPLETED
    outputs = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert "RuntimeError: disk full" in outputs[0]
    assert "unknown tool 'nope'" in outputs[1]
    assert "invalid JSON" in outputs[2]
    assert "do not fit read_file" in outputs[3]
    assert "timed out" in outputs[4]
    assert all(e.is_error for e in result.events if e.kind == "tool_result")  # type: ignore[attr-defined]


def test_head_too_big_ends_context_truncated_without_any_provider_call(h: Harness) -> None:
    provider = h.provider(["never"])
    huge = [{"role": "user", "content": "word " * 40_000}]
    result = h.run(h.loop(provider, tools=TOOLS, manager=_manager(8192)), huge)
    assert result.termination is wg.TerminationReason.CONTEXT_TRUNCATED
    assert not result.termination.is_retryable
    assert provider.calls == 0
    assert isinstance(result.error, wg.ContextTruncatedError)


def test_long_run_is_pruned_but_full_transcript_returned(h: Harness) -> None:
    script = [FakeCalls(("read_file", {"path": f"f{i}.py"})) for i in range(40)] + ["done"]
    provider = h.provider(script)
    result = h.run(h.loop(provider, tools=TOOLS, manager=_manager(4096), max_iterations=50), TASK)
    assert result.termination is wg.TerminationReason.COMPLETED
    assert len(result.messages) == 2 + 40 * 2 + 1
    sent = [len(r.messages) for r in provider.requests]
    assert max(sent) < len(result.messages)
    assert "transcript_pruned" in kinds(result)
    for request in provider.requests:
        assert request.messages[:2] == TASK


def test_without_manager_sends_the_full_transcript(h: Harness) -> None:
    script = [FakeCalls(("read_file", {"path": f"f{i}.py"})) for i in range(5)] + ["done"]
    provider = h.provider(script)
    result = h.run(h.loop(provider, tools=TOOLS, max_tokens=100), TASK)
    assert [len(r.messages) for r in provider.requests] == [2, 4, 6, 8, 10, 12]
    assert all(r.max_tokens == 100 for r in provider.requests)
    assert "context_estimate" not in kinds(result)


def test_rate_limits_back_off_honouring_retry_after(h: Harness) -> None:
    provider = h.provider([_rate_limited(2.0), _rate_limited(0.0), "ok"])
    result = h.run(h.loop(provider, manager=_manager()), TASK)
    assert result.termination is wg.TerminationReason.COMPLETED
    assert provider.calls == 3
    assert len(h.sleeps) == 2 and h.sleeps[0] >= 2.0
    assert kinds(result).count("retry_scheduled") == 2


def test_auth_failure_stops_at_once(h: Harness) -> None:
    auth = Failure(kind=FailureKind.AUTH, retryable=False, status=401, message="bad key")
    provider = h.provider([auth, "never"])
    result = h.run(h.loop(provider, manager=_manager()), TASK)
    assert result.termination is wg.TerminationReason.PROVIDER_ERROR
    assert result.termination.is_retryable
    assert result.failure is not None and result.failure.kind is FailureKind.AUTH
    assert provider.calls == 1


def test_overflow_refits_once_then_stops_truncated(h: Harness) -> None:
    provider = h.provider([_overflow(), _overflow()])
    result = h.run(h.loop(provider, manager=_manager()), TASK)
    assert result.termination is wg.TerminationReason.CONTEXT_TRUNCATED
    assert provider.calls == 2
    decisions = [e.decision for e in result.events if e.kind == "provider_error"]  # type: ignore[attr-defined]
    assert decisions == ["refit", "stop"]


def test_overflow_with_exact_count_recalibrates_before_the_refit(h: Harness) -> None:
    # The provider says the prompt was 20,000 tokens: far beyond what the estimate
    # thought. Calibration grows to match, and the refit finds nothing fits: the run
    # stops legibly instead of sending again.
    provider = h.provider([_overflow(prompt=20_000, window=8192), "never"])
    result = h.run(h.loop(provider, manager=_manager()), TASK)
    assert result.termination is wg.TerminationReason.CONTEXT_TRUNCATED
    assert provider.calls == 1


def test_overflow_without_manager_is_a_provider_error(h: Harness) -> None:
    provider = h.provider([_overflow()])
    result = h.run(h.loop(provider), TASK)
    assert result.termination is wg.TerminationReason.PROVIDER_ERROR
    assert result.failure is not None and result.failure.kind is FailureKind.CONTEXT_OVERFLOW


def test_output_limit_clamps_for_the_rest_of_the_run(h: Harness) -> None:
    limit = Failure(
        kind=FailureKind.OUTPUT_LIMIT,
        retryable=False,
        status=400,
        message="too big",
        max_output_tokens=1000,
        requested_output=4000,
    )
    provider = h.provider([limit, FakeCalls(("read_file", {"path": "a"})), "ok"])
    result = h.run(h.loop(provider, tools=TOOLS, manager=_manager(), max_tokens=4000), TASK)
    assert result.termination is wg.TerminationReason.COMPLETED
    assert [r.max_tokens for r in provider.requests] == [4000, 1000, 1000]


def test_suspend_and_resume_with_supplied_result(h: Harness) -> None:
    provider = h.provider(
        [FakeCalls(("read_file", {"path": "a"}), ("deploy", {"target": "prod"})), "deployed"]
    )
    loop = h.loop(provider, tools=TOOLS, manager=_manager())
    paused = h.run(loop, TASK)
    assert paused.termination is wg.TerminationReason.SUSPENDED
    state = paused.state
    assert (
        state is not None and state.reason == "needs approval" and state.data == {"target": "prod"}
    )
    assert [r.call_id for r in state.completed] == ["call_0"]
    restored = wg.RunState.from_json(state.to_json())
    assert restored == state
    done = h.resume(loop, restored, results={"call_1": "approved and deployed"})
    assert done.termination is wg.TerminationReason.COMPLETED
    tool_outputs = [m["content"] for m in done.messages if m.get("role") == "tool"]
    assert tool_outputs[1] == "approved and deployed"
    assert provider.calls == 2
    # calibration resets on the resumed run's first send
    resumed_estimates = [e for e in done.events if e.kind == "context_estimate"]
    assert resumed_estimates[0].calibration == wg.Calibration().seed  # type: ignore[attr-defined]


def test_resume_reruns_the_paused_tool_when_no_result_supplied(h: Harness) -> None:
    provider = h.provider([FakeCalls(("deploy", {"target": "staging"})), "ok"])
    loop = h.loop(provider, tools=TOOLS)
    paused = h.run(loop, TASK)
    assert paused.state is not None
    APPROVALS.append("staging")
    try:
        done = h.resume(loop, paused.state)
    finally:
        APPROVALS.remove("staging")
    assert done.termination is wg.TerminationReason.COMPLETED
    assert any(m.get("content") == "deployed staging" for m in done.messages)


class Crash(BaseException):
    """Simulates the process dying mid-run."""


def test_journal_replays_model_calls_and_never_reruns_tools(h: Harness, tmp_path: Any) -> None:
    counted: list[str] = []

    @wg.tool
    def count(path: str) -> str:
        """Counts invocations."""
        counted.append(path)
        return f"n={len(counted)}"

    script: list[ScriptItem] = [FakeCalls(("count", {"path": f"p{i}"})) for i in range(4)] + [
        "done"
    ]
    journal = wg.SqliteJournal(tmp_path / "runs.db")
    first = h.provider([*script[:3], Crash()])
    with pytest.raises(Crash):
        h.run(h.loop(first, tools=[count], manager=_manager(), journal=journal), TASK, run_id="r1")
    assert counted == ["p0", "p1", "p2"]
    second = h.provider(script[3:])
    result = h.run(
        h.loop(second, tools=[count], manager=_manager(), journal=journal), TASK, run_id="r1"
    )
    assert result.termination is wg.TerminationReason.COMPLETED
    assert counted == ["p0", "p1", "p2", "p3"]  # finished tools never re-run
    assert second.calls == 2  # journalled calls replayed, not re-sent
    assert kinds(result).count("model_call") == 2  # events for live calls only
    assert journal.termination("r1") == "COMPLETED"
    assert result.events[0].to_dict()["resumed"] is True  # the journal held the run
    with pytest.raises(wg.WindowGuardError, match="different transcript"):
        h.run(
            h.loop(second, tools=[count], journal=journal),
            [{"role": "user", "content": "other"}],
            run_id="r1",
        )


def test_rerunning_a_finished_run_says_it_replayed_it(
    h: Harness, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    journal = wg.SqliteJournal(tmp_path / "runs.db")
    script: list[ScriptItem] = [FakeCalls(("read_file", {"path": "a"})), "done"]
    first = h.run(h.loop(h.provider(script), tools=TOOLS, journal=journal), TASK, run_id="r2")
    assert first.events[0].to_dict()["resumed"] is False
    assert not [r for r in caplog.records if "r2" in r.getMessage()]
    again = h.provider([])  # would fail if called: a finished run is replayed
    with caplog.at_level(logging.INFO, logger="windowguard"):
        replay = h.run(h.loop(again, tools=TOOLS, journal=journal), TASK, run_id="r2")
    assert again.calls == 0 and replay.messages == first.messages
    started = replay.events[0]
    assert started.kind == "run_started" and started.to_dict()["resumed"] is True
    said = [r for r in caplog.records if "'r2' already finished (COMPLETED)" in r.getMessage()]
    assert said and said[0].levelno == logging.WARNING and "replaying" in said[0].getMessage()


def test_failing_sink_never_breaks_a_run(h: Harness) -> None:
    seen: list[str] = []

    def broken(event: wg.Event) -> None:
        raise ValueError("sink down")

    provider = h.provider([FakeCalls(("read_file", {"path": "a"})), "ok"])
    result = h.run(
        h.loop(provider, tools=TOOLS, sinks=[broken, lambda e: seen.append(e.kind)]), TASK
    )
    assert result.termination is wg.TerminationReason.COMPLETED
    assert seen == kinds(result)


def test_stream_yields_deltas_and_events(h: Harness) -> None:
    provider = h.provider([FakeCalls(("read_file", {"path": "a"})), "the bug is fixed"])
    loop = h.loop(provider, tools=TOOLS, manager=_manager())

    async def collect_async(stream: Any) -> list[Any]:
        return [item async for item in stream]

    stream = loop.stream(TASK)
    items = list(stream) if h.mode == "sync" else asyncio.run(collect_async(stream))
    text = "".join(i.text for i in items if isinstance(i, StreamDelta))
    assert text == "the bug is fixed"
    assert stream.result is not None and stream.result.termination is wg.TerminationReason.COMPLETED
    event_kinds = [i.kind for i in items if isinstance(i, wg.Event)]
    assert event_kinds == kinds(stream.result)
    assert all(r.messages[:2] == TASK for r in provider.requests)


def test_parity_same_messages_and_events(tmp_path: Any) -> None:
    def scenario(mode: str) -> tuple[list[Any], list[dict[str, Any]]]:
        hh = Harness(mode)
        script = [
            FakeCalls(("read_file", {"path": f"f{i}"}), ("explode", {})) for i in range(12)
        ] + ["done"]
        result = hh.run(hh.loop(hh.provider(script), tools=TOOLS, manager=_manager(4096)), TASK)
        return result.messages, [e.to_dict() for e in result.events]

    assert scenario("sync") == scenario("async")


def test_bad_loop_configuration_is_named() -> None:
    with pytest.raises(wg.ConfigurationError, match="max_iterations"):
        wg.ToolLoop(FakeProvider([]), max_iterations=-1)
    with pytest.raises(wg.ConfigurationError, match="Tool values"):
        wg.ToolLoop(FakeProvider([]), tools=[lambda: 1])  # type: ignore[list-item]
    with pytest.raises(wg.ConfigurationError, match="run_id"):
        wg.ToolLoop(FakeProvider([]), journal=wg.SqliteJournal(":memory:")).run(TASK)
    with pytest.raises(wg.ConfigurationError, match="list of messages"):
        wg.ToolLoop(FakeProvider([])).run("hello")  # type: ignore[arg-type]


def test_run_state_rejects_garbage() -> None:
    with pytest.raises(wg.ConfigurationError, match="run state"):
        wg.RunState.from_json(json.dumps({"run_id": "x"}))


# --------------------------------------------------------------------------- resume input


def _paused(h: Harness, **kw: Any) -> tuple[Any, Any, wg.RunState]:
    provider = h.provider(
        [FakeCalls(("read_file", {"path": "a"}), ("deploy", {"target": "prod"})), "deployed"]
    )
    loop = h.loop(provider, tools=TOOLS, **kw)
    paused = h.run(loop, TASK, **({"run_id": "r-resume"} if "journal" in kw else {}))
    assert paused.state is not None
    return provider, loop, paused.state


def test_resume_refuses_results_for_calls_the_turn_does_not_have(h: Harness) -> None:
    provider, loop, state = _paused(h)
    with pytest.raises(wg.RunStateError, match=r"'call_9'.*'call_0', 'call_1'"):
        h.resume(loop, state, results={"call_9": "approved"})
    with pytest.raises(wg.RunStateError, match="already has a result"):
        h.resume(loop, state, results={"call_0": "other contents"})
    assert provider.calls == 1  # nothing ran: no tool, no model call


def test_resume_refuses_results_that_are_not_a_mapping_of_text(h: Harness) -> None:
    provider, loop, state = _paused(h)
    with pytest.raises(wg.RunStateError, match=r"must map .* got list"):
        h.resume(loop, state, results=["approved"])
    with pytest.raises(wg.RunStateError, match="result text"):
        h.resume(loop, state, results={"call_1": {"ok": True}})
    assert provider.calls == 1


def test_resume_refuses_what_is_not_a_run_state(h: Harness) -> None:
    _, loop, state = _paused(h)
    with pytest.raises(wg.RunStateError, match=r"got dict; rebuild it with RunState.from_dict"):
        h.resume(loop, state.to_dict())
    with pytest.raises(wg.RunStateError, match="got str"):
        h.resume(loop, state.to_json())
    assert isinstance(wg.RunStateError("x"), wg.ConfigurationError)


def test_resuming_one_state_twice_with_another_answer_is_refused(h: Harness, tmp_path: Any) -> None:
    journal = wg.SqliteJournal(tmp_path / "runs.db")
    provider, loop, state = _paused(h, journal=journal)
    first = h.resume(loop, state, results={"call_1": "approved"})
    assert first.termination is wg.TerminationReason.COMPLETED
    with pytest.raises(wg.JournalMismatchError, match=r"'call_1'.*'approved'.*'denied'") as info:
        h.resume(loop, state, results={"call_1": "denied"})
    assert info.value.run_id == "r-resume"
    held = journal.tool_result("r-resume", 0, 1)
    assert held is not None and held.content == "approved"  # the journal kept its answer
    again = h.resume(loop, state, results={"call_1": "approved"})  # the same answer replays
    assert again.messages == first.messages and provider.calls == 2


@wg.tool
def pause_badly(what: str) -> str:
    """Pauses the run with data that is not JSON."""
    raise wg.SuspendRun("needs approval", {"when": object()})


def test_suspend_with_data_that_cannot_be_saved_is_refused_at_once(h: Harness) -> None:
    ran: list[str] = []

    @wg.tool
    def note(text: str) -> str:
        """Writes a note."""
        ran.append(text)
        return "noted"

    provider = h.provider([FakeCalls(("pause_badly", {"what": "x"}), ("note", {"text": "n"}))])
    loop = h.loop(provider, tools=[pause_badly, note])
    with pytest.raises(wg.RunStateError, match=r"'pause_badly'.*cannot be saved.*object"):
        h.run(loop, TASK)
    if h.mode == "sync":
        assert ran == []  # refused before the rest of the turn ran


# --------------------------------------------------------------------------- idempotency


def test_a_tool_can_take_its_call_context_which_the_model_never_sees(h: Harness) -> None:
    seen: list[wg.ToolContext] = []

    @wg.tool
    def charge(order: str, ctx: wg.ToolContext) -> str:
        """Charge an order once.

        Args:
            order: the order.
        """
        seen.append(ctx)
        return f"charged {order}"

    assert charge.parameters["properties"].keys() == {"order"}
    assert charge.parameters["required"] == ["order"]
    provider = h.provider(
        [FakeCalls(("charge", {"order": "o1"}), ("charge", {"order": "o2"})), "done"]
    )
    result = h.run(h.loop(provider, tools=[charge]), TASK, run_id="r-ctx")
    assert result.termination is wg.TerminationReason.COMPLETED
    assert [(c.run_id, c.call_id, c.step, c.position) for c in seen] == [
        ("r-ctx", "call_0", 0, 0),
        ("r-ctx", "call_1", 0, 1),
    ]
    keys = {c.idempotency_key for c in seen}
    assert len(keys) == 2 and all(k.startswith("wg-") for k in keys)
    # the model cannot set it
    sneaky = h.provider([FakeCalls(("charge", {"order": "o3", "ctx": "forged"})), "done"])
    forged = h.run(h.loop(sneaky, tools=[charge]), TASK)
    assert "unexpected argument 'ctx'" in forged.messages[3]["content"]


def test_a_tool_in_flight_at_a_kill_runs_again_with_the_same_idempotency_key(
    h: Harness, tmp_path: Any
) -> None:
    keys: list[str] = []

    @wg.tool
    def send_mail(to: str, ctx: wg.ToolContext | None = None) -> str:
        """Send a mail (the process dies the first time, mid-way)."""
        assert ctx is not None
        keys.append(ctx.idempotency_key)
        if len(keys) == 1:
            raise Crash("killed while the mail was being sent")
        return "sent"

    journal = wg.SqliteJournal(tmp_path / "runs.db")
    script: list[ScriptItem] = [FakeCalls(("send_mail", {"to": "a@b.c"})), "done"]
    with pytest.raises(Crash):
        h.run(h.loop(h.provider(script), tools=[send_mail], journal=journal), TASK, run_id="m1")
    result = h.run(
        h.loop(h.provider(script[1:]), tools=[send_mail], journal=journal), TASK, run_id="m1"
    )
    assert result.termination is wg.TerminationReason.COMPLETED
    assert len(keys) == 2 and keys[0] == keys[1]  # at least once, recognisably the same call


# --------------------------------------------------------------------------- hung tools

HANG = threading.Event()


@wg.tool
def hang() -> str:
    """Never returns (until the test ends)."""
    HANG.wait(20)
    return "woke"


@wg.tool
def quick() -> str:
    """Returns at once."""
    return "quick ran"


def test_hung_tools_of_one_loop_never_starve_another_loop(h: Harness) -> None:
    HANG.clear()
    try:
        stuck = h.provider([FakeCalls(*[("hang", {})] * 8), "gave up"])
        first = h.run(h.loop(stuck, tools=[hang], tool_timeout=0.1), TASK)
        outputs = [m["content"] for m in first.messages if m.get("role") == "tool"]
        assert len(outputs) == 8 and all("timed out" in o for o in outputs)
        fresh = h.provider([FakeCalls(("quick", {})), "done"])
        second = h.run(h.loop(fresh, tools=[quick], tool_timeout=5.0), TASK)
        assert [m["content"] for m in second.messages if m.get("role") == "tool"] == ["quick ran"]
    finally:
        HANG.set()


def test_a_loop_holds_at_most_its_own_tool_threads(h: Harness) -> None:
    HANG.clear()
    try:
        stuck = h.provider([FakeCalls(*[("hang", {})] * 3), FakeCalls(("quick", {})), "done"])
        loop = h.loop(stuck, tools=[hang, quick], tool_timeout=0.2, max_tool_threads=2)
        result = h.run(loop, TASK)
        outputs = [m["content"] for m in result.messages if m.get("role") == "tool"]
        assert "before it started: all 2 tool threads were busy" in outputs[2]
        assert "before it started" in outputs[3]  # the loop's two threads are still hung
        assert loop._tool_runner.threads.threads == 2
    finally:
        HANG.set()
    with pytest.raises(wg.ConfigurationError, match="max_tool_threads"):
        h.loop(h.provider([]), max_tool_threads=0)


def test_tool_threads_are_bounded_daemon_threads_that_end_when_idle() -> None:
    threads = ToolThreads(1, idle_seconds=0.05)
    release = threading.Event()
    first = threads.submit(release.wait, 20)
    second = threads.submit(threading.current_thread)  # waits: the one thread is busy
    assert threads.threads == 1 and not second.done()
    release.set()
    worker = second.result(timeout=20)
    assert first.result() is True and threads.threads == 1
    assert worker.daemon and worker.name.startswith("windowguard-tool-")
    worker.join(timeout=20)  # idle for idle_seconds, the thread ends
    assert not worker.is_alive() and threads.threads == 0
    threads.shutdown()
    with pytest.raises(RuntimeError, match="after shutdown"):
        threads.submit(print)


EXITS = textwrap.dedent(
    """
    import asyncio, sys, time
    import windowguard as wg
    from windowguard.run.providers.fake import AsyncFakeProvider, FakeCalls, FakeProvider

    @wg.tool
    def hang() -> str:
        '''Hangs for a minute.'''
        time.sleep(60)
        return "late"

    script = [FakeCalls(("hang", {})), "gave up on it"]
    task = [{"role": "user", "content": "go"}]
    if sys.argv[1] == "sync":
        result = wg.ToolLoop(FakeProvider(script), tools=[hang], tool_timeout=0.2).run(task)
    else:
        loop = wg.AsyncToolLoop(AsyncFakeProvider(script), tools=[hang], tool_timeout=0.2)
        result = asyncio.run(loop.run(task))
    print(result.termination.name, result.text, flush=True)
    """
)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_hung_tool_never_keeps_the_process_from_exiting(mode: str, tmp_path: Any) -> None:
    script = tmp_path / "exits.py"
    script.write_text(EXITS)
    env = {**os.environ, "PYTHONPATH": str(Path(wg.__file__).resolve().parents[1])}
    try:
        done = subprocess.run(
            [sys.executable, str(script), mode], env=env, capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the process waited for the abandoned tool instead of exiting")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "COMPLETED gave up on it"
