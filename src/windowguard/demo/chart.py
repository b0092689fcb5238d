"""Pressure over steps, from a run's events: the series and its PNG chart.

A *step* is one model call, numbered from 1. ``context_pressure`` events (one per
answered call) give the pressure line; ``transcript_pruned``, ``max_tokens_shrunk`` /
``context_emergency_shrink``, ``context_edited`` (results clamped or cleared, call
arguments cleared, turns summarized: the edit stages) and ``provider_error`` events are
placed on the step of the send they belong to — the next call after the last pressure
reading. An edit repeated from an earlier send (``"new": false``) is not marked again,
and a ``"drop"`` edit is the prune already marked.

:func:`series_from_events` is pure and works on ``Event.to_dict()`` dicts, which is
exactly what a JSONL sink writes, so a chart can be drawn live (the demo) or later
from a file (``windowguard plot``). Drawing needs matplotlib (the ``demo`` extra); it
uses the Agg canvas directly, never pyplot's global state.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.exceptions import ConfigurationError

__all__ = ["EDIT_MARKS", "PressureSeries", "draw_chart", "read_events", "series_from_events"]

EDIT_MARKS = {"clamp": "D", "clear": "o", "clear_inputs": "P", "summarize": "*"}
"""The marker each kind of edit is drawn with (a drop is drawn as a prune)."""
_EDIT_LABELS = {
    "clamp": "clamped",
    "clear": "cleared",
    "clear_inputs": "arguments cleared",
    "summarize": "summarized",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class PressureSeries:
    """One run's pressure over steps.

    Attributes:
        label: the legend's name for the run.
        steps: the step of each pressure reading.
        pressures: provider-reported pressure (0..1) at those steps.
        prunes: steps whose send dropped oldest turns.
        new_cuts: the subset of ``prunes`` where the cut moved (low-water pruning).
        shrinks: steps whose ``max_tokens`` was lowered.
        edits: ``(step, edit kind, tokens freed)`` of the edit stages' new edits, one per
            step and kind (``"clamp"``, ``"clear"``, ``"clear_inputs"``, ``"summarize"``).
        failures: ``(step, failure kind)`` of provider errors.
        window: the window the pressures are measured against, if known.
    """

    label: str
    steps: tuple[int, ...]
    pressures: tuple[float, ...]
    prunes: tuple[int, ...] = ()
    new_cuts: tuple[int, ...] = ()
    shrinks: tuple[int, ...] = ()
    failures: tuple[tuple[int, str], ...] = ()
    window: int | None = None
    edits: tuple[tuple[int, str, int], ...] = ()


def series_from_events(events: Iterable[Mapping[str, Any]], label: str) -> PressureSeries:
    """Collect the pressure series of one run from its event dicts.

    Args:
        events: ``Event.to_dict()`` dicts in emission order (other kinds are ignored).
        label: the run's name in the legend.

    Returns:
        The series (empty tuples when the events hold no readings).
    """
    steps: list[int] = []
    pressures: list[float] = []
    prunes: list[int] = []
    cuts: list[int] = []
    shrinks: list[int] = []
    failures: list[tuple[int, str]] = []
    edits: dict[tuple[int, str], int] = {}
    window: int | None = None
    for event in events:
        kind = event.get("event")
        upcoming = len(steps) + 1
        if kind == "context_pressure":
            steps.append(upcoming)
            pressures.append(float(event.get("pressure", 0.0)))
            window = int(event["window"]) if isinstance(event.get("window"), int) else window
        elif kind == "transcript_pruned":
            prunes.append(upcoming)
            if event.get("new_cut", True):
                cuts.append(upcoming)
        elif kind in ("max_tokens_shrunk", "context_emergency_shrink"):
            shrinks.append(upcoming)
        elif kind == "provider_error":
            failures.append((upcoming, str(event.get("failure_kind", "unknown"))))
        elif kind == "context_edited" and event.get("new", True) is not False:
            if event.get("edit") not in EDIT_MARKS:
                continue
            key = (upcoming, str(event["edit"]))
            freed = event.get("tokens_freed")
            edits[key] = edits.get(key, 0) + (freed if isinstance(freed, int) else 0)
    return PressureSeries(
        label=label,
        steps=tuple(steps),
        pressures=tuple(pressures),
        prunes=tuple(prunes),
        new_cuts=tuple(cuts),
        shrinks=tuple(shrinks),
        failures=tuple(failures),
        window=window,
        edits=tuple((step, edit, freed) for (step, edit), freed in edits.items()),
    )


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """Read an events file: JSON Lines, one ``Event.to_dict()`` per line (what
    :class:`~windowguard.run.sinks.JsonlSink` writes), or one JSON document holding
    them: an array of event objects, a single event object, or an object whose
    ``"events"`` is such an array (pretty-printed or not).

    Raises:
        ConfigurationError: the file is missing or unreadable, or holds something else;
            the message names the line or item and says what was expected.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigurationError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{path}: cannot read: {exc}") from exc
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        pass  # JSON Lines (or broken): read line by line, below
    else:
        return _events_of(path, whole)
    events: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(
                f"{path}:{number}: not JSON ({exc.msg}); expected {_EXPECTED}"
            ) from None
        if not isinstance(value, dict) or "event" not in value:
            raise ConfigurationError(f"{path}:{number}: not an event (no 'event' key)")
        events.append(value)
    return events


