"""``windowguard proxy``: refusals, upstream errors, pass-through, auth, metrics, the CLI.

The proxy runs in-process on a free port (``ProxyServer``: uvicorn on a thread) in front
of an emulator the test starts; clients are the real ``openai`` / ``anthropic`` SDKs or
plain ``httpx2`` requests. One test starts the CLI in a subprocess.
"""

from __future__ import annotations

import http.server
import itertools
import json
import logging
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import anthropic
import httpx2
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

import windowguard as wg
from windowguard.accounting.discovery import clear_discovery_cache
from windowguard.core.events import Event, ProviderErrorEvent
from windowguard.core.exceptions import ConfigurationError
from windowguard.emulator import Emulator, EmulatorRequest, Reply, ToolCall
from windowguard.proxy import ProxyConfig, ProxyServer, discover_upstream
from windowguard.proxy._wire import SseUsage, forward_headers

MODEL = "emulated-model"
SYSTEM = "You are a careful coding agent."
TASK = "TASK-9d2: make the tests pass."


@pytest.fixture(autouse=True)
def _fresh_discovery() -> Iterator[None]:
    clear_discovery_cache()
    wg.clear_counter_cache()
    yield
    clear_discovery_cache()
    wg.clear_counter_cache()


def proxy_for(emu: Emulator, *, sinks: Any = (), **options: Any) -> ProxyServer:
    return ProxyServer(ProxyConfig(upstream=emu.root_url, port=0, **options), sinks=sinks)


def chat(messages: list[Any], **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": messages, **extra}


def tool_policy(request: EmulatorRequest) -> Reply:
    n = request.call_number
    return Reply(
        text=f"Reading {n}.",
        tool_calls=(ToolCall(name="read_file", arguments={"path": f"m{n}.py"}),),
    )


# -- refusals ---------------------------------------------------------------------------


def test_a_request_that_cannot_fit_is_refused_in_openai_shape_without_contacting_upstream() -> None:
    with (
        Emulator(flavor="vllm", context_window=4096) as emu,
        proxy_for(emu) as proxy,
        openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client,
    ):
        huge = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "word " * 6000}]
        for stream in (False, True):
            with pytest.raises(openai.BadRequestError) as caught:
                client.chat.completions.create(model=MODEL, messages=huge, stream=stream)  # type: ignore[call-overload]
            error = caught.value.body
            assert isinstance(error, dict)
            assert error["code"] == "context_truncated"
            assert error["type"] == "invalid_request_error"
            assert error["param"] is None
            assert error["context_window"] == 4096
            assert error["estimated_tokens"] > error["budget"]
            assert "cannot fit the context window" in error["message"]
        assert emu.records == ()  # the upstream never saw it
        assert proxy.metrics.value("refusals_total", "chat") == 2


def test_a_request_that_cannot_fit_is_refused_in_anthropic_shape() -> None:
    with (
        Emulator(flavor="anthropic", context_window=4096) as emu,
        proxy_for(emu) as proxy,
        anthropic.Anthropic(base_url=proxy.root_url, api_key="k", max_retries=0) as client,
    ):
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.messages.create(
                model=MODEL,
                max_tokens=100,
                messages=[{"role": "user", "content": "word " * 6000}],
            )
        body = caught.value.body
        assert isinstance(body, dict)
        assert body["type"] == "error"
        assert body["error"]["type"] == "invalid_request_error"
        assert "cannot fit the context window" in body["error"]["message"]
        assert emu.records == ()


@pytest.mark.parametrize(
    ("body", "wording"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (json.dumps(chat("hello")).encode(), "must be a list of messages"),
        (json.dumps(chat([1, 2])).encode(), "message 0"),
        (json.dumps({"messages": []}).encode(), "model"),
        (json.dumps(chat([{"role": "user", "content": "x"}], max_tokens=-1)).encode(), "max_"),
        (json.dumps(chat([{"role": "user", "content": "x"}], tools="x")).encode(), "tools"),
    ],
)
def test_bad_input_is_a_400_in_the_apis_shape_naming_the_problem(body: bytes, wording: str) -> None:
    with Emulator(flavor="vllm", context_window=4096) as emu, proxy_for(emu) as proxy:
        for path, anthropic_shape in (("/v1/chat/completions", False), ("/v1/messages", True)):
            answer = httpx2.post(
                proxy.root_url + path, content=body, headers={"content-type": "application/json"}
            )
            assert answer.status_code == 400, answer.text
            data = answer.json()
            message = data["error"]["message"]
            assert wording in message
            assert "Traceback" not in answer.text
            if anthropic_shape:
                assert data["type"] == "error"
                assert data["error"]["type"] == "invalid_request_error"
            else:
                assert data["error"]["code"] == "invalid_request"
        assert emu.records == ()


