"""Discovery against small local servers returning each server's real JSON shape.

Shapes come from: vLLM ``vllm/entrypoints/openai/protocol.py`` ModelCard
(``max_model_len``); llama.cpp ``tools/server/README.md`` (``/props``
``default_generation_settings.n_ctx``, ``/v1/models`` ``meta``); Ollama ``docs/api.md``
(``/api/ps`` ``context_length``, ``/api/show`` ``model_info``/``parameters``); TGI
``router/src/lib.rs`` Info; LM Studio REST v0 docs; OpenRouter ``/api/v1/models``;
Anthropic Models API (``max_input_tokens``, ``max_tokens``); Gemini ``models.get``.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import windowguard as wg
from windowguard.accounting.discovery import (
    UNLOADED_DEFAULT_WINDOW,
    adiscover_model_info,
    clear_discovery_cache,
    discover_endpoint,
    discover_model_info,
)
from windowguard.core.exceptions import ConfigurationError, ModelInfoError

Route = tuple[int, Any]  # (status, JSON-able body or raw bytes)


class _Server:
    def __init__(self, routes: dict[tuple[str, str], Route]) -> None:
        self.routes = routes
        self.hits: list[tuple[str, str, dict[str, str], bytes]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                server.hits.append((method, self.path, dict(self.headers), body))
                status, payload = server.routes.get((method, self.path), (404, {"error": "nf"}))
                raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

            def log_message(self, format: str, *args: object) -> None:
                del format, args

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    clear_discovery_cache()
    yield
    clear_discovery_cache()


@pytest.fixture
def serve() -> Iterator[Callable[[dict[tuple[str, str], Route]], _Server]]:
    servers: list[_Server] = []

    def start(routes: dict[tuple[str, str], Route]) -> _Server:
        server = _Server(routes)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


VLLM_MODELS = {
    "object": "list",
    "data": [
        {
            "id": "meta-llama/Llama-3.1-8B-Instruct",
            "object": "model",
            "created": 1730000000,
            "owned_by": "vllm",
            "root": "meta-llama/Llama-3.1-8B-Instruct",
            "parent": None,
            "max_model_len": 16384,
            "permission": [],
        }
    ],
}


@pytest.mark.parametrize("suffix", ["/v1", "", "/v1/", "/"])
def test_vllm_max_model_len_with_or_without_v1(serve: Any, suffix: str) -> None:
    server = serve({("GET", "/v1/models"): (200, VLLM_MODELS)})
    info = discover_model_info(server.url + suffix, "meta-llama/Llama-3.1-8B-Instruct")
    assert info is not None
    assert info.context_window == 16384
    assert info.source == "discovered"
    assert info.tokenizer == "llama3"
    assert info.source_of("tokenizer") == "catalog"
    assert info.origin is not None and "/v1/models" in info.origin


def test_vllm_served_model_name_uses_root_for_tokenizer(serve: Any) -> None:
    body = {
        "object": "list",
        "data": [
            {"id": "my-agent", "object": "model", "root": "Qwen/Qwen3-8B", "max_model_len": 32768}
        ],
    }
    server = serve({("GET", "/v1/models"): (200, body)})
    info = discover_model_info(server.url, "my-agent")
    assert info is not None and info.context_window == 32768 and info.tokenizer == "qwen"


def test_sglang_shape(serve: Any) -> None:
    body = {
        "object": "list",
        "data": [
            {
                "id": "Qwen/Qwen3-8B",
                "object": "model",
                "owned_by": "sglang",
                "root": "Qwen/Qwen3-8B",
                "max_model_len": 40960,
            }
        ],
    }
    server = serve({("GET", "/v1/models"): (200, body)})
    info = discover_model_info(server.url + "/v1", "Qwen/Qwen3-8B")
    assert info is not None and info.context_window == 40960


def test_model_not_listed_gives_none(serve: Any) -> None:
    server = serve({("GET", "/v1/models"): (200, VLLM_MODELS)})
    assert discover_model_info(server.url, "some-other-model") is None


def test_llamacpp_props_wins_over_models_meta(serve: Any) -> None:
    models = {
        "object": "list",
        "data": [
            {
                "id": "llama.gguf",
                "object": "model",
                "owned_by": "llamacpp",
                "meta": {"vocab_type": 2, "n_vocab": 128256, "n_ctx_train": 131072, "n_ctx": 8192},
            }
        ],
    }
    props = {
        "default_generation_settings": {"n_ctx": 4096, "params": {"n_predict": -1}},
        "total_slots": 2,
        "model_path": "/models/llama.gguf",
    }
    server = serve({("GET", "/v1/models"): (200, models), ("GET", "/props"): (200, props)})
    info = discover_model_info(server.url, "llama.gguf")
    assert info is not None and info.context_window == 4096


def test_llamacpp_models_meta_alone(serve: Any) -> None:
    models = {
        "object": "list",
        "data": [{"id": "m", "meta": {"n_ctx_train": 131072, "n_ctx": 8192}}],
    }
    server = serve({("GET", "/v1/models"): (200, models)})
    info = discover_model_info(server.url, "m")
    assert info is not None and info.context_window == 8192


def test_llamacpp_n_ctx_train_alone_is_not_a_served_window(serve: Any) -> None:
    models = {"object": "list", "data": [{"id": "m", "meta": {"n_ctx_train": 131072}}]}
    server = serve({("GET", "/v1/models"): (200, models)})
    assert discover_model_info(server.url, "m") is None


OLLAMA_V1 = {
    "object": "list",
    "data": [{"id": "llama3.1:8b", "object": "model", "owned_by": "library"}],
}
OLLAMA_SHOW = {
    "modelfile": "FROM ...",
    "parameters": 'num_ctx                        8192\nstop                "<|eot_id|>"',
    "template": "...",
    "details": {"family": "llama", "parameter_size": "8.0B"},
    "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
}


def test_ollama_prefers_allocated_context_from_ps(serve: Any) -> None:
    ps = {
        "models": [
            {
                "name": "llama3.1:8b",
                "model": "llama3.1:8b",
                "size": 8372905984,
                "expires_at": "2025-07-31T00:50:57.706998+02:00",
                "size_vram": 8372905984,
                "context_length": 16384,
            }
        ]
    }
    server = serve(
        {
            ("GET", "/v1/models"): (200, OLLAMA_V1),
            ("GET", "/api/ps"): (200, ps),
            ("POST", "/api/show"): (200, OLLAMA_SHOW),
        }
    )
    info = discover_model_info(server.url + "/v1", "llama3.1:8b")
    assert info is not None and info.context_window == 16384
    assert info.tokenizer == "llama3"


def test_ollama_show_num_ctx_when_not_loaded(serve: Any) -> None:
    server = serve(
        {
            ("GET", "/api/ps"): (200, {"models": []}),
            ("POST", "/api/show"): (200, OLLAMA_SHOW),
        }
    )
    info = discover_model_info(server.url, "llama3.1:8b")
    assert info is not None and info.context_window == 8192
    method, _, _, body = next(h for h in server.hits if h[1] == "/api/show")
    assert method == "POST" and json.loads(body)["model"] == "llama3.1:8b"


def test_ollama_show_without_num_ctx_is_capped_at_the_default(serve: Any) -> None:
    shown = dict(OLLAMA_SHOW, parameters='stop "<|eot_id|>"')
    server = serve({("GET", "/api/ps"): (200, {"models": []}), ("POST", "/api/show"): (200, shown)})
    info = discover_model_info(server.url, "llama3.1:8b")
    assert info is not None and info.context_window == UNLOADED_DEFAULT_WINDOW


def test_ollama_ps_matches_latest_tag(serve: Any) -> None:
    ps = {"models": [{"name": "qwen3:latest", "model": "qwen3:latest", "context_length": 40960}]}
    server = serve({("GET", "/api/ps"): (200, ps)})
    info = discover_model_info(server.url, "qwen3")
    assert info is not None and info.context_window == 40960


def test_tgi_info(serve: Any) -> None:
    info_body = {
        "model_id": "mistralai/Mistral-7B-Instruct-v0.3",
        "model_dtype": "torch.float16",
        "max_concurrent_requests": 128,
        "max_best_of": 2,
        "max_input_tokens": 8191,
        "max_total_tokens": 8192,
        "version": "2.4.0",
    }
    server = serve({("GET", "/info"): (200, info_body)})
    info = discover_model_info(server.url, "tgi")
    assert info is not None
    assert (info.context_window, info.max_input_tokens) == (8192, 8191)


def test_tgi_old_field_name(serve: Any) -> None:
    server = serve({("GET", "/info"): (200, {"max_input_length": 1024, "max_total_tokens": 2048})})
    info = discover_model_info(server.url, "tgi")
    assert info is not None and info.max_input_tokens == 1024


def test_lmstudio_loaded_and_not_loaded(serve: Any) -> None:
    loaded = {
        "id": "qwen2.5-7b-instruct",
        "state": "loaded",
        "max_context_length": 32768,
        "loaded_context_length": 8192,
    }
    cold = {"id": "meta-llama-3.1-8b-instruct", "state": "not-loaded", "max_context_length": 131072}
    server = serve(
        {
            ("GET", "/api/v0/models/qwen2.5-7b-instruct"): (200, loaded),
            ("GET", "/api/v0/models/meta-llama-3.1-8b-instruct"): (200, cold),
        }
    )
    first = discover_model_info(server.url, "qwen2.5-7b-instruct")
    second = discover_model_info(server.url, "meta-llama-3.1-8b-instruct")
    assert first is not None and first.context_window == 8192
    assert second is not None and second.context_window == UNLOADED_DEFAULT_WINDOW


def test_openrouter_models_list(serve: Any) -> None:
    body = {
        "data": [
            {
                "id": "openai/gpt-4o",
                "name": "OpenAI: GPT-4o",
                "context_length": 128000,
                "top_provider": {
                    "context_length": 128000,
                    "max_completion_tokens": 16384,
                    "is_moderated": True,
                },
            }
        ]
    }
    server = serve({("GET", "/api/v1/models"): (200, body)})
    info = discover_model_info(server.url + "/api/v1", "openai/gpt-4o")
    assert info is not None
    assert (info.context_window, info.max_output_tokens, info.tokenizer) == (128000, 16384, "o200k")


def test_anthropic_model_get_with_headers(serve: Any) -> None:
    body = {
        "type": "model",
        "id": "claude-sonnet-4-5-20250929",
        "display_name": "Claude Sonnet 4.5",
        "created_at": "2025-09-29T00:00:00Z",
        "max_input_tokens": 200000,
        "max_tokens": 64000,
    }
    server = serve({("GET", "/v1/models/claude-sonnet-4-5-20250929"): (200, body)})
    info = discover_model_info(server.url, "claude-sonnet-4-5-20250929", api_key="sk-test")
    assert info is not None
    assert (info.context_window, info.max_output_tokens, info.tokenizer) == (
        200000,
        64000,
        "claude",
    )
    _, _, headers, _ = next(h for h in server.hits if h[1].startswith("/v1/models/claude"))
    lowered = {k.lower(): v for k, v in headers.items()}
    assert lowered["x-api-key"] == "sk-test"
    assert lowered["anthropic-version"] == "2023-06-01"


def test_gemini_models_get(serve: Any) -> None:
    body = {
        "name": "models/gemini-2.0-flash",
        "version": "2.0",
        "displayName": "Gemini 2.0 Flash",
        "inputTokenLimit": 1048576,
        "outputTokenLimit": 8192,
        "supportedGenerationMethods": ["generateContent", "countTokens"],
    }
    server = serve({("GET", "/v1beta/models/gemini-2.0-flash"): (200, body)})
    info = discover_model_info(server.url + "/v1beta", "gemini-2.0-flash")
    assert info is not None
    assert (info.context_window, info.max_output_tokens) == (1048576, 8192)


@pytest.mark.parametrize(
    "route",
    [
        (200, b"<html>not json</html>"),
        (200, b"\xff\xfe garbage"),
        (200, {"object": "list", "data": "nope"}),
        (200, [1, 2, 3]),
        (500, {"error": "boom"}),
        (200, {"object": "list", "data": [{"id": "m", "max_model_len": "many"}]}),
        (200, {"object": "list", "data": [{"id": "m", "max_model_len": -5}]}),
    ],
)
def test_garbage_and_errors_give_none(serve: Any, route: Route) -> None:
    server = serve(
        {("GET", "/v1/models"): route, ("GET", "/props"): route, ("GET", "/info"): route}
    )
    assert discover_model_info(server.url, "m", timeout=2.0) is None


def test_unreachable_gives_none() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert discover_model_info(f"http://127.0.0.1:{port}/v1", "m", timeout=2.0) is None


def _closed_port() -> int:
    """A local port nothing listens on: connecting to it is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_server_is_named_unreachable_with_the_url_and_the_os_error() -> None:
    port = _closed_port()
    found = discover_endpoint(f"http://127.0.0.1:{port}/v1", "m", timeout=2.0)
    assert found.info is None and found.unreachable
    assert f"http://127.0.0.1:{port} is unreachable" in found.problem
    assert f"GET http://127.0.0.1:{port}/v1/models" in found.problem
    assert "refused" in found.problem.lower()  # the operating system's own words


