"""What the ``windowguard`` subcommands share: errors, options, the model, output.

Invariants: bad input is reported by raising :class:`CliError` (or any
:class:`~windowguard.core.exceptions.WindowGuardError`) with a one-line message; ``main``
turns it into one line on stderr and exit status 2. A window that is only the fallback
for a model nobody knows is said as a warning (:func:`window_warning`). Reading
transcripts lives in :mod:`._transcripts`. Output goes through
:class:`Output`, which uses rich (tables, colour) only when it is installed, the
stream is a terminal and ``--plain`` was not given; otherwise it writes aligned plain
text, so pipes and logs never see escape codes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from ..accounting.catalog import ModelInfo
from ..core.adapters import FORMATS
from ..core.edits._flags import edit_stages
from ..core.edits.config import EditStage
from ..core.exceptions import ConfigurationError
from ..pipeline.manager import ContextWindowManager

if TYPE_CHECKING:
    from ._transcripts import Transcript

__all__ = [
    "EXAMPLE",
    "ArgumentParser",
    "CliError",
    "Output",
    "add_edit_options",
    "add_model_options",
    "common_parent",
    "edits_of",
    "edits_summary",
    "make_manager",
    "non_negative_int",
    "positive_int",
    "read_text",
    "warn",
    "window_warning",
]

EXAMPLE = "example:coding-agent"


class CliError(Exception):
    """A one-line error for the user; exit status 2."""


def read_text(path: str) -> str:
    """The text of ``path``, or ``-`` for stdin.

    Raises:
        CliError: missing or unreadable.
    """
    if path == "-":
        return sys.stdin.read()
    file = Path(path)
    if not file.is_file():
        raise CliError(f"{path}: no such file")
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{path}: cannot read: {exc}") from exc


def positive_int(text: str) -> int:
    """argparse type: a positive integer."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return value


def trigger_value(text: str) -> int | float:
    """argparse type: a token count (an integer >= 1) or a fraction in (0, 1]."""
    value: int | float
    try:
        value = int(text)
    except ValueError:
        value = _fraction(text)
        if not 0.0 < value <= 1.0:
            raise argparse.ArgumentTypeError(f"a fraction must lie in (0, 1]: {text}") from None
        return value
    if value < 1:
        raise argparse.ArgumentTypeError(f"a token count must be >= 1: {text}")
    return value


