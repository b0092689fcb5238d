"""An answer the upstream breaks off after its headers is a visible failure (issue 20,
item 8): it counts in ``upstream_errors_total``, emits ``provider_error``, and a fitted
stream ends with an error event in the API's shape, so the real SDKs raise instead of
returning a truncated answer as if it were whole.

The upstream is a plain ``http.server`` that promises a longer body than it sends and
closes the connection mid-stream.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import httpx2
import openai
import pytest

from windowguard.core.events import Event, ProviderErrorEvent
from windowguard.proxy import ProxyConfig, ProxyServer

from .upstreams import QuietHandler, serve

MODEL = "broken-model"


def _chunk(text: str) -> bytes:
    data = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }
    return f"data: {json.dumps(data)}\n\n".encode()


_ANTHROPIC_START = (
    b"event: message_start\n"
    b'data: {"type": "message_start", "message": {"id": "msg_1", "type": "message", '
    b'"role": "assistant", "model": "broken-model", "content": [], "stop_reason": null, '
    b'"stop_sequence": null, "usage": {"input_tokens": 5, "output_tokens": 1}}}\n\n'
    b"event: content_block_start\n"
    b'data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", '
    b'"text": ""}}\n\n'
)


class _Breaks(QuietHandler):
    """Sends part of what it promised, then drops the connection."""

    protocol_version = "HTTP/1.1"

    def _broken(self, content_type: str, first: bytes) -> None:
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(first) + 10_000))
        self.end_headers()
        self.wfile.write(first + b'data: {"choi')  # and the next event, cut off
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(2)

    def do_GET(self) -> None:
        if self.path.endswith("/v1/models"):
            body = json.dumps({"object": "list", "data": [{"id": MODEL}]}).encode()
            self.answer(200, body, {"content-type": "application/json"})
            return
        self._broken("application/octet-stream", b"x" * 100)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path.endswith("/messages"):
            self._broken("text/event-stream", _ANTHROPIC_START)
        else:
            self._broken("text/event-stream", _chunk("Hello, ") + _chunk("wor"))


@pytest.fixture
def upstream() -> Iterator[str]:
    with serve(_Breaks) as root:
        yield root


def test_a_broken_chat_stream_raises_in_the_sdk_and_is_counted(upstream: str) -> None:
    events: list[Event] = []
    config = ProxyConfig(upstream=upstream, port=0, window=8192, model=MODEL)
    with (
        ProxyServer(config, sinks=[events.append]) as proxy,
        openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client,
    ):
        stream = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=True
        )
        texts: list[str] = []
        with pytest.raises(openai.APIError, match="broke the stream off"):
            texts.extend(chunk.choices[0].delta.content or "" for chunk in stream)
        assert "".join(texts) == "Hello, wor"  # what came before the break got through
        assert proxy.metrics.value("upstream_errors_total", "connection") == 1
    errors = [e for e in events if isinstance(e, ProviderErrorEvent)]
    assert (
        len(errors) == 1 and errors[0].site == "proxy chat.completions.create" and errors[0].run_id
    )


def test_a_broken_anthropic_stream_raises_in_the_sdk(upstream: str) -> None:
    config = ProxyConfig(upstream=upstream, port=0, window=8192, model=MODEL)
    with (
        ProxyServer(config) as proxy,
        anthropic.Anthropic(base_url=proxy.root_url, api_key="k", max_retries=0) as client,
    ):

        def read_all() -> None:
            with client.messages.stream(
                model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "hi"}]
            ) as stream:
                for _ in stream:
                    pass

        with pytest.raises(anthropic.APIError, match="broke the stream off"):
            read_all()
        assert proxy.metrics.value("upstream_errors_total", "connection") == 1


def test_a_broken_passed_through_body_is_counted_and_emitted(upstream: str) -> None:
    events: list[Event] = []
    config = ProxyConfig(upstream=upstream, port=0, window=8192, model=MODEL)
    with ProxyServer(config, sinks=[events.append]) as proxy:
        received: list[bytes] = []

        def read_all() -> None:
            with httpx2.stream("GET", proxy.base_url + "/files/big") as answer:
                received.extend(answer.iter_bytes())

        with pytest.raises(httpx2.RemoteProtocolError):  # the client sees the break too
            read_all()
        assert b"".join(received).startswith(b"x" * 100)
        assert proxy.metrics.value("upstream_errors_total", "connection") == 1
    assert [e.site for e in events if isinstance(e, ProviderErrorEvent)] == [
        "proxy chat.completions.create"
    ]