def test_a_server_that_answers_without_a_window_is_not_called_unreachable(serve: Any) -> None:
    server = serve({("GET", "/v1/models"): (200, {"object": "list", "data": [{"id": "m"}]})})
    found = discover_endpoint(server.url, "m", timeout=2.0)
    assert found.info is None and not found.unreachable
    assert (
        found.problem == f"{server.url} answered, but no endpoint it serves stated a window for 'm'"
    )
    served = serve({("GET", "/v1/models"): (200, VLLM_MODELS)})
    found = discover_endpoint(served.url, "meta-llama/Llama-3.1-8B-Instruct", timeout=2.0)
    assert found.info is not None and found.info.context_window == 16384
    assert not found.unreachable and found.problem == ""


def test_from_endpoint_never_guesses_a_window_silently(caplog: Any) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    with pytest.raises(ModelInfoError) as info:
        wg.ContextWindowManager.from_endpoint(url, "mystery-model-xyz", timeout=2.0)
    message = str(info.value)
    assert url in message and "is unreachable" in message and "refused" in message.lower()
    assert "fallback_window=" in message and "8192" not in message
    # asked for by name, the fallback is used, and said: in the log and in the events
    caplog.set_level("WARNING", logger="windowguard")
    mgr = wg.ContextWindowManager.from_endpoint(
        url, "mystery-model-xyz", timeout=2.0, fallback_window=12_000
    )
    assert mgr.context_window == 12_000
    assert mgr.model_info.source_of("context_window") == "fallback"
    assert "fallback_window=12000" in caplog.text and "is unreachable" in caplog.text
    fit = mgr.fit([{"role": "user", "content": "hi"}])
    (estimate,) = [e for e in fit.events if e.kind == "context_estimate"]
    assert estimate.to_dict()["source"] == "fallback"


