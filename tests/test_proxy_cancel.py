"""A client that gives up cancels its upstream request (issue 20, item 2): the proxy
closes the upstream connection, which is how vLLM and llama.cpp learn to stop work.

The upstream is a plain ``http.server`` that holds each model call until its client
(the proxy) closes the connection, and records that it did.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from typing import ClassVar

import pytest

from windowguard.core.events import Event
from windowguard.proxy import ProxyConfig, ProxyServer

from .upstreams import QuietHandler, serve

MODEL = "slow-model"


class _Slow(QuietHandler):
    """Answers GET /v1/models; holds every model call until the peer closes, up to 30 s."""

    closed: ClassVar[threading.Event] = threading.Event()
    held: ClassVar[threading.Event] = threading.Event()

    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": MODEL}]}).encode()
        self.answer(200, body, {"content-type": "application/json"})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        if not self.path.endswith("/chat/completions"):  # startup's count-API probes
            self.answer(404)
            return
        self.held.set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            readable, _, _ = select.select([self.connection], [], [], 0.05)
            if readable and not self.connection.recv(1, 0):
                self.closed.set()  # the proxy closed the connection: stop working
                return
        self.send_response(500)
        self.end_headers()


@pytest.fixture
def slow() -> Iterator[str]:
    _Slow.closed.clear()
    _Slow.held.clear()
    with serve(_Slow) as root:
        yield root


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_that_gives_up_cancels_the_upstream_request(slow: str, stream: bool) -> None:
    events: list[Event] = []
    config = ProxyConfig(upstream=slow, port=0, window=8192, model=MODEL)
    with ProxyServer(config, sinks=[events.append]) as proxy:
        body = json.dumps(
            {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
        ).encode()
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        ).encode()
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as client:
            client.sendall(head + body)
            assert _Slow.held.wait(30)  # the upstream is working on it
        # The client went away before any answer (a timeout, a cancelled task).
        assert _Slow.closed.wait(30), "the upstream request was not cancelled"
        deadline = time.monotonic() + 30
        while proxy.metrics.value("client_disconnects_total", "chat") < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert not any(e.kind == "provider_error" for e in events)  # not an upstream failure
