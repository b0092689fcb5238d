"""Benchmark (issue 19): which context policy keeps what the agent needs, at what cost.

An offline replay. Agent tasks with planted facts (:mod:`_retention_tasks`: the real
corpus runs, long runs of real corpus turns, the demo's coding agent, and runs with one
tool result larger than the window) are replayed by a scripted agent
(:mod:`_retention_replay`) through each context policy (:mod:`_retention_policies`)
with the same window and reply budget, counting every request exactly (o200k_base).

Per policy and window: tasks solved (the final answer reached with every needed fact
visible when needed), model calls (re-fetches and summaries included), input tokens
billed, their cost under Anthropic's and OpenAI's prompt caching, facts lost by where
they lived, CONTEXT_TRUNCATED ends, overflows, orphaned results and unanswered calls in
the requests sent, requests without the user's task, and the share of sends that extend
the previous request (a stable prefix for the provider's cache).

Prices (bench_cache.py, same model): Anthropic Claude Sonnet 4, base input $3 / MTok,
5-minute cache write 1.25x, cache read 0.1x (docs.anthropic.com/en/docs/about-claude/pricing),
cache breakpoint at the end of each request, so what the previous request shared is
read and the rest is written; OpenAI gpt-4.1, input $2 / MTok, cached input $0.50
(0.25x; platform.openai.com/docs/pricing), automatic prefix caching from 1,024 tokens in
128-token steps. Summary calls are billed uncached.

    bench/run bench_retention.py [--quick] [--policies SUBSTRING ...] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _retention_policies as rp
import _retention_tasks as rt
from _retention_replay import MAX_TOKENS, ExactCounter, Outcome, budget, replay

SOURCES = ("task", "tool", "agent", "user")


def build_tasks(quick: bool) -> list[rt.Task]:
    """The task set: 63 tasks, 123 replays (quick: 19 tasks, 36 replays)."""
    if quick:
        return [
            *rt.corpus_tasks(limit=2),
            *rt.synthetic_tasks(6),
            *rt.demo_tasks(6),
            *rt.oversized_tasks()[:2],
        ]
    return [
        *rt.corpus_tasks(limit=12),
        *rt.synthetic_tasks(24),
        *rt.demo_tasks(20),
        *rt.oversized_tasks(),
    ]


def counter_for(task: rt.Task) -> ExactCounter:
    from windowguard.accounting.local import local_tokenizer

    counter = local_tokenizer("o200k")
    if counter is None:
        raise SystemExit("no exact o200k tokenizer (pip install bpe-openai)")
    return ExactCounter(counter, task.tools)


def run_policy(policy: rp.Policy, tasks: Sequence[rt.Task]) -> list[Outcome]:
    """Every task in every one of its windows through one policy."""
    outcomes = []
    for task in tasks:
        for window in task.windows:
            counter = counter_for(task)
            session = policy.make(window, MAX_TOKENS[window], task.tools, counter)
            outcomes.append(replay(task, window, session, counter))
    return outcomes


def _sum(outcomes: Sequence[Outcome], attr: str) -> int:
    return sum(getattr(o, attr) for o in outcomes)


def table_row(name: str, outcomes: Sequence[Outcome]) -> str:
    lost = {s: sum(v == s for o in outcomes for v in o.lost.values()) for s in SOURCES}
    ends = {e: sum(o.end == e for o in outcomes) for e in ("CONTEXT_TRUNCATED", "overflow")}
    sends = _sum(outcomes, "sends") - len(outcomes)
    extends = f"{_sum(outcomes, 'extends') / sends:.0%}" if sends > 0 else "-"
    return (
        f"| {name} | {sum(o.solved for o in outcomes)} / {len(outcomes)} "
        f"| {_sum(outcomes, 'calls'):,} ({_sum(outcomes, 'refetch_calls'):,} / "
        f"{_sum(outcomes, 'summary_calls'):,}) "
        f"| {_sum(outcomes, 'input_tokens') / 1e6:.2f} "
        f"| {sum(o.anthropic_usd for o in outcomes):.2f} "
        f"| {sum(o.openai_usd for o in outcomes):.2f} "
        f"| {sum(lost.values())} ({' / '.join(str(lost[s]) for s in SOURCES)}) "
        f"| {_sum(outcomes, 'refetched')} "
        f"| {ends['CONTEXT_TRUNCATED']} | {ends['overflow']} "
        f"| {_sum(outcomes, 'orphans')} / {_sum(outcomes, 'unanswered')} "
        f"| {_sum(outcomes, 'task_missing')} | {extends} "
        f"| {max((o.peak_share for o in outcomes), default=0):.2f} |"
    )


HEADER = (
    "| policy | tasks solved | model calls (re-fetch / summary) | input tokens billed (M) "
    "| Anthropic $ (cached) | OpenAI $ (cached) | facts lost (task / tool / agent / user) "
    "| facts re-fetched | CONTEXT_TRUNCATED | overflows | orphaned results / unanswered calls "
    "| requests without the task | sends extending the previous | largest prompt / budget |\n"
    "| --- |" + " ---: |" * 13
)


def print_totals(results: dict[str, list[Outcome]]) -> None:
    """Every window together, and the same work compared: the replays every policy ran to
    the end (a replay that overflowed or was refused ends early, and bills less)."""
    if not results:
        return
    done = [{(o.task, o.window) for o in outs if o.end == "completed"} for outs in results.values()]
    common = set.intersection(*done)
    print("\n#### All windows\n")
    print(
        f"The last three columns count only the {len(common)} replays every policy in this "
        "run completed (no overflow, no CONTEXT_TRUNCATED): the same work, billed.\n"
    )
    print(
        "| policy | tasks solved | facts lost | overflows | input tokens billed (M) "
        "| input tokens, common replays (M) | Anthropic $, common | OpenAI $, common |"
    )
    print("| --- |" + " ---: |" * 7)
    for name, outcomes in results.items():
        mine = [o for o in outcomes if (o.task, o.window) in common]
        lost = sum(len(o.lost) for o in outcomes)
        overflows = sum(o.end == "overflow" for o in outcomes)
        print(
            f"| {name} | {sum(o.solved for o in outcomes)} / {len(outcomes)} | {lost} "
            f"| {overflows} | {_sum(outcomes, 'input_tokens') / 1e6:.2f} "
            f"| {_sum(mine, 'input_tokens') / 1e6:.2f} "
            f"| {sum(o.anthropic_usd for o in mine):.2f} | {sum(o.openai_usd for o in mine):.2f} |"
        )


def print_tables(results: dict[str, list[Outcome]], skipped: dict[str, str]) -> None:
    windows = sorted({o.window for outs in results.values() for o in outs})
    for window in windows:
        print(
            f"\n#### Window {window:,} (max_tokens {MAX_TOKENS[window]:,}, input budget "
            f"{budget(window, MAX_TOKENS[window]):,})\n"
        )
        print(HEADER)
        for name, outcomes in results.items():
            print(table_row(name, [o for o in outcomes if o.window == window]))
    print_totals(results)
    groups = sorted({o.group for outs in results.values() for o in outs})
    print("\n#### Tasks solved per group (all windows)\n")
    print("| policy | " + " | ".join(groups) + " |")
    print("| --- |" + " ---: |" * len(groups))
    for name, outcomes in results.items():
        cells = []
        for group in groups:
            mine = [o for o in outcomes if o.group == group]
            cells.append(f"{sum(o.solved for o in mine)} / {len(mine)}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    for name, reason in skipped.items():
        print(f"\n- not run: **{name}**: {reason}")
    notes = [(name, o) for name, outs in results.items() for o in outs if o.end != "completed"]
    if notes:
        print("\n#### Runs that ended early\n")
        for name, o in notes[:60]:
            print(f"- {name}, {o.task} @ {o.window:,}: {o.end}: {o.note}")
        if len(notes) > 60:
            print(f"- ... {len(notes) - 60} more")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="19 tasks instead of 63")
    parser.add_argument(
        "--policies", nargs="*", default=None, help="run the rows whose name has one of these"
    )
    args = parser.parse_args()

    import _corpus

    started = time.perf_counter()
    tasks = build_tasks(args.quick)
    built = time.perf_counter() - started
    print("### Retention replay (bench/bench_retention.py)\n")
    print(
        _corpus.environment(
            "langchain", "langchain-core", "pydantic-ai-slim", "pydantic-ai-harness"
        )
    )
    replays = sum(len(t.windows) for t in tasks)
    facts = sum(len(t.facts) for t in tasks)
    print(
        f"\n{len(tasks)} tasks ({replays} replays over their windows, {facts} facts, "
        f"{sum(len(t.steps) for t in tasks):,} agent steps), built in {built:.1f} s. "
        "Groups: "
        + ", ".join(
            f"{g} {sum(t.group == g for t in tasks)}" for g in sorted({t.group for t in tasks})
        )
        + "."
    )
    results: dict[str, list[Outcome]] = {}
    skipped: dict[str, str] = {}
    timings: dict[str, float] = {}
    for policy in rp.all_policies():
        if args.policies and not any(p.lower() in policy.name.lower() for p in args.policies):
            continue
        reason = policy.missing()
        if reason:
            skipped[policy.name] = reason
            continue
        start = time.perf_counter()
        results[policy.name] = run_policy(policy, tasks)
        timings[policy.name] = time.perf_counter() - start
        print(f"<!-- {policy.name}: {timings[policy.name]:.1f} s -->", flush=True)
    print_tables(results, skipped)
    print("\n#### Time per policy\n")
    for name, seconds in timings.items():
        per = statistics.mean([seconds / replays])
        print(f"- {name}: {seconds:.1f} s ({per * 1000:.0f} ms per replay)")
    print(f"\nTotal {time.perf_counter() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
