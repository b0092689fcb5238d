"""Benchmark (2): ContextWindowManager.fit() time, cold and warm, and its peak memory.

For synthetic transcripts of 10, 100, 1,000 and 5,000 real corpus turns
(``_corpus.synthetic``) with the corpora's tool schemas, two windows:

* ``fits``: a window twice the transcript's estimate, so nothing is pruned;
* ``prunes``: a window holding the head, tools and about half the turns, so every fit
  drops old turns.

*Cold* is the first send of a run: a fresh manager, ``fit(N turns, last_usage=None)``.
*Warm* is the next send of the same run after appending one turn:
``fit(N + 1 turns, last_usage=NO_USAGE)`` or ``last_usage=<int>`` (alternating
repetitions). Times are ``time.perf_counter`` around the ``fit`` call only, with the
garbage collector disabled while timing; median and p95 over many repetitions. Peak
memory is tracemalloc's peak during one cold and one warm fit.

Targets (issue 2): warm < 1 ms and cold < 20 ms at 1,000 turns. When one is missed
(or with ``--profile``) the missed scenario is run under cProfile and the functions
taking the time are printed with their shares.

Two more tables (issue 18, item 9):

* **warm fit with an integer usage report** in a fixed window (128k and 200k) at 1,000,
  10,000 and 100,000 turns: the steady state of a long run, where the window bounds what
  is kept and the rest is pruned. After a cold fit and a few untimed sends, every send
  reports the exact prompt tokens of the previous one (o200k, OpenAI's accounting) as
  ``last_usage`` and appends one turn; the fit is timed. Targets: < 0.1 ms at 1,000
  turns, and at most 1.5x that at 100,000.
* **cold fit near the edge** with each family's exact local tokenizer at a 200k window
  (the tokenizer loaded beforehand): a transcript whose heuristic estimate first passes
  95 % of the budget (the estimate says "near the edge"), and one whose estimate passes
  2.5 budgets (it prunes, also by the exact count).
  Target: < 200 ms.

    bench/run bench_fit.py            # or: .venv/bin/python bench/bench_fit.py [--quick]
    bench/run bench_fit.py --tables usage edge    # only the issue-18 tables
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpus
import windowguard as wg

SIZES = (10, 100, 1_000, 5_000)
REPETITIONS = {10: 3_000, 100: 1_000, 1_000: 200, 5_000: 40}
MAX_TOKENS = 4_096
SAFETY = 500
TARGET_SIZE = 1_000
TARGET_WARM_MS = 0.1  # issue 10: when no decision is near the edge (the fits rows)
TARGET_COLD_MS = 20.0
USAGE_SIZES = (1_000, 10_000, 100_000)
USAGE_WINDOWS = (128_000, 200_000)
USAGE_REPETITIONS = 200
USAGE_WARMUP = 8
TARGET_USAGE_MS = 0.1  # issue 18: warm, int usage, 1,000 turns ...
TARGET_USAGE_GROWTH = 1.5  # ... and at most 1.5x that at 100,000 turns
EDGE_WINDOW = 200_000
EDGE_FAMILIES = ("o200k", "cl100k", "llama3", "qwen", "mistral")
EDGE_REPETITIONS = 5
TARGET_EDGE_MS = 200.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """One transcript size fitted into one window."""

    turns: int
    window_kind: str  # "fits" or "prunes"
    info: wg.ModelInfo
    tools: list[dict[str, object]]
    before: list[dict[str, object]]  # N turns
    after: list[dict[str, object]]  # N + 1 turns, the same objects plus one turn


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    cold_ms: tuple[float, ...]
    warm_none_ms: tuple[float, ...]
    warm_int_ms: tuple[float, ...]
    cold_cpu_ms: tuple[float, ...]  # process CPU time: robust to other load on the machine
    warm_cpu_ms: tuple[float, ...]
    dropped_cold: int
    dropped_warm: int


def build(turns: int) -> tuple[Scenario, Scenario]:
    """The ``fits`` and ``prunes`` scenarios of one transcript size."""
    transcript = _corpus.synthetic(turns)
    before = transcript.messages
    after = before + _corpus.extra_turn(turns)
    head = before[: _corpus.split_head(before)]
    probe = wg.ContextWindowManager(model_info=wg.ModelInfo(10**9, tokenizer="o200k"))
    full = probe.fit(after, tools=transcript.tools, max_tokens=MAX_TOKENS).estimated_tokens
    head_only = probe.fit(
        head, tools=transcript.tools, max_tokens=MAX_TOKENS, new_run=True
    ).estimated_tokens
    fits = wg.ModelInfo(2 * full + MAX_TOKENS + SAFETY, tokenizer="o200k")
    prunes = wg.ModelInfo((head_only + full) // 2 + MAX_TOKENS + SAFETY, tokenizer="o200k")

    def scenario(kind: str, info: wg.ModelInfo) -> Scenario:
        return Scenario(
            turns=turns,
            window_kind=kind,
            info=info,
            tools=transcript.tools,
            before=before,
            after=after,
        )

    return scenario("fits", fits), scenario("prunes", prunes)


def manager(scenario: Scenario) -> wg.ContextWindowManager:
    return wg.ContextWindowManager(model_info=scenario.info, safety=SAFETY)


def time_scenario(scenario: Scenario, repetitions: int) -> Timing:
    """Time cold and warm fits, ``repetitions`` times each."""
    cold: list[float] = []
    warm_none: list[float] = []
    warm_int: list[float] = []
    dropped_cold = dropped_warm = -1
    cold_cpu: list[float] = []
    warm_cpu: list[float] = []
    clock, cpu_clock = time.perf_counter, time.process_time
    gc.collect()
    gc.disable()
    try:
        for rep in range(repetitions):
            mgr = manager(scenario)
            cpu, start = cpu_clock(), clock()
            first = mgr.fit(scenario.before, tools=scenario.tools, max_tokens=MAX_TOKENS)
            cold.append(clock() - start)
            cold_cpu.append(cpu_clock() - cpu)
            usage: object = wg.NO_USAGE if rep % 2 == 0 else first.estimated_tokens
            cpu, start = cpu_clock(), clock()
            second = mgr.fit(
                scenario.after, tools=scenario.tools, max_tokens=MAX_TOKENS, last_usage=usage
            )
            (warm_none if rep % 2 == 0 else warm_int).append(clock() - start)
            warm_cpu.append(cpu_clock() - cpu)
            dropped_cold, dropped_warm = first.dropped_turns, second.dropped_turns
            if rep % 64 == 63:
                gc.enable()
                gc.collect()
                gc.disable()
    finally:
        gc.enable()
    ms = 1_000.0
    return Timing(
        cold_ms=tuple(t * ms for t in cold),
        warm_none_ms=tuple(t * ms for t in warm_none),
        warm_int_ms=tuple(t * ms for t in warm_int),
        cold_cpu_ms=tuple(t * ms for t in cold_cpu),
        warm_cpu_ms=tuple(t * ms for t in warm_cpu),
        dropped_cold=dropped_cold,
        dropped_warm=dropped_warm,
    )


def peak_memory(scenario: Scenario) -> tuple[int, int]:
    """tracemalloc peak bytes of one cold fit and of the warm fit after it."""
    gc.collect()
    mgr = manager(scenario)
    tracemalloc.start()
    try:
        mgr.fit(scenario.before, tools=scenario.tools, max_tokens=MAX_TOKENS)
        cold = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        mgr.fit(scenario.after, tools=scenario.tools, max_tokens=MAX_TOKENS, last_usage=wg.NO_USAGE)
        warm = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return cold, warm


def median(values: tuple[float, ...]) -> float:
    return statistics.median(values)


def p95(values: tuple[float, ...]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def fmt_ms(value: float) -> str:
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def fmt_bytes(value: int) -> str:
    return f"{value / 1024:.0f} KiB" if value < 1024 * 1024 else f"{value / 1024**2:.1f} MiB"


def profile(label: str, run: Callable[[], object], repetitions: int) -> None:
    """Print where ``run``'s time goes: top functions by own time, with shares."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repetitions):
        run()
    profiler.disable()
    stats = pstats.Stats(profiler)
    rows = stats.stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in rows.values()) or 1.0
    print(f"\n#### Profile: {label} ({repetitions} runs under cProfile)\n")
    print("| function | own time | incl. time | calls/run |")
    print("| --- | ---: | ---: | ---: |")
    ranked = sorted(rows.items(), key=lambda item: item[1][2], reverse=True)
    for (filename, line, name), (_, ncalls, own, cumulative, _) in ranked[:15]:
        where = "/".join(Path(filename).parts[-2:]) if filename != "~" else "builtin"
        print(
            f"| `{name}` ({where}:{line}) | {100 * own / total:.1f}% "
            f"| {100 * cumulative / total:.1f}% | {ncalls / repetitions:,.0f} |"
        )