# -- the upstream refuses ---------------------------------------------------------------


def test_an_upstream_overflow_is_refitted_once_and_resent() -> None:
    events: list[Event] = []
    # The proxy is told a window larger than the one served: the upstream refuses, says
    # its window, and the refit sends what fits. Drop only: the default edits' clearing
    # at 55 % of the assumed window would keep most requests under the served one.
    with (
        Emulator(
            flavor="vllm", context_window=4096, scenario=tool_policy, count_apis="none"
        ) as emu,
        proxy_for(emu, window=8192, sinks=[events.append], no_edits=True) as proxy,
        openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client,
    ):
        transcript: list[Any] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": TASK},
        ]
        for n in range(30):
            reply = client.chat.completions.create(model=MODEL, messages=transcript, max_tokens=200)
            message = reply.choices[0].message
            transcript.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls or []:
                transcript.append(
                    {"role": "tool", "tool_call_id": call.id, "content": f"line {n}\n" * 60}
                )
        statuses = [r.status for r in emu.records]
        assert statuses.count(400) == 1, statuses  # one overflow, learnt from
        refused = statuses.index(400)
        assert statuses[refused + 1] == 200  # the refit went through at once
        assert len(statuses) == 31
        assert proxy.metrics.value("refits_total", "chat") == 1
        assert proxy.metrics.value("upstream_errors_total", "context_overflow") == 1
        decisions = [e.decision for e in events if isinstance(e, ProviderErrorEvent)]
        assert decisions == ["refit"]


def test_non_overflow_upstream_errors_come_back_unchanged() -> None:
    with (
        Emulator(flavor="openai", context_window=4096, faults={1: 429, 2: 429, 3: 503}) as emu,
        proxy_for(emu, window=4096) as proxy,
    ):
        body = chat([{"role": "user", "content": "hi"}])
        through = httpx2.post(proxy.base_url + "/chat/completions", json=body)
        direct = httpx2.post(emu.base_url + "/chat/completions", json=body)
        assert through.status_code == direct.status_code == 429
        assert through.json() == direct.json()
        assert through.headers["retry-after"] == direct.headers["retry-after"]
        client = openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0)
        with client, pytest.raises(openai.InternalServerError) as caught:
            client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=True
            )
        assert caught.value.status_code == 503
        assert [r.status for r in emu.records] == [429, 429, 503]
        assert proxy.metrics.value("upstream_errors_total", "rate_limit") == 1
        assert proxy.metrics.value("refits_total", "chat") == 0


def test_an_unreachable_upstream_is_a_502_in_the_apis_shape() -> None:
    with Emulator(flavor="vllm", context_window=4096) as emu:
        upstream = discover_upstream(ProxyConfig(upstream=emu.root_url))
    # The emulator is gone: its port refuses connections.
    with ProxyServer(ProxyConfig(upstream=upstream.root, port=0), upstream=upstream) as proxy:
        answer = httpx2.post(
            proxy.base_url + "/chat/completions", json=chat([{"role": "user", "content": "hi"}])
        )
        assert answer.status_code == 502
        assert answer.json()["error"]["code"] == "upstream_unreachable"
        assert proxy.metrics.value("upstream_errors_total", "connection") == 1


# -- an upstream the proxy cannot count for ---------------------------------------------


@pytest.mark.parametrize("no_edits", [False, True], ids=["default-edits", "no-edits"])
def test_an_upstream_that_reports_no_window_needs_window_and_is_then_guarded(
    no_edits: bool,
) -> None:
    with Emulator(
        flavor="openai", context_window=8192, count_apis="none", scenario=tool_policy
    ) as emu:
        with pytest.raises(ConfigurationError, match="--window"):
            discover_upstream(ProxyConfig(upstream=emu.base_url))
        with (
            proxy_for(emu, window=8192, no_edits=no_edits) as proxy,
            openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client,
        ):
            assert proxy.upstream.counter is None
            transcript: list[Any] = [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": TASK},
            ]
            for n in range(80):
                reply = client.chat.completions.create(
                    model=MODEL, messages=transcript, max_tokens=300
                )
                message = reply.choices[0].message
                transcript.append(message.model_dump(exclude_none=True))
                for call in message.tool_calls or []:
                    transcript.append(
                        {"role": "tool", "tool_call_id": call.id, "content": f"v{n} = 1\n" * 30}
                    )
            assert [r.status for r in emu.records] == [200] * 80
            # The window was exercised: old results cleared (the default edits), or whole
            # turns dropped (--no-edits, which edits nothing else).
            edited = proxy.metrics.value("edited_requests_total", "chat")
            if no_edits:
                assert proxy.metrics.value("pruned_requests_total", "chat") > 0
                assert edited == 0
            else:
                assert edited > 0


