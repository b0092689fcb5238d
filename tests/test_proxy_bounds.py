"""The proxy's bounds and failure paths: model names from clients, a body cut short,
and a start that fails.

The proxy runs in-process (``ProxyServer``) in front of an emulator, or of a small fake
upstream the test starts on 127.0.0.1; clients are the real ``openai`` SDK or plain
``httpx2`` requests.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import httpx2
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

import windowguard as wg
from windowguard.accounting.discovery import clear_discovery_cache
from windowguard.cli import main
from windowguard.core.events import Event, ProviderErrorEvent, ProxyRefused
from windowguard.emulator import Emulator
from windowguard.proxy import ProxyConfig, ProxyServer
from windowguard.proxy._wire import SseUsage

from .upstreams import QuietHandler, serve

MODEL = "emulated-model"


@pytest.fixture(autouse=True)
def _fresh_discovery() -> Iterator[None]:
    clear_discovery_cache()
    wg.clear_counter_cache()
    yield
    clear_discovery_cache()
    wg.clear_counter_cache()


class _Recorder(QuietHandler):
    """Forwards every request to the emulator and records its method and path."""

    target: ClassVar[str] = ""
    seen: ClassVar[list[tuple[str, str]]] = []

    def _forward(self) -> None:
        self.seen.append((self.command, self.path))
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host",)}
        answer = httpx2.request(
            self.command, self.target + self.path, headers=headers, content=body or None
        )
        self.send_response(answer.status_code)
        self.send_header("content-type", answer.headers.get("content-type", "application/json"))
        self.send_header("content-length", str(len(answer.content)))
        self.end_headers()
        self.wfile.write(answer.content)

    do_GET = _forward
    do_POST = _forward


def test_model_names_the_upstream_did_not_list_use_the_startup_discovery() -> None:
    with Emulator(flavor="vllm", context_window=4096) as emu:
        _Recorder.target, _Recorder.seen = emu.root_url, []
        with (
            serve(_Recorder) as upstream,
            ProxyServer(ProxyConfig(upstream=upstream, port=0, model=MODEL)) as proxy,
            openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client,
        ):
            at_startup = [call for call in _Recorder.seen if call[1] != "/v1/chat/completions"]
            assert at_startup  # the startup discovery asked the upstream
            names = [MODEL] + [f"cycled-{n}" for n in range(30)]
            for name in names:
                client.chat.completions.create(
                    model=name, messages=[{"role": "user", "content": "hi"}], max_tokens=16
                )
            later = [call for call in _Recorder.seen if call[1] != "/v1/chat/completions"]
            sent = [call for call in _Recorder.seen if call[1] == "/v1/chat/completions"]
            assert len(sent) == len(names)
            # No discovery and no count-endpoint probe per name; only counts of prompts.
            probes = [call for call in later[len(at_startup) :] if call[1] != "/tokenize"]
            assert probes == []
            openai_guard = proxy.app.state.proxy.guards._guards["openai"]
            assert len(openai_guard._models) == len(names)  # one each, below the bound


def test_many_model_names_keep_the_proxys_state_bounded() -> None:
    with (
        Emulator(flavor="vllm", context_window=4096) as emu,
        ProxyServer(ProxyConfig(upstream=emu.root_url, port=0, model=MODEL, max_models=8)) as proxy,
    ):
        openai_guard = proxy.app.state.proxy.guards._guards["openai"]
        bound = openai_guard._models.max_keys
        assert bound == 8
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
        with httpx2.Client(base_url=proxy.base_url, timeout=30) as client:
            for n in range(bound + 20):
                answer = client.post("/chat/completions", json={**body, "model": f"m-{n}"})
                assert answer.status_code == 200, answer.text
        assert len(openai_guard._models) == bound


class _CutOff(QuietHandler):
    """An upstream that answers a model call's headers, then drops the connection."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", "5000")
        self.end_headers()
        self.wfile.write(b'{"id": "chatcmpl-1", "choices": [')
        self.wfile.flush()
        self.close_connection = True


