"""The emulator reads request bodies safely: sizes first, bounded JSON, every flavour's shape.

Driven over raw sockets and http.client, as a careless or hostile client would: a body
declared larger than ``max_body_bytes`` is answered 413 before any of it is read, and
malformed bodies (bad JSON, JSON nested 200 000 deep, a bad ``Content-Length``) are
answered 400; after each, the server still answers the next request.
"""

from __future__ import annotations

import http.client
import json
import socket
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

from windowguard.core.exceptions import ConfigurationError
from windowguard.core.failures import FailureKind, classify_failure
from windowguard.emulator import Emulator

FLAVORS = ("openai", "vllm", "llamacpp", "anthropic")
MIB = 1024 * 1024


@pytest.fixture(scope="module", params=FLAVORS)
def emu(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    with Emulator(flavor=request.param, context_window=4096, scenario="echo") as emulator:
        yield emulator


def _path(emu: Emulator) -> str:
    return "/v1/messages" if emu.flavor == "anthropic" else "/v1/chat/completions"


def _raw(emu: Emulator, head: str, body: bytes = b"") -> tuple[int, dict[str, str], Any]:
    """Send ``head`` (request line and headers, without the blank line) and ``body`` as
    they are, and read one response; a server that hangs fails on the socket timeout."""
    with socket.create_connection(("127.0.0.1", emu.port), timeout=30) as sock:
        sock.sendall(head.encode("latin-1") + b"\r\n\r\n" + body)
        response = http.client.HTTPResponse(sock)
        response.begin()
        payload = response.read()
        headers = {k.lower(): v for k, v in response.getheaders()}
        return response.status, headers, json.loads(payload)


def _head(emu: Emulator, *headers: str) -> str:
    lines = [f"POST {_path(emu)} HTTP/1.1", f"Host: 127.0.0.1:{emu.port}", *headers]
    return "\r\n".join(lines)


def _still_answers(emu: Emulator) -> None:
    """A fresh, well-formed request after the refusal gets a normal 200."""
    request: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    if emu.flavor == "anthropic":
        request["max_tokens"] = 16
    connection = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=30)
    try:
        connection.request(
            "POST",
            _path(emu),
            body=json.dumps(request),
            headers={"content-type": "application/json"},
        )
        response = connection.getresponse()
        assert response.status == 200, response.read()
        response.read()
    finally:
        connection.close()


def _assert_shape(emu: Emulator, status: int, body: Any) -> None:
    """The error body is in the emulated server's own envelope."""
    if emu.flavor == "anthropic":
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}
    elif emu.flavor == "llamacpp":
        assert body["error"]["code"] == status and {"message", "type"} <= set(body["error"])
    elif emu.flavor == "vllm":
        assert body["error"]["code"] == status and "param" in body["error"]
    else:
        assert set(body["error"]) == {"message", "type", "param", "code"}


# --- oversized bodies: 413 at once ------------------------------------------------


def test_a_body_declared_at_2_to_the_40_is_refused_413_without_reading_it(emu: Emulator) -> None:
    status, headers, body = _raw(emu, _head(emu, f"Content-Length: {2**40}"))
    assert status == 413 and headers.get("connection") == "close"
    _assert_shape(emu, status, body)
    failure = classify_failure(status=status, body=body)
    assert failure.kind is FailureKind.REQUEST_TOO_LARGE and not failure.retryable
    _still_answers(emu)


def test_an_expect_100_continue_client_gets_the_413_instead_of_continue(emu: Emulator) -> None:
    head = _head(emu, f"Content-Length: {64 * MIB}", "Expect: 100-continue")
    status, _, body = _raw(emu, head)
    assert status == 413
    _assert_shape(emu, status, body)
    _still_answers(emu)


