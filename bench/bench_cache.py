"""Benchmark (issue 7): what each pruning policy costs under providers' prompt caches.

A 300-iteration coding-agent run in a 32k window, once per policy: ``minimal`` and
``low_water`` at 0.9, 0.8, 0.7, 0.6 and 0.5. The run is simulated, so it is fully
deterministic and needs no server:

* the head is a real one: the system prompt and task of the first OpenHands run in
  ``../shared/corpus`` that carries tool schemas, sent with those schemas;
* iteration 1 sends the head alone; every later iteration appends one real turn (an
  assistant message with its tool calls and the tool results answering them) taken in
  order, cycling, from that corpus's OpenHands runs whose calls name the head's tools
  (fresh copies each time, so every message object is new, as in a live loop);
* every iteration calls ``mgr.fit(transcript, tools=tools, max_tokens=4096,
  last_usage=...)`` with the FULL transcript, as ``ToolLoop`` does, and feeds back the
  exact prompt tokens of the request it sent as the next ``last_usage`` (o200k_base via
  ``windowguard.accounting.templates.count_prompt``'s OpenAI accounting).

What is measured per policy, over all sends:

* **prunes**: sends whose ``Fit.events`` hold a ``transcript_pruned`` event;
* **extends**: sends (after the first) whose kept message list starts with the previous
  send's kept list, object for object: the previous request is an unchanged prefix;
* **tokens sent**: exact prompt tokens summed over sends; **context kept**: their mean
  per send, also as a share of the input budget (``Fit.budget``), and the mean and
  minimum share once pruning has started;
* **cost** of the input tokens under a prompt-cache model. The cached part of a send is
  the exact tokens of its longest common prefix with the previous send (tool schemas,
  then the messages shared object for object). Anthropic: a ``cache_control`` breakpoint
  after the head and one at the end of every request (what the loop's Anthropic
  provider places) makes that prefix a cache read and the rest of the request a 5-minute
  cache write; prefixes under the model's 1,024-token minimum are not cached. OpenAI:
  caching is automatic for prompts of 1,024 tokens or more, in 128-token increments;
  the cached part is billed at the cached rate and the rest at the full input price.
  Both assume every send arrives within the cache's lifetime (5 minutes idle) and is
  routed to a warm cache. Output tokens are left out: every policy generates the same
  replies. The Claude tokenizer is not public, so o200k counts stand in for Claude's.

    bench/run bench_cache.py    # or: .venv/bin/python bench/bench_cache.py [--iterations N]
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpus
import windowguard as wg
from windowguard.accounting.templates import count_prompt, count_prompt_parts
from windowguard.core.prune import PruningPolicy

Message = dict[str, Any]

WINDOW = 32_768
MAX_TOKENS = 4_096
ITERATIONS = 300
POLICIES: tuple[tuple[PruningPolicy, float | None], ...] = (
    ("minimal", None),
    ("low_water", 0.9),
    ("low_water", 0.8),
    ("low_water", 0.7),
    ("low_water", 0.6),
    ("low_water", 0.5),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Prices:
    """Published input prices of one model, USD per million tokens."""

    provider: str
    model: str
    input_per_mtok: float
    cache_read_per_mtok: float
    cache_write_per_mtok: float  # what a token not read from the cache costs
    min_cached_tokens: int
    cache_increment_tokens: int
    source: str


# https://docs.anthropic.com/en/docs/about-claude/pricing (Claude Sonnet 4 row: base
# input $3, 5m cache writes $3.75, cache hits & refreshes $0.30, output $15 per MTok);
# minimum cacheable prompt 1,024 tokens for Sonnet 4 (prompt-caching page).
ANTHROPIC = Prices(
    provider="Anthropic",
    model="Claude Sonnet 4",
    input_per_mtok=3.00,
    cache_read_per_mtok=0.30,
    cache_write_per_mtok=3.75,
    min_cached_tokens=1_024,
    cache_increment_tokens=1,
    source="docs.anthropic.com/en/docs/about-claude/pricing",
)
# https://platform.openai.com/docs/pricing (gpt-4.1: input $2.00, cached input $0.50,
# output $8.00 per MTok); caching is automatic "for prompts containing 1024 tokens or
# more, with cache hits occurring in increments of 128 tokens" (openai-cookbook,
# Prompt Caching 201); uncached tokens cost the normal input price.
OPENAI = Prices(
    provider="OpenAI",
    model="gpt-4.1",
    input_per_mtok=2.00,
    cache_read_per_mtok=0.50,
    cache_write_per_mtok=2.00,
    min_cached_tokens=1_024,
    cache_increment_tokens=128,
    source="platform.openai.com/docs/pricing",
)


def cached_tokens(prices: Prices, prefix_tokens: int) -> int:
    """The tokens of a shared prefix the provider serves from its cache."""
    if prefix_tokens < prices.min_cached_tokens:
        return 0
    step = prices.cache_increment_tokens
    return prefix_tokens // step * step


def cost_usd(prices: Prices, prompt_tokens: int, prefix_tokens: int) -> float:
    """The input cost of one send whose first ``prefix_tokens`` the previous send shared."""
    cached = cached_tokens(prices, prefix_tokens)
    fresh = prompt_tokens - cached
    return (cached * prices.cache_read_per_mtok + fresh * prices.cache_write_per_mtok) / 1e6


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """The coding-agent run every policy replays."""

    head: tuple[Message, ...]
    tools: tuple[Message, ...]
    pool: tuple[tuple[Message, ...], ...]
    source: str


def coding_scenario() -> Scenario:
    """The head, tools and turn pool of the first OpenHands run with tool schemas."""
    runs = [r for r in _corpus.load_runs() if r.source == "openhands"]
    first = next(r for r in runs if r.tools)
    names = {t.get("function", {}).get("name") for t in first.tools}
    pool: list[tuple[Message, ...]] = []
    for run in runs:
        for turn in _corpus.split_turns(run.messages):
            calls = turn[0].get("tool_calls") or ()
            if (
                turn[0].get("role") == "assistant"
                and calls
                and all(c.get("function", {}).get("name") in names for c in calls)
                and _corpus.pairing_problems(turn) == (0, 0)
            ):
                pool.append(tuple(turn))
    return Scenario(
        head=first.messages[: _corpus.split_head(first.messages)],
        tools=first.tools,
        pool=tuple(pool),
        source=f"openhands/{first.id}",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What one policy did over the run."""

    label: str
    sends: int
    prunes: int
    extends: int
    tokens_sent: int
    budget: int
    first_prune: int | None
    kept_after_prune: tuple[int, ...]
    max_prompt_tokens: int
    anthropic_usd: float
    openai_usd: float
    anthropic_read_tokens: int
    openai_read_tokens: int