# -- pass-through -----------------------------------------------------------------------


def test_other_paths_pass_through_untouched() -> None:
    with Emulator(flavor="vllm", context_window=4096) as emu, proxy_for(emu) as proxy:
        for path in ("/v1/models", f"/v1/models/{MODEL}", "/health", "/version"):
            through, direct = httpx2.get(proxy.root_url + path), httpx2.get(emu.root_url + path)
            assert (through.status_code, through.content) == (direct.status_code, direct.content)
        # A POST with a body (vLLM's count API), and a path the upstream does not serve.
        body = {"model": MODEL, "messages": [{"role": "user", "content": "count me"}]}
        through = httpx2.post(proxy.root_url + "/tokenize", json=body)
        direct = httpx2.post(emu.root_url + "/tokenize", json=body)
        assert through.status_code == 200 and through.json() == direct.json()
        through = httpx2.post(proxy.base_url + "/embeddings?x=1", json={"input": "hi"})
        direct = httpx2.post(emu.base_url + "/embeddings?x=1", json={"input": "hi"})
        assert (through.status_code, through.content) == (direct.status_code, direct.content)
        assert through.status_code == 404
        assert proxy.metrics.value("requests_total", "passthrough") == 6


def test_responses_with_server_side_state_are_sent_unchanged() -> None:
    events: list[Event] = []
    with (
        Emulator(flavor="openai", context_window=4096) as emu,
        proxy_for(emu, window=4096, sinks=[events.append]) as proxy,
    ):
        httpx2.post(
            proxy.base_url + "/responses",
            json={"model": MODEL, "input": "hi", "previous_response_id": "resp_1"},
        )
        assert [e.kind for e in events if e.kind == "guard_passthrough"] == ["guard_passthrough"]
        assert len(emu.records) == 1


def test_a_client_that_asks_for_stream_usage_gets_the_usage_chunk() -> None:
    with (
        Emulator(flavor="vllm", context_window=4096) as emu,
        proxy_for(emu) as proxy,
        openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client,
    ):
        messages = [{"role": "user", "content": "hi"}]
        chunks = list(
            client.chat.completions.create(
                model=MODEL, messages=messages, stream=True, stream_options={"include_usage": True}
            )
        )
        assert chunks[-1].choices == [] and chunks[-1].usage is not None
        plain = list(client.chat.completions.create(model=MODEL, messages=messages, stream=True))
        assert all(chunk.choices for chunk in plain)
        assert len(plain) == len(chunks) - 1


# -- auth -------------------------------------------------------------------------------


def test_the_clients_key_is_forwarded_by_default() -> None:
    with (
        Emulator(flavor="vllm", context_window=4096, api_key="sk-client-1") as emu,
        proxy_for(emu, window=4096, model=MODEL) as proxy,  # discovery needs a key
    ):
        for key, ok in (("sk-client-1", True), ("sk-wrong", False)):
            with openai.OpenAI(base_url=proxy.base_url, api_key=key, max_retries=0) as client:
                try:
                    client.chat.completions.create(
                        model=MODEL, messages=[{"role": "user", "content": "hi"}]
                    )
                    assert ok
                except openai.AuthenticationError:
                    assert not ok
    with (
        Emulator(flavor="anthropic", context_window=4096, api_key="sk-ant-client") as emu,
        proxy_for(emu, window=4096, model=MODEL) as proxy,
        anthropic.Anthropic(base_url=proxy.root_url, api_key="sk-ant-client", max_retries=0) as c,
    ):
        c.messages.create(model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "hi"}])
        assert [r.status for r in emu.records] == [200]


