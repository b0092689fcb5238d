"""Tasks for the retention replay (bench/bench_retention.py): agent runs with planted facts.

A *task* is one agent run in OpenAI Chat Completions format, split into a head (system
prompt and the user's task) and *steps*. A step is what the agent produced in answer to
one model call: an assistant message (text and tool calls), the tool results answering
it, and any user messages that followed. The last step's assistant message is the final
answer.

*Facts* are exact marker strings (``FACT-xxxx-nn-hhhhhh``) planted in the run, each in
one place, so a replay can tell whether a request still shows it:

* ``task``: in the user's task in the head (every windowguard policy keeps the head);
* ``tool``: inside a tool result, at a random line (so a head/tail clamp or a
  placeholder may remove it). Re-fetchable: calling the same tool with the same
  arguments returns the same text;
* ``agent``: a note in an assistant message's text (the agent's own conclusion); lost
  for good once no request shows it;
* ``user``: in a user message after the head (a real tau-bench user turn, or a short
  follow-up message added to a coding run); lost for good likewise.

Every fact is needed by the final answer, and each fact after the head also by one
step in between (drawn at least two steps after the one that holds it).

Builders (deterministic: the same name gives the same task):

* :func:`corpus_tasks`: the real corpus runs with native tool calls (tau-bench,
  OpenHands, SWE-agent), each as recorded;
* :func:`synthetic_tasks`: a real head and 40-110 real corpus turns in a row (sources
  interleaved, as ``_corpus.synthetic``), with the corpora's 20 tool schemas;
* :func:`demo_tasks`: the demo's coding agent (``windowguard.demo``: its plan, then
  tools drawn from their schemas) on the demo's sample project, and the same agent on
  the bench's coding tools (windowguard's own source at a pinned commit);
* :func:`oversized_tasks`: a short coding run in which one tool result is larger than
  the whole window (issue 19's case).

Tasks serialise to JSON (:func:`dump_tasks` / :func:`load_tasks`) so the smoke test
ships a tiny fixture and needs neither ``../shared`` nor git.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

Message = dict[str, Any]
Source = Literal["task", "tool", "agent", "user"]

#: share of the run (by steps) in which facts are planted: the rest is where they are needed
_PLANT_SHARE = 0.7
_TOOL_FACTS = 3
_LOG_STEP = 4  # where the oversized result comes, in an oversized task


@dataclass(frozen=True, slots=True, kw_only=True)
class Fact:
    """One planted fact.

    Attributes:
        id: short id, unique in its task.
        marker: the exact string planted; a request shows the fact iff it contains it.
        source: where it lives (see the module docstring).
        step: the step holding it (-1: the head).
        tool: for a tool fact, the call that returns it again: the tool's name and its
            arguments (a JSON string, as sent).
        result: for a tool fact, the whole result text that call returns.
    """

    id: str
    marker: str
    source: Source
    step: int
    tool: tuple[str, str] | None = None
    result: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One model call's answer: the assistant message first, then results and user turns."""

    messages: tuple[Message, ...]
    needs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One agent run to replay, with its facts and the windows it is replayed in."""

    name: str
    group: str
    head: tuple[Message, ...]
    steps: tuple[Step, ...]
    tools: tuple[Message, ...]
    facts: tuple[Fact, ...]
    windows: tuple[int, ...] = field(default=(16_384, 32_768))

    def fact(self, fact_id: str) -> Fact:
        """The fact of that id."""
        return next(f for f in self.facts if f.id == fact_id)


# --------------------------------------------------------------------------- planting


def _marker(name: str, index: int, rng: random.Random) -> str:
    tag = hashlib.sha256(name.encode()).hexdigest()[:4]
    return f"FACT-{tag}-{index:02d}-{rng.getrandbits(24):06x}"


def _calls(message: Message) -> list[Message]:
    return list(message.get("tool_calls") or ())


def _insert_line(text: str, line: str, rng: random.Random) -> str:
    lines = text.split("\n")
    at = rng.randrange(len(lines) + 1)
    return "\n".join([*lines[:at], line, *lines[at:]])


def plant(
    name: str,
    group: str,
    head: Sequence[Message],
    turns: Sequence[Sequence[Message]],
    tools: Sequence[Message],
    *,
    windows: tuple[int, ...],
    user_turns: Sequence[bool] | None = None,
) -> Task:
    """Plant facts in a run (fresh copies; the inputs are not changed).

    Args:
        name: the task's name (seeds every choice).
        group: the task group it is reported under.
        head: system prompt(s) and the user's task.
        turns: the steps; each starts with an assistant message.
        tools: the tool schemas the run was sent with.
        windows: the context windows to replay it in.
        user_turns: per turn, whether its user messages are a real user's (tau-bench);
            None: every user message after the head is.

    Returns:
        The task.
    """
    rng = random.Random(name)
    head = [copy.deepcopy(m) for m in head]
    copies: list[list[Message]] = [[copy.deepcopy(m) for m in turn] for turn in turns]
    turns = copies
    count = len(turns)
    plant_until = max(1, int(count * _PLANT_SHARE))
    facts: list[Fact] = []

    task_message = next(m for m in reversed(head) if m.get("role") == "user")
    marker = _marker(name, 0, rng)
    task_message["content"] = (
        f"{_text(task_message)}\n\n(Quote this reference in the answer: {marker})"
    )
    facts.append(Fact(id="f00", marker=marker, source="task", step=-1))

    # Tool facts: results of distinct steps, in their text, at a random line.
    results = [
        (s, i)
        for s, turn in enumerate(turns[:plant_until])
        for i, m in enumerate(turn)
        if m.get("role") == "tool" and isinstance(m.get("content"), str) and m["content"].strip()
    ]
    by_step: dict[int, list[int]] = {}
    for s, i in results:
        by_step.setdefault(s, []).append(i)
    chosen_steps = sorted(rng.sample(sorted(by_step), min(_TOOL_FACTS, len(by_step))))
    for s in chosen_steps:
        i = rng.choice(by_step[s])
        message = turns[s][i]
        call = next(
            (c for c in _calls(turns[s][0]) if c.get("id") == message.get("tool_call_id")), None
        )
        if call is None:
            continue
        marker = _marker(name, len(facts), rng)
        message["content"] = _insert_line(message["content"], f"note: {marker}", rng)
        function = call.get("function") or {}
        facts.append(
            Fact(
                id=f"f{len(facts):02d}",
                marker=marker,
                source="tool",
                step=s,
                tool=(str(function.get("name")), str(function.get("arguments") or "{}")),
                result=message["content"],
            )
        )

    # One note of the agent's own, in an assistant message's text.
    s = rng.randrange(plant_until)
    marker = _marker(name, len(facts), rng)
    assistant = turns[s][0]
    text = assistant.get("content") if isinstance(assistant.get("content"), str) else ""
    assistant["content"] = f"{text}\n\nConclusion so far (keep for the answer): {marker}".strip()
    facts.append(Fact(id=f"f{len(facts):02d}", marker=marker, source="agent", step=s))

    # One thing the user said after the task: a real user turn, or a follow-up added.
    candidates = [
        (s, i)
        for s, turn in enumerate(turns[:plant_until])
        if user_turns is None or user_turns[s]
        for i, m in enumerate(turn)
        if m.get("role") == "user" and isinstance(m.get("content"), str)
    ]
    marker = _marker(name, len(facts), rng)
    if candidates:
        s, i = rng.choice(candidates)
        turns[s][i]["content"] = f"{turns[s][i]['content']}\n(Also, my reference: {marker})"
    else:
        s = rng.randrange(plant_until)
        copies[s].append({"role": "user", "content": f"One more thing for later: {marker}."})
    facts.append(Fact(id=f"f{len(facts):02d}", marker=marker, source="user", step=s))

    needs: list[list[str]] = [[] for _ in turns]
    for fact in facts:
        if fact.source != "task" and fact.step + 2 <= count - 2:
            needs[rng.randint(fact.step + 2, count - 2)].append(fact.id)
    needs[-1] = [f.id for f in facts]
    steps = tuple(
        Step(messages=tuple(turn), needs=tuple(sorted(set(n))))
        for turn, n in zip(turns, needs, strict=True)
    )
    return Task(
        name=name,
        group=group,
        head=tuple(head),
        steps=steps,
        tools=tuple(copy.deepcopy(list(tools))),
        facts=tuple(facts),
        windows=windows,
    )


def _text(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


# --------------------------------------------------------------------------- builders


def _well_formed(turns: Sequence[Sequence[Message]]) -> bool:
    import _corpus

    return all(
        t and t[0].get("role") == "assistant" and _corpus.pairing_problems(t) == (0, 0)
        for t in turns
    )


def corpus_tasks(limit: int | None = None) -> list[Task]:
    """The real runs with native tool calls and at least six steps, as recorded.

    Replayed in 8k and 16k windows: most real runs are 3-33k tokens.
    """
    import _corpus

    tasks = []
    for run in _corpus.load_runs():
        turns = _corpus.split_turns(run.messages)
        if len(turns) < 6 or not _well_formed(turns):
            continue
        if not any(m.get("role") == "tool" for t in turns for m in t):
            continue
        head = run.messages[: _corpus.split_head(run.messages)]
        tasks.append(
            plant(
                f"{run.source}/{run.id}",
                f"corpus: {run.source}",
                head,
                turns,
                run.tools,
                windows=(8_192, 16_384),
            )
        )
    # Larger runs first within each source, so a limit keeps the ones that prune.
    tasks.sort(
        key=lambda t: (t.group, -sum(len(json.dumps(m)) for s in t.steps for m in s.messages))
    )
    if limit is not None:
        per_source: dict[str, int] = {}
        kept = []
        for task in tasks:
            per_source[task.group] = per_source.get(task.group, 0) + 1
            if per_source[task.group] <= limit:
                kept.append(task)
        tasks = kept
    return tasks


def _sourced_pool() -> list[tuple[str, tuple[Message, ...]]]:
    """Every well-formed corpus turn with its source, sources interleaved round-robin."""
    import _corpus

    by_source: dict[str, list[tuple[Message, ...]]] = {}
    for run in _corpus.load_runs():
        for turn in _corpus.split_turns(run.messages):
            if turn[0].get("role") == "assistant" and _corpus.pairing_problems(turn) == (0, 0):
                by_source.setdefault(run.source, []).append(tuple(turn))
    pool: list[tuple[str, tuple[Message, ...]]] = []
    queues = [(s, list(t)) for s, t in sorted(by_source.items())]
    while any(q for _, q in queues):
        for source, queue in queues:
            if queue:
                pool.append((source, queue.pop(0)))
    return pool


def synthetic_tasks(count: int) -> list[Task]:
    """Long runs: a real head and 40-110 consecutive turns of the interleaved pool."""
    import _corpus

    pool = _sourced_pool()
    head = _corpus._head()
    tasks = []
    for index in range(count):
        rng = random.Random(f"synthetic:{index}")
        length = rng.randint(40, 110)
        start = index * 131 % len(pool)
        chosen = [pool[(start + k) % len(pool)] for k in range(length)]
        tasks.append(
            plant(
                f"synthetic/{index:02d}",
                "synthetic (corpus turns)",
                head,
                [turn for _, turn in chosen],
                _corpus.all_tools(),
                windows=(16_384, 32_768),
                user_turns=[source == "tau-bench" for source, _ in chosen],
            )
        )
    return tasks


def _agent_turns(
    tools: Sequence[Any],
    seed: int,
    iterations: int,
    answer: str,
    *,
    plan: bool = True,
    max_parallel: int = 2,
) -> list[list[Message]]:
    """The demo agent's run (its plan, then tools drawn from their schemas by the seed)."""
    from windowguard.demo.runner import _PLAN
    from windowguard.emulator.scenarios import arguments_from_schema

    offered = {t.name: t for t in tools}
    turns: list[list[Message]] = []
    for number in range(1, iterations + 1):
        planned = [
            (name, {key: value})
            for name, key, value in (_PLAN[number - 1] if plan and number <= len(_PLAN) else ())
            if name in offered
        ]
        if not planned:
            rng = random.Random(f"demo:{seed}:{number}")
            chosen = rng.sample(sorted(offered), rng.randint(1, min(max_parallel, len(offered))))
            planned = [(n, arguments_from_schema(offered[n].parameters, rng)) for n in chosen]
        calls = [
            {
                "id": f"call_{number}_{k}",
                "type": "function",
                "function": {"name": n, "arguments": json.dumps(a)},
            }
            for k, (n, a) in enumerate(planned)
        ]
        what = ", ".join(f"{n}({', '.join(map(str, a.values()))})" for n, a in planned)
        turn: list[Message] = [
            {"role": "assistant", "content": f"Next: {what}.", "tool_calls": calls}
        ]
        for call, (n, a) in zip(calls, planned, strict=True):
            turn.append(
                {"role": "tool", "tool_call_id": call["id"], "content": str(offered[n].fn(**a))}
            )
        turns.append(turn)
    turns.append([{"role": "assistant", "content": answer}])
    return turns


