"""Which count API a server offers: one cheap probe per API, cached.

Each probe is a one-message count through the counter itself, all probes sharing one
deadline on a daemon thread (as :mod:`windowguard.accounting.discovery` does), so discovery never
raises for what a server does and never outlives ``timeout``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import urlsplit

from ...core.exceptions import ConfigurationError
from ._client import Counter, ensure_template, post, root_of
from ._counters import (
    AnthropicCountTokens,
    GeminiCountTokens,
    LlamaCppPythonCounter,
    LlamaServerCounter,
    OpenAIInputTokens,
    SGLangTokenizeCounter,
    TGICounter,
    VLLMTokenizeCounter,
)
from ._types import CountQuery, DeadlineError, RemoteCounter, RemoteCountError

__all__ = ["adiscover_counter", "clear_counter_cache", "discover_counter"]

_Spec = tuple[str, str | None]  # (counter kind, template)
_KINDS: dict[str, Callable[..., Counter]] = {
    "vllm": VLLMTokenizeCounter,
    "sglang": SGLangTokenizeCounter,
    "llama-server": LlamaServerCounter,
    "llama-cpp-python": LlamaCppPythonCounter,
    "tgi": TGICounter,
    "anthropic": AnthropicCountTokens,
    "openai": OpenAIInputTokens,
    "gemini": GeminiCountTokens,
}
CACHE_ENTRIES: Final = 256
"""Count-API discoveries remembered, least recently used forgotten first (a caller that
names many models must not grow the cache, nor probe a server, without bound)."""

_cache: OrderedDict[tuple[str, str, str | None], _Spec | None] = OrderedDict()
_cache_lock = threading.Lock()


def _build(spec: _Spec, base_url: str, api_key: str | None, timeout: float) -> Counter:
    kind, template = spec
    kwargs: dict[str, Any] = {"api_key": api_key, "timeout": timeout}
    if template is not None:
        kwargs["template"] = template
    return _KINDS[kind](base_url, **kwargs)


_PROBE: Final = ({"role": "user", "content": "hi"},)


def _counts(counter: Counter, model: str, deadline: float) -> bool:
    """Whether ``counter`` counts a one-message chat (the cheapest probe of an API)."""
    query = CountQuery(format="openai_chat", model=model, messages=_PROBE)
    try:
        counter._exchange(counter._prepared(query), model, deadline)
    except DeadlineError:
        raise
    except RemoteCountError:
        return False
    return True


def _candidates(root: str, template: str | None) -> list[_Spec]:
    """The count APIs to probe, in order; the providers' own hosts only their API."""
    host = (urlsplit(root).hostname or "").lower()
    if host.endswith("anthropic.com"):
        return [("anthropic", None)]
    if host.endswith("openai.com"):
        return [("openai", None)]
    if host.endswith("googleapis.com") or re.search(r"/v1(alpha|beta)\d*(/openai)?$", root):
        return [("gemini", None)]
    specs: list[_Spec] = [("tokenize", None), ("llama-server", None), ("tgi", None)]
    if template is not None:  # text-only APIs count a chat rendered here
        specs += [("tgi", template), ("llama-cpp-python", template)]
    return [*specs, ("anthropic", None), ("openai", None)]


def _discover(
    root: str, model: str, template: str | None, api_key: str | None, deadline: float
) -> _Spec | None:
    for spec in _candidates(root, template):
        if spec[0] == "tokenize":
            found = _tokenize_kind(root, model, template, api_key, deadline)
            if found is not None:
                return found
        elif _counts(_build(spec, root, api_key, 60.0), model, deadline):
            return spec
    return None


