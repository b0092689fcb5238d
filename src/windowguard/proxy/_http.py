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

import json
import re
from collections.abc import AsyncIterator, Iterable
from typing import Any, Final

import httpx2
from starlette.requests import Request as HttpRequest
from starlette.responses import StreamingResponse

__all__ = [
    "ClientGone",
    "Ending",
    "PassedResponse",
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
    if _SURROGATE_ESCAPE.search(raw):
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


async def read_all(answer: httpx2.Response) -> bytes | httpx2.HTTPError:
    """The whole body of an upstream answer, or the error that cut it short (the
    connection dropped after the headers, a read timeout); the answer is closed."""
    try:
        return await answer.aread()
    except httpx2.HTTPError as exc:
        return exc
    finally:
        await answer.aclose()


def usage_of_body(raw: bytes) -> object:
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    usage = data.get("usage")
    return usage if isinstance(usage, dict) else None
