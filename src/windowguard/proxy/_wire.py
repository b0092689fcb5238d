"""What the proxy reads and writes on the wire: error bodies, headers, SSE usage.

Invariants:

- Every error the proxy itself answers is in the shape of the API the client called:
  OpenAI's ``{"error": {"message", "type", "code", "param"}}`` for Chat Completions and
  Responses, Anthropic's ``{"type": "error", "error": {"type", "message"}}`` for
  Messages, so an unmodified SDK raises its own ``BadRequestError`` with the message.
- Hop-by-hop headers (RFC 9110 section 7.6.1) and the ones the proxy recomputes
  (``host``, ``content-length``) never cross it; nothing else is changed but the
  credentials, and only when the proxy was given its own key.
- With its own key, the proxy never passes that key back: :class:`Redactor` replaces it
  (and its JSON-escaped spelling) in every upstream body and header a client gets,
  streamed or not, however the bytes are split.
- :class:`SseUsage` reads server-sent events as they pass: it holds back at most one
  unfinished event, hands each complete event's ``data`` to a callback, and the bytes
  go on untouched, except what the proxy's own ``include_usage`` added (the usage-only
  chunk, and each other chunk's ``"usage": null``), which is taken out again. An
  unfinished event (or a body that is not an event stream) that grows past
  :data:`MAX_EVENT_BYTES` is passed on as it arrives, unparsed, up to the end of that
  event: memory stays bounded, and only a usage inside such an event is missed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from ..guard._streams import stream_usage

__all__ = [
    "HOP_BY_HOP",
    "REDACTED",
    "Redactor",
    "SseUsage",
    "anthropic_error",
    "error_body",
    "forward_headers",
    "openai_error",
    "response_headers",
    "stream_error_event",
]

HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
_CREDENTIALS: Final = ("authorization", "x-api-key")

REDACTED: Final = b"[key redacted by windowguard proxy]"
"""What replaces the proxy's own key in what an upstream sends back."""

MAX_EVENT_BYTES: Final = 1024 * 1024
"""The most of one unfinished server-sent event :class:`SseUsage` holds back to parse."""
_SEPARATOR_TAIL: Final = 3  # a blank line split across reads: keep its first bytes


def openai_error(
    message: str, *, code: str | None, error_type: str = "invalid_request_error", **numbers: Any
) -> dict[str, Any]:
    """An OpenAI-shaped error body (extra fields, such as token numbers, ride along)."""
    return {
        "error": {"message": message, "type": error_type, "code": code, "param": None, **numbers}
    }


def anthropic_error(
    message: str, *, error_type: str = "invalid_request_error", **numbers: Any
) -> dict[str, Any]:
    """An Anthropic-shaped error body."""
    return {"type": "error", "error": {"type": error_type, "message": message, **numbers}}


def error_body(
    anthropic: bool,
    message: str,
    *,
    code: str | None,
    error_type: str = "invalid_request_error",
    **numbers: Any,
) -> dict[str, Any]:
    """The error body in the called API's shape (``anthropic``: Messages)."""
    if anthropic:
        return anthropic_error(message, error_type=error_type, **numbers)
    return openai_error(message, code=code, error_type=error_type, **numbers)


def forward_headers(
    headers: Iterable[tuple[str, str]],
    *,
    api_key: str | None,
    anthropic: bool,
    identity: bool,
    keep_length: bool = False,
) -> list[tuple[str, str]]:
    """The client's request headers as sent upstream.

    Args:
        headers: the client's headers (lower- or mixed-case names).
        api_key: the proxy's own key: replaces the client's credentials (the header the
            client used; ``x-api-key`` for Anthropic routes and ``Authorization`` for
            the others when it sent none); None forwards the client's own.
        anthropic: the route is Anthropic's (its credential header is ``x-api-key``).
        identity: ask for an unencoded answer (the proxy reads it).
        keep_length: keep ``content-length`` (a body passed on byte for byte).
    """
    out: list[tuple[str, str]] = []
    sent: set[str] = set()
    connection_named = set()
    pairs = list(headers)
    for name, value in pairs:
        if name.lower() == "connection":
            connection_named |= {t.strip().lower() for t in value.split(",")}
    for name, value in pairs:
        lower = name.lower()
        if lower in HOP_BY_HOP or lower == "host" or lower in connection_named:
            continue
        if lower == "content-length" and not keep_length:
            continue
        if identity and lower == "accept-encoding":
            continue
        if lower in _CREDENTIALS:
            sent.add(lower)
            if api_key is not None:
                continue
        out.append((name, value))
    if api_key is not None:
        if "authorization" in sent or (not sent and not anthropic):
            out.append(("authorization", f"Bearer {api_key}"))
        if "x-api-key" in sent or (not sent and anthropic):
            out.append(("x-api-key", api_key))
    if identity:
        out.append(("accept-encoding", "identity"))
    return out


