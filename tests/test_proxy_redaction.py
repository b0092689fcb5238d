"""The proxy's own key never goes back to a client (issue 20, item 7), and what the
proxy decodes it passes on without a ``content-encoding`` it no longer has (item 8).

The upstream is a plain ``http.server`` that echoes the credentials it received: in an
error body, in a header, split across the chunks of a stream, and gzip-encoded on a
passed-through path. Clients are the real ``openai`` SDK and plain ``httpx2``.
"""

from __future__ import annotations

import gzip
import json
import random
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from windowguard.proxy import ProxyConfig, ProxyServer
from windowguard.proxy._http import ANSWER_LIMIT
from windowguard.proxy._wire import REDACTED, Redactor

from .upstreams import QuietHandler, serve

MODEL = "echo-model"
SECRET = "sk-proxy-S3CRET/7f2a-99"


class _Echo(QuietHandler):
    """Echoes the key it was sent, wherever a careless upstream might."""

    def _key(self) -> str:
        auth = self.headers.get("authorization") or ""
        return auth.removeprefix("Bearer ") or self.headers.get("x-api-key") or ""

    def do_GET(self) -> None:
        key = self._key()
        if self.path.endswith("/v1/models"):
            data = {"object": "list", "data": [{"id": MODEL, "max_model_len": 8192}]}
            self.answer(200, json.dumps(data).encode(), {"content-type": "application/json"})
            return
        body = gzip.compress(json.dumps({"you_sent": key}).encode())
        self.answer(
            200,
            body,
            {"content-type": "application/json", "content-encoding": "gzip", "x-echo": key},
        )

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        key = self._key()
        if request.get("stream"):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            chunk = {
                "id": "c1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": MODEL,
                "choices": [{"index": 0, "delta": {"content": f"key={key}"}}],
            }
            data = f"data: {json.dumps(chunk)}\n\n".encode()
            cut = data.index(key.encode()) + 7  # the key split across two writes
            for part in (data[:cut], data[cut:], b"data: [DONE]\n\n"):
                self.wfile.write(part)
                self.wfile.flush()
                time.sleep(0.02)
            return
        if request.get("model") == "gzip-ok":
            answer = {
                "id": "c2",
                "object": "chat.completion",
                "created": 0,
                "model": MODEL,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "fine"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
            }
            headers = {"content-type": "application/json", "content-encoding": "gzip"}
            self.answer(200, gzip.compress(json.dumps(answer).encode()), headers)
            return
        error = {"error": {"message": f"Incorrect API key provided: {key}.", "code": "invalid"}}
        headers = {"content-type": "application/json", "x-echo": f"got {key}"}
        self.answer(401, json.dumps(error).encode(), headers)


@pytest.fixture
def echo() -> Iterator[str]:
    with serve(_Echo) as root:
        yield root


def test_the_proxys_key_never_comes_back_to_a_client(echo: str) -> None:
    config = ProxyConfig(upstream=echo, port=0, window=8192, model=MODEL, api_key=SECRET)
    escaped = json.dumps(SECRET)[1:-1].replace("/", "\\/")
    with (
        ProxyServer(config) as proxy,
        openai.OpenAI(base_url=proxy.base_url, api_key="sk-client", max_retries=0) as client,
    ):
        messages: list[Any] = [{"role": "user", "content": "hi"}]
        # An error body and header that echo the key.
        with pytest.raises(openai.AuthenticationError) as caught:
            client.chat.completions.create(model=MODEL, messages=messages)
        answer = caught.value.response
        assert SECRET not in answer.text and escaped not in answer.text
        assert REDACTED.decode() in answer.text
        assert SECRET not in answer.headers["x-echo"]
        # A stream whose chunks split the key.
        stream = client.chat.completions.create(model=MODEL, messages=messages, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        assert text == f"key={REDACTED.decode()}"
        # A passed-through, gzip-encoded answer: decoded, the key taken out.
        through = httpx2.get(proxy.base_url + "/echo", headers={"authorization": "Bearer x"})
        assert through.status_code == 200
        assert "content-encoding" not in through.headers
        assert through.json() == {"you_sent": REDACTED.decode()}
        assert SECRET not in through.headers["x-echo"]


def test_without_its_own_key_the_clients_answers_are_untouched(echo: str) -> None:
    config = ProxyConfig(upstream=echo, port=0, window=8192, model=MODEL)
    with ProxyServer(config) as proxy:
        through = httpx2.get(proxy.base_url + "/echo", headers={"authorization": "Bearer mine"})
        assert through.json() == {"you_sent": "mine"}  # the client's own key: its business
        assert through.headers["content-encoding"] == "gzip"  # passed on as it came


def test_a_fitted_answer_the_proxy_decoded_loses_its_content_encoding(echo: str) -> None:
    config = ProxyConfig(upstream=echo, port=0, window=8192, model=MODEL)
    with (
        ProxyServer(config) as proxy,
        openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client,
    ):
        # The upstream gzips although the proxy asked for identity: the SDK reads it.
        answer = client.chat.completions.with_raw_response.create(
            model="gzip-ok", messages=[{"role": "user", "content": "hi"}]
        )
        assert "content-encoding" not in answer.headers
        assert answer.parse().choices[0].message.content == "fine"


@given(
    st.text(alphabet='ab/"\\-k', min_size=1, max_size=12),
    st.lists(st.sampled_from(["x", "a", "k/", "\\/", '"', " "]), max_size=12),
    st.randoms(),
)
def test_a_redactor_takes_every_key_out_however_the_stream_splits_it(
    secret: str, filler: list[str], rnd: random.Random
) -> None:
    escaped = json.dumps(secret)[1:-1]
    pieces = [*filler, secret, *filler, escaped, escaped.replace("/", "\\/"), *filler]
    data = "".join(pieces).encode()
    whole = Redactor([secret]).whole(data)
    redactor = Redactor([secret])
    cuts = sorted(rnd.sample(range(1, len(data)), min(len(data) - 1, rnd.randint(0, 8))))
    parts = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    streamed = b"".join(redactor.feed(p) for p in parts) + redactor.close()
    forms = {secret, escaped, escaped.replace("/", "\\/")}
    for out in (whole, streamed):
        for form in forms:
            assert form.encode() not in out.replace(REDACTED, b"\x00")
    if not any(a != b and a in b for a in forms for b in forms):
        assert streamed == whole  # (a form inside another may be cut either way)


class _Bomb(QuietHandler):
    """Answers every call with 96 MiB of zeros, gzip-encoded (about 100 KB on the wire)."""

    def do_GET(self) -> None:
        data = {"object": "list", "data": [{"id": MODEL, "max_model_len": 8192}]}
        self.answer(200, json.dumps(data).encode(), {"content-type": "application/json"})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        bomb = gzip.compress(b"0" * (96 * 1024 * 1024), compresslevel=9)
        headers = {"content-type": "application/json", "content-encoding": "gzip"}
        status = 500 if "fail" in self.path else 200
        self.answer(status, bomb, headers)


def test_an_answer_that_decodes_past_the_bound_is_a_502_not_held_whole() -> None:
    with serve(_Bomb) as root:
        config = ProxyConfig(upstream=root, port=0, window=8192, model=MODEL)
        with (
            ProxyServer(config) as proxy,
            openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client,
        ):
            with pytest.raises(openai.InternalServerError) as caught:
                client.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": "hi"}]
                )
            answer = caught.value.response
            assert answer.status_code == 502
            error = answer.json()["error"]
            assert error["code"] == "upstream_answer_too_large"
            assert f"more than {ANSWER_LIMIT} bytes" in error["message"]
