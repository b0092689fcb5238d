"""Is windowguard's token accounting right? A long coding loop against exact counts (issue 10).

A 150-iteration coding-agent run goes through ``windowguard.ToolLoop`` with
``windowguard.OpenAIChatProvider`` (the official ``openai`` SDK's real HTTP stack)
against ``windowguard.emulator.Emulator``, which counts every prompt exactly: o200k_base
with the "openai" chat template (tool schemas included) and refuses what does not fit
with the server's own 400. The agent reads real files (60-300 lines), runs commands
(pytest, git, ls ... output) and greps, 1-3 calls per turn (:mod:`_coding_tools`).

Rows: window 16,384 (max_tokens 2,048) and 32,768 (max_tokens 4,096) x

* **count endpoint**: emulator flavour ``vllm`` (vLLM serves ``POST /tokenize``);
* **usage only**: flavour ``openai`` serving a model no catalog knows and no count API,
  the window given explicitly: the usage each reply reports and a tokenizer inferred
  from it are all the manager has;
* **usage only, heuristic**: the same with ``counter="heuristic"`` (no local tokenizer);
* **no windowguard** (reference): ``manager=None``, the full transcript every send.

The manager is built in exactly one place, :func:`make_manager`.

Run: ``bench/run bench_accounting.py`` (``--quick``: 50 iterations).
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import windowguard as wg
from _coding_tools import SOURCE_COMMIT, coding_tools, wire_tools
from _corpus import O200K_FILE, environment, split_head
from windowguard.accounting.counters import TiktokenCounter
from windowguard.accounting.templates import count_prompt
from windowguard.core.events import ContextEstimate, Event, ProviderErrorEvent, TranscriptPruned
from windowguard.emulator import CodingAgent, Emulator, EmulatorRequest, Reply, ToolCall
from windowguard.emulator.scenarios import arguments_from_schema

MODEL = "acme-coder-7b"  # no catalog knows it: the window and tokenizer must come from elsewhere
TEMPLATE = "openai"
CHAT_PATH = "/v1/chat/completions"
WINDOWS = ((16_384, 2_048), (32_768, 4_096))  # (context window, max_tokens requested)
OUTPUT_FLOOR = 200  # the smallest reply a refusal must leave room for (the shrink guard's floor)
NEAR_BUDGET = 0.9  # "within 10% of the budget": estimate >= 0.9 x budget

SYSTEM = """\
You are a senior software engineer working as an autonomous coding agent in the \
repository of windowguard, a Python library that keeps LLM agent tool loops inside the \
model's context window. You have three tools: read_file (a numbered slice of a file), \
run_command (a shell command in the repository root) and grep (a fixed-string search).

