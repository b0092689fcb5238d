"""``windowguard proxy --upstream URL``: serve the guarding proxy in the foreground.

Prints what startup discovery found (window, tokenizer family, count endpoint) and the
address to point clients at, then serves until interrupted. Refuses to start, with
status 2 and one line saying what to pass, when nothing is known of the upstream's
window and ``--window`` was not given. The key named by ``--api-key-env`` is read from
the environment, never from the command line (where ``ps`` would show it).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..core.prune import POLICIES
from ..core.shrink import DEFAULT_SAFETY_BUFFER
from ..run._conversations import (
    DEFAULT_MAX_CONVERSATIONS,
    DEFAULT_MAX_STATE_MB,
    DEFAULT_TTL_SECONDS,
)
from ._common import CliError, add_edit_options, non_negative_int, positive_int

__all__ = ["register", "run"]

_DESCRIPTION = """\
An OpenAI- and Anthropic-compatible proxy that keeps every request inside the model's
context window. POST /v1/chat/completions, /v1/responses and /v1/messages are fitted
(oldest whole turns left out, head and newest turn kept, max_tokens fitted, tools
counted) and forwarded; streams pass through as they arrive. A request that cannot fit
gets a 400 with code "context_truncated" and never reaches the upstream. Every other
path passes through untouched. GET /metrics (Prometheus) and GET /healthz are served,
and a live page of the conversations it guards at GET / (in a browser) and /windowguard/.

With --clamp-tool-results and --clear-tool-results, oversized tool results are cut to
their start and end and old ones replaced by placeholders before any whole turn is
left out; the client's own transcript is never changed, only what is forwarded.
"""

_EPILOG = """\
example:
  windowguard proxy --upstream http://127.0.0.1:8000
  OPENAI_BASE_URL=http://127.0.0.1:8788/v1 your-agent
  windowguard proxy --upstream http://127.0.0.1:8000 --clamp-tool-results 8000 \\
      --clear-tool-results 3