_EXPECTED = (
    'JSON Lines of events (one {"event": ...} object per line, as JsonlSink writes), '
    "or one JSON array of such objects"
)


def _events_of(path: str | Path, value: object) -> list[dict[str, Any]]:
    """The events of a file that is one JSON document."""
    if isinstance(value, dict) and "event" not in value and isinstance(value.get("events"), list):
        value = value["events"]
    if isinstance(value, dict):
        if "event" not in value:
            keys = ", ".join(repr(key) for key in list(value)[:5]) or "none"
            raise ConfigurationError(
                f"{path}: a JSON object that is not an event (no 'event' key; its keys: "
                f"{keys}); expected {_EXPECTED}"
            )
        return [value]
    if not isinstance(value, list):
        kind = {str: "string", bool: "boolean", int: "number", float: "number"}.get(
            type(value), "null"
        )
        raise ConfigurationError(f"{path}: a JSON {kind}, not events; expected {_EXPECTED}")
    for index, item in enumerate(value):
        if not isinstance(item, dict) or "event" not in item:
            raise ConfigurationError(
                f"{path}: item {index} of the JSON array is not an event (no 'event' key)"
            )
    return value


def draw_chart(series: Sequence[PressureSeries], path: str | Path, *, title: str = "") -> Path:
    """Draw pressure over steps for one or more runs and save it as PNG.

    Prunes are marked with triangles on their run's line (filled where the cut
    moved), shrinks with squares, edits (:data:`EDIT_MARKS`: clamps with diamonds,
    clears with circles, cleared arguments with plus signs, summaries with stars) on the
    line too, provider failures with a cross at the window line.

    Args:
        series: the runs to draw.
        path: the PNG to write (its folder must exist).
        title: the chart's title.

    Returns:
        The path written.

    Raises:
        ImportError: matplotlib is missing (``pip install "windowguard[demo]"``).
        ConfigurationError: no series holds a pressure reading or a failure.
    """
    if not any(s.steps or s.failures for s in series):
        raise ConfigurationError("nothing to plot: no context_pressure or provider_error events")
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(
            'drawing charts needs matplotlib: pip install "windowguard[demo]"'
        ) from exc
    figure = Figure(figsize=(11, 4.5), dpi=110)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.axhline(1.0, color="#b22222", linewidth=1, linestyle="--", label="window")
    for index, run in enumerate(series):
        color = f"C{index}"
        axes.plot(run.steps, run.pressures, color=color, marker=".", label=run.label)
        at = dict(zip(run.steps, run.pressures, strict=True))
        _marks(axes, run.prunes, at, color, "v", "none", f"{run.label}: pruned")
        _marks(axes, run.new_cuts, at, color, "v", color, None)
        _marks(axes, run.shrinks, at, color, "s", "none", f"{run.label}: max_tokens shrunk")
        for edit, marker in EDIT_MARKS.items():
            steps = [step for step, kind, _ in run.edits if kind == edit]
            _marks(axes, steps, at, color, marker, "none", f"{run.label}: {_EDIT_LABELS[edit]}")
        for step, kind in run.failures:
            axes.plot([step], [1.0], marker="X", markersize=11, color=color, linestyle="none")
            axes.annotate(kind, (step, 1.0), textcoords="offset points", xytext=(6, 6), color=color)
    axes.set_xlabel("step (model call)")
    axes.set_ylabel("pressure (prompt tokens / window)")
    axes.set_ylim(0, 1.15)
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    if title:
        axes.set_title(title)
    figure.tight_layout()
    target = Path(path)
    figure.savefig(target, format="png")
    return target


def _marks(
    axes: Any,
    steps: Sequence[int],
    at: Mapping[int, float],
    color: str,
    marker: str,
    face: str,
    label: str | None,
) -> None:
    # A send's marker sits on the reading that followed it; a send that failed has
    # none, so its marker sits on the previous reading.
    points = [(s, at.get(s, at.get(s - 1))) for s in steps]
    shown = [(s, p) for s, p in points if p is not None]
    if not shown:
        return
    xs, ys = zip(*shown, strict=True)
    axes.plot(
        xs,
        ys,
        linestyle="none",
        marker=marker,
        markersize=8,
        markeredgecolor=color,
        markerfacecolor=face,
        label=label,
    )
