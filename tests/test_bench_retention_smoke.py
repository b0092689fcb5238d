"""Keeps the retention replay (bench/bench_retention.py, issue 19) alive and its books right.

Three tiny tasks ship as ``tests/fixtures/retention_tasks.json`` (written by running this
file: ``python tests/test_bench_retention_smoke.py``), so nothing here reads ``../shared``
or git. Each is replayed in an 8k window (input budget 6,668) by the scripted agent:

* ``fits``: small; nothing is dropped, so every fact is visible, nothing is fetched
  again and every request extends the previous one;
* ``agent-and-tool``: four ~1,800-token reads. By the final answer drop-only has dropped
  the oldest turn: the agent's note in it is lost for good, its read, which holds a tool
  fact, is fetched again (one more call) and is then visible;
* ``user``: a user's follow-up in step 0 is dropped likewise and lost.

The default edits (``wg.DEFAULT_EDITS``) clear old tool results instead, so the note and
the follow-up stay visible.

The accounting is checked against what was actually sent (recorded requests, recounted
with ``windowguard.accounting.templates.count_prompt``), not against numbers written down here.
pydantic-ai-harness is a benchmark-only dependency: its test skips when it is absent.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "retention_tasks.json"
sys.path.insert(0, str(BENCH))

import _retention_policies as rp  # noqa: E402
import _retention_tasks as rt  # noqa: E402
from _retention_replay import MAX_TOKENS, ExactCounter, Request, replay  # noqa: E402

WINDOW = 8_192


def _counter() -> Any:
    from windowguard.accounting.local import local_tokenizer

    counter = local_tokenizer("o200k")
    if counter is None:
        pytest.skip("no exact o200k tokenizer installed (bpe-openai, in the test extra)")
    return counter


class Recording:
    """A session that records every request its policy built."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.requests: list[Request] = []

    def append(self, messages: Any, *, prompt_tokens: int | None) -> None:
        self.inner.append(messages, prompt_tokens=prompt_tokens)

    def request(self) -> Request:
        request: Request = self.inner.request()
        self.requests.append(request)
        return request

    def side_calls(self) -> list[int]:
        return list(self.inner.side_calls())


def _run(policy: rp.Policy, task: rt.Task) -> tuple[Any, Recording]:
    counter = ExactCounter(_counter(), task.tools)
    session = Recording(policy.make(WINDOW, MAX_TOKENS[WINDOW], task.tools, counter))
    return replay(task, WINDOW, session, counter), session


def _tasks() -> dict[str, rt.Task]:
    return {t.name: t for t in rt.load_tasks(FIXTURE)}


def _visible(request: Request, marker: str) -> bool:
    return any(marker in json.dumps(m) for m in request.messages)


def _policy(name: str) -> rp.Policy:
    return next(p for p in rp.windowguard_policies() if p.name == name)


def _drop_only() -> rp.Policy:
    # by name: the first row is the default (edits=None), which clears before it drops
    return _policy("windowguard drop-only (low-water, today)")


def test_everything_fits_nothing_lost_nothing_fetched() -> None:
    task = _tasks()["fits"]
    outcome, session = _run(_drop_only(), task)
    assert outcome.end == "completed"
    assert outcome.solved
    assert outcome.lost == {}
    assert outcome.refetch_calls == 0
    assert outcome.calls == outcome.sends == len(task.steps) == len(session.requests)
    assert outcome.extends == outcome.sends - 1  # nothing dropped: each request extends the last
    for fact in task.facts:
        assert _visible(session.requests[-1], fact.marker)


def test_drop_loses_the_note_and_refetches_the_result() -> None:
    from windowguard.accounting.templates import count_prompt

    task = _tasks()["agent-and-tool"]
    outcome, session = _run(_drop_only(), task)
    note = next(f for f in task.facts if f.source == "agent")
    result = next(f for f in task.facts if f.source == "tool")
    final, before = session.requests[-1], session.requests[-2]
    # What happened on the wire: the last send before the refetch showed neither fact,
    # the refetch's result made the tool fact visible, the note never came back.
    assert not _visible(before, note.marker)
    assert not _visible(before, result.marker)
    assert _visible(final, result.marker)
    assert not _visible(final, note.marker)
    # ... and the books say exactly that.
    assert outcome.end == "completed"
    assert outcome.lost == {note.id: "agent"}
    assert not outcome.solved
    assert outcome.refetch_calls == 1
    assert outcome.refetched == 1
    assert outcome.calls == len(task.steps) + 1 == len(session.requests)
    assert (outcome.orphans, outcome.unanswered, outcome.task_missing) == (0, 0, 0)
    counter = _counter()
    recounted = [
        count_prompt(counter, r.messages, list(task.tools), template="openai")
        for r in session.requests
    ]
    assert outcome.input_tokens == sum(recounted)
    assert outcome.peak_share <= 1.0
    assert outcome.anthropic_usd > 0 and outcome.openai_usd > 0


def test_drop_loses_what_the_user_said() -> None:
    task = _tasks()["user"]
    outcome, session = _run(_drop_only(), task)
    said = next(f for f in task.facts if f.source == "user")
    assert not _visible(session.requests[-1], said.marker)
    assert outcome.lost == {said.id: "user"}
    assert outcome.refetch_calls == 0  # a user's words cannot be fetched again
    assert outcome.end == "completed"