How to work:
- Study before you change anything: read the modules involved, their tests and the \
recent history; cite file:line for every claim you make.
- Run the relevant tests before and after a change, and the whole suite at the end.
- Prefer small, reviewable changes; keep the public API stable (src/windowguard/__init__.py \
is the contract) and follow the style of the surrounding code.
- Several independent reads or searches may be issued at once as parallel tool calls.
- When you are done, answer with a summary: what was wrong, what you changed and why, \
and which tests cover it."""

TASK = """\
Issue 10: token accounting. Long coding runs against a vLLM server sometimes fail with \
"This model's maximum context length is 16384 tokens" even though windowguard guards \
every send, and in other runs windowguard prunes far more than needed: the requests it \
sends use barely half the window. Find out how ContextWindowManager.fit() counts a \
request (estimator, calibration, budget, pruning), how the tool loop feeds it the usage \
the server reports, and where the count can be wrong in either direction. Check the \
tests that cover it and propose a fix with the tests to add."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """One row: a window and how the manager can learn exact counts."""

    accounting: str  # "count endpoint" | "usage only" | "usage only, heuristic" | "no windowguard"
    flavor: str
    window: int
    max_tokens: int

    @property
    def managed(self) -> bool:
        return self.accounting != "no windowguard"


def make_manager(provider: RecordingProvider, config: Config) -> wg.ContextWindowManager | None:
    """The manager for one row, built the way the README says.

    * count endpoint: the window discovered by the provider (vLLM's ``max_model_len``);
      the ``ToolLoop`` hands the manager the ``/tokenize`` API its provider discovered.
    * usage only: the window given explicitly for a model no catalog knows; the ledger
      learns from every report, and the installed tokenizer that counts the first report
      exactly is inferred (``tokenizer_inferred``).
    * usage only, heuristic: the same with ``counter="heuristic"``: the ledger and the
      tokenizer-free heuristic (the unknown family: the maximum over known families).
    """
    if not config.managed:
        return None
    if config.accounting == "count endpoint":
        return wg.ContextWindowManager(model_info=provider.model_info())
    info = wg.ModelInfo(config.window, source="explicit")
    if config.accounting == "usage only, heuristic":
        return wg.ContextWindowManager(MODEL, model_info=info, counter="heuristic")
    return wg.ContextWindowManager(MODEL, model_info=info)


# --- the emulated model ------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class TurnNumberedAgent:
    """The emulator's "coding-agent:N" scenario, numbered by the calls it has answered.

    Same choices as :class:`windowguard.emulator.CodingAgent` (1-3 parallel calls, the
    same seeded draw, arguments from the tools' JSON schemas), but the turn number is
    the count of calls this emulator has answered, not the count of tool-call turns in
    the request: a pruned request holds only the turns still kept, so "coding-agent:N"
    under pruning repeats the same few turns and never reaches N.
    """

    iterations: int
    max_parallel: int = 3
    answered: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: EmulatorRequest) -> Reply:
        with self.lock:
            number, self.answered = self.answered, self.answered + 1
        if not request.tools or number >= self.iterations:
            return CodingAgent(iterations=0)(request)
        names = ",".join(tool.name for tool in request.tools)
        rng = random.Random(f"coding-agent:{request.seed}:{number}:{names}")
        count = rng.randint(1, min(self.max_parallel, len(request.tools)))
        chosen = rng.sample(list(request.tools), count)
        return Reply(
            tool_calls=tuple(
                ToolCall(name=tool.name, arguments=arguments_from_schema(tool.parameters, rng))
                for tool in chosen
            )
        )


# --- recording what was sent, and how long windowguard took --------------------------------


class Recorder:
    """Event sink plus provider hook: each request sent, its estimate, windowguard's time.

    Each send is paired with the newest ``context_estimate`` event emitted before it (the
    loop emits one per fit, right before the send). Guard time of a send = from the last
    ``run_started`` / ``tool_result`` event (the tools are done) to the provider's
    ``complete()``: appending results, ``fit()`` (pruning, shrink, any remote count) and
    event emission. Retries are not timed.
    """

    def __init__(self) -> None:
        self.mark: float | None = None
        self.estimate: ContextEstimate | None = None
        self.guard_seconds: list[float] = []
        self.sent: list[list[Any]] = []
        self.estimates: list[ContextEstimate | None] = []

    def __call__(self, event: Event) -> None:
        if isinstance(event, ContextEstimate):
            self.estimate = event
        elif event.kind in ("run_started", "tool_result"):
            self.mark = time.perf_counter()
        elif event.kind == "provider_error":
            self.mark = None

    def sending(self, messages: Sequence[Any]) -> None:
        if self.mark is not None:
            self.guard_seconds.append(time.perf_counter() - self.mark)
            self.mark = None
        self.sent.append(list(messages))
        self.estimates.append(self.estimate)
        self.estimate = None


class RecordingProvider(wg.OpenAIChatProvider):
    """``OpenAIChatProvider`` that tells a :class:`Recorder` what it sends, then sends it.

    ``endpoint`` is the emulator's ``base_url`` (the provider keeps its own private).
    """

    recorder: Recorder
    endpoint: str

    def complete(self, request: Any) -> Any:
        self.recorder.sending(request.messages)
        return super().complete(request)


class RequestLog(logging.Handler):
    """Every HTTP request the emulator served, from its access log (``METHOD /path``).

    The emulator logs each request at DEBUG on ``windowguard.emulator``; counting them
    shows discovery and count-endpoint calls whatever client made them.
    """

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.requests: Counter[str] = Counter()
        self._level = logging.NOTSET

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        if record.levelno == logging.DEBUG and '"' in line:
            request = line.split('"', 2)[1].split()
            if len(request) >= 2:
                self.requests[f"{request[0]} {request[1].split('?', 1)[0]}"] += 1

    def __enter__(self) -> RequestLog:
        # DEBUG records still propagate, but nothing above prints below WARNING.
        logger = logging.getLogger("windowguard.emulator")
        self._level = logger.level
        logger.setLevel(logging.DEBUG)
        logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logger = logging.getLogger("windowguard.emulator")
        logger.removeHandler(self)
        logger.setLevel(self._level)


# --- one run -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    config: Config
    termination: str
    iterations: int
    sends: int
    overflows: int
    error_kinds: dict[str, int]
    refusals: int
    unjustified: int
    refusal_note: str
    window_use: float | None
    near: list[float]
    ratios: list[float]
    peak_exact: int
    pruned: int
    dropped: list[int]
    shrinks: int
    other_kinds: dict[str, int]
    other_paths: dict[str, int]
    guard_ms: list[float]
    seconds: float
    mismatches: int
    first_overflow: str
    transcript: list[Any]
    budget: int | None
    calibration: float | None


def exact(counter: TiktokenCounter, messages: Sequence[Any], tools: list[dict[str, Any]]) -> int:
    """The emulator's own count: the "openai" template over messages and tool schemas."""
    return count_prompt(counter, list(messages), tools or None, template=TEMPLATE)


def refusal_floor(
    counter: TiktokenCounter, transcript: list[Any], tools: list[dict[str, Any]]
) -> int:
    """Exact tokens of what a refusal says cannot fit: head + newest turn + tools + floor."""
    head = split_head(transcript)
    newest = max(
        (i for i, m in enumerate(transcript) if m.get("role") == "assistant" and i >= head),
        default=len(transcript),
    )
    kept = transcript[:head] + transcript[newest:]
    return exact(counter, kept, tools) + OUTPUT_FLOOR


KNOWN_KINDS = {
    "run_started",
    "run_finished",
    "context_estimate",
    "context_pressure",
    "context_pressure_threshold",
    "transcript_pruned",
    "transcript_deferred",
    "max_tokens_shrunk",
    "context_emergency_shrink",
    "calibration_updated",
    "model_call",
    "tool_call",
    "tool_result",
    "provider_error",
    "retry_scheduled",
}


def run_one(config: Config, iterations: int, seed: int, counter: TiktokenCounter) -> Row:
    tools = coding_tools(seed)
    schemas = wire_tools(tools)
    recorder = Recorder()
    agent = TurnNumberedAgent(iterations=iterations)
    started = time.perf_counter()
    with (
        RequestLog() as log,
        Emulator(
            flavor=config.flavor,
            context_window=config.window,
            tokenizer=counter,
            template=TEMPLATE,
            model=MODEL,
            scenario=agent,
            seed=seed,
            count_apis=None if config.accounting == "count endpoint" else "none",
        ) as emu,
    ):
        provider = RecordingProvider(MODEL, base_url=emu.base_url, api_key="bench")
        provider.recorder, provider.endpoint = recorder, emu.base_url
        try:
            loop = wg.ToolLoop(
                provider,
                tools=tools,
                manager=make_manager(provider, config),
                max_iterations=iterations + 10,
                max_tokens=config.max_tokens,
                sinks=[recorder],
            )
            messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
            result = loop.run(messages)
        finally:
            provider.close()
        records = emu.records
    seconds = time.perf_counter() - started

    chat = [r for r in records if r.path == CHAT_PATH]
    other_paths = {k: n for k, n in log.requests.items() if k != f"POST {CHAT_PATH}"}
    if len(chat) != len(recorder.sent):
        raise SystemExit(f"{config}: {len(chat)} emulator calls but {len(recorder.sent)} sends")
    exacts, mismatches = [], 0
    for record, sent in zip(chat, recorder.sent, strict=True):
        mine = exact(counter, sent, schemas)
        if record.prompt_tokens is not None and record.prompt_tokens != mine:
            mismatches += 1
        exacts.append(record.prompt_tokens if record.prompt_tokens is not None else mine)

    events = result.events
    kinds = Counter(e.kind for e in events)
    paired = [(e, x) for e, x in zip(recorder.estimates, exacts, strict=True) if e is not None]
    if config.managed and len(paired) != len(chat):
        raise SystemExit(f"{config}: {len(chat) - len(paired)} sends without a context_estimate")
    estimates = [e for e, _ in paired]
    ratios = [e.estimated_tokens / x for e, x in paired]
    near = [
        e.estimated_tokens / x for e, x in paired if e.estimated_tokens >= NEAR_BUDGET * e.budget
    ]
    ok = [x for r, x in zip(chat, exacts, strict=True) if r.status == 200]
    tail = ok[len(ok) // 3 :]
    use = statistics.fmean(tail) / (config.window - config.max_tokens) if tail else None
    overflows = sum(1 for r in chat if r.status == 400)
    first_overflow = next(
        (
            f"seed {seed}: first overflow at send {i + 1}: exact prompt {x:,} "
            f"+ max_tokens {config.max_tokens:,} > {config.window:,}"
            for i, (r, x) in enumerate(zip(chat, exacts, strict=True))
            if r.status == 400
        ),
        "",
    )
    error_kinds = Counter(e.failure_kind for e in events if isinstance(e, ProviderErrorEvent))
    refusals = unjustified = 0
    note = ""
    if result.termination is wg.TerminationReason.CONTEXT_TRUNCATED:
        refusals = 1
        floor = refusal_floor(counter, result.messages, schemas)
        unjustified = int(floor <= config.window)
        error = result.error
        note = (
            f"seed {seed}: refused at iteration {result.iterations} "
            f"({'un' if unjustified else ''}justified): exact head + newest turn + tools "
            f"+ {OUTPUT_FLOOR} = {floor:,} {'<=' if unjustified else '>'} {config.window:,}; "
            f"windowguard's estimate {getattr(error, 'estimated_tokens', 0):,} > budget "
            f"{getattr(error, 'budget', 0):,}"
        )
    pruned = [e for e in events if isinstance(e, TranscriptPruned)]
    return Row(
        config=config,
        termination=result.termination.name,
        iterations=result.iterations,
        sends=len(chat),
        overflows=overflows,
        error_kinds=dict(error_kinds),
        refusals=refusals,
        unjustified=unjustified,
        refusal_note=note,
        window_use=use,
        near=near,
        ratios=ratios,
        peak_exact=max(ok, default=0),
        pruned=len(pruned),
        dropped=[e.dropped_turns for e in pruned],
        shrinks=kinds["max_tokens_shrunk"] + kinds["context_emergency_shrink"],
        other_kinds={k: n for k, n in kinds.items() if k not in KNOWN_KINDS},
        other_paths=other_paths,
        guard_ms=[s * 1e3 for s in recorder.guard_seconds],
        seconds=seconds,
        mismatches=mismatches,
        first_overflow=first_overflow,
        transcript=result.messages,
        budget=estimates[0].budget if estimates else None,
        calibration=estimates[-1].calibration if estimates else None,
    )


# --- tables --------------------------------------------------------------------------------


def _stat(values: Sequence[float], how: str) -> str:
    if not values:
        return "-"
    if how == "max":
        return f"{max(values):.3f}"
    if how == "min":
        return f"{min(values):.3f}"
    return f"{statistics.median(values):.3f}"


def _counts(mapping: dict[str, int]) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(mapping.items())) or "-"


def _summed(dicts: Sequence[dict[str, int]]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for d in dicts:
        total.update(d)
    return dict(total)


def print_setup(rows: list[Row], counter: TiktokenCounter, seeds: Sequence[int]) -> None:
    """Head and tool sizes, and what the tools returned (from the longest transcript)."""
    longest = max(rows, key=lambda r: len(r.transcript)).transcript
    schemas = wire_tools(coding_tools(seeds[0]))
    head = longest[: split_head(longest)]
    head_tokens = exact(counter, head, [])
    tools_tokens = exact(counter, head, schemas) - head_tokens
    calls = {
        c["id"]: c["function"]["name"]
        for m in longest
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or ()
    }
    by_tool: dict[str, list[tuple[int, int]]] = {}
    for m in longest:
        if m.get("role") == "tool":
            text = m.get("content") or ""
            by_tool.setdefault(calls.get(m["tool_call_id"], "?"), []).append(
                (text.count("\n") + 1 if text else 0, counter.count(text))
            )
    turns = [m for m in longest if m.get("role") == "assistant" and m.get("tool_calls")]
    parallel = Counter(len(m["tool_calls"]) for m in turns)
    print(
        f"Model {MODEL!r} (in no catalog); exact counts: o200k_base with the {TEMPLATE!r} "
        f"template, tool schemas included. Head (system + task) {head_tokens:,} exact tokens; "
        f"the 3 tool schemas {tools_tokens:,}. {'Seeds' if len(seeds) > 1 else 'Seed'} "
        f"{', '.join(map(str, seeds))}: every "
        "row runs the same seeds, so every row sees the same agent turns and tool output. "
        f"Tool output is windowguard's own source and history at commit {SOURCE_COMMIT[:7]}. "
        f"Seed {seeds[0]}'s longest run: {len(turns)} tool-call turns, calls per turn "
        + ", ".join(f"{k}: {n}" for k, n in sorted(parallel.items()))
        + ".\n"
    )
    print("| tool | results | lines min / median / max | exact tokens min / median / max |")
    print("| --- | ---: | ---: | ---: |")
    for name, sizes in sorted(by_tool.items()):
        lines = [s[0] for s in sizes]
        tokens = [s[1] for s in sizes]
        print(
            f"| {name} | {len(sizes)} | {min(lines)} / {statistics.median(lines):.0f} / "
            f"{max(lines)} | {min(tokens):,} / {statistics.median(tokens):,.0f} / "
            f"{max(tokens):,} |"
        )
    print()


def print_tables(groups: list[list[Row]]) -> None:
    """One line per configuration, its seeds' runs pooled."""
    print(
        "| window | max_tokens | accounting | runs: end | iterations | sends | overflows "
        "| refusals (unjustified) | window use | near budget: sends | est/exact max "
        "| est/exact p50 |"
    )
    print("| ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for runs in groups:
        c = runs[0].config
        ends = Counter(r.termination for r in runs)
        uses = [r.window_use for r in runs if r.window_use is not None]
        use = f"{statistics.fmean(uses):.2f}" if uses else "-"
        if len(uses) > 1:
            use += f" ({min(uses):.2f}-{max(uses):.2f})"
        near = [x for r in runs for x in r.near]
        print(
            f"| {c.window:,} | {c.max_tokens:,} | {c.accounting} "
            f"| {', '.join(f'{k} {n}' for k, n in sorted(ends.items()))} "
            f"| {' / '.join(str(r.iterations) for r in runs)} | {sum(r.sends for r in runs)} "
            f"| {sum(r.overflows for r in runs)} | {sum(r.refusals for r in runs)} "
            f"({sum(r.unjustified for r in runs)}) | {use} "
            f"| {len(near) if c.managed else '-'} | {_stat(near, 'max')} | {_stat(near, 'p50')} |"
        )
    print()
    print(
        "| window | accounting | input budget | pruned sends | dropped turns mean / max "
        "| max_tokens shrinks | peak exact / (window - max_tokens) | est/exact all sends "
        "min / p50 / max | final calibration | provider errors | other event kinds "
        "| other HTTP requests | guard ms/send p50 / p95 / max | s/run |"
    )
    print(
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- "
        "| ---: | ---: |"
    )
    for runs in groups:
        c = runs[0].config
        dropped = [d for r in runs for d in r.dropped]
        dropped_text = f"{statistics.fmean(dropped):.1f} / {max(dropped)}" if dropped else "0 / 0"
        peak = max(r.peak_exact for r in runs) / (c.window - c.max_tokens)
        ratios = [x for r in runs for x in r.ratios]
        ratio_text = " / ".join(_stat(ratios, how) for how in ("min", "p50", "max"))
        guard = sorted(ms for r in runs for ms in r.guard_ms)
        p95 = guard[min(len(guard) - 1, int(0.95 * len(guard)))] if guard else 0.0
        timing = f"{statistics.median(guard):.2f} / {p95:.2f} / {max(guard):.2f}" if guard else "-"
        calibrations = [r.calibration for r in runs if r.calibration is not None]
        calibration = f"{max(calibrations):.3f}" if calibrations else "-"
        budget = f"{runs[0].budget:,}" if runs[0].budget is not None else "-"
        print(
            f"| {c.window:,} | {c.accounting} | {budget} | {sum(r.pruned for r in runs)} "
            f"| {dropped_text} | {sum(r.shrinks for r in runs)} | {peak:.2f} | {ratio_text} "
            f"| {calibration} | {_counts(_summed([r.error_kinds for r in runs]))} "
            f"| {_counts(_summed([r.other_kinds for r in runs]))} "
            f"| {_counts(_summed([r.other_paths for r in runs]))} | {timing} "
            f"| {statistics.fmean(r.seconds for r in runs):.1f} |"
        )
    print()
    for runs in groups:
        c = runs[0].config
        for r in runs:
            notes = [r.refusal_note, r.first_overflow]
            if r.mismatches:
                notes.append(f"{r.mismatches} sends where the recount differs from the emulator's")
            for note in filter(None, notes):
                print(f"- {c.window:,} / {c.accounting}: {note}")


def library_source() -> str:
    """Which windowguard ran: this checkout (clean or not) or another copy."""
    package = Path(wg.__file__).resolve().parent
    src = Path(__file__).resolve().parents[1] / "src"
    if package.parent != src:
        return f"windowguard imported from {package} (not this checkout's src/)."
    try:
        dirty = subprocess.run(
            ["git", "-C", str(src.parent), "status", "--porcelain", "--", "src"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "windowguard imported from this checkout's src/ (git status unknown)."
    if dirty:
        return "windowguard imported from this checkout's src/, WITH uncommitted changes."
    return "windowguard imported from this checkout's src/, no uncommitted changes."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="50 iterations, one seed")
    parser.add_argument("--seeds", type=int, default=None, help="runs per row (default 3)")
    args = parser.parse_args()
    iterations = 50 if args.quick else 150
    seeds = list(range(args.seeds if args.seeds is not None else (1 if args.quick else 3)))
    counter = TiktokenCounter.from_file(O200K_FILE, "o200k_base")
    print(f"## Token accounting in a {iterations}-iteration coding loop (issue 10)\n")
    print(environment("openai", "tiktoken"))
    print(f"\n{library_source()}\n")
    started = time.perf_counter()
    groups: list[list[Row]] = []
    for window, max_tokens in WINDOWS:
        for accounting, flavor in (
            ("count endpoint", "vllm"),
            ("usage only", "openai"),
            ("usage only, heuristic", "openai"),
            ("no windowguard", "vllm"),
        ):
            config = Config(
                accounting=accounting, flavor=flavor, window=window, max_tokens=max_tokens
            )
            groups.append([run_one(config, iterations, seed, counter) for seed in seeds])
    print_setup([r for runs in groups for r in runs], counter, seeds)
    print_tables(groups)
    print(f"\n{len(groups) * len(seeds)} runs in {time.perf_counter() - started:.0f} s.")


if __name__ == "__main__":
    main()