def test_the_proxys_own_key_replaces_the_clients(tmp_path: Path, caplog: Any) -> None:
    secret = "sk-proxy-SECRET-4f9a7c"
    client_key = "sk-client-SECRET-77b1"
    events: list[Event] = []
    log = tmp_path / "events.jsonl"
    caplog.set_level(logging.DEBUG)
    with (
        Emulator(flavor="vllm", context_window=4096, api_key=secret, scenario=tool_policy) as emu,
        ProxyServer(
            ProxyConfig(upstream=emu.root_url, port=0, api_key=secret, events=str(log)),
            sinks=[events.append],
        ) as proxy,
        openai.OpenAI(base_url=proxy.base_url, api_key=client_key, max_retries=0) as client,
    ):
        assert secret not in repr(proxy.config)
        messages: list[Any] = [{"role": "user", "content": "word " * 5000}]
        with pytest.raises(openai.BadRequestError):  # a refusal: its message holds no key
            client.chat.completions.create(model=MODEL, messages=messages)
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
        list(
            client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=True
            )
        )
        assert [r.status for r in emu.records] == [200, 200]
        assert httpx2.get(proxy.base_url + "/models").status_code == 200  # pass-through too
        metrics = httpx2.get(proxy.root_url + "/metrics").text
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o600
    written = log.read_text()
    assert '"event": "context_pressure"' in written
    everything = "\n".join(
        [written, metrics, caplog.text, *(json.dumps(e.to_dict(), default=str) for e in events)]
    )
    assert caplog.records  # the proxy, uvicorn and httpx2 logged at DEBUG
    for key in (secret, client_key):
        assert key not in everything
    assert any(e.kind == "context_pressure" for e in events)


# -- metrics and health -----------------------------------------------------------------

_SAMPLE = re.compile(
    r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?P<labels>[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"'
    r'(,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*")*)\})? (?P<value>[0-9.e+-]+|\+Inf|NaN)$'
)


def parse_exposition(text: str) -> dict[str, float]:
    """Check the Prometheus text format line by line; samples by ``name{labels}``."""
    assert text.endswith("\n")
    types: dict[str, str] = {}
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            assert len(line.split(" ", 3)) == 4
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "histogram", "gauge")
            types[name] = kind
        else:
            match = _SAMPLE.match(line)
            assert match, f"not a sample line: {line!r}"
            name = match["name"]
            family = re.sub(r"_(bucket|sum|count)$", "", name)
            assert name in types or family in types, f"{name} has no TYPE"
            samples[name + "{" + (match["labels"] or "") + "}"] = float(match["value"])
    return samples


def test_metrics_are_prometheus_text_and_count_what_happened() -> None:
    with (
        Emulator(flavor="vllm", context_window=4096, scenario=tool_policy) as emu,
        proxy_for(emu) as proxy,
        openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client,
    ):
        transcript: list[Any] = [{"role": "user", "content": TASK}]
        for _ in range(25):
            reply = client.chat.completions.create(
                model=MODEL, messages=transcript, max_tokens=3000
            )
            message = reply.choices[0].message
            transcript.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls or []:
                transcript.append({"role": "tool", "tool_call_id": call.id, "content": "x\n" * 300})
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "w " * 9000}]
            )
        httpx2.get(proxy.base_url + "/models")
        answer = httpx2.get(proxy.root_url + "/metrics")
        health = httpx2.get(proxy.root_url + "/healthz").json()
        root = emu.root_url
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = parse_exposition(answer.text)
    p = "windowguard_proxy_"
    assert samples[p + 'requests_total{api="chat"}'] == 26
    assert samples[p + 'requests_total{api="passthrough"}'] == 1
    assert samples[p + 'refusals_total{api="chat"}'] == 1
    assert samples[p + 'pruned_requests_total{api="chat"}'] > 0
    assert (
        samples[p + 'dropped_turns_total{api="chat"}']
        >= samples[p + 'pruned_requests_total{api="chat"}']
    )
    assert samples[p + 'shrinks_total{api="chat"}'] > 0
    buckets = [v for k, v in samples.items() if k.startswith(p + "added_latency_seconds_bucket")]
    assert buckets == sorted(buckets)  # cumulative
    assert samples[p + 'added_latency_seconds_bucket{api="chat",le="+Inf"}'] == 25
    assert samples[p + 'added_latency_seconds_count{api="chat"}'] == 25
    # The fit alone (from the whole body on): as many requests, never more time.
    assert samples[p + 'fit_seconds_count{api="chat"}'] == 25
    assert (
        0
        < samples[p + 'fit_seconds_sum{api="chat"}']
        <= samples[p + 'added_latency_seconds_sum{api="chat"}']
    )
    assert health == {
        "status": "ok",
        "upstream": root,
        "model": MODEL,
        "context_window": 4096,
        "count_endpoint": "vllm POST /tokenize",
    }