class _Exact:
    """Exact o200k prompt accounting per message object, computed once per object."""

    def __init__(self, tools: Sequence[Message]) -> None:
        self.counter = _corpus.o200k_counter()
        empty = count_prompt_parts(self.counter, [], list(tools), template="openai")
        self.tools_tokens = empty.tools_tokens
        self.request_tokens = empty.request_tokens
        self.tokens: dict[int, tuple[Message, int]] = {}

    def message(self, message: Message) -> int:
        hit = self.tokens.get(id(message))
        if hit is None or hit[0] is not message:
            parts = count_prompt_parts(self.counter, [message], None, template="openai")
            hit = (message, parts.message_tokens[0])
            self.tokens[id(message)] = hit
        return hit[1]

    def prompt(self, messages: Sequence[Message]) -> int:
        return self.tools_tokens + sum(map(self.message, messages)) + self.request_tokens

    def prefix(self, messages: Sequence[Message]) -> int:
        """Tokens of a request prefix: the tool schemas, then these messages."""
        return self.tools_tokens + sum(map(self.message, messages))


def shared_prefix(previous: Sequence[object], current: Sequence[object]) -> int:
    """How many leading messages two requests share, object for object."""
    count = 0
    for before, now in zip(previous, current, strict=False):
        if before is not now:
            break
        count += 1
    return count