"""


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _positive_mib(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of MiB, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of MiB, got {text!r}")
    return value


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    """Add the ``proxy`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser = sub.add_parser(
        "proxy",
        parents=[parent],
        help="serve an OpenAI/Anthropic-compatible proxy that fits every request",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--upstream",
        required=True,
        metavar="URL",
        help="the server to forward to, with or without /v1 (http://127.0.0.1:8000)",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1, local only)"
    )
    parser.add_argument("--port", type=non_negative_int, default=8788, help="port (default 8788)")
    parser.add_argument(
        "--window",
        type=positive_int,
        metavar="N",
        help="context window in tokens, for every model (default: discovered)",
    )
    parser.add_argument(
        "--model",
        metavar="NAME",
        help="the model to discover at startup (default: the first the upstream lists)",
    )
    parser.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="send the key in this environment variable upstream instead of the clients' own",
    )
    parser.add_argument(
        "--events", metavar="FILE", help="append events as JSON lines to FILE (mode 0600)"
    )
    parser.add_argument(
        "--otel",
        action="store_true",
        help="send events to OpenTelemetry (needs windowguard[otel] and a configured SDK)",
    )
    parser.add_argument(
        "--max-conversations",
        type=positive_int,
        default=DEFAULT_MAX_CONVERSATIONS,
        metavar="N",
        help="conversations remembered per model, least recently used forgotten (default 1024)",
    )
    parser.add_argument(
        "--max-state-mb",
        type=_positive_mib,
        default=DEFAULT_MAX_STATE_MB,
        metavar="MIB",
        help="the most the remembered conversations of every model may hold together "
        "(estimated: each keeps its last transcript), least recently used forgotten beyond "
        f"it (default {DEFAULT_MAX_STATE_MB}, for a host with 1 GiB or more)",
    )
    parser.add_argument(
        "--max-models",
        type=positive_int,
        default=256,
        metavar="N",
        help="model names whose limits and conversations are remembered, least recently "
        "used forgotten (default 256)",
    )
    parser.add_argument(
        "--ttl-seconds",
        "--ttl",
        dest="ttl_seconds",
        type=_positive_float,
        default=DEFAULT_TTL_SECONDS,
        metavar="SECONDS",
        help="forget a conversation idle this long (default 3600; --ttl is its old name)",
    )
    parser.add_argument(
        "--safety",
        type=non_negative_int,
        default=DEFAULT_SAFETY_BUFFER,
        metavar="N",
        help="tokens kept free below the window (default 500)",
    )
    parser.add_argument(
        "--pruning",
        choices=POLICIES,
        default="low_water",
        help="low_water (default: drop down to 70%% of the budget and keep that cut, so the "
        "upstream's prompt cache keeps working) or minimal (drop just enough each time)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="answer a damaged transcript (an orphaned tool result, an unanswered call) "
        "with a 400 instead of passing it on unchanged",
    )
    parser.add_argument(
        "--discover",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="ask the upstream for its models, windows and count endpoint (default: at "
        "startup, and for each new model unless it is api.openai.com / api.anthropic.com); "
        "--no-discover asks nothing, so give --window",
    )
    parser.add_argument(
        "--upstream-timeout",
        type=_positive_float,
        default=600.0,
        metavar="SECONDS",
        help="wait this long for the upstream's next byte (default 600)",
    )
    parser.add_argument(
        "--header-timeout",
        type=_positive_float,
        default=15.0,
        metavar="SECONDS",
        help="close a connection that has not sent a request's headers after this long "
        "(default 15)",
    )
    parser.add_argument(
        "--body-timeout",
        type=_positive_float,
        default=60.0,
        metavar="SECONDS",
        help="answer 408 when a request body pauses this long (default 60)",
    )
    parser.add_argument(
        "--max-connections",
        type=positive_int,
        default=1000,
        metavar="N",
        help="serve at most N connections at once; more are answered 503 (default 1000)",
    )
    parser.add_argument(
        "--discovery-timeout",
        type=_positive_float,
        default=5.0,
        metavar="SECONDS",
        help="time allowed for each startup discovery (default 5)",
    )
    parser.add_argument(
        "--page",
        choices=("root", "path", "off"),
        default="root",
        help="the live page: root (default: GET / in a browser, and /windowguard/), path "
        "(/windowguard/ only, so / reaches an upstream's own page, as llama.cpp's) or off",
    )
    parser.add_argument(
        "--no-page", dest="page", action="store_const", const="off", help="--page off"
    )
    parser.add_argument(
        "--no-preload-tokenizers",
        dest="preload_tokenizers",
        action="store_false",
        help="load exact tokenizers on first use, not at startup (startup is faster; the "
        "first fits that need one then stall every client while it loads)",
    )
    add_edit_options(parser, spill=True)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``windowguard proxy``; returns the exit status.

    Raises:
        CliError: ``--api-key-env`` names an unset or empty variable.
        ConfigurationError: a bad option, or nothing known of the window without
            ``--window``.
    """
    try:
        from ..proxy import ProxyConfig, serve
    except ImportError as exc:
        raise CliError(
            f"windowguard proxy needs Starlette, uvicorn and httpx2 ({exc}); "
            'pip install "windowguard[proxy]"'
        ) from exc

    api_key: str | None = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env) or None
        if api_key is None:
            raise CliError(f"--api-key-env {args.api_key_env}: that variable is unset or empty")
    config = ProxyConfig(
        upstream=args.upstream,
        host=args.host,
        port=args.port,
        window=args.window,
        model=args.model,
        api_key=api_key,
        events=args.events,
        otel=args.otel,
        max_conversations=args.max_conversations,
        max_state_mb=args.max_state_mb,
        max_models=args.max_models,
        ttl_seconds=args.ttl_seconds,
        safety=args.safety,
        pruning=args.pruning,
        strict=args.strict,
        discover=args.discover,
        upstream_timeout=args.upstream_timeout,
        discovery_timeout=args.discovery_timeout,
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        max_connections=args.max_connections,
        clamp_tool_results=args.clamp_tool_results,
        spill_dir=args.spill_dir,
        clear_tool_results=args.clear_tool_results,
        clear_at_least=args.clear_at_least,
        clear_trigger=args.clear_trigger,
        no_edits=args.no_edits,
        page=args.page,
        preload_tokenizers=args.preload_tokenizers,
    )
    return serve(config)