@pytest.mark.parametrize(
    ("path", "anthropic_shape"), [("/v1/chat/completions", False), ("/v1/messages", True)]
)
def test_an_answer_cut_off_after_its_headers_is_a_502_in_the_apis_shape(
    path: str, anthropic_shape: bool
) -> None:
    events: list[Event] = []
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 16,
    }
    with (
        serve(_CutOff) as upstream,
        ProxyServer(
            ProxyConfig(upstream=upstream, port=0, window=8192, model=MODEL),
            sinks=[events.append],
        ) as proxy,
    ):
        answer = httpx2.post(proxy.root_url + path, json=body, timeout=30)
        assert answer.status_code == 502, answer.text
        assert "Traceback" not in answer.text
        data = answer.json()
        assert "could not be reached" in data["error"]["message"]
        if anthropic_shape:
            assert data["type"] == "error"
        else:
            assert data["error"]["code"] == "upstream_unreachable"
        assert proxy.metrics.value("upstream_errors_total", "connection") == 1
    errors = [e for e in events if isinstance(e, ProviderErrorEvent)]
    assert [e.decision for e in errors] == ["returned"]


def test_a_body_over_the_limit_is_a_413_with_a_proxy_refused_event() -> None:
    events: list[Event] = []
    with (
        Emulator(flavor="vllm", context_window=4096) as emu,
        ProxyServer(
            ProxyConfig(upstream=emu.root_url, port=0, max_body_bytes=1000),
            sinks=[events.append],
        ) as proxy,
    ):
        body = {"model": MODEL, "messages": [{"role": "user", "content": "x" * 2000}]}
        answer = httpx2.post(proxy.base_url + "/chat/completions", json=body, timeout=30)
        assert answer.status_code == 413
        assert answer.json()["error"]["code"] == "request_too_large"
        assert emu.records == ()
    refused = [e for e in events if isinstance(e, ProxyRefused)]
    assert [e.code for e in refused] == ["request_too_large"]


def test_an_events_file_that_cannot_be_opened_stops_the_cli_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = tmp_path / "missing-directory" / "events.jsonl"
    with Emulator(flavor="vllm", context_window=4096) as emu:
        status = main(["proxy", "--upstream", emu.root_url, "--port", "0", "--events", str(events)])
    err = capsys.readouterr().err
    assert status == 2
    assert "--events" in err and "cannot be opened" in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


_BIG_EVENT = (
    b'data: {"object":"chat.completion.chunk","choices":[{"delta":{"content":"'
    + (b"x" * 3000)
    + b'"}}],"usage":null}\n\n'
)
_USAGE_EVENT = (
    b'data: {"object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":7,'
    b'"completion_tokens":2,"total_tokens":9}}\n\n'
)
_BIG_STREAM = _BIG_EVENT + _BIG_EVENT + _USAGE_EVENT + b"data: [DONE]\n\n"


@given(cuts=st.lists(st.integers(min_value=0, max_value=len(_BIG_STREAM)), max_size=12))
def test_sse_usage_holds_at_most_the_limit_of_an_unfinished_event(cuts: list[int]) -> None:
    bounds = sorted({0, len(_BIG_STREAM), *cuts})
    pieces = [_BIG_STREAM[a:b] for a, b in itertools.pairwise(bounds)]
    for strip in (False, True):
        seen: list[object] = []
        reader = SseUsage(seen.append, strip_usage_chunk=strip, max_event_bytes=256)
        out = b""
        for piece in pieces:
            out += reader.feed(piece)
            assert len(reader._buffer) <= 256  # bounded, whatever arrives
        out += reader.close()
        # Oversized events pass on byte for byte; parsing resumes after them.
        assert seen == [{"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}]
        expected = _BIG_STREAM if not strip else _BIG_STREAM.replace(_USAGE_EVENT, b"")
        assert out == expected


def test_sse_usage_passes_a_body_that_is_not_an_event_stream_on_unheld() -> None:
    body = b'{"id": "x", "text": "' + b"y" * 5000 + b'"}'
    reader = SseUsage(lambda usage: None, strip_usage_chunk=False, max_event_bytes=256)
    out = b"".join(reader.feed(body[i : i + 100]) for i in range(0, len(body), 100))
    assert len(out) >= len(body) - 256 - 100
    assert out + reader.close() == body