def replay(
    scenario: Scenario,
    policy: PruningPolicy,
    low_water: float | None,
    *,
    iterations: int,
    window: int,
    exact_counter: bool,
    offset: int = 0,
) -> Outcome:
    """Run the simulated loop under one policy and account every send.

    Args:
        scenario: the run to replay.
        policy: ``"minimal"`` or ``"low_water"``.
        low_water: the low-water fraction (None for ``minimal``).
        iterations: sends.
        window: the context window.
        exact_counter: give the manager the exact o200k counter instead of its
            heuristic estimator (which is calibrated by the exact ``last_usage`` either way).
        offset: the pool turn the run starts with.

    Returns:
        The run's accounting.
    """
    manager = wg.ContextWindowManager(
        model_info=wg.ModelInfo(window, MAX_TOKENS, tokenizer="o200k"),
        pruning=policy,
        low_water=0.7 if low_water is None else low_water,
        counter=_corpus.o200k_counter() if exact_counter else None,
    )
    tools = copy.deepcopy(list(scenario.tools))
    exact = _Exact(tools)
    transcript: list[Message] = copy.deepcopy(list(scenario.head))
    previous: list[Message] = []
    last_usage: int | None = None
    prunes = extends = tokens_sent = max_prompt = 0
    anthropic_usd = openai_usd = 0.0
    anthropic_read = openai_read = 0
    budget = 0
    first_prune: int | None = None
    kept_after_prune: list[int] = []
    for iteration in range(iterations):
        if iteration:
            turn = scenario.pool[(offset + iteration - 1) % len(scenario.pool)]
            transcript.extend(copy.deepcopy(m) for m in turn)
        fit = manager.fit(transcript, tools=tools, max_tokens=MAX_TOKENS, last_usage=last_usage)
        sent = cast(list[Message], fit.messages)
        budget = fit.budget
        prompt = exact.prompt(sent)
        if any(event.kind == "transcript_pruned" for event in fit.events):
            prunes += 1
            if first_prune is None:
                first_prune = iteration
        if first_prune is not None:
            kept_after_prune.append(prompt)
        shared = shared_prefix(previous, sent) if iteration else 0
        if iteration and shared == len(previous):
            extends += 1
        prefix = exact.prefix(sent[:shared]) if iteration else 0
        anthropic_usd += cost_usd(ANTHROPIC, prompt, prefix)
        openai_usd += cost_usd(OPENAI, prompt, prefix)
        anthropic_read += cached_tokens(ANTHROPIC, prefix)
        openai_read += cached_tokens(OPENAI, prefix)
        tokens_sent += prompt
        max_prompt = max(max_prompt, prompt)
        previous = list(sent)
        last_usage = prompt
    # The per-message accounting must agree with the whole-request count.
    whole = count_prompt(exact.counter, previous, tools, template="openai")
    if whole != exact.prompt(previous):
        raise RuntimeError(f"per-message accounting {exact.prompt(previous)} != {whole}")
    label = policy if low_water is None else f"{policy} {low_water:.1f}"
    return Outcome(
        label=label,
        sends=iterations,
        prunes=prunes,
        extends=extends,
        tokens_sent=tokens_sent,
        budget=budget,
        first_prune=first_prune,
        kept_after_prune=tuple(kept_after_prune),
        max_prompt_tokens=max_prompt,
        anthropic_usd=anthropic_usd,
        openai_usd=openai_usd,
        anthropic_read_tokens=anthropic_read,
        openai_read_tokens=openai_read,
    )


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def print_tables(outcomes: Sequence[Outcome], window: int) -> None:
    """The policy table, and each cost next to the context it buys."""
    base = next(o for o in outcomes if o.label == "minimal")
    print(
        "| policy | sends | prunes | cut moves | extends previous | tokens sent "
        "| avg kept (tokens) | avg kept % budget | after 1st prune: avg / min % budget "
        f"| {ANTHROPIC.model} $ | {OPENAI.model} $ |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for o in outcomes:
        later = o.kept_after_prune
        steady = (
            f"{_pct(sum(later) / len(later), o.budget)} / {_pct(min(later), o.budget)}"
            if later
            else "-"
        )
        print(
            f"| {o.label} | {o.sends} | {o.prunes} | {o.sends - 1 - o.extends} "
            f"| {_pct(o.extends, o.sends - 1)} | {o.tokens_sent:,} "
            f"| {o.tokens_sent / o.sends:,.0f} | {_pct(o.tokens_sent / o.sends, o.budget)} "
            f"| {steady} | {o.anthropic_usd:.2f} | {o.openai_usd:.2f} |"
        )
    print()
    print(
        "| policy | Anthropic cache reads | Anthropic $/MTok sent | $ vs minimal "
        "| OpenAI cached | OpenAI $/MTok sent | $ vs minimal | uncached $ (Anthropic / OpenAI) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for o in outcomes:
        a_rate = o.anthropic_usd / o.tokens_sent * 1e6
        o_rate = o.openai_usd / o.tokens_sent * 1e6
        print(
            f"| {o.label} | {_pct(o.anthropic_read_tokens, o.tokens_sent)} | {a_rate:.2f} "
            f"| {_pct(o.anthropic_usd, base.anthropic_usd)} "
            f"| {_pct(o.openai_read_tokens, o.tokens_sent)} | {o_rate:.2f} "
            f"| {_pct(o.openai_usd, base.openai_usd)} "
            f"| {o.tokens_sent * ANTHROPIC.input_per_mtok / 1e6:.2f} / "
            f"{o.tokens_sent * OPENAI.input_per_mtok / 1e6:.2f} |"
        )
    print()
    worst = max(o.max_prompt_tokens for o in outcomes)
    print(
        f"Window {window:,}, max_tokens {MAX_TOKENS:,}, input budget {base.budget:,} "
        f"(on the manager's estimate); first prune at send {base.first_prune}; largest exact "
        f"prompt sent {worst:,} tokens (+ {MAX_TOKENS:,} reply = {worst + MAX_TOKENS:,} of "
        f"{window:,})."
    )
    print()


def print_robustness(runs: Sequence[tuple[int, Sequence[Outcome]]]) -> None:
    """Cost relative to minimal and context kept, for runs starting at other pool turns."""
    labels = [o.label for o in runs[0][1]]
    head = " | ".join(f"start {offset}" for offset, _ in runs)
    print(f"| policy | {head} |")
    print("| --- |" + " ---: |" * len(runs))
    for index, label in enumerate(labels):
        cells = []
        for _, outcomes in runs:
            base, o = outcomes[0], outcomes[index]
            later = o.kept_after_prune
            kept = _pct(sum(later) / len(later), o.budget) if later else "-"
            cells.append(
                f"{_pct(o.anthropic_usd, base.anthropic_usd)} / "
                f"{_pct(o.openai_usd, base.openai_usd)} / {kept}"
            )
        print(f"| {label} | " + " | ".join(cells) + " |")
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--iterations", type=int, default=ITERATIONS)
    parser.add_argument("--window", type=int, default=WINDOW)
    args = parser.parse_args()
    scenario = coding_scenario()
    print(_corpus.environment("tiktoken"))
    print()
    print(
        f"Coding-agent run: head and {len(scenario.tools)} tool schemas of "
        f"{scenario.source}, then {len(scenario.pool)} real OpenHands turns cycled; "
        f"{args.iterations} sends per policy, exact o200k prompt tokens (OpenAI accounting) "
        "fed back as last_usage. Input cost only (every policy generates the same output)."
    )
    print()
    for prices in (ANTHROPIC, OPENAI):
        print(
            f"- {prices.provider} {prices.model} ({prices.source}): input "
            f"${prices.input_per_mtok:.2f}/MTok, cache read ${prices.cache_read_per_mtok:.2f}"
            f"/MTok, uncached part ${prices.cache_write_per_mtok:.2f}/MTok"
            + (" (5-minute cache write)" if prices is ANTHROPIC else "")
            + f"; cached only from {prices.min_cached_tokens:,} tokens"
            + (
                f", in {prices.cache_increment_tokens}-token increments"
                if prices.cache_increment_tokens > 1
                else ""
            )
            + "."
        )
    print()
    print(
        "prunes: sends with a transcript_pruned event (any turn dropped from the full "
        "transcript); cut moves: sends that do not extend the previous send (a prune "
        "that changed what is kept, so the cache misses after the head)."
    )
    print()
    for exact_counter, title in (
        (True, "Manager with the exact o200k counter (counter=TiktokenCounter)"),
        (False, "Manager with its default heuristic estimator"),
    ):
        outcomes = [
            replay(
                scenario,
                policy,
                low_water,
                iterations=args.iterations,
                window=args.window,
                exact_counter=exact_counter,
            )
            for policy, low_water in POLICIES
        ]
        for o in outcomes:
            if o.max_prompt_tokens + MAX_TOKENS > args.window:
                print(f"OVERFLOW: {o.label} sent {o.max_prompt_tokens:,} tokens")
                return 1
        print(f"### {title}")
        print()
        print_tables(outcomes, args.window)
    offsets = tuple(range(0, len(scenario.pool), len(scenario.pool) // 4 + 1))
    runs = [
        (
            offset,
            [
                replay(
                    scenario,
                    policy,
                    low_water,
                    iterations=args.iterations,
                    window=args.window,
                    exact_counter=True,
                    offset=offset,
                )
                for policy, low_water in POLICIES
            ],
        )
        for offset in offsets
    ]
    print("### Other starting points in the turn pool (exact counter)")
    print()
    print(
        "Each cell: Anthropic $ vs minimal / OpenAI $ vs minimal / avg context kept after "
        "the first prune, % of budget."
    )
    print()
    print_robustness(runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
