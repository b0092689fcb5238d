"""Reading a request body safely: its declared size first, then bounded JSON.

The emulator's handler asks :func:`declared_length` before it reads a byte of a body:
a body above ``max_body_bytes`` is refused with a 413 at once (never read into memory),
and a ``Content-Length`` that is not one number, or a ``Transfer-Encoding`` it does not
read, with a 400. Only then is the body read and parsed by :func:`parse_json`, which
answers malformed JSON and JSON nested deeper than :data:`MAX_JSON_DEPTH` with a 400.

Invariants:
    * Every refusal is built by :mod:`windowguard.core.provider_errors`, in the flavour's
      error shape.
    * Nothing here reads a socket: the handler reads exactly the declared length, and
      drains (reads and drops) an oversized body only after answering it.
    * Pure: the same headers or bytes give the same answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core import provider_errors
from ..core.provider_errors import Flavor, WireError

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "MAX_JSON_DEPTH",
    "BodyRefusal",
    "declared_length",
    "parse_json",
]

#: the default cap of a request body: 32 MiB, far above any real chat request
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
#: the deepest JSON nesting a request may have (tool schemas nest a few levels; a
#: 200 000-deep array only exists to crash a parser)
MAX_JSON_DEPTH = 128

_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True, slots=True)
class BodyRefusal:
    """A body the emulator will not read or use.

    Attributes:
        error: the answer to send.
        close: the connection must close after the answer (the body was not read, so
            the next bytes on it are not a request).
        discard_bytes: how much of an unread body to drain after answering, so that a
            client that writes its whole body before reading sees the answer.
    """

    error: WireError
    close: bool
    discard_bytes: int = 0


def declared_length(
    flavor: Flavor, headers: Mapping[str, str], all_lengths: list[str], *, max_body_bytes: int
) -> int | BodyRefusal:
    """The body's size from its headers, or the refusal it gets before being read.

    Args:
        flavor: the emulated server (for the error shape).
        headers: the request headers, lowercased names.
        all_lengths: every ``Content-Length`` value sent (a repeated header is refused).
        max_body_bytes: the largest body the server reads.

    Returns:
        The number of bytes to read (0 without a body), or the refusal.
    """
    if headers.get("transfer-encoding"):
        message = (
            "Transfer-Encoding request bodies are not supported by this server; send the body "
            "with a Content-Length header."
        )
        return BodyRefusal(provider_errors.invalid_request_error(flavor, message), close=True)
    values = {value.strip() for value in all_lengths}
    if not values:
        return 0
    text = next(iter(values))
    if len(values) != 1 or not _DIGITS.fullmatch(text):
        shown = ", ".join(sorted(repr(value) for value in values))
        message = f"Invalid Content-Length header: {shown}; expected one non-negative integer."
        return BodyRefusal(provider_errors.invalid_request_error(flavor, message), close=True)
    length = int(text)
    if length > max_body_bytes:
        error = provider_errors.request_too_large_error(
            flavor, body_bytes=length, max_body_bytes=max_body_bytes
        )
        return BodyRefusal(error, close=True, discard_bytes=length)
    return length


def parse_json(flavor: Flavor, raw: bytes) -> Any:
    """The JSON value of a body, or a :class:`BodyRefusal` for one that cannot be used.

    Args:
        flavor: the emulated server (for the error shape).
        raw: the body (empty: no body, None).

    Returns:
        The decoded value (None for an empty body), or the refusal.
    """
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except RecursionError:
        return _too_deep(flavor)
    except ValueError as exc:  # includes UnicodeDecodeError
        message = f"The request body is not valid JSON: {exc}"
        return BodyRefusal(provider_errors.invalid_request_error(flavor, message), close=False)
    if _depth_exceeds(value, MAX_JSON_DEPTH):
        return _too_deep(flavor)
    return value


def _too_deep(flavor: Flavor) -> BodyRefusal:
    message = f"The request body nests JSON more than {MAX_JSON_DEPTH} levels deep."
    return BodyRefusal(provider_errors.invalid_request_error(flavor, message), close=False)


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists/objects more than ``limit`` deep (iteratively)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Any
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False