def test_from_endpoint_uses_the_catalog_for_a_known_model_and_says_the_server_was_down(
    caplog: Any,
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    caplog.set_level("WARNING", logger="windowguard")
    mgr = wg.ContextWindowManager.from_endpoint(url, "gpt-4o", timeout=2.0)
    assert mgr.context_window == wg.lookup_model("gpt-4o").context_window  # type: ignore[union-attr]
    assert mgr.remote is None  # no count endpoint is looked for at a dead server
    assert "is unreachable" in caplog.text and "from the catalog" in caplog.text


def test_from_endpoint_at_a_server_without_windows_needs_a_fallback_for_an_unknown_model(
    serve: Any,
) -> None:
    server = serve({("GET", "/v1/models"): (200, {"object": "list", "data": []})})
    with pytest.raises(ModelInfoError, match="answered, but no endpoint it serves stated"):
        wg.ContextWindowManager.from_endpoint(server.url, "mystery-model-xyz", timeout=2.0)
    mgr = wg.ContextWindowManager.from_endpoint(
        server.url, "mystery-model-xyz", timeout=2.0, model_info=wg.ModelInfo(context_window=9000)
    )
    assert mgr.context_window == 9000


def test_silent_server_returns_none_within_the_total_timeout() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)  # accepts the TCP handshake, never answers
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        started = time.monotonic()
        assert discover_model_info(url, "m", timeout=0.5) is None
        elapsed = time.monotonic() - started
    assert elapsed < 2.0, f"discovery took {elapsed:.2f}s for a 0.5s budget"