# -- the command ------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_cli_serves_prints_what_it_found_and_refuses_to_start_blind(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "from windowguard.cli import main; exit(main())", "proxy"]
    with Emulator(flavor="openai", context_window=4096, count_apis="none") as emu:
        blind = subprocess.run(
            [*command, "--upstream", emu.base_url, "--port", "0"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert blind.returncode == 2
        assert "pass --window N" in blind.stderr
        assert "Traceback" not in blind.stderr
    with Emulator(flavor="vllm", context_window=4096) as emu:
        port = _free_port()
        env = {**os.environ, "WG_TEST_KEY": "sk-from-env"}
        process = subprocess.Popen(
            [
                *command,
                "--upstream",
                emu.root_url,
                "--port",
                str(port),
                "--api-key-env",
                "WG_TEST_KEY",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert process.stdout is not None
            banner = []
            for line in process.stdout:
                banner.append(line)
                if "listening on" in line:
                    break
            text = "".join(banner)
            assert "window 4096 tokens, source discovered" in text
            assert "count endpoint: vllm POST /tokenize" in text
            assert f"base URL for OpenAI SDKs: http://127.0.0.1:{port}/v1;" in text
            assert f"for Anthropic SDKs: http://127.0.0.1:{port})" in text  # no /v1/v1
            deadline = time.monotonic() + 10
            while True:
                try:
                    answer = httpx2.post(
                        f"http://127.0.0.1:{port}/v1/chat/completions",
                        json=chat([{"role": "user", "content": "hi"}]),
                    )
                    break
                except httpx2.ConnectError:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
            assert answer.status_code == 200
        finally:
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=30)
        assert "sk-from-env" not in text + err
        assert "Traceback" not in err


def test_cli_help_names_every_flag() -> None:
    from windowguard.cli import main

    with pytest.raises(SystemExit) as done:
        main(["proxy", "--help"])
    assert done.value.code == 0


# -- the wire pieces ----------------------------------------------------------------------

_STREAM = (
    b'data: {"object":"chat.completion.chunk","choices":[{"delta":{"content":"Hel"}}],'
    b'"usage":null}\n\n'
    b'data: {"object":"chat.completion.chunk","choices":[{"delta":{"content":"lo"}}],'
    b'"usage":null}\n\n'
    b'data: {"object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":7,'
    b'"completion_tokens":2,"total_tokens":9}}\n\n'
    b"data: [DONE]\n\n"
)


# What the client reads when the proxy asked for include_usage: no usage chunk, and no
# "usage": null in the others (each such event's JSON written again, compact).
_STRIPPED = (
    b'data: {"object":"chat.completion.chunk","choices":[{"delta":{"content":"Hel"}}]}\n\n'
    b'data: {"object":"chat.completion.chunk","choices":[{"delta":{"content":"lo"}}]}\n\n'
    b"data: [DONE]\n\n"
)


@given(cuts=st.lists(st.integers(min_value=0, max_value=len(_STREAM)), max_size=12))
def test_sse_usage_reads_usage_and_strips_what_include_usage_added_wherever_bytes_split(
    cuts: list[int],
) -> None:
    bounds = sorted({0, len(_STREAM), *cuts})
    pieces = [_STREAM[a:b] for a, b in itertools.pairwise(bounds)]
    for strip in (False, True):
        seen: list[object] = []
        reader = SseUsage(seen.append, strip_usage_chunk=strip)
        out = b"".join(reader.feed(piece) for piece in pieces) + reader.close()
        assert seen == [{"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}]
        assert out == (_STRIPPED if strip else _STREAM)


def test_forward_headers_drop_hop_by_hop_and_replace_credentials_only_when_told() -> None:
    given_headers = [
        ("Host", "proxy:8788"),
        ("Connection", "keep-alive, x-private"),
        ("X-Private", "1"),
        ("Authorization", "Bearer sk-client"),
        ("Content-Length", "12"),
        ("Accept-Encoding", "gzip"),
        ("OpenAI-Organization", "org-1"),
    ]
    kept = forward_headers(given_headers, api_key=None, anthropic=False, identity=False)
    assert kept == [
        ("Authorization", "Bearer sk-client"),
        ("Accept-Encoding", "gzip"),
        ("OpenAI-Organization", "org-1"),
    ]
    replaced = dict(forward_headers(given_headers, api_key="sk-p", anthropic=False, identity=True))
    assert replaced == {
        "OpenAI-Organization": "org-1",
        "authorization": "Bearer sk-p",
        "accept-encoding": "identity",
    }
    anthropic_side = dict(forward_headers([], api_key="sk-p", anthropic=True, identity=False))
    assert anthropic_side == {"x-api-key": "sk-p"}


# -- more of the upstream refusing ------------------------------------------------------


def test_a_refit_that_cannot_fit_is_a_context_truncated_refusal() -> None:
    # The proxy believes in an 8k window; the upstream serves 1k and says so.
    with (
        Emulator(flavor="vllm", context_window=1024, count_apis="none") as emu,
        proxy_for(emu, window=8192) as proxy,
        openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client,
    ):
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "word " * 2000}]
            )
        body = caught.value.body
        assert isinstance(body, dict)
        assert body["code"] == "context_truncated"
        assert body["context_window"] == 1024  # learnt from the upstream's refusal
        assert [r.status for r in emu.records] == [400]  # sent once, never resent
        assert proxy.metrics.value("refusals_total", "chat") == 1


class _AlwaysOverflow(http.server.BaseHTTPRequestHandler):
    """An upstream that refuses every model call with vLLM's overflow 400."""

    body = json.dumps(
        {
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you "
            "requested 4200 tokens (12 in the messages, 4188 in the completion). Please "
            "reduce the length of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    ).encode()
    calls: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.calls.append(self.path)
        self.send_response(400)
        self.send_header("content-type", "application/json")
        self.send_header("x-upstream", "fake")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def test_a_second_overflow_goes_back_unchanged() -> None:
    _AlwaysOverflow.calls.clear()  # a rerun in one process starts from none
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AlwaysOverflow)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        root = f"http://127.0.0.1:{server.server_address[1]}"
        with ProxyServer(ProxyConfig(upstream=root, port=0, window=8192, model=MODEL)) as proxy:
            answer = httpx2.post(
                proxy.base_url + "/chat/completions",
                json=chat([{"role": "user", "content": "hi"}], max_tokens=100),
                timeout=120,  # two upstream calls and a refit, on a loaded CI machine
            )
            assert answer.status_code == 400
            assert answer.content == _AlwaysOverflow.body
            assert answer.headers["x-upstream"] == "fake"
            sent = [path for path in _AlwaysOverflow.calls if path == "/v1/chat/completions"]
            assert len(sent) == 2  # one refit, no loop (other calls: startup discovery)
            assert proxy.metrics.value("refits_total", "chat") == 1
            assert proxy.metrics.value("upstream_errors_total", "context_overflow") == 2
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# -- OpenTelemetry ------------------------------------------------------------------------


def test_events_reach_opentelemetry() -> None:
    from opentelemetry.sdk import trace as sdk_trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans = InMemorySpanExporter()
    tracer_provider = sdk_trace.TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    sink = wg.OpenTelemetrySink(tracer_provider.get_tracer("test"), meter)
    with (
        Emulator(flavor="vllm", context_window=4096) as emu,
        proxy_for(emu, sinks=[sink], otel=True) as proxy,  # otel=True: the global no-op too
        openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client,
        tracer_provider.get_tracer("test").start_as_current_span("request") as span,
    ):
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert span is not None
    data = reader.get_metrics_data()
    names = {
        metric.name
        for rm in (data.resource_metrics if data else ())
        for sm in rm.scope_metrics
        for metric in sm.metrics
    }
    assert "windowguard.context.pressure" in names


@pytest.mark.parametrize(("ttl", "remembered"), [(60.0, True), (0.2, False)])
def test_a_conversation_idle_past_the_ttl_starts_over(ttl: float, remembered: bool) -> None:
    events: list[Any] = []
    messages: list[Any] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    with (
        Emulator(flavor="vllm", context_window=16_384) as emu,
        proxy_for(emu, sinks=[events.append], ttl_seconds=ttl) as proxy,
        openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client,
    ):
        reply = client.chat.completions.create(**chat(messages, max_tokens=64))
        messages += [
            {"role": "assistant", "content": reply.choices[0].message.content},
            {"role": "user", "content": "and then?"},
        ]
        time.sleep(0.5)
        del events[:]
        client.chat.completions.create(**chat(messages, max_tokens=64))
    measured = [e for e in events if e.kind == "usage_measured"]
    # A remembered conversation attributes the first reply's usage; a forgotten one
    # starts a new run, with nothing to attribute.
    assert bool(measured) is remembered
