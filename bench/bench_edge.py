"""Benchmark: overflows and refusals at the edge of the window, in a random sweep (issue 18).

At least 1,500 seeded random agent runs (``_edge.make_case``: windows 4k-200k, 0-30
real tool schemas, ``max_tokens`` None in a third, OpenAI Chat / Responses / Anthropic
formats, the five families with offline tokenizers, a third of the tool results from
the dense content classes of ``_content``), each sent several times as it grows with the
exact prompt tokens of every send reported as the next send's ``last_usage``. Every
send is checked against the truth: the exact prompt tokens of what ``fit`` returned, as
the family's chat template and tokenizer count it (``_edge.Truth``). Two accounting
modes on the same runs: (a) ``counter=None`` with the family's exact local tokenizer
installed, (b) ``counter="heuristic"`` (no exact source), where every overflow is fitted
again once the way the loop does, with and without the provider's numbers.

Then the issue's own failing case per family and format: 14 exactly measured turns, then
one comma-separated word list of about 26k exact tokens, sent into a 32k window.

Columns: *sends* fitted (a refusal is a send that was refused); *overflows*: truth +
fitted ``max_tokens`` > window; *refusals*: ``ContextTruncatedError``; *unjustified*:
refused although truth(head + newest turn + tools) + 200 <= window; *window use*: truth
/ budget over the sends that pruned (mean and min); *worst truth / estimate*: the
largest under-count over all sends.

    bench/run bench_edge.py            # 1,500 runs x 2 modes (``--quick``: 150)
    bench/run bench_edge.py --cases 300 --seed 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.reference_templates

import _edge
from _corpus import environment
from _edge import FAMILIES, FORMATS, MODES, Outcome, Send

CASES = 1_500
EXAMPLES = 12


def run_sweep(
    cases: int, seed: int, modes: Sequence[str] = MODES, progress: bool = False
) -> dict[str, list[Outcome]]:
    """Every case in every mode (truth counts shared between the modes of a case)."""
    truths: dict[str, _edge.Truth] = {}
    outcomes: dict[str, list[Outcome]] = {mode: [] for mode in modes}
    for index in range(cases):
        case = _edge.make_case(seed, index)
        rendered = _edge.render(case)
        truth = truths.get(case.family) or truths.setdefault(case.family, _edge.Truth(case.family))
        for mode in modes:
            started = time.process_time()
            outcome = _edge.simulate(rendered, mode, truth)
            outcome.seconds = time.process_time() - started
            outcomes[mode].append(outcome)
        if progress and index % 100 == 99:
            print(f"  ... {index + 1} runs", file=sys.stderr, flush=True)
    return outcomes


# --------------------------------------------------------------------------- tables


def _sends(outcomes: Iterable[Outcome]) -> list[Send]:
    return [send for outcome in outcomes for send in outcome.sends]


def _ratio(values: Sequence[float], how: Callable[[Sequence[float]], float]) -> str:
    return f"{how(values):.2f}" if values else "-"


def _row(label: str, outcomes: list[Outcome]) -> str:
    sends = _sends(outcomes)
    fitted = [s for s in sends if not s.refused]
    overflows = [s for s in fitted if s.overflow]
    none = sum(1 for s, o in _with_case(outcomes) if s.overflow and o.case.max_tokens is None)
    refusals = [s for s in sends if s.refused]
    pruned = [s.truth / s.budget for s in fitted if s.dropped_turns and s.truth and s.budget]
    use = f"{_ratio(pruned, statistics.fmean)} / {_ratio(pruned, min)} ({len(pruned)})"
    worst = max((s.truth / s.estimate for s in fitted if s.truth and s.estimate), default=0.0)
    cells = [
        label,
        str(len(outcomes)),
        str(len(sends)),
        _bold(len(overflows)),
        str(none),
        str(len(refusals)),
        _bold(sum(s.unjustified for s in refusals)),
        use,
        f"{worst:.3f}",
    ]
    stated = sum(1 for s in overflows if s.stated and s.stated.outcome == "fits")
    unstated = sum(1 for s in overflows if s.unstated and s.unstated.outcome == "fits")
    identical = sum(1 for s in overflows if s.unstated and s.unstated.outcome == "identical")
    cells += [f"{stated} / {len(overflows)}", f"{unstated} / {len(overflows)}", str(identical)]
    return "| " + " | ".join(cells) + " |"


def _bold(value: int) -> str:
    return f"**{value}**" if value else "0"


def _with_case(outcomes: Iterable[Outcome]) -> list[tuple[Send, Outcome]]:
    return [(send, outcome) for outcome in outcomes for send in outcome.sends]


def print_mode(mode: str, outcomes: list[Outcome]) -> None:
    title = (
        '(b) no exact source: `counter="heuristic"`'
        if mode == "heuristic"
        else "(a) exact local tokenizer installed: `counter=None`"
    )
    print(f"#### {title}\n")
    header = (
        "| family / format | runs | sends | overflows | of them max_tokens=None | refusals "
        "| unjustified refusals | window use mean / min (pruned sends) | worst truth / estimate "
        "| overflows recovered by one refit, numbers stated | ... no numbers "
        "| refits identical to the refused request (no numbers) |"
    )
    rule = "| --- |" + " ---: |" * 11
    print(header)
    print(rule)
    for family in FAMILIES:
        for fmt in FORMATS:
            group = [o for o in outcomes if o.case.family == family and o.case.fmt == fmt]
            print(_row(f"{family} / {fmt}", group))
    for family in FAMILIES:
        print(_row(f"{family} / all", [o for o in outcomes if o.case.family == family]))
    for fmt in FORMATS:
        print(_row(f"all / {fmt}", [o for o in outcomes if o.case.fmt == fmt]))
    print(_row("**all**", outcomes))
    seconds = sum(o.seconds for o in outcomes)
    print(f"\nCPU time of the fits and truth counts in this mode: {seconds:.0f} s.\n")


def print_classes(sweep: dict[str, list[Outcome]]) -> None:
    """Overflows by the content that arrived since the previous (measured) send."""
    print("#### Overflows by the content that arrived after measured sends\n")
    print(
        "Sends after a run's first: what the turns appended since the previous send held "
        "(a send can hold several classes). The first send of a run (cold: nothing "
        "measured) is one row of its own.\n"
    )
    modes = list(sweep)
    columns = " | ".join(f"overflows ({m})" for m in modes)
    print(f"| content class | sends it arrived in (mode {modes[0]}) | {columns} |")
    print("| --- | ---: |" + " ---: |" * len(modes))
    arrived: Counter[str] = Counter()
    overflows: dict[str, Counter[str]] = {m: Counter() for m in modes}
    first = "(a run's first send)"
    for mode in modes:
        for send in _sends(sweep[mode]):
            names = {first} if send.number == 0 else set(send.newest)
            for name in names:
                if mode == modes[0]:
                    arrived[name] += 1
                if send.overflow:
                    overflows[mode][name] += 1
    for name, count in sorted(arrived.items(), key=lambda item: (item[0] != first, -item[1])):
        cells = " | ".join(str(overflows[m][name]) for m in modes)
        print(f"| {name} | {count} | {cells} |")
    print()


def print_examples(mode: str, outcomes: list[Outcome]) -> None:
    found = [(s, o) for s, o in _with_case(outcomes) if s.overflow or s.unjustified]
    if not found:
        return
    print(f"#### The first {min(EXAMPLES, len(found))} of {len(found)} failing sends ({mode})\n")
    print(
        "| run | family / format | window | max_tokens asked / fitted | tools | send "
        "| estimate | truth | truth + max_tokens - window | exact | dropped turns "
        "| what arrived | refit (numbers / none) |"
    )
    print("| ---: | --- |" + " ---: |" * 7 + " --- | ---: | --- | --- |")
    for send, outcome in found[:EXAMPLES]:
        case = outcome.case
        if send.refused:
            over = (send.floor_truth or 0) - case.window  # head + newest + tools + floor
        else:
            over = (send.truth or 0) + (send.max_tokens or 0) - case.window
        what = ", ".join(sorted(set(send.newest))) or "-"
        refit = "-"
        if send.stated and send.unstated:
            refit = f"{send.stated.outcome} / {send.unstated.outcome}"
        truth = f"{send.truth:,}" if send.truth is not None else "refused"
        if send.refused:
            truth = f"refused ({send.floor_truth:,} with the floor)"
        print(
            f"| {case.index} | {case.family} / {case.fmt} | {case.window:,} "
            f"| {case.max_tokens or 'None'} / {send.max_tokens or '-'} | {len(case.tools)} "
            f"| {send.number + 1} of {len(case.sends)} | {send.estimate:,} | {truth} "
            f"| {over:+,} | {'yes' if send.exact else 'no'} | {send.dropped_turns} | {what} "
            f"| {refit} |"
        )
    print()


def print_issue_cases(modes: Sequence[str]) -> None:
    """The issue's case: 14 measured turns, a ~26k-token word list, a 32k window."""
    print("#### The issue's case: 14 measured turns, then a comma-separated word list\n")
    print(
        "32,768-token window, max_tokens 1,024; sends 1-14 each add one real turn and "
        "report the exact prompt of the previous send; send 15 adds a comma-separated "
        f"word list of about {_edge.ISSUE_LIST_TOKENS:,} exact tokens.\n"
    )
    print(
        "| family / format | mode | estimate | truth | fitted max_tokens "
        "| truth + max_tokens - window | dropped turns | outcome |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    truths: dict[str, _edge.Truth] = {}
    for family in FAMILIES:
        truth = truths.setdefault(family, _edge.Truth(family))
        for fmt in FORMATS:
            rendered = _edge.render(_edge.issue_case(family, fmt))
            for mode in modes:
                outcome = _edge.simulate(rendered, mode, truth)
                last = outcome.sends[-1]
                if last.refused:
                    verdict = "unjustified refusal" if last.unjustified else "refused (justified)"
                    print(
                        f"| {family} / {fmt} | {mode} | {last.estimate:,} | - | - | - | - "
                        f"| {verdict} (send {last.number + 1}) |"
                    )
                    continue
                over = (last.truth or 0) + (last.max_tokens or 0) - rendered.case.window
                verdict = "**overflow**" if last.overflow else "fits"
                if last.number + 1 < len(rendered.case.sends):
                    verdict += f" (run ended at send {last.number + 1})"
                print(
                    f"| {family} / {fmt} | {mode} | {last.estimate:,} | {last.truth:,} "
                    f"| {last.max_tokens:,} | {over:+,} | {last.dropped_turns} | {verdict} |"
                )
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the runs (150)")
    parser.add_argument("--cases", type=int, default=None, help=f"runs (default {CASES:,})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modes", nargs="*", default=list(MODES), choices=MODES)
    parser.add_argument("--progress", action="store_true", help="progress lines on stderr")
    parser.add_argument(
        "--edits",
        choices=list(_edge.EDITS),
        default="drop only",
        help="the managers' edits (default: drop only, the accounting alone)",
    )
    args = parser.parse_args()
    _edge.edits_policy = args.edits
    cases = args.cases if args.cases is not None else (CASES // 10 if args.quick else CASES)

    started = time.perf_counter()
    print("### Edge rule: a random sweep (bench/bench_edge.py)\n")
    print(environment("tiktoken", "tokenizers", "mistral-common"))
    print(
        f"\n{cases:,} random runs, seed {args.seed}; truth: {_edge.TRUTH}, "
        "Anthropic and Responses requests converted to chat form by the emulator's "
        "parsers (tool results as tool messages). Edits: "
        f"{args.edits} (`edits={_edge.EDITS[args.edits]!r}`).\n"
    )
    sweep = run_sweep(cases, args.seed, args.modes, progress=args.progress)
    print(
        f"Truth counts: {_edge.TRUTH_TALLY['reference']:,} by the vendors' software, "
        f"{_edge.TRUTH_TALLY['template']:,} by windowguard's template accounting (OpenAI "
        "families, and requests the vendors' software refuses, such as mistral-common's "
        "empty assistant messages).\n"
    )
    for mode, outcomes in sweep.items():
        print_mode(mode, outcomes)
    print_classes(sweep)
    for mode, outcomes in sweep.items():
        print_examples(mode, outcomes)
    print_issue_cases(args.modes)
    print(f"Wall time {time.perf_counter() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
