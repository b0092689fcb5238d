"""One normalisation of a request's path, before the proxy routes it and forwards it.

Servers accept one path in many spellings: ``/v1/./chat/completions``,
``/v1//chat/completions``, ``/v1/x/../chat/completions``, ``/v1/%63hat/completions``.
Routed on the spelling, such a request would skip fitting and still reach the fitted
route upstream. So the proxy decides on one form, and forwards that same form:

- the raw path (as the client sent it, percent escapes and all) is split on ``/``;
  each segment is percent-decoded and must be UTF-8;
- empty and ``.`` segments go, ``..`` removes the segment before it: a path that climbs
  above its root is refused, so nothing escapes the upstream's path prefix
  (``/gateway/tenant-a`` + ``/../tenant-b/...``);
- a segment that decodes to a separator (``%2F``, ``%5C``, or a raw ``\\``), a NUL or
  another control character is refused: the upstream could read it as a separator or
  end the path there;
- a trailing ``/`` is kept, except on a fitted route (``/v1/chat/completions/`` is that
  route, forwarded without it);
- each segment is percent-encoded again (RFC 3986 ``pchar``), so the upstream reads the
  segments the proxy routed on.

A refused path is answered 400 in the called API's shape, naming the problem.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, unquote_to_bytes

from starlette.responses import JSONResponse

from ._wire import error_body

__all__ = ["BadPath", "Path", "PathsMiddleware", "normalise_path"]

# RFC 3986 pchar, less the percent sign: what a segment may hold unescaped.
_SAFE: Final = "!$&'()*+,;=:@-._~"
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


class BadPath(ValueError):
    """A path the proxy will not route or forward; the message says why."""


@dataclass(frozen=True, slots=True)
class Path:
    """A normalised path: ``decoded`` (for routing) and ``encoded`` (for forwarding)."""

    decoded: str
    encoded: str


def normalise_path(raw: bytes, fitted: frozenset[str] = frozenset()) -> Path:
    """The one form of a raw request path (see the module docstring).

    Args:
        raw: the path as the client sent it (ASGI ``raw_path``), without the query.
        fitted: the fitted routes' paths (a trailing ``/`` on one of them goes).

    Raises:
        BadPath: the path cannot be routed safely.
    """
    if not raw.startswith(b"/"):
        raise BadPath(f"the path must start with '/': {_shown(raw)}")
    segments: list[str] = []
    parts = raw[1:].split(b"/")
    trailing = len(parts) > 1 and parts[-1] == b""
    for part in parts:
        try:
            segment = unquote_to_bytes(part).decode("utf-8")
        except UnicodeDecodeError:
            raise BadPath(f"the path is not UTF-8 once decoded: {_shown(raw)}") from None
        if "/" in segment or "\\" in segment:
            raise BadPath(
                f"the path holds an encoded or backslash separator in {_shown(part)!s}; "
                "write '/' between segments"
            )
        if _CONTROL.search(segment):
            raise BadPath(f"the path holds a control character (such as %00): {_shown(raw)}")
        if segment in ("", "."):
            continue
        if segment == "..":
            if not segments:
                raise BadPath(f"the path climbs above its root with '..': {_shown(raw)}")
            segments.pop()
            continue
        segments.append(segment)
    decoded = "/" + "/".join(segments)
    encoded = "/" + "/".join(quote(s, safe=_SAFE) for s in segments)
    if trailing and segments and decoded not in fitted:
        decoded += "/"
        encoded += "/"
    return Path(decoded=decoded, encoded=encoded)


def _shown(raw: bytes) -> str:
    """A path for an error message: as sent, non-ASCII bytes escaped, at most 200 chars."""
    text = raw.decode("ascii", errors="backslashreplace")
    return text if len(text) <= 200 else text[:200] + "..."


class PathsMiddleware:
    """ASGI middleware: every HTTP request's path in its one normalised form
    (:func:`normalise_path`) before routing, or a 400 in the called API's shape naming what is
    wrong with it."""

    def __init__(
        self, app: Any, *, fitted: frozenset[str], refused: Callable[[bool, str], None]
    ) -> None:
        self.app = app
        self.fitted = fitted
        self.refused = refused  # told (anthropic, message) of each path it refuses

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        raw = scope.get("raw_path")
        if not isinstance(raw, bytes):
            raw = str(scope.get("path", "")).encode("utf-8")
        try:
            path = normalise_path(raw, self.fitted)
        except BadPath as exc:
            anthropic = b"messages" in raw
            message = f"windowguard proxy: {exc}"
            self.refused(anthropic, message)
            body = error_body(anthropic, message, code="invalid_path")
            await JSONResponse(body, status_code=400)(scope, receive, send)
            return
        scope = dict(scope, path=path.decoded, raw_path=path.encoded.encode("ascii"))
        await self.app(scope, receive, send)