def test_a_40_mib_body_streamed_by_http_client_gets_413_and_memory_stays_flat() -> None:
    # http.client writes the whole body before it reads: the server answers at once, then
    # drains what keeps coming without keeping it.
    chunk = b"x" * MIB
    size = 40 * MIB
    with Emulator(flavor="openai", context_window=4096, scenario="echo") as emu:
        connection = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=60)
        tracemalloc.start()
        try:
            connection.request(
                "POST",
                "/v1/chat/completions",
                body=(chunk for _ in range(size // MIB)),
                headers={"content-type": "application/json", "content-length": str(size)},
            )
            response = connection.getresponse()
            payload = response.read()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            connection.close()
        assert response.status == 413
        assert json.loads(payload)["error"]["code"] == "request_too_large"
        assert peak < 8 * MIB  # the server never held the body (nor a chunk of this size)
        _still_answers(emu)


def test_max_body_bytes_is_configurable_and_checked() -> None:
    with Emulator(flavor="anthropic", context_window=4096, max_body_bytes=1024) as emu:
        big = json.dumps(
            {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "x" * 2000}]}
        ).encode()
        status, _, body = _raw(emu, _head(emu, f"Content-Length: {len(big)}"), big)
        assert status == 413
        assert body["error"] == {
            "type": "request_too_large",
            "message": "Request exceeds the maximum allowed number of bytes.",
        }
        _still_answers(emu)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigurationError, match="max_body_bytes"):
            Emulator(max_body_bytes=bad)  # type: ignore[arg-type]


def test_the_count_apis_are_capped_too() -> None:
    with Emulator(flavor="vllm", context_window=4096, max_body_bytes=1024) as emu:
        head = "\r\n".join(
            [
                "POST /tokenize HTTP/1.1",
                f"Host: 127.0.0.1:{emu.port}",
                f"Content-Length: {10 * MIB}",
            ]
        )
        status, _, body = _raw(emu, head)
        assert status == 413 and body["error"]["code"] == 413


# --- malformed bodies: 400 --------------------------------------------------------


def test_json_nested_200k_deep_is_a_400_not_a_recursion_error(emu: Emulator) -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    status, _, body = _raw(emu, _head(emu, f"Content-Length: {len(deep)}"), deep)
    assert status == 400
    _assert_shape(emu, status, body)
    assert "levels deep" in json.dumps(body)
    _still_answers(emu)


def test_json_just_past_the_depth_limit_is_a_400(emu: Emulator) -> None:
    # 130 levels parse fine in Python, but no request nests like that: refused the same way.
    deeper = b'{"model": "m", "messages": ' + b"[" * 130 + b"]" * 130 + b"}"
    status, _, body = _raw(emu, _head(emu, f"Content-Length: {len(deeper)}"), deeper)
    assert status == 400 and "levels deep" in json.dumps(body)


def test_invalid_json_is_a_400_in_the_flavours_shape(emu: Emulator) -> None:
    status, _, body = _raw(emu, _head(emu, "Content-Length: 9"), b"{not json")
    assert status == 400
    _assert_shape(emu, status, body)
    assert classify_failure(status=status, body=body).kind is FailureKind.INVALID_REQUEST
    _still_answers(emu)


@pytest.mark.parametrize(
    "lengths",
    [("-5",), ("abc",), ("1e3",), ("12", "13")],
    ids=["negative", "not-a-number", "float", "two-values"],
)
def test_a_bad_content_length_is_a_400_and_closes(emu: Emulator, lengths: tuple[str, ...]) -> None:
    head = _head(emu, *(f"Content-Length: {value}" for value in lengths))
    status, headers, body = _raw(emu, head, b"{}")
    assert status == 400 and headers.get("connection") == "close"
    _assert_shape(emu, status, body)
    assert "Content-Length" in json.dumps(body)
    _still_answers(emu)


def test_a_chunked_body_is_refused_rather_than_misread(emu: Emulator) -> None:
    head = _head(emu, "Transfer-Encoding: chunked")
    status, headers, body = _raw(emu, head, b"2\r\n{}\r\n0\r\n\r\n")
    assert status == 400 and headers.get("connection") == "close"
    _assert_shape(emu, status, body)
    _still_answers(emu)


def test_a_body_shorter_than_declared_is_a_400() -> None:
    with Emulator(flavor="openai", context_window=4096) as emu:
        with socket.create_connection(("127.0.0.1", emu.port), timeout=30) as sock:
            head = _head(emu, "Content-Length: 100")
            sock.sendall(head.encode() + b"\r\n\r\n" + b'{"model":')
            sock.shutdown(socket.SHUT_WR)  # the client gives up half way
            response = http.client.HTTPResponse(sock)
            response.begin()
            assert response.status == 400
            assert "ended after 9 of its 100 bytes" in response.read().decode()
        _still_answers(emu)
