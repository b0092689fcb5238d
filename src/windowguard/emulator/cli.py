"""``windowguard emulate``: run the provider emulator from the command line.

Starts an :class:`~windowguard.emulator.Emulator` on 127.0.0.1, prints the base URL to
give an SDK, and serves until interrupted (Ctrl-C), then shuts down cleanly. Exit codes:
0 after a clean shutdown, 2 for unusable options.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Sequence
from typing import TextIO

from ..core.exceptions import ConfigurationError
from .server import DEFAULT_TOKENIZER, Emulator

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``windowguard emulate``."""
    parser = argparse.ArgumentParser(
        prog="windowguard emulate",
        description=(
            "Serve an OpenAI-, vLLM-, llama.cpp- or Anthropic-compatible endpoint on "
            "127.0.0.1 that counts prompts exactly and enforces the context window."
        ),
    )
    parser.add_argument(
        "--flavor", choices=("openai", "vllm", "llamacpp", "anthropic"), default="openai"
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind (0: any free port)")
    parser.add_argument(
        "--window", type=int, default=8192, help="context window in tokens (default 8192)"
    )
    parser.add_argument(
        "--max-output-tokens", type=int, default=None, help="the model's output cap"
    )
    parser.add_argument(
        "--tokenizer",
        default=DEFAULT_TOKENIZER,
        help="tiktoken encoding name, .tiktoken file or tokenizer.json "
        f"(default {DEFAULT_TOKENIZER})",
    )
    parser.add_argument(
        "--template",
        choices=("openai", "llama3", "qwen", "mistral"),
        default=None,
        help="chat template to count with (default: from the tokenizer's name)",
    )
    parser.add_argument("--model", default="emulated-model", help="the served model name")
    parser.add_argument(
        "--scenario",
        default="coding-agent",
        help="coding-agent, coding-agent:N (N tool rounds) or echo",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--faults", default="", help='fault schedule, e.g. "3,4:429;7:500;p=0.05:503"'
    )
    parser.add_argument("--api-key", default=None, help="require this API key")
    parser.add_argument(
        "--count-apis",
        default=None,
        help="token-count APIs to serve, comma-separated: none, vllm, sglang, llama-server, "
        "llama-cpp-python, tgi, anthropic, openai, gemini (default: the flavour's own)",
    )
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    stop: threading.Event | None = None,
    out: TextIO | None = None,
) -> int:
    """Run the emulator until Ctrl-C (or until ``stop`` is set).

    Args:
        argv: the arguments (``sys.argv[1:]`` when None).
        stop: an event that ends the serving loop (for embedding and tests).
        out: where to print the URLs (stdout when None).

    Returns:
        The exit code: 0 after a clean shutdown, 2 for unusable options.
    """
    args = build_parser().parse_args(argv)
    stream = out or sys.stdout
    try:
        emulator = Emulator(
            flavor=args.flavor,
            context_window=args.window,
            tokenizer=args.tokenizer,
            max_output_tokens=args.max_output_tokens,
            api_key=args.api_key,
            model=args.model,
            scenario=args.scenario,
            seed=args.seed,
            faults=args.faults or None,
            template=args.template,
            count_apis=args.count_apis.split(",") if args.count_apis else None,
            port=args.port,
        )
    except (ConfigurationError, ImportError) as exc:
        print(f"windowguard emulate: {exc}", file=sys.stderr)
        return 2
    waiter = stop or threading.Event()
    try:
        emulator.start()
    except OSError as exc:
        print(f"windowguard emulate: cannot bind port {args.port}: {exc}", file=sys.stderr)
        return 2
    try:
        url = emulator.root_url if args.flavor == "anthropic" else emulator.base_url
        print(url, file=stream, flush=True)
        print(
            f"serving {args.flavor} model {args.model!r}, window {args.window} tokens, "
            f"template {emulator.template!r}, count APIs "
            f"{', '.join(emulator.count_apis) or 'none'}; Ctrl-C stops",
            file=stream,
            flush=True,
        )
        try:
            while not waiter.wait(0.2):
                pass
        except KeyboardInterrupt:
            pass
    finally:
        emulator.close()
    return 0


if __name__ == "__main__":  # pragma: no cover - manual use
    raise SystemExit(main())