def test_the_default_edits_keep_what_the_agent_and_the_user_said() -> None:
    default = _policy("windowguard default (wg.DEFAULT_EDITS)")
    for name in ("agent-and-tool", "user"):
        task = _tasks()[name]
        outcome, session = _run(default, task)
        assert outcome.end == "completed"
        assert (outcome.orphans, outcome.unanswered, outcome.task_missing) == (0, 0, 0)
        # old tool results were cleared (a tool fact may be fetched again), but the
        # agent's note and the user's follow-up were never lost
        assert any(_visible(r, "[cleared to save context: ") for r in session.requests)
        said = [f for f in task.facts if f.source in ("agent", "user")]
        assert said and all(_visible(session.requests[-1], f.marker) for f in said)
        assert not {f.id for f in said} & set(outcome.lost)


def test_langchain_anchor_runs_and_is_checked() -> None:
    pytest.importorskip("langchain.agents.middleware.context_editing")
    for task in _tasks().values():
        policy = rp.langchain_policies()[0]
        outcome, session = _run(policy, task)
        assert outcome.calls == len(session.requests) - (outcome.end == "overflow")
        assert outcome.end in ("completed", "overflow")


def test_harness_anchor_runs_and_is_checked() -> None:
    pytest.importorskip(
        "pydantic_ai_harness", reason="pydantic-ai-harness is benchmark-only (bench/requirements)"
    )
    task = _tasks()["agent-and-tool"]
    outcome, session = _run(rp.harness_policies()[0], task)
    assert outcome.end in ("completed", "overflow")
    assert outcome.orphans == outcome.unanswered == 0
    assert outcome.calls == len(session.requests) - (outcome.end == "overflow")


# --------------------------------------------------------------------------- the fixture


def _read(part: int, lines: int, fact: str | None = None) -> str:
    rows = [f"{part}.{n}: alpha beta gamma delta epsilon zeta eta theta" for n in range(lines)]
    if fact:
        rows.insert(lines // 2, f"note: {fact}")
    return "\n".join(rows)


def _step(n: int, text: str | None, result: str | None, *extra: dict[str, Any]) -> rt.Step:
    assistant: dict[str, Any] = {"role": "assistant", "content": text}
    messages: list[dict[str, Any]] = [assistant]
    if result is not None:
        call_id = f"call_{n}"
        assistant["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "read", "arguments": json.dumps({"part": n})},
            }
        ]
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return rt.Step(messages=(*messages, *extra))


def build_fixture() -> list[rt.Task]:
    """The three tasks of the module docstring."""
    tools = (
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read one part of the report.",
                "parameters": {"type": "object", "properties": {"part": {"type": "integer"}}},
            },
        },
    )

    def head(marker: str) -> tuple[dict[str, Any], ...]:
        return (
            {"role": "system", "content": "You are a careful test agent."},
            {"role": "user", "content": f"Collect the facts. (Quote this reference: {marker})"},
        )

    big = 130  # lines of ~14 tokens: ~1,800 tokens per read

    def final(needs: tuple[str, ...]) -> rt.Step:
        return rt.Step(messages=({"role": "assistant", "content": "Done."},), needs=needs)

    fits = rt.Task(
        name="fits",
        group="smoke",
        head=head("FACT-aaaa-00-000001"),
        steps=(
            _step(0, "Conclusion so far: FACT-aaaa-01-000002", _read(0, 5)),
            _step(1, None, _read(1, 5, "FACT-aaaa-02-000003")),
            final(("f00", "f01", "f02")),
        ),
        tools=tools,
        facts=(
            rt.Fact(id="f00", marker="FACT-aaaa-00-000001", source="task", step=-1),
            rt.Fact(id="f01", marker="FACT-aaaa-01-000002", source="agent", step=0),
            rt.Fact(
                id="f02",
                marker="FACT-aaaa-02-000003",
                source="tool",
                step=1,
                tool=("read", json.dumps({"part": 1})),
                result=_read(1, 5, "FACT-aaaa-02-000003"),
            ),
        ),
        windows=(WINDOW,),
    )
    refetched = _read(0, big, "FACT-bbbb-02-000003")
    agent_and_tool = rt.Task(
        name="agent-and-tool",
        group="smoke",
        head=head("FACT-bbbb-00-000001"),
        steps=(
            _step(0, "Conclusion so far: FACT-bbbb-01-000002", refetched),
            _step(1, None, _read(1, big)),
            _step(2, None, _read(2, big)),
            _step(3, None, _read(3, big)),
            final(("f00", "f01", "f02")),
        ),
        tools=tools,
        facts=(
            rt.Fact(id="f00", marker="FACT-bbbb-00-000001", source="task", step=-1),
            rt.Fact(id="f01", marker="FACT-bbbb-01-000002", source="agent", step=0),
            rt.Fact(
                id="f02",
                marker="FACT-bbbb-02-000003",
                source="tool",
                step=0,
                tool=("read", json.dumps({"part": 0})),
                result=refetched,
            ),
        ),
        windows=(WINDOW,),
    )
    user = rt.Task(
        name="user",
        group="smoke",
        head=head("FACT-cccc-00-000001"),
        steps=(
            _step(
                0,
                None,
                _read(0, big),
                {"role": "user", "content": "Also, my reference: FACT-cccc-01-000002"},
            ),
            _step(1, None, _read(1, big)),
            _step(2, None, _read(2, big)),
            _step(3, None, _read(3, big)),
            final(("f00", "f01")),
        ),
        tools=tools,
        facts=(
            rt.Fact(id="f00", marker="FACT-cccc-00-000001", source="task", step=-1),
            rt.Fact(id="f01", marker="FACT-cccc-01-000002", source="user", step=0),
        ),
        windows=(WINDOW,),
    )
    return [fits, agent_and_tool, user]


if __name__ == "__main__":
    FIXTURE.parent.mkdir(exist_ok=True)
    rt.dump_tasks(build_fixture(), FIXTURE)
    print(f"wrote {FIXTURE}")
