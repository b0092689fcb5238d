"""``windowguard plot EVENTS.jsonl [MORE.jsonl …] -o chart.png``: pressure over steps.

Reads event files (what :class:`~windowguard.run.sinks.JsonlSink` writes: JSON Lines; or
one JSON array of event objects, :func:`~windowguard.demo.chart.read_events`) and draws
each run's provider-reported pressure per model call, with prunes, ``max_tokens``
shrinks, edits (``context_edited``: results clamped or cleared, call arguments cleared,
turns summarized) and provider failures marked. Needs matplotlib.

A file of a tool loop is one run. A file of a drop-in surface (``wg.guard``, the proxy)
may hold many conversations: their events carry a ``"conversation"`` key (a provider
error its ``run_id``), and each conversation is a run of its own, one line each, labelled
``FILE KEY`` with the key's first 8 characters; ``--conversation KEY`` (a prefix) plots
only that one. Steps are never counted across conversations.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
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
    parser.add_argument(
        "--conversation",
        metavar="KEY",
        help="plot only this conversation of a proxy's or wg.guard's events (a prefix of "
        "its key; by default each conversation is a line of its own)",
    )
    parser.set_defaults(handler=run)


_SHORT = 8
"""How many characters of a conversation's key label its line."""


def _conversation_of(event: Mapping[str, Any]) -> str | None:
    """The conversation an event belongs to (a provider error names it as its run)."""
    key = event.get("conversation")
    if key is None and event.get("event") == "provider_error":
        key = event.get("run_id") or None
    return key if isinstance(key, str) else None


def _runs(
    events: Sequence[Mapping[str, Any]], label: str, wanted: str | None
) -> list[PressureSeries]:
    """One series per conversation (in the order they first appear), or one for a file
    whose events name none; ``wanted``: only the conversations whose key starts so."""
    groups: dict[str | None, list[Mapping[str, Any]]] = {}
    for event in events:
        groups.setdefault(_conversation_of(event), []).append(event)
    keys = [key for key in groups if key is not None]
    if not keys:
        return [series_from_events(events, label)] if wanted is None else []
    if wanted is not None:
        keys = [key for key in keys if key.startswith(wanted)]
    if len(keys) == 1 and wanted is None:
        return [series_from_events(groups[keys[0]], label)]
    return [series_from_events(groups[key], f"{label} {key[:_SHORT]}") for key in keys]


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
        CliError: matplotlib missing, the output folder does not exist, or
            ``--conversation`` names no conversation, or several.
    """
    wanted = args.conversation
    files = [(read_events(p), Path(p).stem) for p in args.events]
    series = [run for events, label in files for run in _runs(events, label, wanted)]
    if wanted is not None and len(series) != 1:
        found = sorted({k for events, _ in files for e in events if (k := _conversation_of(e))})
        listed = ", ".join(key[:_SHORT] for key in found[:20]) or "none (no event names one)"
        how = "no conversation's key starts" if not series else "several conversations' start"
        raise CliError(
            f"--conversation {wanted}: {how} with {wanted!r}; the conversations in "
            f"{', '.join(args.events)}: {listed}"
        )
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