def test_results_and_none_are_cached_until_cleared(serve: Any) -> None:
    server = serve({("GET", "/v1/models"): (200, VLLM_MODELS)})
    model = "meta-llama/Llama-3.1-8B-Instruct"
    first = discover_model_info(server.url + "/v1", model)
    hits = len(server.hits)
    server.routes[("GET", "/v1/models")] = (500, {})
    assert discover_model_info(server.url, model) == first  # same key without /v1
    assert len(server.hits) == hits
    assert discover_model_info(server.url, "other") is None
    hits = len(server.hits)
    assert discover_model_info(server.url, "other") is None
    assert len(server.hits) == hits  # None is cached too
    clear_discovery_cache()
    assert discover_model_info(server.url, model) is None  # asked again, now failing
    assert len(server.hits) > hits


def test_async_twin_matches_sync(serve: Any) -> None:
    server = serve({("GET", "/v1/models"): (200, VLLM_MODELS)})
    model = "meta-llama/Llama-3.1-8B-Instruct"
    got = asyncio.run(adiscover_model_info(server.url + "/v1", model))
    assert got is not None and got.context_window == 16384
    clear_discovery_cache()
    assert discover_model_info(server.url, model) == got


def test_async_twin_does_not_block_the_loop() -> None:
    async def main(url: str) -> tuple[object, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        result = await adiscover_model_info(url, "m", timeout=0.5)
        task.cancel()
        return result, ticks

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        result, ticks = asyncio.run(main(f"http://127.0.0.1:{listener.getsockname()[1]}"))
    assert result is None
    assert ticks >= 5  # the loop kept running while discovery waited


@pytest.mark.parametrize(
    ("base_url", "model", "timeout"),
    [
        ("localhost:8000", "m", 1.0),
        ("http://x", "", 1.0),
        ("http://x", "m", 0),
        ("http://x", "m", -1.0),
    ],
)
def test_bad_arguments_are_configuration_errors(base_url: str, model: str, timeout: float) -> None:
    with pytest.raises(ConfigurationError):
        discover_model_info(base_url, model, timeout=timeout)


def test_the_cache_is_bounded_least_recently_used_first(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import windowguard.accounting.discovery as discovery

    monkeypatch.setattr(discovery, "CACHE_ENTRIES", 3)
    server = serve({("GET", "/v1/models"): (200, VLLM_MODELS)})
    model = "meta-llama/Llama-3.1-8B-Instruct"
    assert discover_model_info(server.url, model) is not None
    for n in range(6):  # a client cycling model names
        discover_model_info(server.url, f"cycled-{n}")
        assert discover_model_info(server.url, model) is not None  # kept: used again
    hits = len(server.hits)
    assert discover_model_info(server.url, model) is not None
    assert len(server.hits) == hits  # still cached
    assert len(discovery._cache) <= 3
    discover_model_info(server.url, "cycled-0")  # evicted long ago: asked again
    assert len(server.hits) > hits