def stream_error_event(anthropic: bool, message: str) -> bytes:
    """A server-sent event that ends a broken stream in the API's own error shape, so
    the SDK raises instead of ending as if the answer were complete (OpenAI's SDKs
    raise on a ``data`` object with an ``error``; Anthropic's on an ``error`` event)."""
    if anthropic:
        data = anthropic_error(message, error_type="api_error")
        return b"event: error\ndata: " + json.dumps(data).encode("utf-8") + b"\n\n"
    data = openai_error(message, code="upstream_stream_broken", error_type="upstream_error")
    return b"data: " + json.dumps(data).encode("utf-8") + b"\n\n"


def response_headers(
    headers: Iterable[tuple[str, str]],
    *,
    decoded: bool = False,
    redactor: Redactor | None = None,
) -> dict[str, str]:
    """The upstream's response headers as given to the client: hop-by-hop ones and
    ``content-length`` (the server sets it for the body it sends) removed.

    Args:
        headers: the upstream's response headers.
        decoded: the body goes on decoded (``content-encoding`` removed too).
        redactor: replaces the proxy's own key in header values.
    """
    out: dict[str, str] = {}
    for name, value in headers:
        lower = name.lower()
        if lower in HOP_BY_HOP or lower == "content-length":
            continue
        if decoded and lower == "content-encoding":
            continue
        if redactor is not None:
            value = redactor.text(value)
        out[lower] = value
    return out


class Redactor:
    """Replaces secrets in bytes passing through, however the stream splits them.

    :meth:`feed` returns what may go on now; it holds back only a tail that could be the
    start of a secret (so a stream whose chunks end in anything else is not delayed),
    and :meth:`close` returns that tail. :meth:`whole` and :meth:`text` redact a body or
    a header value at once. With no secret, every method passes its input through.

    Args:
        secrets: the texts to replace (empty ones are ignored); each is replaced as
            written and as JSON writes it (``/`` as ``\\/``, ``"`` and ``\\``
            escaped).
    """

    __slots__ = ("_secrets", "_tail", "_texts")

    def __init__(self, secrets: Iterable[str | None]) -> None:
        found: set[str] = set()
        for secret in secrets:
            if not secret:
                continue
            escaped = json.dumps(secret)[1:-1]
            found |= {secret, escaped, escaped.replace("/", "\\/")}
        self._texts = tuple(sorted(found, key=len, reverse=True))
        self._secrets = tuple(text.encode("utf-8") for text in self._texts)
        self._tail = b""

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def whole(self, data: bytes) -> bytes:
        """``data`` with every secret replaced."""
        for secret in self._secrets:
            if secret in data:
                data = data.replace(secret, REDACTED)
        return data

    def text(self, value: str) -> str:
        """A header value with every secret replaced."""
        for secret in self._texts:
            if secret in value:
                value = value.replace(secret, REDACTED.decode("ascii"))
        return value

    def feed(self, chunk: bytes) -> bytes:
        """The next bytes of a stream; returns the bytes to pass on now."""
        if not self._secrets:
            return chunk
        data = self.whole(self._tail + chunk)
        hold = self._held(data)
        self._tail = data[len(data) - hold :]
        return data[: len(data) - hold]

    def close(self) -> bytes:
        """The stream ended: what was held back."""
        tail, self._tail = self._tail, b""
        return tail

    def _held(self, data: bytes) -> int:
        """The longest tail of ``data`` that is a proper prefix of a secret (0: none)."""
        longest = 0
        end = len(data)
        for secret in self._secrets:
            position = data.find(secret[:1], max(end - len(secret) + 1, 0))
            while position >= 0 and end - position > longest:
                if secret.startswith(data[position:]):
                    longest = end - position
                    break
                position = data.find(secret[:1], position + 1)
        return longest