def demo_tasks(count: int) -> list[Task]:
    """The demo's coding agent: half on the sample project, half on the bench's coding tools."""
    import _coding_tools
    from windowguard.demo.runner import ANSWER, SYSTEM, TASK
    from windowguard.demo.tools import project_tools

    head = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    tasks = []
    for seed in range(count):
        if seed % 2 == 0:
            tools: tuple[Any, ...] = project_tools()
            turns = _agent_turns(tools, seed, 40, ANSWER)
            name, group, windows = (
                f"demo/tinytodo-{seed:02d}",
                "demo agent: sample project",
                (8_192, 16_384),
            )
        else:
            tools = _coding_tools.coding_tools(seed)
            turns = _agent_turns(tools, seed, 45, ANSWER, plan=False)
            name, group, windows = (
                f"demo/windowguard-{seed:02d}",
                "demo agent: coding tools",
                (16_384, 32_768),
            )
        tasks.append(
            plant(name, group, head, turns, _coding_tools.wire_tools(tools), windows=windows)
        )
    return tasks


def _huge_log(lines: int, seed: int) -> str:
    rng = random.Random(f"log:{seed}")
    out = [f"build log, job {seed}: {lines} lines"]
    for n in range(lines):
        out.append(
            f"2026-11-29T14:{n // 3600 % 60:02d}:{n // 60 % 60:02d}.{n % 1000:03d} "
            f"INFO worker-{rng.randint(1, 16)} step {n} ok in {rng.randint(3, 900)} ms "
            f"(cache {rng.choice(('hit', 'miss'))}, queue {rng.randint(0, 40)})"
        )
    return "\n".join(out)


