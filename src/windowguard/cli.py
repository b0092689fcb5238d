"""The ``windowguard`` command.

Subcommands:
    fit FILE      write the fitted transcript (same format) to stdout or ``-o``
    emulate       run the provider emulator (see ``windowguard emulate --help``)

Bad input (missing file, broken JSON, unknown format or model) prints one line to
stderr and exits non-zero; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from .adapters import FORMATS
from .catalog import ModelInfo
from .exceptions import ContextTruncatedError, WindowGuardError
from .manager import ContextWindowManager

__all__ = ["main"]

EXAMPLE = "example:coding-agent"


class CliError(Exception):
    """A one-line error for the user; exit status 2."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Transcript:
    """A transcript file as read: messages plus what travelled with them."""

    messages: list[Any]
    tools: list[Any] | None
    system: Any
    model: str | None
    container: str  # "list", "object" or "jsonl"
    raw: Any


def read_transcript(path: str) -> Transcript:
    """Read a transcript: a JSON list of messages, a JSON object with ``messages``
    (and optionally ``tools``, ``system``, ``model``), or JSON Lines of messages.

    ``example:coding-agent`` names the bundled example (a real OpenHands run).
    """
    if path == EXAMPLE:
        text = resources.files("windowguard.examples").joinpath("coding_agent.json").read_text()
    else:
        file = Path(path)
        if not file.is_file():
            raise CliError(f"{path}: no such file")
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CliError(f"{path}: cannot read: {exc}") from exc
    try:
        data = json.loads(text)
        container = "list" if isinstance(data, list) else "object"
    except json.JSONDecodeError as whole:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError:
            raise CliError(
                f"{path}: not JSON or JSON Lines (line {whole.lineno}: {whole.msg})"
            ) from whole
        container = "jsonl"
    if isinstance(data, list):
        return Transcript(
            messages=data, tools=None, system=None, model=None, container=container, raw=data
        )
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        tools = data.get("tools")
        return Transcript(
            messages=data["messages"],
            tools=tools if isinstance(tools, list) else None,
            system=data.get("system"),
            model=data.get("model") if isinstance(data.get("model"), str) else None,
            container="object",
            raw=data,
        )
    if isinstance(data, dict) and isinstance(data.get("input"), list):
        return Transcript(
            messages=data["input"],
            tools=data.get("tools"),
            system=None,
            model=data.get("model"),
            container="object",
            raw=data,
        )
    raise CliError(f"{path}: expected a list of messages or an object with 'messages'")


def _manager(args: argparse.Namespace, transcript: Transcript) -> ContextWindowManager:
    model = args.model or transcript.model
    if args.context_window is not None:
        info = ModelInfo(
            args.context_window,
            max_output_tokens=args.max_output_tokens,
            source="explicit",
        )
        return ContextWindowManager(model, model_info=info, safety=args.safety)
    return ContextWindowManager(model, safety=args.safety)


def _cmd_fit(args: argparse.Namespace) -> int:
    transcript = read_transcript(args.file)
    mgr = _manager(args, transcript)
    try:
        fit = mgr.fit(
            transcript.messages,
            tools=None if args.no_tools else transcript.tools,
            max_tokens=args.max_tokens,
            system=transcript.system,
            format=args.format,
        )
    except ContextTruncatedError as exc:
        raise CliError(f"CONTEXT_TRUNCATED: {exc}") from exc
    if transcript.container == "jsonl":
        out = "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in fit.messages)
    elif transcript.container == "list":
        out = json.dumps(fit.messages, ensure_ascii=False, indent=1) + "\n"
    else:
        key = "messages" if "messages" in transcript.raw else "input"
        out = json.dumps({**transcript.raw, key: fit.messages}, ensure_ascii=False, indent=1)
        out += "\n"
    if args.output:
        Path(args.output).write_text(out, encoding="utf-8")
    else:
        sys.stdout.write(out)
    info = mgr.model_info
    summary = (
        f"windowguard fit: {len(transcript.messages)} -> {len(fit.messages)} messages, "
        f"dropped {fit.dropped_turns} oldest turns; ~{fit.estimated_tokens} tokens of a "
        f"{fit.budget} budget (window {fit.context_window} from {info.source}, "
        f"pressure {fit.pressure:.0%}); max_tokens {fit.max_tokens}"
    )
    if fit.deferred:
        summary += "; DAMAGED input passed on unchanged: " + "; ".join(
            str(p) for p in fit.problems[:3]
        )
    if args.output:
        summary += f"; written to {args.output}"
    print(summary, file=sys.stderr)
    return 0


def _cmd_emulate(argv: Sequence[str]) -> int:
    from .emulator.cli import main as emulate_main

    return emulate_main(list(argv))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``windowguard`` command."""
    parser = argparse.ArgumentParser(
        prog="windowguard",
        description="Keep LLM agent tool loops inside the model's context window.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    fit = sub.add_parser(
        "fit",
        help="fit a transcript into a model's window",
        description="Write the fitted transcript (same format) to stdout or -o; a summary "
        f"goes to stderr. FILE may be '{EXAMPLE}' for the bundled example.",
    )
    fit.add_argument("file", metavar="FILE", help=f"transcript file, or {EXAMPLE}")
    fit.add_argument("--model", help="model name (catalog limits and tokenizer family)")
    fit.add_argument("--context-window", type=_positive_int, help="window in tokens")
    fit.add_argument("--max-output-tokens", type=_positive_int, help="the model's output cap")
    fit.add_argument("--max-tokens", type=_positive_int, help="the request's reply budget")
    fit.add_argument("--safety", type=int, default=500, help="tokens kept free (default 500)")
    fit.add_argument("--format", choices=FORMATS, help="wire format (detected by default)")
    fit.add_argument("--no-tools", action="store_true", help="ignore the file's tool schemas")
    fit.add_argument("-o", "--output", help="write the fitted transcript here")
    fit.set_defaults(handler=_cmd_fit)
    sub.add_parser("emulate", help="run the provider emulator", add_help=False)
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``windowguard`` command; returns the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["emulate"]:
        return _cmd_emulate(args_list[1:])
    parser = build_parser()
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args.handler(args))
    except CliError as exc:
        print(f"windowguard: error: {exc}", file=sys.stderr)
        return 2
    except WindowGuardError as exc:
        print(f"windowguard: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
