"""``windowguard fit FILE``: write the fitted transcript, in the file's own shape.

With edit options (``--clamp-tool-results``, ``--clear-tool-results``,
``--clear-at-least``) the written transcript holds the edited results (clamped, or
replaced by placeholders) where the edit stages made them. The fitted transcript goes
to stdout (or ``-o``) as JSON, JSON Lines or the same JSON
object with its ``messages`` / ``input`` replaced (from a file of transcripts, the chosen
one as one line); a one-line summary goes to stderr, so ``windowguard fit t.json >
fitted.json`` stays clean. Damaged or empty input writes nothing and exits 2: fitting it
would pass the damage on for the provider to refuse.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..core.exceptions import ContextTruncatedError
from ._common import (
    EXAMPLE,
    CliError,
    add_edit_options,
    add_model_options,
    edits_summary,
    make_manager,
    warn,
    window_warning,
)
from ._transcripts import add_input_options, damage, damage_line, load_transcript

__all__ = ["register", "run"]


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    """Add the ``fit`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser = sub.add_parser(
        "fit",
        parents=[parent],
        help="fit a transcript into a model's window",
        description="Write the fitted transcript (same format) to stdout or -o; a summary "
        f"goes to stderr. FILE may be '{EXAMPLE}' for the bundled example.",
    )
    parser.add_argument("file", metavar="FILE", help=f"transcript file, or {EXAMPLE}")
    add_input_options(parser)
    add_model_options(parser)
    add_edit_options(parser)
    parser.add_argument("-o", "--output", help="write the fitted transcript here")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``windowguard fit``; returns the exit status.

    Raises:
        CliError: unreadable, empty or damaged input, or nothing fits
            (``CONTEXT_TRUNCATED``).
    """
    transcript = load_transcript(args)
    problems = damage(transcript, args.format)
    if problems:
        raise CliError(damage_line(transcript, problems) + "; nothing written")
    mgr = make_manager(args, transcript)
    fallback = window_warning(mgr)
    try:
        fit = mgr.fit(
            transcript.messages,
            tools=None if args.no_tools else transcript.tools,
            max_tokens=args.max_tokens,
            system=transcript.system,
            format=args.format,
        )
    except ContextTruncatedError as exc:
        note = f" ({fallback})" if fallback else ""
        raise CliError(f"CONTEXT_TRUNCATED: {exc}{note}") from exc
    if transcript.container == "jsonl-transcripts":
        key = "messages" if "messages" in transcript.raw else "input"
        out = json.dumps({**transcript.raw, key: fit.messages}, ensure_ascii=False) + "\n"
    elif transcript.container == "jsonl":
        out = "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in fit.messages)
    elif transcript.container == "list":
        out = json.dumps(fit.messages, ensure_ascii=False, indent=1) + "\n"
    else:
        key = "messages" if "messages" in transcript.raw else "input"
        out = json.dumps({**transcript.raw, key: fit.messages}, ensure_ascii=False, indent=1)
        out += "\n"
    if args.output:
        try:
            Path(args.output).write_text(out, encoding="utf-8")
        except OSError as exc:
            raise CliError(f"{args.output}: cannot write: {exc}") from exc
    else:
        sys.stdout.write(out)
    if fallback:
        warn(fallback)
    info = mgr.model_info
    summary = "windowguard fit: "
    if transcript.count > 1:
        summary += f"{transcript.where}: "
    summary += (
        f"{len(transcript.messages)} -> {len(fit.messages)} messages, "
        f"dropped {fit.dropped_turns} oldest turns; ~{fit.estimated_tokens} tokens of a "
        f"{fit.budget} budget (window {fit.context_window} from {info.source}, "
        f"pressure {fit.pressure:.0%}); max_tokens {fit.max_tokens}"
    )
    if mgr.edits:
        summary += "; " + edits_summary([r.to_dict() for r in fit.edits if r.kind != "drop"])
    if fit.deferred:
        summary += "; DAMAGED input passed on unchanged: " + "; ".join(
            str(p) for p in fit.problems[:3]
        )
    if args.output:
        summary += f"; written to {args.output}"
    if transcript.count > 1 and not transcript.chosen:
        summary += "; --index N or --id ID picks another"
    print(summary, file=sys.stderr)
    return 0