class _MemoCounter:
    """The exact o200k counter, remembering each text (a run re-sends the same texts)."""

    def __init__(self) -> None:
        self._counter = _corpus.o200k_counter()
        self._known: dict[str, int] = {}

    def count(self, text: str) -> int:
        known = self._known.get(text)
        if known is None:
            known = self._known[text] = self._counter.count(text)
        return known


def usage_table(sizes: list[int], repetitions: int) -> list[str]:
    """Warm fits with an int usage report in fixed windows (see the module docstring)."""
    from windowguard.accounting.templates import count_prompt

    print("\n### Warm fit() with an integer usage report, fixed windows (issue 18)\n")
    print(
        f"o200k; max_tokens={MAX_TOKENS}; {USAGE_WARMUP} untimed sends after the cold fit, "
        f"then {repetitions} timed ones, each reporting the exact prompt tokens of the "
        "previous send and appending one real turn. Times in ms; CPU = process_time.\n"
    )
    print(
        "| turns | window | kept turns (last send) | new cuts in timed sends | cold ms "
        "| warm median | warm p95 | warm mean | warm CPU median | exact sends |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    counter = _MemoCounter()
    medians: dict[tuple[int, int], float] = {}
    for turns in sizes:
        transcript = _corpus.synthetic(turns)
        extras = [_corpus.extra_turn(turns + i) for i in range(USAGE_WARMUP + repetitions)]
        for window in USAGE_WINDOWS:
            messages = list(transcript.messages)
            mgr = wg.ContextWindowManager(
                model_info=wg.ModelInfo(window, tokenizer="o200k"), safety=SAFETY
            )
            tools = transcript.tools
            clock, cpu_clock = time.perf_counter, time.process_time
            start = clock()
            fit = mgr.fit(messages, tools=tools, max_tokens=MAX_TOKENS)
            cold = clock() - start
            wall: list[float] = []
            cpu: list[float] = []
            cuts = exact = 0
            gc.collect()
            gc.disable()
            try:
                for index, turn in enumerate(extras):
                    usage = count_prompt(counter, fit.messages, tools, template="openai")
                    messages.extend(turn)
                    cpu_start, start = cpu_clock(), clock()
                    fit = mgr.fit(messages, tools=tools, max_tokens=MAX_TOKENS, last_usage=usage)
                    elapsed, elapsed_cpu = clock() - start, cpu_clock() - cpu_start
                    if index >= USAGE_WARMUP:
                        wall.append(elapsed * 1e3)
                        cpu.append(elapsed_cpu * 1e3)
                        cuts += any(getattr(e, "new_cut", False) for e in fit.events)
                        exact += fit.exact
                    if index % 64 == 63:
                        gc.enable()
                        gc.collect()
                        gc.disable()
            finally:
                gc.enable()
            timings = tuple(wall)
            medians[(turns, window)] = median(timings)
            kept = turns + len(extras) - fit.dropped_turns
            print(
                f"| {turns:,} | {window:,} | {kept:,} | {cuts} | {fmt_ms(cold * 1e3)} "
                f"| {fmt_ms(median(timings))} | {fmt_ms(p95(timings))} "
                f"| {fmt_ms(statistics.fmean(timings))} | {fmt_ms(median(tuple(cpu)))} "
                f"| {exact} / {len(timings)} |",
                flush=True,
            )
    misses = []
    for window in USAGE_WINDOWS:
        base = medians.get((1_000, window))
        if base is not None and base >= TARGET_USAGE_MS:
            misses.append(f"{window:,}: {fmt_ms(base)} ms at 1,000 turns")
        top = medians.get((100_000, window))
        if base is not None and top is not None and top > TARGET_USAGE_GROWTH * base:
            misses.append(f"{window:,}: {top / base:.1f}x at 100,000 turns")
    print(
        f"\nTargets: warm median < {TARGET_USAGE_MS} ms at 1,000 turns and <= "
        f"{TARGET_USAGE_GROWTH}x that at 100,000 -- "
        + ("all met" if not misses else "missed: " + "; ".join(misses))
    )
    return misses


def _turns_to_estimate(family: str, target: int) -> int:
    """The fewest synthetic turns whose heuristic estimate (no tools) reaches ``target``."""
    probe = wg.ContextWindowManager(
        model_info=wg.ModelInfo(10**9, tokenizer=family), counter="heuristic"
    )
    tools = _corpus.synthetic(0).tools
    low, high = 1, 64

    def estimate(turns: int) -> int:  # each probe is a run of its own
        return probe.fit(
            _corpus.synthetic(turns).messages, tools=tools, new_run=True
        ).estimated_tokens

    while estimate(high) < target:
        low, high = high, high * 2
    while low < high:
        middle = (low + high) // 2
        low, high = (middle + 1, high) if estimate(middle) < target else (low, middle)
    return low


def edge_table(repetitions: int) -> list[str]:
    """Cold fits near the edge with each local tokenizer (see the module docstring)."""
    from windowguard.accounting.local import local_status, local_tokenizer

    print("\n### Cold fit() near the edge, per local tokenizer, 200k window (issue 18)\n")
    print(
        f"Window {EDGE_WINDOW:,}, max_tokens={MAX_TOKENS}, safety={SAFETY}, "
        f"{len(_corpus.all_tools())} tool schemas, `counter=None` (the family's exact "
        f"tokenizer, loaded before timing); a fresh manager per fit, {repetitions} fits "
        "per row; times in ms (wall median / CPU median).\n"
    )
    print(
        "| family | transcript | turns | messages | fitted count / budget | dropped turns "
        "| Fit.exact | wall median | wall max | CPU median | tokenizer load ms |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    misses = []
    budget = EDGE_WINDOW - MAX_TOKENS - SAFETY
    for family in EDGE_FAMILIES:
        start = time.perf_counter()
        if local_tokenizer(family) is None:
            print(f"| {family} | - | - | - | - | - | - | - | - | - | {local_status(family)} |")
            continue
        load = (time.perf_counter() - start) * 1e3
        near = _turns_to_estimate(family, int(0.95 * budget))
        prunes = _turns_to_estimate(family, int(2.5 * budget))
        rows = (("near: estimate >= 0.95 budget", near), ("prunes: estimate >= 2.5 budget", prunes))
        for kind, turns in rows:
            transcript = _corpus.synthetic(turns)
            wall: list[float] = []
            cpu: list[float] = []
            fit = None
            for _ in range(repetitions):
                mgr = wg.ContextWindowManager(
                    model_info=wg.ModelInfo(EDGE_WINDOW, tokenizer=family), safety=SAFETY
                )
                messages = _corpus.synthetic(turns).messages  # fresh dicts: nothing cached
                gc.collect()
                cpu_start, begin = time.process_time(), time.perf_counter()
                fit = mgr.fit(messages, tools=transcript.tools, max_tokens=MAX_TOKENS)
                wall.append((time.perf_counter() - begin) * 1e3)
                cpu.append((time.process_time() - cpu_start) * 1e3)
            assert fit is not None
            value = median(tuple(wall))
            if value >= TARGET_EDGE_MS:
                misses.append(f"{family} {kind.split(':')[0]} {fmt_ms(value)} ms")
            print(
                f"| {family} | {kind} | {turns:,} | {len(transcript.messages):,} "
                f"| {fit.estimated_tokens / fit.budget:.2f} | {fit.dropped_turns:,} "
                f"| {'yes' if fit.exact else 'no'} | {fmt_ms(value)} | {fmt_ms(max(wall))} "
                f"| {fmt_ms(median(tuple(cpu)))} | {load:.0f} |",
                flush=True,
            )
            load = 0.0  # loaded once per process
    print(
        f"\nTarget: cold fit near the edge < {TARGET_EDGE_MS:.0f} ms (wall median) -- "
        + ("all met" if not misses else "missed: " + "; ".join(misses))
    )
    return misses


def print_fit_header() -> None:
    print(
        f"\nSynthetic transcripts: one real head + N real turns cycled from "
        f"{_corpus.pool_size():,} corpus turns, {len(_corpus.all_tools())} tool schemas; "
        f"max_tokens={MAX_TOKENS}, safety={SAFETY}. Times in ms: wall clock "
        "(perf_counter) median / p95, and the median process CPU time (process_time), "
        "which other load on the machine does not inflate.\n"
    )
    print(
        "| turns | messages | window | dropped turns cold / warm | cold median | cold p95 "
        "| warm median (NO_USAGE) | warm p95 (NO_USAGE) | warm median (int usage) "
        "| warm p95 (int usage) | cold / warm median, CPU time | runs | peak mem cold "
        "| peak mem warm |"
    )
    print(
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: | ---: |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the repetitions")
    parser.add_argument("--profile", action="store_true", help="profile 1,000 turns anyway")
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    parser.add_argument(
        "--tables",
        nargs="*",
        default=["fit", "usage", "edge"],
        choices=["fit", "usage", "edge"],
        help="fit: cold and warm by size; usage: warm with an int usage in fixed "
        "windows; edge: cold near the edge per local tokenizer",
    )
    parser.add_argument("--usage-sizes", type=int, nargs="*", default=list(USAGE_SIZES))
    args = parser.parse_args()
    if "fit" not in args.tables:
        args.sizes = []

    print("### fit() time, cold and warm (bench/bench_fit.py)\n")
    print(_corpus.environment())
    if args.sizes:
        print_fit_header()
    missed: list[tuple[Scenario, str]] = []
    misses: list[str] = []
    scenarios: dict[tuple[int, str], Scenario] = {}
    for turns in args.sizes:
        for scenario in build(turns):
            scenarios[(turns, scenario.window_kind)] = scenario
            repetitions = REPETITIONS.get(turns, 20)
            if args.quick:
                repetitions = max(10, repetitions // 10)
            timing = time_scenario(scenario, repetitions)
            cold_mem, warm_mem = peak_memory(scenario)
            print(
                f"| {turns:,} | {len(scenario.before):,} | {scenario.window_kind} "
                f"(window {scenario.info.context_window:,}) "
                f"| {timing.dropped_cold:,} / {timing.dropped_warm:,} "
                f"| {fmt_ms(median(timing.cold_ms))} | {fmt_ms(p95(timing.cold_ms))} "
                f"| {fmt_ms(median(timing.warm_none_ms))} | {fmt_ms(p95(timing.warm_none_ms))} "
                f"| {fmt_ms(median(timing.warm_int_ms))} | {fmt_ms(p95(timing.warm_int_ms))} "
                f"| {fmt_ms(median(timing.cold_cpu_ms))} / {fmt_ms(median(timing.warm_cpu_ms))} "
                f"| {repetitions:,} | {fmt_bytes(cold_mem)} | {fmt_bytes(warm_mem)} |",
                flush=True,
            )
            # The targets hold when no decision is near the edge: the fits rows. A prunes
            # row makes a new cut on its cold fit, which asks the exact counters. Warm is
            # the steady state (NO_USAGE); a fit with an int usage is the run's first
            # report here, attributed once over the whole transcript.
            if turns == TARGET_SIZE and scenario.window_kind == "fits":
                checks = (
                    ("cold", "wall", median(timing.cold_ms), TARGET_COLD_MS),
                    ("cold", "CPU", median(timing.cold_cpu_ms), TARGET_COLD_MS),
                    ("warm", "wall", median(timing.warm_none_ms), TARGET_WARM_MS),
                )
                for phase, clock, value, target in checks:
                    if value >= target:
                        missed.append((scenario, phase))
                        misses.append(
                            f"{phase} {scenario.window_kind} ({clock} {fmt_ms(value)} ms)"
                        )

    if TARGET_SIZE in args.sizes:
        print(
            f"\nTargets at {TARGET_SIZE:,} turns, window fits: warm (NO_USAGE) < "
            f"{TARGET_WARM_MS} ms, cold < {TARGET_COLD_MS} ms (medians) -- "
            f"{'all met' if not misses else 'missed: ' + ', '.join(misses)}"
        )
    to_profile: list[tuple[Scenario, str]] = []
    for scenario, phase in missed:  # each missed scenario once (a miss may be wall and CPU)
        if not any(s is scenario and p == phase for s, p in to_profile):
            to_profile.append((scenario, phase))
    if args.profile and TARGET_SIZE in args.sizes:
        to_profile = [
            (scenarios[(TARGET_SIZE, kind)], phase)
            for kind in ("fits", "prunes")
            for phase in ("cold", "warm")
        ]
    for scenario, phase in to_profile:
        profile_phase(scenario, phase)
    if "usage" in args.tables:
        usage_reps = USAGE_REPETITIONS // 5 if args.quick else USAGE_REPETITIONS
        usage_table(args.usage_sizes, usage_reps)
    if "edge" in args.tables:
        edge_table(2 if args.quick else EDGE_REPETITIONS)
    return 0


def profile_phase(scenario: Scenario, phase: str) -> None:
    label = f"{phase} fit, {scenario.turns:,} turns, window {scenario.window_kind}"
    if phase == "cold":

        def run() -> object:
            return manager(scenario).fit(
                scenario.before, tools=scenario.tools, max_tokens=MAX_TOKENS
            )

        profile(label, run, 50)
        return
    # Warm: one manager per profiled send, its cold fit done before profiling starts.
    managers = []
    for _ in range(200):
        mgr = manager(scenario)
        mgr.fit(scenario.before, tools=scenario.tools, max_tokens=MAX_TOKENS)
        managers.append(mgr)
    pending = iter(managers)

    def run_warm() -> object:
        return next(pending).fit(
            scenario.after, tools=scenario.tools, max_tokens=MAX_TOKENS, last_usage=wg.NO_USAGE
        )

    profile(label, run_warm, len(managers))


if __name__ == "__main__":
    raise SystemExit(main())
