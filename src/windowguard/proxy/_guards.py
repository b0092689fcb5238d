"""The proxy's use of the drop-in guard's core: one guard per vendor, and the refit.

A JSON request body is exactly the keyword arguments of the SDK call it stands for, so
the proxy fits it with :class:`windowguard.guard._core.Guard`: ``Guard.request`` reads
it, ``Guard.aconversation_for`` finds its conversation (keyed by its head, in a
:class:`~windowguard.run._conversations.ConversationStore` per model), ``Guard.afit`` fits
it on the event loop (a remote count, when one is needed, is awaited), and the returned
``Send`` feeds the usage back or learns from a refusal.

This module is the thin adapter between that core and a server:

- :class:`ProxyGuards` holds one guard for the OpenAI routes and one for Anthropic's,
  pointed at the upstream (the guard reads an endpoint from a client's ``base_url`` and
  ``api_key``; :class:`_Endpoint` is that, with the proxy's own key or none, never a
  client's), with the proxy's idle timeout for conversations. The reactive refit after
  an upstream overflow is :meth:`Guard.arefit`, on the event loop.
- One byte budget (``--max-state-mb``, a
  :class:`~windowguard.run._retained.StateBudget`) covers the conversations of both
  guards and every model: the least recently used are forgotten beyond it, and each
  eviction is counted and logged (:meth:`ProxyGuards.evicted`).
- The edit stages the flags ask for (``--clamp-tool-results``, ``--clear-tool-results``
  ...) are made once, here, and shared by both guards' conversations.
- A model the upstream did not list at startup gets the startup model's limits and
  count endpoint (:meth:`ProxyGuards.known`) when startup discovery found them: the
  model name comes from the client, so a client cycling names must not cause one
  discovery and one count-endpoint probe upstream per name.
- :class:`UpstreamRefusal` carries an upstream error answer in the attributes an SDK
  status error has, so ``Send.failed`` and ``classify_failure`` read it as they read an
  SDK's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import httpx2

from ..accounting.catalog import ModelInfo
from ..accounting.local import LOCAL_FAMILIES, LocalTokenizerError, local_accounting
from ..accounting.remote import RemoteCounter
from ..core.events import Event
from ..guard._apis import ANTHROPIC_MESSAGES, Api
from ..guard._core import Guard
from ..run._retained import StateBudget
from ..run.sinks import Sink
from .config import ProxyConfig, UpstreamInfo, state_bytes

__all__ = ["ProxyGuards", "UpstreamRefusal"]


class UpstreamRefusal(Exception):
    """An upstream error answer, shaped like an SDK status error.

    Attributes:
        response: the upstream's response.
        status_code: its status.
        body: its body (bytes).
    """

    def __init__(self, response: httpx2.Response, body: bytes) -> None:
        super().__init__(f"upstream answered {response.status_code}")
        self.response = response
        self.status_code = response.status_code
        self.body = body


class _Endpoint:
    """What the guard reads from a client: where it sends, and with which key."""

    __slots__ = ("api_key", "base_url")

    def __init__(self, base_url: str, api_key: str | None) -> None:
        self.base_url = base_url
        self.api_key = api_key

    def __repr__(self) -> str:
        return f"_Endpoint({self.base_url!r})"


class ProxyGuards:
    """The guards of one proxy: OpenAI routes and Anthropic's, sharing the sinks.

    Args:
        config: the proxy's settings.
        upstream: what startup discovery found.
        sinks: where events go.
        on_evict: told how many conversations the byte budget evicted, each time.
    """

    def __init__(
        self,
        config: ProxyConfig,
        upstream: UpstreamInfo,
        sinks: Iterable[Sink],
        *,
        on_evict: Callable[[int], None] | None = None,
    ) -> None:
        sinks = tuple(sinks)
        self.budget = StateBudget(state_bytes(config), on_evict=on_evict)
        self._upstream = upstream
        explicit: ModelInfo | None = upstream.explicit
        # One set of stages (and one spill store) for both guards: stages hold no
        # per-run state, and the store is keyed by content.
        self.edits = config.edit_stages()
        self._guards = {
            vendor: Guard(
                vendor=vendor,
                model_info=explicit,
                safety=config.safety,
                pruning=config.pruning,
                sinks=sinks,
                strict=config.strict,
                manager=None,
                max_conversations=config.max_conversations,
                discover=config.discover,
                discovery_timeout=config.discovery_timeout,
                ttl_seconds=config.ttl_seconds,
                max_models=config.max_models,
                known_limits=self.known,
                edits=self.edits,
                caller="windowguard proxy",
                state_budget=self.budget,
            )
            for vendor in ("openai", "anthropic")
        }
        # The proxy's own key, or none: a client's key never reaches discovery or counts.
        self._endpoint = _Endpoint(upstream.root + "/v1", config.api_key)

    def known(self, model: str) -> tuple[ModelInfo, RemoteCounter | None] | None:
        """The startup discovery's limits for a model the upstream did not list (None:
        the model was listed or is the startup model, or startup found no window)."""
        upstream = self._upstream
        if upstream.model_info is None or model == upstream.model or model in upstream.listed:
            return None
        return upstream.model_info, upstream.counter

    def tokenizers_to_preload(self) -> tuple[str, ...]:
        """The exact tokenizer families to load before serving: the startup model's
        family when the catalog names one, else the first installed family tokenizer
        inference tries (it stops at the first that counts as the upstream did; loading
        every family would cost some 300 MB for the ones that do not)."""
        info = self._upstream.explicit or self._upstream.model_info
        family = info.tokenizer if info is not None else None
        if family is not None:
            return (family,) if local_accounting(family) is not None else ()
        return tuple(f for f in LOCAL_FAMILIES if local_accounting(f) is not None)[:1]

    def preload_tokenizers(self) -> dict[str, str]:
        """Load :meth:`tokenizers_to_preload` (blocking: run it on a worker thread before
        serving). Returns what each family came from, or why it could not be loaded."""
        loaded: dict[str, str] = {}
        for family in self.tokenizers_to_preload():
            accounting = local_accounting(family)
            if accounting is None:
                continue
            try:
                accounting.counter.count("warm")
            except LocalTokenizerError as exc:
                loaded[family] = f"not loaded: {exc}"
                continue
            loaded[family] = accounting.origin
        return loaded

    def for_api(self, api: Api) -> Guard:
        """The guard that fits calls of ``api``."""
        return self._guards["anthropic" if api is ANTHROPIC_MESSAGES else "openai"]

    def endpoint_for(self, api: Api) -> _Endpoint:
        """The endpoint the guard discovers and counts at."""
        return self._endpoint

    def emit(self, event: Event) -> None:
        """Give an event to the sinks."""
        self._guards["openai"].emit(event)
