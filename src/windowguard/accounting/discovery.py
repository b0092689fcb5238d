"""Discovery: ask the serving endpoint what window it actually serves.

A catalog says what a model *can* take; a server says what it was *started with*
(``vllm serve --max-model-len 8192``, ``llama-server -c 4096``, Ollama's ``num_ctx``).
:func:`discover_model_info` asks, in one bounded pass, the endpoints that report it:

====================  =====================================  ==============================
server                endpoint                               fields
====================  =====================================  ==============================
vLLM, SGLang          ``GET /v1/models``                     ``max_model_len``
OpenRouter            ``GET /api/v1/models``                 ``context_length``,
                                                             ``top_provider.*``
Anthropic             ``GET /v1/models/{id}`` (and list)     ``max_input_tokens``,
                                                             ``max_tokens``
Mistral, LM Studio    ``GET /v1/models``, ``/api/v0/models``  ``max_context_length``,
                                                             ``loaded_context_length``
Groq                  ``GET /v1/models``                     ``context_window``,
                                                             ``max_completion_tokens``
llama.cpp             ``GET /props``, ``GET /v1/models``     ``default_generation_settings
                                                             .n_ctx``, ``meta.n_ctx``
Ollama                ``GET /api/ps``, ``POST /api/show``    ``context_length`` (allocated),
                                                             ``<arch>.context_length``,
                                                             ``num_ctx``
TGI                   ``GET /info``                          ``max_total_tokens``,
                                                             ``max_input_tokens``
Gemini                ``GET /v1beta/models/{id}``            ``inputTokenLimit``,
                                                             ``outputTokenLimit``
====================  =====================================  ==============================

Invariants:

- It never raises for what a server does: unreachable, refused, 404, garbage, a
  non-JSON body or a model it does not list all give None. :func:`discover_endpoint`
  says which it was (:class:`Discovery`): a server no request reached is *unreachable*,
  named with the URL and the operating system's error, never just "nothing found".
- ``timeout`` bounds the *whole* discovery, not each request: requests share one
  deadline and the work runs on a daemon thread the caller stops waiting for, so even a
  server that accepts and never answers (or a hung DNS lookup) cannot hang a run.
- Results, None included, are cached per (endpoint, model) until
  :func:`clear_discovery_cache`. ``base_url`` may end in ``/v1`` or not; both share an
  entry. The cache is bounded (:data:`CACHE_ENTRIES`, least recently used evicted
  first): model names can come from clients, and a forgotten entry only costs one more
  discovery.
- A model that is not loaded yet (Ollama without ``num_ctx``, LM Studio) will be
  loaded with the server's default context, not the model's maximum; discovery then
  reports at most :data:`UNLOADED_DEFAULT_WINDOW`, because those servers truncate
  silently instead of answering 400.
- Sync uses only the standard library; the async twin runs the same work on a thread
  and awaits it, so it never blocks the event loop.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, urlsplit

from ..core.exceptions import ConfigurationError
from .catalog import ModelInfo, lookup_model

__all__ = [
    "UNLOADED_DEFAULT_WINDOW",
    "Discovery",
    "adiscover_model_info",
    "clear_discovery_cache",
    "discover_endpoint",
    "discover_model_info",
]

UNLOADED_DEFAULT_WINDOW: Final = 4096
"""Ollama's and LM Studio's usual default context for a model loaded on demand."""

_MAX_BODY: Final = 16 * 1024 * 1024
_ANTHROPIC_VERSION: Final = "2023-06-01"  # https://docs.claude.com/en/api/versioning

CACHE_ENTRIES: Final = 256
"""Discoveries remembered, least recently used forgotten first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Discovery:
    """What one discovery found, or why it found nothing.

    Attributes:
        info: the served limits (``source="discovered"``), or None.
        unreachable: no request reached the server (refused, no such host, no route,
            no answer in time): ``problem`` names the URL and the error.
        problem: why ``info`` is None, in words (``""`` when it is not): unreachable
            (``http://h:9 is unreachable (GET http://h:9/v1/models: [Errno 111]
            Connection refused)``), no answer within the timeout, or a server that
            answered without stating a window.
    """

    info: ModelInfo | None
    unreachable: bool = False
    problem: str = ""


