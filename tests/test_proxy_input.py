"""Input the proxy must not pass on as it came (issue 20, items 5 and 6).

One path form: no spelling of a fitted route skips fitting, nothing climbs out of the
upstream's path prefix, and a path it cannot route safely is a 400. A lone UTF-16
surrogate in a body, and a request with two framings, are 400s naming the problem; a
non-ASCII header byte goes on as it came. Never a 500.

Raw requests go over a socket (an HTTP client would normalise the path itself); the
upstreams are the emulator and a plain ``http.server`` that records what it was asked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import ClassVar
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from windowguard.core.events import Event
from windowguard.emulator import Emulator
from windowguard.proxy import ProxyConfig, ProxyServer
from windowguard.proxy._paths import BadPath, normalise_path

from .upstreams import QuietHandler, raw_request, serve

MODEL = "emulated-model"
FITTED = frozenset({"/v1/chat/completions", "/v1/responses", "/v1/messages"})


# -- the normalisation ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "decoded", "encoded"),
    [
        (b"/v1/chat/completions", "/v1/chat/completions", "/v1/chat/completions"),
        (b"/v1/./chat/completions", "/v1/chat/completions", "/v1/chat/completions"),
        (b"/v1//chat/completions", "/v1/chat/completions", "/v1/chat/completions"),
        (b"/v1/x/../chat/completions", "/v1/chat/completions", "/v1/chat/completions"),
        (b"/v1/%63hat/completions", "/v1/chat/completions", "/v1/chat/completions"),
        (b"/v1/chat/completions/", "/v1/chat/completions", "/v1/chat/completions"),
        (b"/v1/responses/.", "/v1/responses", "/v1/responses"),
        (b"/v1/%2e%2e/v1/messages", "/v1/messages", "/v1/messages"),
        (b"/v1/models/a%20b", "/v1/models/a b", "/v1/models/a%20b"),
        (b"/v1/models/caf%C3%A9", "/v1/models/caf\u00e9", "/v1/models/caf%C3%A9"),
        (b"/docs/", "/docs/", "/docs/"),
        (b"/", "/", "/"),
    ],
)
def test_every_spelling_has_one_form(raw: bytes, decoded: str, encoded: str) -> None:
    path = normalise_path(raw, FITTED)
    assert (path.decoded, path.encoded) == (decoded, encoded)


@pytest.mark.parametrize(
    ("raw", "wording"),
    [
        (b"/..", "climbs above its root"),
        (b"/v1/../../tenant-b/v1/models", "climbs above its root"),
        (b"/v1/%2e%2e/%2E%2E/x", "climbs above its root"),
        (b"/v1/models/..%2F..%2Ftenant-b", "encoded or backslash separator"),
        (b"/v1/chat%2Fcompletions", "encoded or backslash separator"),
        (b"/v1/chat%5Ccompletions", "encoded or backslash separator"),
        (b"/v1\\chat/completions", "encoded or backslash separator"),
        (b"/v1/models/a%00b", "control character"),
        (b"/v1/models/%0d%0aX-Injected: 1", "control character"),
        (b"/v1/models/%FF", "not UTF-8"),
        (b"v1/models", "must start with '/'"),
    ],
)
def test_a_path_that_cannot_be_routed_safely_is_refused_naming_why(
    raw: bytes, wording: str
) -> None:
    with pytest.raises(BadPath, match=wording):
        normalise_path(raw, FITTED)


_SEGMENT = st.one_of(
    st.sampled_from(["", ".", "..", "%2e", "%2E%2e", "v1", "chat", "completions", "a b"]),
    st.text(alphabet="abc%2FfeE.-_~:@!", max_size=6),
    st.text(max_size=4),
)


@given(st.lists(_SEGMENT, max_size=8), st.booleans())
def test_the_form_is_stable_and_never_climbs_or_splits(segments: list[str], trailing: bool) -> None:
    raw = ("/" + "/".join(segments) + ("/" if trailing else "")).encode("utf-8")
    try:
        path = normalise_path(raw, FITTED)
    except BadPath:
        return
    again = normalise_path(path.encoded.encode("ascii"), FITTED)
    assert again == path  # forwarding the form routes to the same place
    pieces = path.encoded.split("/")[1:]
    assert all(p not in (".", "..") for p in pieces)
    assert "//" not in path.encoded
    assert unquote(path.encoded) == path.decoded
    assert path.encoded.isascii()


# -- through the proxy ------------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    [
        "/v1/./chat/completions",
        "/v1//chat/completions",
        "/v1/x/../chat/completions",
        "/v1/%63hat/completions",
        "/v1/chat/completions/",
        "//v1/chat/completions",
    ],
)
def test_no_spelling_of_a_fitted_route_lets_an_overflow_through(target: str) -> None:
    events: list[Event] = []
    with (
        Emulator(flavor="vllm", context_window=4096) as emu,
        ProxyServer(ProxyConfig(upstream=emu.root_url, port=0), sinks=[events.append]) as proxy,
    ):
        body = {"model": MODEL, "messages": [{"role": "user", "content": "word " * 6000}]}
        status, payload = raw_request(proxy.port, "POST", target, json.dumps(body).encode())
        assert status == 400
        assert json.loads(payload)["error"]["code"] == "context_truncated"
        assert emu.records == ()  # the upstream never saw it
        assert proxy.metrics.value("refusals_total", "chat") == 1
        # ... and a request that fits, by the same spelling, is answered by the upstream
        body["messages"] = [{"role": "user", "content": "hi"}]
        status, payload = raw_request(proxy.port, "POST", target, json.dumps(body).encode())
        assert status == 200, payload
        assert [r.path for r in emu.records] == ["/v1/chat/completions"]


def test_a_responses_spelling_is_fitted_too() -> None:
    with (
        Emulator(flavor="openai", context_window=4096) as emu,
        ProxyServer(ProxyConfig(upstream=emu.root_url, port=0, window=4096)) as proxy,
    ):
        body = {"model": MODEL, "input": "word " * 6000}
        status, payload = raw_request(
            proxy.port, "POST", "/v1/responses/.", json.dumps(body).encode()
        )
        assert status == 400
        assert json.loads(payload)["error"]["code"] == "context_truncated"
        assert emu.records == ()


class _Recorder(QuietHandler):
    """An upstream that answers every request 200 and records the raw path it got."""

    paths: ClassVar[list[str]] = []

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.paths.append(self.path)
        body = json.dumps({"object": "list", "data": []}).encode()
        self.answer(200, body, {"content-type": "application/json"})

    do_GET = do_POST = do_DELETE = _answer


@pytest.fixture
def recorder() -> Iterator[str]:
    _Recorder.paths.clear()
    with serve(_Recorder) as root:
        yield root


def test_nothing_climbs_out_of_the_upstreams_path_prefix(recorder: str) -> None:
    events: list[Event] = []
    config = ProxyConfig(upstream=recorder + "/gateway/tenant-a", port=0, window=8192, model=MODEL)
    with ProxyServer(config, sinks=[events.append]) as proxy:
        _Recorder.paths.clear()  # startup discovery
        for target, wording in [
            ("/v1/../../tenant-b/v1/models", "climbs above its root"),
            ("/../tenant-b/v1/models", "climbs above its root"),
            ("/v1/%2e%2e/%2e%2e/tenant-b/v1/models", "climbs above its root"),
            ("/v1/models/..%2F..%2F..%2Ftenant-b", "encoded or backslash separator"),
            ("/v1/models/x%00y", "control character"),
        ]:
            status, payload = raw_request(proxy.port, "GET", target)
            assert status == 400, target
            error = json.loads(payload)["error"]
            assert error["code"] == "invalid_path" and wording in error["message"]
        assert _Recorder.paths == []  # none of them reached the upstream
        refused = [e for e in events if e.kind == "proxy_refused"]
        assert len(refused) == 5 and {e.code for e in refused} == {"invalid_path"}  # type: ignore[attr-defined]
        # What is forwarded is the one form, under the prefix.
        for target, sent in [
            ("/v1/./models", "/gateway/tenant-a/v1/models"),
            ("/v1/x/../models?limit=2", "/gateway/tenant-a/v1/models?limit=2"),
            ("/v1/models/a%20b", "/gateway/tenant-a/v1/models/a%20b"),
            ("/v1/models/caf%C3%A9", "/gateway/tenant-a/v1/models/caf%C3%A9"),
        ]:
            _Recorder.paths.clear()
            status, _ = raw_request(proxy.port, "GET", target)
            assert status == 200
            assert _Recorder.paths == [sent]


def test_an_anthropic_path_is_refused_in_anthropics_shape(recorder: str) -> None:
    config = ProxyConfig(upstream=recorder, port=0, window=8192, model=MODEL)
    with ProxyServer(config) as proxy:
        status, payload = raw_request(proxy.port, "POST", "/v1/../../messages", b"{}")
        assert status == 400
        body = json.loads(payload)
        assert body["type"] == "error" and "climbs above" in body["error"]["message"]


# -- input the proxy cannot pass on as it is --------------------------------------------


def test_a_lone_surrogate_is_a_400_naming_it_and_a_pair_goes_through() -> None:
    with (
        Emulator(flavor="vllm", context_window=4096) as emu,
        ProxyServer(ProxyConfig(upstream=emu.root_url, port=0)) as proxy,
    ):
        cut = b'{"model": "m", "messages": [{"role": "user", "content": "hi \\ud83d"}]}'
        status, payload = raw_request(proxy.port, "POST", "/v1/chat/completions", cut)
        assert status == 400
        error = json.loads(payload)["error"]
        assert error["code"] == "invalid_request" and "lone UTF-16 surrogate" in error["message"]
        assert "\\ud83d" in error["message"]
        anthropic = (
            b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "\\uDC00"}]}'
        )
        status, payload = raw_request(proxy.port, "POST", "/v1/messages", anthropic)
        assert status == 400 and json.loads(payload)["type"] == "error"
        assert emu.records == ()
        paired = b'{"model": "m", "messages": [{"role": "user", "content": "hi \\ud83d\\ude00"}]}'
        status, _ = raw_request(proxy.port, "POST", "/v1/chat/completions", paired)
        assert status == 200 and len(emu.records) == 1


class _Headers(_Recorder):
    """A recorder that also keeps one request header, as the bytes it received."""

    seen: ClassVar[list[bytes]] = []

    def _answer(self) -> None:
        value = self.headers.get("x-custom")
        if value is not None:
            self.seen.append(value.encode("latin-1"))
        super()._answer()

    do_GET = do_POST = _answer


def test_a_non_ascii_header_byte_goes_on_as_it_came_and_two_framings_are_refused() -> None:
    _Headers.seen.clear()
    with serve(_Headers) as root:
        config = ProxyConfig(upstream=root, port=0, window=8192, model=MODEL)
        with ProxyServer(config) as proxy:
            status, _ = raw_request(proxy.port, "GET", "/v1/models", headers=("x-custom: caf\xe9",))
            assert status == 200
            body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
            status, _ = raw_request(
                proxy.port,
                "POST",
                "/v1/chat/completions",
                body.encode(),
                headers=("x-custom: na\xefve",),
            )
            assert status == 200
            assert _Headers.seen == [b"caf\xe9", b"na\xefve"]
            _Recorder.paths.clear()
            status, payload = raw_request(
                proxy.port,
                "POST",
                "/tokenize",
                headers=("content-length: 5", "transfer-encoding: chunked"),
            )
            assert status == 400
            assert (
                "both Content-Length and Transfer-Encoding"
                in json.loads(payload)["error"]["message"]
            )
            assert _Recorder.paths == []
