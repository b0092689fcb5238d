"""``windowguard classify``: what a provider's error body means.

Reads an error body (JSON or text) from FILE or stdin, with an optional ``--status``
and ``--header NAME:VALUE`` pairs, and prints :func:`windowguard.classify_failure`'s
answer: the kind, whether a retry can help, the token numbers the message states, and
what to do. ``--json`` prints the classification as one JSON object.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..core.failures import FailureKind, classify_failure
from ._common import CliError, Output, read_text

__all__ = ["register", "run"]

_ADVICE = {
    FailureKind.CONTEXT_OVERFLOW: "prune the transcript (ContextWindowManager.fit) and resend",
    FailureKind.OUTPUT_LIMIT: "lower max_tokens to the model's output cap",
    FailureKind.RATE_LIMIT: "wait (retry_after when given) and retry",
    FailureKind.AUTH: "check the API key",
    FailureKind.PERMISSION: "check the key's access to this model",
    FailureKind.NOT_FOUND: "check the model name and base URL",
    FailureKind.INVALID_REQUEST: "fix the request; retrying it unchanged fails again",
    FailureKind.REQUEST_TOO_LARGE: (
        "send a smaller request (prune with ContextWindowManager.fit, lower max_tokens) or "
        "raise the limit (tokens per minute, body size); waiting does not help"
    ),
    FailureKind.CONTENT_FILTER: "change the content; retrying unchanged fails again",
    FailureKind.SERVER: "retry with backoff",
    FailureKind.OVERLOADED: "retry with backoff",
    FailureKind.TIMEOUT: "retry, perhaps with a longer timeout",
    FailureKind.CONNECTION: "check the endpoint and retry",
    FailureKind.MALFORMED_RESPONSE: (
        "retry with backoff; if it persists, check what sits between you and the server "
        "(a proxy answering HTML, a stream cut short)"
    ),
    FailureKind.UNKNOWN: "not recognised; inspect the body",
}


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    """Add the ``classify`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser = sub.add_parser(
        "classify",
        parents=[parent],
        help="classify a provider error body",
        description="Classify a provider error body read from FILE or stdin.",
    )
    parser.add_argument("file", metavar="FILE", nargs="?", default="-", help="body (- = stdin)")
    parser.add_argument("--status", type=int, help="the HTTP status")
    parser.add_argument(
        "--header", action="append", default=[], metavar="NAME:VALUE", help="a response header"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``windowguard classify``; returns the exit status.

    Raises:
        CliError: unreadable input, an empty body without status, or a bad header.
    """
    body = read_text(args.file)
    if not body.strip() and args.status is None:
        raise CliError("empty error body (give the body on stdin or as FILE, or --status)")
    headers = []
    for item in args.header:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise CliError(f"--header {item!r}: expected NAME:VALUE")
        headers.append((name.strip(), value.strip()))
    failure = classify_failure(status=args.status, body=body or None, headers=headers or None)
    data: dict[str, Any] = {
        "kind": failure.kind.value,
        "retryable": failure.retryable,
        "retry_after": failure.retry_after,
        "status": failure.status,
        "provider": failure.provider,
        "code": failure.code,
        "message": failure.message,
        "prompt_tokens": failure.prompt_tokens,
        "prompt_tokens_is_lower_bound": failure.prompt_tokens_is_lower_bound,
        "context_window": failure.context_window,
        "requested_output": failure.requested_output,
        "max_output_tokens": failure.max_output_tokens,
        "advice": _ADVICE.get(failure.kind, ""),
    }
    if args.json:
        print(json.dumps(data, indent=1))
        return 0
    rows = [[key, str(value)] for key, value in data.items() if value not in (None, "", False)]
    if not failure.retryable:
        rows.insert(1, ["retryable", "False"])
    Output(plain=args.plain).table(["field", "value"], rows, title="classification")
    return 0
