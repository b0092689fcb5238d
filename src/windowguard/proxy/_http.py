"""The proxy app's HTTP plumbing: request bodies, headers and paths as forwarded, a
client's disconnect, and upstream answers read whole or passed on as they end.

Invariants:

- A body is a JSON object of valid Unicode, or a message that says what is wrong with
  it (:func:`parse_body`); never an exception.
- Headers go upstream as the bytes the client sent (:func:`header_bytes`).
- A passed-through answer the upstream broke off is broken off for the client too
  (:class:`PassedResponse`), never ended as if whole.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any, Final

import httpx2
from starlette.requests import Request as HttpRequest
from starlette.responses import StreamingResponse

__all__ = [
    "ANSWER_LIMIT",
    "AnswerTooLarge",
    "ClientGone",
    "Ending",
    "PassedResponse",
    "QuickSwitches",
    "disconnected",
    "encode_body",
    "forwarded_path",
    "header_bytes",
    "parse_body",
    "read_all",
    "usage_of_body",
]

# A JSON escape of a UTF-16 surrogate: json.loads pairs them, and leaves a lone one in
# the text, which no UTF-8 encoder (ours, a tokenizer's, the upstream's) takes.
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")


class Ending:
    """Whether a passed-through answer was broken off upstream."""

    __slots__ = ("broken",)

    def __init__(self) -> None:
        self.broken = False


class PassedResponse(StreamingResponse):
    """A passed-through answer that ends as the upstream's did: one broken off upstream
    is left incomplete (the server closes the connection without its last chunk), so
    the client sees the break instead of a shorter body that looks whole."""

    def __init__(self, content: AsyncIterator[bytes], ending: Ending, **options: Any) -> None:
        super().__init__(content, **options)
        self.ending = ending

    async def stream_response(self, send: Any) -> None:
        start = {"type": "http.response.start", "status": self.status_code}
        await send({**start, "headers": self.raw_headers})
        async for chunk in self.body_iterator:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if not self.ending.broken:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


def parse_body(raw: bytes) -> dict[str, Any] | str:
    """A request body as a JSON object, or what is wrong with it."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        return f"the request body is not valid JSON ({exc})"
    if not isinstance(body, dict):
        return f"the request body must be a JSON object, got {type(body).__name__}"
    # (a byte search first: memchr-fast, where the pattern's scan of a 30 MB body held
    # the interpreter for 20 ms)
    if (b"\\ud" in raw or b"\\uD" in raw) and _SURROGATE_ESCAPE.search(raw):
        try:
            json.dumps(body, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            lone = exc.object[exc.start : exc.end].encode("unicode_escape").decode("ascii")
            return (
                f"the request body holds a lone UTF-16 surrogate ({lone}), which is not "
                "valid Unicode: a string was cut in the middle of a character (an emoji?)"
            )
    return body


def encode_body(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, ensure_ascii=False).encode("utf-8")


class ClientGone(Exception):
    """The client disconnected before its answer (the upstream request was cancelled)."""


async def disconnected(request: HttpRequest) -> None:
    """Returns when the client disconnects (its body was read whole already)."""
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            return


def header_bytes(headers: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """Headers as the bytes the client sent (Starlette reads them as Latin-1): a
    non-ASCII byte in a value goes on as it came, instead of failing an ASCII encode."""
    return [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]


def forwarded_path(request: HttpRequest) -> str:
    """The normalised path, percent-encoded, as the upstream gets it (_Paths)."""
    raw = request.scope.get("raw_path")
    return raw.decode("ascii") if isinstance(raw, bytes) else request.url.path


ANSWER_LIMIT: Final = 64 * 1024 * 1024
"""The most bytes, decoded, of an upstream answer the proxy reads whole (a fitted
route's answer, for its usage, or an error, to classify it): a gzip bomb of 600 MiB
took the proxy to 1.85 GB before this bound."""


class AnswerTooLarge(httpx2.DecodingError):
    """An upstream answer that decodes to more than :data:`ANSWER_LIMIT` bytes."""


async def read_all(answer: httpx2.Response, limit: int = ANSWER_LIMIT) -> bytes | httpx2.HTTPError:
    """The whole body of an upstream answer, decoded, or the error that cut it short (the
    connection dropped after the headers, a read timeout, :class:`AnswerTooLarge` past
    ``limit`` bytes: one raw chunk decodes to at most ~1,000 times its size, so what is
    held stays near the limit); the answer is closed."""
    parts: list[bytes] = []
    size = 0
    try:
        async for part in answer.aiter_bytes():
            size += len(part)
            if size > limit:
                return AnswerTooLarge(f"the upstream's answer decodes to more than {limit} bytes")
            parts.append(part)
    except httpx2.HTTPError as exc:
        return exc
    finally:
        await answer.aclose()
    return b"".join(parts)


def usage_of_body(raw: bytes) -> object:
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    usage = data.get("usage")
    return usage if isinstance(usage, dict) else None


class QuickSwitches:
    """While a large request is parsed, fitted or encoded on a worker thread, the
    interpreter hands the GIL over every ``interval`` seconds instead of every 5 ms.

    The worker's Python (the estimator's slices) holds the GIL between short C calls;
    the event loop thread gets it only when the holder is asked to drop it, after the
    switch interval. A small request needs the GIL after each of its loop's waits, so
    at 5 ms each it was answered in 0.7 s during a 30 MB fit, and in 13 ms (p50) at
    0.5 ms (bench_proxy_fairness.py). The previous interval comes back when no large
    request is in that stretch any more.
    """

    __slots__ = ("_active", "_interval", "_lock", "_saved")

    def __init__(self, interval: float = 0.0005) -> None:
        self._interval = interval
        self._active = 0
        self._saved = 0.0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Quick switches for the ``with`` block (nested and concurrent blocks count)."""
        with self._lock:
            if self._active == 0:
                self._saved = sys.getswitchinterval()
                sys.setswitchinterval(min(self._saved, self._interval))
            self._active += 1
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                if self._active == 0:
                    sys.setswitchinterval(self._saved)
