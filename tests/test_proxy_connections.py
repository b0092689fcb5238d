"""Connection hygiene (issue 20, item 4): a connection that never sends a whole request
is closed after ``header_timeout``, a body that stalls is a 408 after ``body_timeout``,
and past ``max_connections`` a connection is answered 503; so idle or trickling
clients cannot stop real traffic."""

from __future__ import annotations

import json
import resource
import socket
import time

import httpx2
import pytest

from windowguard.emulator import Emulator
from windowguard.proxy import ProxyConfig, ProxyServer

MODEL = "emulated-model"


def _closed_by_peer(sock: socket.socket, within: float) -> bool:
    """Whether the other side closed ``sock`` (after any answer) within ``within`` s."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if not sock.recv(65536):
                return True
        except TimeoutError:
            continue
        except OSError:
            return True
    return False


def test_trickling_connections_are_closed_and_real_traffic_goes_on() -> None:
    with (
        Emulator(flavor="vllm", context_window=4096) as emu,
        ProxyServer(
            ProxyConfig(upstream=emu.root_url, port=0, header_timeout=1.0, max_connections=150)
        ) as proxy,
    ):
        idle = []
        for _ in range(200):  # more than max_connections, each one byte of a request
            sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
            sock.sendall(b"P")
            idle.append(sock)
        try:
            assert all(_closed_by_peer(sock, within=30) for sock in idle)
        finally:
            for sock in idle:
                sock.close()
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        answer = httpx2.post(proxy.base_url + "/chat/completions", json=body, timeout=30)
        assert answer.status_code == 200


def test_a_connection_past_the_limit_is_answered_503() -> None:
    with (
        Emulator(flavor="vllm", context_window=4096) as emu,
        ProxyServer(
            ProxyConfig(upstream=emu.root_url, port=0, header_timeout=30.0, max_connections=3)
        ) as proxy,
    ):
        held = [socket.create_connection(("127.0.0.1", proxy.port)) for _ in range(3)]
        try:
            for sock in held:
                sock.sendall(b"G")
            time.sleep(0.2)  # (let the server register them; the check below waits)
            answer = httpx2.get(proxy.base_url + "/models", timeout=30)
            assert answer.status_code == 503
        finally:
            for sock in held:
                sock.close()
        deadline = time.monotonic() + 30
        while httpx2.get(proxy.base_url + "/models", timeout=30).status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_a_body_that_stalls_is_a_408_in_the_apis_shape() -> None:
    with (
        Emulator(flavor="vllm", context_window=4096) as emu,
        ProxyServer(ProxyConfig(upstream=emu.root_url, port=0, body_timeout=0.5)) as proxy,
    ):
        body = json.dumps({"model": MODEL, "messages": []}).encode()
        head = (
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json"
            f"\r\ncontent-length: {len(body) + 100}\r\n\r\n"
        ).encode()
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as sock:
            sock.sendall(head + body)  # 100 bytes short, then nothing
            answer = b""
            while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
        status = int(answer.split(b" ", 2)[1])
        assert status == 408
        error = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
        assert error["code"] == "request_timeout" and "paused" in error["message"]
        assert emu.records == ()


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--max-connections", "0"), ("--header-timeout", "-1"), ("--body-timeout", "0")],
)
def test_a_bad_limit_is_refused_naming_its_flag(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from windowguard.cli import main

    with pytest.raises(SystemExit) as done:
        main(["proxy", "--upstream", "http://127.0.0.1:9", flag, value])
    assert done.value.code == 2
    assert f"argument {flag}" in capsys.readouterr().err


def test_accepted_connections_have_nagle_off() -> None:
    # An answer's headers and body are two writes; with Nagle on, the body waits for the
    # client's delayed ACK (40 ms on every sequential request, measured before the fix).
    with (
        Emulator(flavor="vllm", context_window=4096) as emu,
        ProxyServer(ProxyConfig(upstream=emu.root_url, port=0)) as proxy,
    ):
        body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
        request = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
            f"\r\nContent-Length: {len(body)}\r\n\r\n{body}"
        ).encode()
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as sock:
            sock.sendall(request)
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
            server = proxy._server
            assert server is not None
            accepted = [
                conn.transport.get_extra_info("socket") for conn in server.server_state.connections
            ]
            assert accepted
            for conn_sock in accepted:
                assert conn_sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_1100_idle_connections_do_not_stop_real_traffic() -> None:
    # The issue's own numbers: 1,100 connections sending one byte each, past the default
    # limit of 1,000 (and a common 1,024 open-files limit, which the proxy raises).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2 * 1100 + 512  # this process holds both ends
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"the open-files hard limit is {hard}; this test needs {wanted}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    with (
        Emulator(flavor="vllm", context_window=4096) as emu,
        ProxyServer(ProxyConfig(upstream=emu.root_url, port=0, header_timeout=2.0)) as proxy,
    ):
        idle = []
        try:
            for _ in range(1100):
                sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
                sock.sendall(b"P")
                idle.append(sock)
            # Past the limit a real client is answered (503, which SDKs retry), not hung.
            busy = httpx2.get(proxy.base_url + "/models", timeout=30)
            assert busy.status_code in (200, 503)
            assert all(_closed_by_peer(sock, within=60) for sock in idle)
        finally:
            for sock in idle:
                sock.close()
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        for _ in range(20):
            answer = httpx2.post(proxy.base_url + "/chat/completions", json=body, timeout=30)
            assert answer.status_code == 200
