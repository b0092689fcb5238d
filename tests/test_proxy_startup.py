"""What the proxy says when it cannot start, or starts knowing less (issue 20, item 9):
an upstream that is not there is "could not be reached", not "did not say what window
it serves"; one that refuses to list its models says how."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from windowguard.core.exceptions import ConfigurationError
from windowguard.proxy import ProxyConfig, discover_upstream

from .upstreams import QuietHandler, serve


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens there once closed


def test_an_upstream_that_is_not_there_is_named_unreachable() -> None:
    root = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(ConfigurationError) as caught:
        discover_upstream(ProxyConfig(upstream=root, port=0))
    message = str(caught.value)
    assert f"the upstream {root} could not be reached" in message
    assert "Connection refused" in message and "is it running" in message
    assert "did not say what window" not in message
    # With --window the proxy starts, and its banner says the upstream was not reached.
    info = discover_upstream(ProxyConfig(upstream=root, port=0, window=4096, model="m"))
    assert any("models listed: (none: upstream unreachable" in line for line in info.describe())


class _Locked(QuietHandler):
    """An upstream that wants a key for everything."""

    def do_GET(self) -> None:
        body = b'{"error": {"message": "missing key"}}'
        self.answer(401, body, {"content-type": "application/json"})


@pytest.fixture
def locked() -> Iterator[str]:
    with serve(_Locked) as root:
        yield root


def test_an_upstream_that_answers_but_lists_nothing_says_how(locked: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        discover_upstream(ProxyConfig(upstream=locked, port=0))
    message = str(caught.value)
    assert "did not say what window it serves" in message and "--window N" in message
    assert "--api-key-env" in message  # it may need a key to list its models
    info = discover_upstream(ProxyConfig(upstream=locked, port=0, window=4096, model="m"))
    assert "models listed: (none: GET /v1/models answered HTTP 401)" in info.describe()


def test_sigint_stops_the_proxy_even_when_the_shell_started_it_ignored() -> None:
    # A shell starts a background job with SIGINT ignored (the process inherits SIG_IGN,
    # and Python then installs no handler). uvicorn handles SIGINT once it runs, but one
    # that came between the "listening on" banner and uvicorn's handler was lost and the
    # proxy served on: two CI runs side by side left two such proxies running. serve()
    # now makes SIGINT interrupt from its start.
    import signal

    from windowguard.proxy.server import _interruptible

    before = signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _interruptible()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        handler = signal.getsignal(signal.SIGINT)
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # a caller's own choice is kept
        _interruptible()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_DFL
        assert handler is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)