_cache: OrderedDict[tuple[str, str], Discovery] = OrderedDict()
_cache_lock = threading.Lock()


def _cached(key: tuple[str, str]) -> Discovery | None:
    with _cache_lock:
        if key not in _cache:
            return None
        _cache.move_to_end(key)
        return _cache[key]


def _remember(key: tuple[str, str], result: Discovery) -> None:
    with _cache_lock:
        _cache[key] = result
        _cache.move_to_end(key)
        while len(_cache) > CACHE_ENTRIES:
            _cache.popitem(last=False)


class _DeadlineError(Exception):
    """The shared deadline passed; stop probing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Found:
    context_window: int
    max_output_tokens: int | None = None
    max_input_tokens: int | None = None
    served_as: str | None = None  # a name the server gave the model (vLLM ``root``)
    origin: str


# --------------------------------------------------------------------------- public


def discover_model_info(
    base_url: str, model: str, *, api_key: str | None = None, timeout: float = 5.0
) -> ModelInfo | None:
    """Ask the server at ``base_url`` what window it serves ``model`` with.

    :func:`discover_endpoint` does the same and also says why nothing was found.

    Args:
        base_url: the endpoint, with or without a trailing ``/v1``
            (``http://localhost:8000/v1``, ``https://api.anthropic.com``).
        model: the model name as the server knows it.
        api_key: sent as ``Authorization: Bearer``, ``x-api-key`` (Anthropic) and
            ``x-goog-api-key`` (Gemini) when given.
        timeout: seconds for the whole discovery, all requests together.

    Returns:
        A ModelInfo with ``source="discovered"`` and ``origin`` naming the endpoint that
        answered, or None when nothing usable came back in time.

    Raises:
        ConfigurationError: ``base_url`` is not an http(s) URL, ``model`` is empty, or
            ``timeout`` is not a positive number.
    """
    return discover_endpoint(base_url, model, api_key=api_key, timeout=timeout).info


def discover_endpoint(
    base_url: str, model: str, *, api_key: str | None = None, timeout: float = 5.0
) -> Discovery:
    """:func:`discover_model_info`, saying why nothing was found when nothing was.

    Args:
        base_url: the endpoint, with or without a trailing ``/v1``.
        model: the model name as the server knows it.
        api_key: as for :func:`discover_model_info`.
        timeout: seconds for the whole discovery, all requests together.

    Returns:
        The :class:`Discovery` (cached with :func:`discover_model_info`'s results).

    Raises:
        ConfigurationError: as for :func:`discover_model_info`.
    """
    root, key = _prepare(base_url, model, timeout)
    cached = _cached(key)
    if cached is not None:
        return cached
    deadline = time.monotonic() + timeout
    done = threading.Event()
    box: list[Discovery] = [_timed_out(root, timeout)]

    def work() -> None:
        box[0] = _discover_safely(root, model, api_key, deadline, timeout)
        done.set()

    threading.Thread(target=work, name="windowguard-discovery", daemon=True).start()
    result = box[0] if done.wait(timeout) else _timed_out(root, timeout)
    _remember(key, result)
    return result


async def adiscover_model_info(
    base_url: str, model: str, *, api_key: str | None = None, timeout: float = 5.0
) -> ModelInfo | None:
    """Async twin of :func:`discover_model_info`; never blocks the event loop.

    Args:
        base_url: the endpoint, with or without a trailing ``/v1``.
        model: the model name as the server knows it.
        api_key: as for :func:`discover_model_info`.
        timeout: seconds for the whole discovery.

    Returns:
        The same as :func:`discover_model_info` (and shares its cache).

    Raises:
        ConfigurationError: as for :func:`discover_model_info`.
    """
    root, key = _prepare(base_url, model, timeout)
    cached = _cached(key)
    if cached is not None:
        return cached.info
    import asyncio  # on first use: only async callers pay for it

    loop = asyncio.get_running_loop()
    future: asyncio.Future[Discovery] = loop.create_future()
    deadline = time.monotonic() + timeout

    def deliver(value: Discovery) -> None:
        if not future.done():
            future.set_result(value)

    def work() -> None:
        value = _discover_safely(root, model, api_key, deadline, timeout)
        with contextlib.suppress(RuntimeError):  # the loop closed while we worked
            loop.call_soon_threadsafe(deliver, value)

    threading.Thread(target=work, name="windowguard-adiscovery", daemon=True).start()
    try:
        result = await asyncio.wait_for(future, timeout)
    except asyncio.TimeoutError:
        result = _timed_out(root, timeout)
    _remember(key, result)
    return result.info


def clear_discovery_cache() -> None:
    """Forget every cached discovery result, so the next call asks the server again."""
    with _cache_lock:
        _cache.clear()


# --------------------------------------------------------------------------- plumbing


def _prepare(base_url: str, model: str, timeout: float) -> tuple[str, tuple[str, str]]:
    if not isinstance(base_url, str) or urlsplit(base_url.strip()).scheme not in ("http", "https"):
        raise ConfigurationError(f"base_url must be an http(s) URL, got {base_url!r}")
    if not isinstance(model, str) or not model.strip():
        raise ConfigurationError(f"model must be a non-empty str, got {model!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ConfigurationError(f"timeout must be a positive number of seconds, got {timeout!r}")
    root = base_url.strip().rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return root, (root, model)


def _timed_out(root: str, timeout: float) -> Discovery:
    return Discovery(
        info=None, unreachable=True, problem=f"{root} gave no answer within {timeout:g} s"
    )


def _discover_safely(
    root: str, model: str, api_key: str | None, deadline: float, timeout: float
) -> Discovery:
    client = _Client(api_key, deadline)
    try:
        found = _discover(client, root, model)
    except _DeadlineError:
        if client.answered:
            return Discovery(info=None, problem=f"{root} stated no window within {timeout:g} s")
        return _timed_out(root, timeout)
    except Exception as exc:  # a discovery must never break the caller's run
        return Discovery(info=None, problem=f"discovery at {root} failed: {exc!r}")
    if found is not None:
        return Discovery(info=_to_info(found, model))
    if not client.answered and client.failure:
        return Discovery(
            info=None, unreachable=True, problem=f"{root} is unreachable ({client.failure})"
        )
    return Discovery(
        info=None,
        problem=f"{root} answered, but no endpoint it serves stated a window for {model!r}",
    )


def _to_info(found: _Found, model: str) -> ModelInfo:
    window = found.context_window
    known = lookup_model(model) or (lookup_model(found.served_as) if found.served_as else None)
    cap = found.max_output_tokens
    max_in = found.max_input_tokens
    return ModelInfo(
        context_window=window,
        max_output_tokens=min(cap, window) if cap is not None else None,
        max_input_tokens=min(max_in, window) if max_in is not None and max_in < window else None,
        tokenizer=known.tokenizer if known is not None else None,
        source="discovered",
        field_sources=(
            ("context_window", "discovered"),
            ("max_output_tokens", "discovered"),
            ("max_input_tokens", "discovered"),
            ("tokenizer", known.source if known is not None else "discovered"),
        ),
        origin=found.origin,
    )


class _Client:
    """Minimal JSON-over-HTTP client whose every socket wait ends at one deadline."""

    def __init__(self, api_key: str | None, deadline: float) -> None:
        self.deadline = deadline
        self.answered = False  # some request got an HTTP answer (any status)
        self.failure = ""  # the first request that got none, and why
        self.headers = {"Accept": "application/json", "User-Agent": "windowguard-discovery"}
        if api_key:
            self.headers |= {
                "Authorization": f"Bearer {api_key}",
                "x-api-key": api_key,
                "anthropic-version": _ANTHROPIC_VERSION,
                "x-goog-api-key": api_key,
            }

    def _remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise _DeadlineError
        return left

    def call(self, method: str, url: str, body: Mapping[str, Any] | None = None) -> Any:
        """Return the decoded JSON of a 2xx answer, else None."""
        import http.client  # on first use: ``import windowguard`` loads no HTTP client

        parts = urlsplit(url)
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = dict(self.headers)
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn = cls(parts.hostname or "", parts.port, timeout=self._remaining())
        answered = False
        try:
            conn.request(method, path, body=payload, headers=headers)
            sock = conn.sock
            if sock is not None:
                sock.settimeout(self._remaining())
            response = conn.getresponse()
            answered = self.answered = True
            if not 200 <= response.status < 300:
                return None
            chunks: list[bytes] = []
            size = 0
            while not response.isclosed():
                if sock is not None:
                    with contextlib.suppress(OSError):  # closed once the body is read
                        sock.settimeout(self._remaining())
                chunk = response.read(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > _MAX_BODY:
                    return None
                chunks.append(chunk)
            return json.loads(b"".join(chunks).decode("utf-8"))
        except _DeadlineError:
            raise
        except (OSError, http.client.HTTPException, ValueError) as exc:
            # Refused, reset, timed out, not HTTP, not UTF-8, not JSON: no answer here.
            if not answered and not self.failure:
                self.failure = f"{method} {url}: {exc or type(exc).__name__}"
            if self.deadline - time.monotonic() <= 0:
                raise _DeadlineError from None
            return None
        finally:
            conn.close()


# --------------------------------------------------------------------------- probes


def _discover(client: _Client, root: str, model: str) -> _Found | None:
    host = (urlsplit(root).hostname or "").lower()
    if "generativelanguage.googleapis.com" in host or re.search(r"/v1(alpha|beta)\d*$", root):
        return _gemini(client, root, model)
    if host == "openrouter.ai" and not root.endswith("/api"):
        root += "/api"
    probes: tuple[Callable[[_Client, str, str], _Found | None], ...] = (
        _openai_models,
        _model_get,
        _llamacpp_props,
        _ollama,
        _lmstudio,
        _tgi_info,
    )
    tentative: _Found | None = None
    for probe in probes:
        found = probe(client, root, model)
        if found is None:
            continue
        if found.origin.startswith("llama.cpp /v1/models"):
            tentative = tentative or found  # /props knows the per-slot context better
            continue
        return found
    return tentative


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value > 0 else None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _limits(entry: Mapping[str, Any], origin: str) -> _Found | None:
    """Read the limit fields any of the servers puts on a model object."""
    served = entry.get("root") if isinstance(entry.get("root"), str) else None
    window = _int(entry.get("max_model_len"))  # vLLM, SGLang
    if window:
        return _Found(context_window=window, served_as=served, origin=f"vllm {origin}")
    top = _mapping(entry.get("top_provider"))
    window = _int(top.get("context_length")) or _int(entry.get("context_length"))
    if window:  # OpenRouter, Together
        cap = _int(top.get("max_completion_tokens"))
        return _Found(context_window=window, max_output_tokens=cap, origin=f"openrouter {origin}")
    window = _int(entry.get("max_input_tokens"))
    if window:  # Anthropic: max_input_tokens is the context window, max_tokens the reply cap
        cap = _int(entry.get("max_tokens"))
        return _Found(context_window=window, max_output_tokens=cap, origin=f"anthropic {origin}")
    window = _int(entry.get("inputTokenLimit"))
    if window:  # Gemini: the window is the input limit (ai.google.dev/gemini-api/docs/tokens)
        cap = _int(entry.get("outputTokenLimit"))
        return _Found(context_window=window, max_output_tokens=cap, origin=f"gemini {origin}")
    window = _int(entry.get("context_window"))
    if window:  # Groq
        cap = _int(entry.get("max_completion_tokens"))
        return _Found(context_window=window, max_output_tokens=cap, origin=f"groq {origin}")
    loaded = _int(entry.get("loaded_context_length"))
    maximum = _int(entry.get("max_context_length"))
    if loaded:  # LM Studio, loaded
        return _Found(context_window=loaded, origin=f"lmstudio {origin}")
    if maximum:  # Mistral API; LM Studio when not loaded yet loads with its default
        if entry.get("state") == "not-loaded":
            return _Found(
                context_window=min(maximum, UNLOADED_DEFAULT_WINDOW),
                origin=f"lmstudio (not loaded, default context) {origin}",
            )
        return _Found(context_window=maximum, origin=f"max_context_length {origin}")
    meta = _mapping(entry.get("meta"))
    window = _int(meta.get("n_ctx"))  # llama.cpp; n_ctx_train is the model's, not served
    if window:
        return _Found(context_window=window, origin=f"llama.cpp /v1/models {origin}")
    return None


def _pick(entries: object, model: str) -> Mapping[str, Any] | None:
    if not isinstance(entries, list):
        return None
    wanted = model.lower()
    candidates = [e for e in entries if isinstance(e, Mapping)]
    for key in ("id", "name", "root"):
        for entry in candidates:
            value = entry.get(key)
            if isinstance(value, str) and value.lower().removeprefix("models/") == wanted:
                return entry
    return None


def _openai_models(client: _Client, root: str, model: str) -> _Found | None:
    url = f"{root}/v1/models"
    data = client.call("GET", url)
    entries = data.get("data") if isinstance(data, Mapping) else None
    entry = _pick(entries, model)
    return _limits(entry, url) if entry is not None else None


def _model_get(client: _Client, root: str, model: str) -> _Found | None:
    url = f"{root}/v1/models/{quote(model, safe='')}"
    data = client.call("GET", url)
    return _limits(data, url) if isinstance(data, Mapping) else None


def _llamacpp_props(client: _Client, root: str, model: str) -> _Found | None:
    del model  # llama-server serves one model under any name
    url = f"{root}/props"
    data = client.call("GET", url)
    if not isinstance(data, Mapping):
        return None
    settings = data.get("default_generation_settings")
    n_ctx = _int(settings.get("n_ctx")) if isinstance(settings, Mapping) else None
    n_ctx = n_ctx or _int(data.get("n_ctx"))
    return _Found(context_window=n_ctx, origin=f"llama.cpp {url}") if n_ctx else None


_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def _ollama(client: _Client, root: str, model: str) -> _Found | None:
    ps_url = f"{root}/api/ps"
    running = client.call("GET", ps_url)
    names = {model.lower(), f"{model.lower()}:latest"}
    if isinstance(running, Mapping) and isinstance(running.get("models"), list):
        for entry in running["models"]:
            if not isinstance(entry, Mapping):
                continue
            ids = {str(entry.get(k, "")).lower() for k in ("name", "model")}
            allocated = _int(entry.get("context_length"))
            if ids & names and allocated:  # what the loaded runner actually allocated
                return _Found(context_window=allocated, origin=f"ollama {ps_url}")
    show_url = f"{root}/api/show"
    shown = client.call("POST", show_url, {"model": model, "name": model})
    if not isinstance(shown, Mapping):
        return None
    info = shown.get("model_info")
    trained: int | None = None
    if isinstance(info, Mapping):
        arch = info.get("general.architecture")
        trained = _int(info.get(f"{arch}.context_length")) if isinstance(arch, str) else None
        if trained is None:
            trained = next(
                (_int(v) for k, v in info.items() if str(k).endswith(".context_length")), None
            )
    params = shown.get("parameters")
    match = _NUM_CTX.search(params) if isinstance(params, str) else None
    num_ctx = int(match.group(1)) if match else None
    if num_ctx:
        window = min(num_ctx, trained) if trained else num_ctx
        return _Found(context_window=window, origin=f"ollama num_ctx {show_url}")
    if trained:
        return _Found(
            context_window=min(trained, UNLOADED_DEFAULT_WINDOW),
            origin=f"ollama (not loaded, default num_ctx) {show_url}",
        )
    return None


def _lmstudio(client: _Client, root: str, model: str) -> _Found | None:
    url = f"{root}/api/v0/models/{quote(model, safe='')}"
    data = client.call("GET", url)
    if not isinstance(data, Mapping):
        return None
    if "loaded_context_length" not in data and "max_context_length" not in data:
        return None
    return _limits(data, url)


def _tgi_info(client: _Client, root: str, model: str) -> _Found | None:
    del model  # TGI serves one model
    url = f"{root}/info"
    data = client.call("GET", url)
    if not isinstance(data, Mapping):
        return None
    total = _int(data.get("max_total_tokens"))
    if not total:
        return None
    max_in = _int(data.get("max_input_tokens")) or _int(data.get("max_input_length"))
    return _Found(context_window=total, max_input_tokens=max_in, origin=f"tgi {url}")


def _gemini(client: _Client, root: str, model: str) -> _Found | None:
    root = root.removesuffix("/openai")  # the OpenAI-compatible base sits under v1beta
    if not re.search(r"/v1(alpha|beta)?\d*$", root):
        root += "/v1beta"
    name = model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"
    url = f"{root}/{quote(name, safe='/')}"
    data = client.call("GET", url)
    return _limits(data, url) if isinstance(data, Mapping) else None