def oversized_tasks() -> list[Task]:
    """Short coding runs in which one tool result is larger than the whole window."""
    import _coding_tools
    from windowguard.demo.runner import ANSWER, SYSTEM, TASK

    tasks = []
    for seed, lines, window in ((101, 9_000, 32_768), (102, 9_000, 32_768), (103, 2_500, 16_384)):
        tools = _coding_tools.coding_tools(seed)
        turns = _agent_turns(tools, seed, 12, ANSWER, plan=False)
        name = f"oversized/{seed}"
        pinned = _marker(name, 9, random.Random(f"pinned:{name}"))
        log = _huge_log(lines, seed).replace("\n", f"\nfirst failure: job 7, note: {pinned}\n", 1)
        call = {
            "id": "call_log",
            "type": "function",
            "function": {"name": "read_log", "arguments": "{}"},
        }
        turns.insert(
            _LOG_STEP,
            [
                {"role": "assistant", "content": "Reading the build log.", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_log", "content": log},
            ],
        )
        wire = _coding_tools.wire_tools(tools)
        wire.append(
            {
                "type": "function",
                "function": {
                    "name": "read_log",
                    "description": "Print the CI build log.",
                    "parameters": {"type": "object", "properties": {}},
                },
            }
        )
        task = plant(
            name,
            "one result larger than the window",
            head_of(SYSTEM, TASK),
            turns,
            wire,
            windows=(window,),
        )
        tasks.append(_with_log_fact(task, pinned, _LOG_STEP))
    return tasks


def _with_log_fact(task: Task, marker: str, step: int) -> Task:
    """Add the fact at the head of the oversized log: needed next step and at the end.

    A head/tail clamp keeps it; dropping the result (or the run) loses it.
    """
    result = next(m for m in task.steps[step].messages if m.get("role") == "tool")
    fact = Fact(
        id=f"f{len(task.facts):02d}",
        marker=marker,
        source="tool",
        step=step,
        tool=("read_log", "{}"),
        result=result["content"],
    )
    steps = list(task.steps)
    steps[step + 1] = replace(
        steps[step + 1], needs=tuple(sorted({*steps[step + 1].needs, fact.id}))
    )
    steps[-1] = replace(steps[-1], needs=(*steps[-1].needs, fact.id))
    return replace(task, facts=(*task.facts, fact), steps=tuple(steps))


def head_of(system: str, task: str) -> list[Message]:
    """A head of one system prompt and the user's task."""
    return [{"role": "system", "content": system}, {"role": "user", "content": task}]


# --------------------------------------------------------------------------- files


def _fact_json(fact: Fact) -> dict[str, Any]:
    return {
        "id": fact.id,
        "marker": fact.marker,
        "source": fact.source,
        "step": fact.step,
        "tool": list(fact.tool) if fact.tool else None,
        "result": fact.result,
    }


def dump_tasks(tasks: Iterable[Task], path: Path) -> None:
    """Write tasks as JSON (what the smoke test's fixture is)."""
    rows = [
        {
            "name": t.name,
            "group": t.group,
            "head": list(t.head),
            "steps": [{"messages": list(s.messages), "needs": list(s.needs)} for s in t.steps],
            "tools": list(t.tools),
            "facts": [_fact_json(f) for f in t.facts],
            "windows": list(t.windows),
        }
        for t in tasks
    ]
    path.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


def load_tasks(path: Path) -> list[Task]:
    """Read tasks written by :func:`dump_tasks`."""
    tasks = []
    for row in json.loads(path.read_text(encoding="utf-8")):
        tasks.append(
            Task(
                name=row["name"],
                group=row["group"],
                head=tuple(row["head"]),
                steps=tuple(
                    Step(messages=tuple(s["messages"]), needs=tuple(s["needs"]))
                    for s in row["steps"]
                ),
                tools=tuple(row["tools"]),
                facts=tuple(
                    Fact(
                        id=f["id"],
                        marker=f["marker"],
                        source=f["source"],
                        step=f["step"],
                        tool=(str(f["tool"][0]), str(f["tool"][1])) if f["tool"] else None,
                        result=f["result"],
                    )
                    for f in row["facts"]
                ),
                windows=tuple(row["windows"]),
            )
        )
    return tasks
