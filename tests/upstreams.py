"""Fake upstreams for the proxy's tests: a ``http.server`` handler served on a thread,
and raw HTTP/1.1 requests (an HTTP client would normalise what the tests send)."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """A request handler that logs nothing and answers in one call."""

    def answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        """Send ``status``, ``headers`` and ``body`` (with its content-length)."""
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@contextmanager
def serve(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on a free loopback port; yields its root URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def raw_request(
    port: int, method: str, target: str, body: bytes = b"", headers: tuple[str, ...] = ()
) -> tuple[int, bytes]:
    """Send one HTTP/1.1 request with ``target`` exactly as given; the status and body."""
    head = [f"{method} {target} HTTP/1.1", f"host: 127.0.0.1:{port}", "connection: close"]
    head += list(headers)
    if body:
        head += ["content-type: application/json", f"content-length: {len(body)}"]
    data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    answer = b"".join(chunks)
    status_line, _, rest = answer.partition(b"\r\n")
    _, _, payload = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), payload