def _fraction(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a token count or a fraction: {text!r}") from None


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text}")
    return value


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line usage errors (``windowguard fit: error: …; see --help``)."""

    def error(self, message: str) -> NoReturn:
        """Print one line to stderr and exit 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def common_parent() -> argparse.ArgumentParser:
    """Options every subcommand takes (``--plain``)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--plain", action="store_true", help="plain text output (no colour or rich tables)"
    )
    return parent


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """The model and budget options of ``fit`` and ``inspect``."""
    parser.add_argument("--model", help="model name (catalog limits and tokenizer family)")
    parser.add_argument("--context-window", "--window", type=positive_int, help="window in tokens")
    parser.add_argument("--max-output-tokens", type=positive_int, help="the model's output cap")
    parser.add_argument("--max-tokens", type=positive_int, help="the request's reply budget")
    parser.add_argument("--safety", type=int, default=500, help="tokens kept free (default 500)")
    parser.add_argument("--format", choices=FORMATS, help="wire format (detected by default)")
    parser.add_argument("--no-tools", action="store_true", help="ignore the file's tool schemas")


def add_edit_options(parser: argparse.ArgumentParser, *, spill: bool = False) -> None:
    """The edit stages' options (``proxy``, ``inspect``, ``fit``), run before whole turns
    are dropped; ``spill`` adds ``--spill-dir`` (the proxy's; inspecting writes nothing).
    There is no summary option: a summarizer is code."""
    group = parser.add_argument_group(
        "edits",
        "edit tool results before dropping whole turns (default: windowguard's default "
        "edits, wg.DEFAULT_EDITS: clamp results over a quarter of the input budget, clear "
        "all but the newest turn's results once the request passes 55%% of it)",
    )
    group.add_argument(
        "--no-edits",
        action="store_true",
        help="drop whole turns only (no clamping, no clearing)",
    )
    group.add_argument(
        "--clamp-tool-results",
        type=positive_int,
        metavar="TOKENS",
        help="cut any single tool result over TOKENS (>= 100) to its start and end, with a "
        "marker saying how much was cut (an output larger than the window no longer ends "
        "the run)",
    )
    if spill:
        group.add_argument(
            "--spill-dir",
            metavar="DIR",
            help="keep each clamped output whole in DIR (created 0700, files 0600); the "
            "marker names a handle, but the proxy cannot run read_spilled for its clients: "
            "the handle is for a client that offers its own tool over DIR, and the files "
            "stay private to this machine",
        )
    group.add_argument(
        "--clear-tool-results",
        type=positive_int,
        metavar="KEEP",
        help="replace tool results older than the newest KEEP turns by short placeholders "
        "naming the tool and its arguments, oldest first, before any turn is dropped",
    )
    group.add_argument(
        "--clear-at-least",
        type=non_negative_int,
        metavar="TOKENS",
        help="clear only when that frees at least TOKENS (default 1000: each clear "
        "rewrites the cached prompt prefix after it)",
    )
    group.add_argument(
        "--clear-trigger",
        type=trigger_value,
        metavar="TOKENS|FRACTION",
        help="also clear once the request passes TOKENS (an integer) or FRACTION of the "
        "input budget (0.55, as the default edits), not only when turns would be lost",
    )


def edits_of(args: argparse.Namespace) -> tuple[EditStage, ...] | None:
    """The edit stages :func:`add_edit_options`' flags ask for (no spill store; None:
    the default).

    Raises:
        CliError: a value out of range, or ``--clear-at-least`` without
            ``--clear-tool-results`` (the message names the flag).
    """
    try:
        return edit_stages(
            clamp_tool_results=getattr(args, "clamp_tool_results", None),
            clear_tool_results=getattr(args, "clear_tool_results", None),
            clear_at_least=getattr(args, "clear_at_least", None),
            clear_trigger=getattr(args, "clear_trigger", None),
            no_edits=bool(getattr(args, "no_edits", False)),
        )
    except ConfigurationError as exc:
        raise CliError(str(exc)) from exc


def edits_summary(records: Sequence[Mapping[str, Any]]) -> str:
    """What a fit's edit records (``EditRecord.to_dict()``) did, by kind, with the
    tokens each kind freed (``clamped 2 results (-9,100 tokens), ...``)."""
    by_kind: dict[str, list[int]] = {}
    for record in records:
        counts = by_kind.setdefault(record["kind"], [0, 0])
        counts[0] += len(record["messages"])
        counts[1] += record["tokens_freed"]
    if not by_kind:
        return "nothing edited"
    names = {
        "clamp": "clamped {} results",
        "clear": "cleared {} results",
        "clear_inputs": "cleared the arguments of {} calls",
        "summarize": "summarized {} messages",
        "drop": "dropped {} messages",
    }
    return ", ".join(
        f"{names[kind].format(n)} (-{freed:,} tokens)"
        for kind, (n, freed) in by_kind.items()
        if kind in names
    )


def make_manager(args: argparse.Namespace, transcript: Transcript) -> ContextWindowManager:
    """The manager the model and edit options describe (explicit window wins over the
    catalog)."""
    model = args.model or transcript.model
    edits = edits_of(args)
    if args.context_window is not None:
        info = ModelInfo(
            args.context_window, max_output_tokens=args.max_output_tokens, source="explicit"
        )
        return ContextWindowManager(model, model_info=info, safety=args.safety, edits=edits)
    if args.max_output_tokens is not None:
        raise CliError("--max-output-tokens needs --context-window")
    return ContextWindowManager(model, safety=args.safety, edits=edits)


def window_warning(manager: ContextWindowManager) -> str | None:
    """What to say when the window is the fallback for a model nobody knows, else None."""
    info = manager.model_info
    if info.source_of("context_window") != "fallback":
        return None
    fix = "pass --context-window N, or a --model that `windowguard models` knows"
    if not manager.model:
        return (
            f"no model named (--model, or 'model' in the file): the window is the "
            f"{info.context_window}-token fallback; {fix}"
        )
    return (
        f"unknown model {manager.model!r}: not in the catalog or overrides, so the window "
        f"is the {info.context_window}-token fallback; {fix}"
    )


def warn(message: str) -> None:
    """One warning line on stderr (the command goes on)."""
    print(f"windowguard: warning: {message}", file=sys.stderr, flush=True)


def _rich_console(stream: TextIO) -> Any:
    try:
        from rich.console import Console
    except ImportError:
        return None
    return Console(file=stream, highlight=False, soft_wrap=True)


class Output:
    """Lines, bars and tables for one stream: rich on a terminal, plain otherwise.

    Args:
        plain: force plain text.
        stream: where to write (stdout when None).
        force_rich: use rich even when the stream is not a terminal (tests, recordings).
    """

    def __init__(
        self, *, plain: bool = False, stream: TextIO | None = None, force_rich: bool = False
    ) -> None:
        self.stream = stream or sys.stdout
        wants_rich = not plain and (force_rich or _isatty(self.stream))
        self._console = _rich_console(self.stream) if wants_rich else None
        if self._console is not None and force_rich:
            from rich.console import Console

            self._console = Console(
                file=self.stream, force_terminal=True, width=110, highlight=False
            )

    @property
    def rich(self) -> bool:
        """Whether rich output is in use."""
        return self._console is not None

    def line(self, text: str = "", style: str | None = None) -> None:
        """Print one line (``style`` is a rich style, ignored in plain mode)."""
        if self._console is not None:
            from rich.text import Text

            self._console.print(Text(text, style=style or ""))
        else:
            print(text, file=self.stream, flush=True)

    def bar(self, fraction: float, width: int = 20) -> str:
        """A fixed-width bar for ``fraction`` (0..1, clipped); ASCII in plain mode."""
        filled = round(max(0.0, min(fraction, 1.0)) * width)
        full, empty = ("█", "░") if self.rich else ("#", ".")
        return full * filled + empty * (width - filled)

    def table(
        self,
        columns: Sequence[str],
        rows: Sequence[Sequence[str]],
        *,
        title: str = "",
        right: Sequence[int] = (),
        styles: Sequence[str | None] = (),
    ) -> None:
        """Print a table; ``right`` are right-aligned column indices, ``styles`` per row."""
        if self._console is not None:
            from rich.table import Table

            table = Table(title=title or None, title_justify="left")
            for index, name in enumerate(columns):
                table.add_column(name, justify="right" if index in right else "left")
            for index, row in enumerate(rows):
                style = styles[index] if index < len(styles) else None
                table.add_row(*row, style=style)
            self._console.print(table)
            return
        for line in plain_table(columns, rows, title=title, right=right):
            print(line, file=self.stream)
        self.stream.flush()


def plain_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    title: str = "",
    right: Sequence[int] = (),
) -> list[str]:
    """A table as aligned plain-text lines (title, header, rule, rows)."""
    widths = [len(c) for c in columns]
    for row in rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))

    def render(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(cells)
        ]
        return "  ".join(parts).rstrip()

    lines = [title] if title else []
    lines.append(render(columns))
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(render(row) for row in rows)
    return lines


def _isatty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty()) if callable(isatty) else False
