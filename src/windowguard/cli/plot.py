"""``windowguard plot EVENTS.jsonl [MORE.jsonl …] -o chart.png``: pressure over steps.

Reads JSONL event files (what :class:`~windowguard.run.sinks.JsonlSink` writes, one run per
file) and draws each run's provider-reported pressure per model call, with prunes,
``max_tokens`` shrinks, edits (``context_edited``: results clamped or cleared, call
arguments cleared, turns summarized) and provider failures marked. Needs matplotlib.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..demo.chart import PressureSeries, draw_chart, read_events, series_from_events
from ._common import CliError, Output

__all__ = ["register", "run"]


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    """Add the ``plot`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser = sub.add_parser(
        "plot",
        parents=[parent],
        help="draw pressure, prunes, edits and shrinks over steps as PNG",
        description="Draw pressure over steps from JSONL event files (one run per file).",
    )
    parser.add_argument("events", metavar="EVENTS.jsonl", nargs="+", help="event files")
    parser.add_argument("-o", "--output", required=True, help="the PNG to write")
    parser.add_argument("--title", default="", help="chart title")
    parser.set_defaults(handler=run)


def _edits(series: PressureSeries) -> str:
    """``, edits at 3 steps (clamp 1, clear 2; -12,400 tokens)``, or nothing."""
    if not series.edits:
        return ""
    kinds: dict[str, int] = {}
    for _, kind, _ in series.edits:
        kinds[kind] = kinds.get(kind, 0) + 1
    freed = sum(tokens for _, _, tokens in series.edits)
    steps = len({step for step, _, _ in series.edits})
    said = ", ".join(f"{kind} {n}" for kind, n in kinds.items())
    return f", edits at {steps} steps ({said}; -{freed:,} tokens)"


def run(args: argparse.Namespace) -> int:
    """Run ``windowguard plot``; returns the exit status.

    Raises:
        CliError: matplotlib missing, or the output folder does not exist.
    """
    series = [series_from_events(read_events(p), Path(p).stem) for p in args.events]
    target = Path(args.output)
    if not target.parent.is_dir():
        raise CliError(f"{args.output}: folder {target.parent} does not exist")
    try:
        draw_chart(series, target, title=args.title)
    except ImportError as exc:
        raise CliError(str(exc)) from exc
    out = Output(plain=args.plain)
    for run_series in series:
        peak = max(run_series.pressures, default=0.0)
        failed = ", ".join(f"{kind} at step {step}" for step, kind in run_series.failures)
        out.line(
            f"{run_series.label}: {len(run_series.steps)} steps, peak pressure {peak:.0%}, "
            f"{len(run_series.prunes)} prunes, {len(run_series.shrinks)} shrinks"
            + _edits(run_series)
            + (f", failed: {failed}" if failed else "")
        )
    out.line(f"chart: {target}")
    return 0