def _tokenize_kind(
    root: str, model: str, template: str | None, api_key: str | None, deadline: float
) -> _Spec | None:
    """vLLM or SGLang behind ``POST /tokenize``: both take the chat form; vLLM's answer
    carries ``token_strs`` (its ``TokenizeResponse`` dumps the None), SGLang's does not,
    and SGLang's errors are flat ``{"object": "error", ...}`` (text-only releases
    answer one to ``messages``)."""
    counter = VLLMTokenizeCounter(root, api_key=api_key)
    body = counter._prepared(CountQuery(format="openai_chat", model=model, messages=_PROBE))
    try:
        answer = post(root + "/tokenize", json.dumps(body).encode(), counter._headers(), deadline)
        data = json.loads(answer.body.decode("utf-8"))
    except DeadlineError:
        raise
    except (RemoteCountError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    count = data.get("count")
    if 200 <= answer.status < 300 and isinstance(count, int) and not isinstance(count, bool):
        return ("vllm", None) if "token_strs" in data else ("sglang", None)
    if data.get("object") == "error" and template is not None:
        text_only = SGLangTokenizeCounter(root, template=template, api_key=api_key)
        if _counts(text_only, model, deadline):
            return ("sglang", template)
    return None


def _prepare(base_url: str, model: str, timeout: float) -> str:
    root = root_of(base_url)
    if not isinstance(model, str) or not model.strip():
        raise ConfigurationError(f"model must be a non-empty str, got {model!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ConfigurationError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return root


def _discover_safely(
    root: str, model: str, template: str | None, api_key: str | None, deadline: float
) -> _Spec | None:
    try:
        return _discover(root, model, template, api_key, deadline)
    except Exception:  # discovery never raises for what a server does
        return None


def discover_counter(
    base_url: str,
    model: str,
    *,
    api_key: str | None = None,
    timeout: float = 5.0,
    template: str | None = None,
    count_timeout: float = 2.0,
) -> RemoteCounter | None:
    """Find the count API the server at ``base_url`` offers for ``model``.

    Probes, in order, with a one-message count each: vLLM / SGLang ``/tokenize``,
    llama-server ``/apply-template``, TGI ``/chat_tokenize``, llama-cpp-python
    ``/extras/tokenize/count`` (only with ``template``: it counts text), Anthropic
    ``count_tokens``, OpenAI ``responses/input_tokens``; hosts of Anthropic, OpenAI and
    Google are asked their own API only. Results (None included) are cached per
    (endpoint, model, template) until :func:`clear_counter_cache` -- a server that
    refused the probes (a wrong key, say) stays None until then.

    Args:
        base_url: the endpoint, with or without ``/v1``.
        model: the model name as the server knows it.
        api_key: used by the counter returned (and the probes).
        timeout: seconds for the whole discovery, all probes together.
        template: the model's chat template (``"qwen"``, ``"llama3"``, ``"mistral"``),
            which lets text-only count APIs (llama-cpp-python, older SGLang and TGI)
            count chats.
        count_timeout: the returned counter's ``timeout``.

    Returns:
        A counter for the first API that answered a count, or None (never raises for
        what a server does).

    Raises:
        ConfigurationError: ``base_url`` is not an http(s) URL, ``model`` is empty,
            a timeout is not positive, or ``template`` has no text form.
    """
    root = _prepare(base_url, model, timeout)
    template = ensure_template(template, required=False)
    key = (root, model, template)
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            spec = _cache[key]
            return None if spec is None else _build(spec, base_url, api_key, count_timeout)
    deadline = time.monotonic() + timeout
    done = threading.Event()
    box: list[_Spec | None] = [None]

    def work() -> None:
        box[0] = _discover_safely(root, model, template, api_key, deadline)
        done.set()

    threading.Thread(target=work, name="windowguard-count-discovery", daemon=True).start()
    spec = box[0] if done.wait(timeout) else None
    with _cache_lock:
        _cache[key] = spec
        _cache.move_to_end(key)
        while len(_cache) > CACHE_ENTRIES:
            _cache.popitem(last=False)
    return None if spec is None else _build(spec, base_url, api_key, count_timeout)


async def adiscover_counter(
    base_url: str,
    model: str,
    *,
    api_key: str | None = None,
    timeout: float = 5.0,
    template: str | None = None,
    count_timeout: float = 2.0,
) -> RemoteCounter | None:
    """Async twin of :func:`discover_counter` (shares its cache; never blocks the loop)."""
    import asyncio  # on first use: only async callers pay for it

    return await asyncio.to_thread(
        discover_counter,
        base_url,
        model,
        api_key=api_key,
        timeout=timeout,
        template=template,
        count_timeout=count_timeout,
    )


def clear_counter_cache() -> None:
    """Forget every discovered count API, so the next discovery asks again."""
    with _cache_lock:
        _cache.clear()
