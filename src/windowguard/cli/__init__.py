"""The ``windowguard`` command.

Subcommands, one module each:
    demo          a coding agent with and without windowguard, offline (:mod:`.demo`)
    inspect FILE  tokens per turn, what fit would drop, estimate vs exact (:mod:`.inspect`)
    fit FILE      write the fitted transcript (same format) to stdout or ``-o`` (:mod:`.fit`)
    models        catalog and discovered limits with their sources (:mod:`.models`)
    classify      classify a provider error body (:mod:`.classify`)
    plot          pressure, prunes and shrinks over steps as PNG (:mod:`.plot`)
    emulate       run the provider emulator (:mod:`windowguard.emulator.cli`)
    proxy         serve the guarding proxy in front of an upstream (:mod:`.proxy`)

Invariants: bad input (missing file, broken JSON, empty or damaged transcript, unknown
format) prints one line to stderr and exits 2 — never a traceback; ``--help`` works on
every command; output is plain text unless rich is installed, stdout is a terminal and
``--plain`` was not given. A reader that stops early (``| head``) ends the command
quietly with status 141, as SIGPIPE ends other Unix tools.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .._version import __version__
from ..core.exceptions import WindowGuardError
from . import classify, demo, fit, inspect, models, plot, proxy
from ._common import ArgumentParser, CliError, common_parent

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``windowguard`` command."""
    parser = ArgumentParser(
        prog="windowguard",
        description="Keep LLM agent tool loops inside the model's context window.",
        epilog="Start with `windowguard demo`.",
    )
    parser.add_argument("--version", action="version", version=f"windowguard {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    parent = common_parent()
    for module in (demo, inspect, fit, models, classify, plot, proxy):
        module.register(sub, parent)
    sub.add_parser("emulate", help="run the provider emulator", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``windowguard`` command.

    Args:
        argv: the arguments (``sys.argv[1:]`` when None).

    Returns:
        The exit status: 0 on success, 2 for bad input, 1 when a run failed.
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["emulate"]:
        from ..emulator.cli import main as emulate_main

        return emulate_main(args_list[1:])
    parser = build_parser()
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args.handler(args))
    except (CliError, WindowGuardError) as exc:
        print(f"windowguard: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        _silence_stdout()
        return _BROKEN_PIPE
    except OSError as exc:
        print(f"windowguard: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("windowguard: interrupted", file=sys.stderr)
        return 130


_BROKEN_PIPE = 128 + 13
"""The status a shell reports for a process ended by SIGPIPE (``seq 1 99999 | head``)."""


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush into the closed pipe
    does not print ``Exception ignored … BrokenPipeError`` on the way out."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real file descriptor (captured in tests)
        pass


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