def is_usage_only_chunk(data: Mapping[str, Any]) -> bool:
    """Whether a Chat Completions chunk is the usage-only one ``include_usage`` adds
    (empty ``choices``, a ``usage``)."""
    return (
        data.get("object") == "chat.completion.chunk"
        and data.get("choices") == []
        and isinstance(data.get("usage"), Mapping)
    )


def _has_null_usage(data: Mapping[str, Any]) -> bool:
    """Whether a Chat Completions chunk carries the ``"usage": null`` that
    ``include_usage`` adds to every chunk but the last."""
    return (
        data.get("object") == "chat.completion.chunk" and "usage" in data and data["usage"] is None
    )


class SseUsage:
    """Reads the usage out of a server-sent event stream passing through.

    Feed it the stream's bytes as they arrive (:meth:`feed`); it returns the bytes to
    pass on: the same bytes, except, with ``strip_usage_chunk``, what the proxy's own
    ``include_usage`` added: the usage-only Chat Completions chunk is dropped, and each
    other chunk's ``"usage": null`` member is taken out (that event's JSON is written
    again, compact), so the client reads what it would read without the proxy. The
    first usage seen goes to ``on_usage``.

    An event longer than ``max_event_bytes`` is passed on unparsed, byte for byte, in
    one piece or as it arrives (so the bytes passed on never depend on how the stream
    was cut into reads): the reader never holds more than that (plus one read).

    Args:
        on_usage: called once, with the first usage found.
        strip_usage_chunk: take out what ``include_usage`` added (the client did not
            ask for it; the proxy did).
        max_event_bytes: the most of one unfinished event held back to parse.
    """

    __slots__ = ("_buffer", "_limit", "_on_usage", "_reported", "_skipping", "_strip")

    def __init__(
        self,
        on_usage: Callable[[object], None],
        *,
        strip_usage_chunk: bool,
        max_event_bytes: int = MAX_EVENT_BYTES,
    ) -> None:
        self._on_usage = on_usage
        self._strip = strip_usage_chunk
        self._limit = max_event_bytes
        self._reported = False
        self._skipping = False  # inside an oversized event: pass bytes on unparsed
        self._buffer = b""

    @property
    def reported(self) -> bool:
        """Whether a usage was found (and handed to ``on_usage``)."""
        return self._reported

    def feed(self, chunk: bytes) -> bytes:
        """Take the next bytes of the stream; returns the bytes to pass on now."""
        self._buffer += chunk
        out: list[bytes] = []
        while True:
            end = _event_end(self._buffer)
            if end < 0:
                break
            event, self._buffer = self._buffer[:end], self._buffer[end:]
            if self._skipping:
                self._skipping = False  # the oversized event's end: parse again after it
                out.append(event)
            elif len(event) > self._limit:
                out.append(event)  # oversized, however it arrived: passed on as it came
            else:
                out.append(self._passed(event))
        if self._skipping or len(self._buffer) > self._limit:
            self._skipping = True
            cut = max(len(self._buffer) - _SEPARATOR_TAIL, 0)
            out.append(self._buffer[:cut])
            self._buffer = self._buffer[cut:]
        return b"".join(out)

    def close(self) -> bytes:
        """The stream ended: whatever is left (an unterminated last event)."""
        rest, self._buffer = self._buffer, b""
        if self._skipping or len(rest) > self._limit:
            return rest
        return self._passed(rest) if rest else b""

    def _passed(self, event: bytes) -> bytes:
        """What of one complete event goes on (b"" for none), its usage read."""
        if b"usage" not in event:  # cheap: most events carry no usage
            return event
        for line in event.splitlines():
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if not payload.startswith(b"{"):
                continue
            try:
                data = json.loads(payload)
            except ValueError:
                continue
            if not isinstance(data, dict):
                continue
            usage = stream_usage(data)
            if usage is not None and not self._reported:
                self._reported = True
                self._on_usage(usage)
            if self._strip and is_usage_only_chunk(data):
                return b""
            if self._strip and _has_null_usage(data):
                del data["usage"]
                encoded = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
                event = event.replace(line, b"data: " + encoded.encode(), 1)
        return event


def _event_end(buffer: bytes) -> int:
    """The index just past the first complete event (a blank line ends one), or -1."""
    ends = [
        (i + len(sep)) for sep in (b"\n\n", b"\r\n\r\n", b"\r\r") if (i := buffer.find(sep)) >= 0
    ]
    return min(ends) if ends else -1
