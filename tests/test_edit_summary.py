"""The opt-in summary stage: whole turns the request would lose are folded into one
summary after the head, incrementally, only when needed, and never made twice for the
same turns (a replayed or resumed run reads it from the journal)."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import windowguard as wg
from windowguard.core.adapters import shaper
from windowguard.core.edits.summary import SUMMARY_PREFIX
from windowguard.core.turns import segment
from windowguard.run.providers.fake import FakeCalls, FakeProvider

HEAD = [
    {"role": "system", "content": "You are a careful coding agent."},
    {"role": "user", "content": "Find the failing test and fix it."},
]


def turn(i: int, lines: int, rng: random.Random) -> list[dict[str, Any]]:
    call = {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": f"m{i}.py"})},
    }
    body = "\n".join(f"{n:04d} value = {rng.randrange(10**6)}" for n in range(lines))
    return [
        {"role": "assistant", "content": f"Note {i}: fact F{i}.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": body},
    ]


class Summarizer:
    """Keeps every ``Note`` line it is shown, and says what it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, str | None]] = []

    def __call__(self, turns: list[Any], previous: str | None) -> str:
        self.calls.append((len(turns), previous))
        notes = [m["content"] for m in turns if m.get("role") == "assistant"]
        return "\n".join(filter(None, [previous, *notes]))


def _manager(summarizer: Any, window: int = 16_384, **options: Any) -> wg.ContextWindowManager:
    return wg.ContextWindowManager(
        model_info=wg.ModelInfo(window, tokenizer="o200k"),
        edits=[wg.Summarize(summarizer, keep_turns=2, **options)],
    )


def test_turns_that_would_be_lost_are_folded_into_one_summary_after_the_head() -> None:
    rng = random.Random(3)
    summarizer = Summarizer()
    mgr = _manager(summarizer)
    messages = list(HEAD)
    usage: object = None
    summaries: list[Any] = []
    for i in range(40):
        messages += turn(i, 180, rng)
        fit = mgr.fit(messages, max_tokens=1_024, last_usage=usage)
        usage = fit.estimated_tokens
        sent = list(fit.messages)
        assert sent[:2] == HEAD and sent[-2:] == messages[-2:]
        shape = shaper("openai_chat")
        assert not segment([shape(m) for m in sent]).problems
        if summarizer.calls:
            summary = sent[2]
            assert summary["role"] == "user" and summary["content"].startswith(SUMMARY_PREFIX)
            summaries.append(summary)
            # every note of a turn no longer sent is in the summary: nothing was lost
            kept = {m["content"] for m in sent if m["role"] == "assistant"}
            for j in range(i + 1):
                note = f"Note {j}: fact F{j}."
                assert note in kept or note in summary["content"]
            assert any(e.kind == "summarize" for e in fit.edits) or summary is summaries[-2]
    assert len(summarizer.calls) >= 2
    # incremental: each call after the first gets the previous summary, never itself
    assert summarizer.calls[0][1] is None
    assert all(previous for _, previous in summarizer.calls[1:])
    assert all(n % 2 == 0 for n, _ in summarizer.calls)  # whole turns only


def test_a_summary_that_does_not_shrink_the_request_is_not_used() -> None:
    rng = random.Random(4)
    calls: list[int] = []

    def verbose(turns: list[Any], previous: str | None) -> str:
        calls.append(len(turns))
        return "lorem ipsum dolor sit amet " * 20_000

    mgr = _manager(verbose)
    messages = list(HEAD)
    usage: object = None
    dropping = 0
    for i in range(30):
        messages += turn(i, 180, rng)
        fit = mgr.fit(messages, max_tokens=1_024, last_usage=usage)
        usage = fit.estimated_tokens
        assert not any(str(m.get("content", "")).startswith(SUMMARY_PREFIX) for m in fit.messages)
        cut = [e for e in fit.edits if e.kind == "drop"]
        dropping += bool(cut)
    assert calls and fit.dropped_turns > 0  # asked, and the turns were dropped instead
    assert len(calls) < dropping  # after a summary that freed nothing, the next send drops


def test_a_failing_summarizer_drops_the_turns_and_the_run_goes_on() -> None:
    rng = random.Random(5)

    def broken(turns: list[Any], previous: str | None) -> str:
        raise RuntimeError("the summary model is down")

    mgr = _manager(broken)
    messages = list(HEAD)
    usage: object = None
    for i in range(30):
        messages += turn(i, 180, rng)
        fit = mgr.fit(messages, max_tokens=1_024, last_usage=usage)
        usage = fit.estimated_tokens
    assert fit.dropped_turns > 0


def test_an_async_summarizer_runs_in_fit_when_no_loop_is_running() -> None:
    rng = random.Random(6)
    seen: list[int] = []

    async def summarize(turns: list[Any], previous: str | None) -> str:
        await asyncio.sleep(0)
        seen.append(len(turns))
        return "Notes: " + ", ".join(m["content"] for m in turns if m["role"] == "assistant")

    mgr = _manager(summarize)
    messages = list(HEAD)
    usage: object = None
    for i in range(30):
        messages += turn(i, 180, rng)
        fit = mgr.fit(messages, max_tokens=1_024, last_usage=usage)
        usage = fit.estimated_tokens
    assert seen and fit.messages[2]["content"].startswith(SUMMARY_PREFIX)


def _script() -> list[Any]:
    return [
        FakeCalls(("read_file", {"path": f"m{i}.py"}), text=f"Note {i}.") for i in range(24)
    ] + ["done"]


@wg.tool
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: the file.
    """
    rng = random.Random(path)
    return "\n".join(f"{n:04d} value = {rng.randrange(10**6)}" for n in range(220))


def test_the_loop_journals_each_summary_and_a_replay_never_asks_again(tmp_path: Path) -> None:
    summarizer = Summarizer()

    def loop(provider: Any, journal: wg.Journal) -> wg.ToolLoop:
        manager = _manager(summarizer, window=12_000)
        return wg.ToolLoop(
            provider, tools=[read_file], manager=manager, max_iterations=40, journal=journal
        )

    with wg.SqliteJournal(tmp_path / "runs.db") as journal:
        first = loop(FakeProvider(_script()), journal).run(list(HEAD), run_id="r-sum")
    assert first.termination is wg.TerminationReason.COMPLETED
    made = len(summarizer.calls)
    assert made >= 1
    folds = [e for e in first.events if isinstance(e, wg.ContextEdited) and e.edit == "summarize"]
    assert len(folds) == made
    summarizer.calls.clear()
    # the same run again from its journal: every model call and every summary replayed
    with wg.SqliteJournal(tmp_path / "runs.db") as journal:
        replayed = loop(FakeProvider([]), journal).run(list(HEAD), run_id="r-sum")
    assert replayed.termination is wg.TerminationReason.COMPLETED
    assert summarizer.calls == []  # the journal held every summary
    assert replayed.messages == first.messages
