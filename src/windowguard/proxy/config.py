"""The proxy's settings, and what it learns about its upstream before it serves.

:func:`discover_upstream` runs once at startup: it finds the model the upstream serves
(``--model``, else the first ``GET /v1/models`` lists), asks the upstream what window it
serves that model with (:func:`windowguard.accounting.discovery.discover_model_info`), looks the
model up in the catalog, and finds the upstream's token-count endpoint
(:func:`windowguard.accounting.remote.discover_counter`). Both discoveries are cached
per (endpoint, model), so the guard's own per-model lookups later find the same answers.

Invariants:

- The proxy never starts blind: when neither discovery nor the catalog knows the
  startup model's window and ``--window`` was not given, :func:`discover_upstream`
  raises :class:`~windowguard.ConfigurationError` saying so and what to pass.
- ``--window`` wins over what discovery found, for every model the proxy fits; the
  tokenizer family discovery or the catalog found is kept.
- The proxy's own key (``api_key``) is never part of a repr or of any message.
- The edit options (``--clamp-tool-results``, ``--spill-dir``, ``--clear-tool-results``,
  ``--clear-at-least``) are checked when the config is made, each error naming its flag;
  :meth:`ProxyConfig.edit_stages` makes the stages (and the spill directory, ``0700``)
  when the proxy starts. A summary stage has no flag: a summarizer is code.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import httpx2

from ..accounting.catalog import ModelInfo, lookup_model, resolve_model_info
from ..accounting.discovery import discover_model_info
from ..accounting.local import TEMPLATE_OF
from ..accounting.remote import RemoteCounter, discover_counter
from ..accounting.templates import TEXT_TEMPLATES
from ..core.edits._flags import edit_stages as stages_from_flags
from ..core.edits.config import EditStage
from ..core.exceptions import ConfigurationError
from ..core.prune import POLICIES, PruningPolicy
from ..core.shrink import DEFAULT_SAFETY_BUFFER
from ..run._conversations import (
    DEFAULT_MAX_CONVERSATIONS,
    DEFAULT_MAX_STATE_MB,
    DEFAULT_TTL_SECONDS,
)
from ..run.spill import SpillStore

__all__ = [
    "DEFAULT_MAX_STATE_MB",
    "DEFAULT_PORT",
    "ProxyConfig",
    "UpstreamInfo",
    "discover_upstream",
    "upstream_root",
]

DEFAULT_PORT: Final = 8788
DEFAULT_HOST: Final = "127.0.0.1"

PageMode = Literal["root", "path", "off"]
PAGE_MODES: Final[tuple[PageMode, ...]] = ("root", "path", "off")
"""Where the live page is served (``--page``): ``root`` (``GET /`` for a browser, and
``/windowguard/``), ``path`` (``/windowguard/`` only), ``off`` (nowhere)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyConfig:
    """How one proxy runs.

    Attributes:
        upstream: the upstream's base URL (``http://127.0.0.1:8000`` or ``.../v1``).
        host: the interface to bind (loopback by default).
        port: the port to bind (0: any free port).
        window: the context window to enforce, for every model (None: discovered).
        model: the model to discover at startup (None: the first the upstream lists).
        api_key: the proxy's own upstream key, replacing the clients' (None: forward
            the client's ``Authorization`` / ``x-api-key``). Never shown.
        events: a JSONL file for the events (created ``0600``), or None.
        otel: send the events to OpenTelemetry (the configured global providers).
        max_conversations: conversations remembered per model (LRU).
        max_state_mb: the most the remembered conversations of every model may hold
            together, in MiB (estimated: each keeps its last transcript and ~900 bytes a
            message of accounting); the least recently used are forgotten beyond it.
        max_models: models whose limits and conversations are remembered (LRU; the
            names come from clients).
        ttl_seconds: a conversation idle this long is forgotten (None: never).
        safety: tokens kept free below the window.
        pruning: ``"low_water"`` (cache-friendly) or ``"minimal"``.
        strict: answer a damaged transcript with a 400 instead of passing it on.
        discover: ask the upstream what it serves (its models, each model's window, its
            count endpoint): None (default): at startup, and for each new model a client
            names unless the upstream is ``api.openai.com`` / ``api.anthropic.com``,
            whose windows the catalog knows; True: always; False (``--no-discover``): no
            request but the clients' own, so ``--window`` (or a ``--model`` the catalog
            knows) gives the window.
        upstream_timeout: seconds to wait for the upstream's next byte.
        discovery_timeout: seconds for each startup discovery.
        max_body_bytes: the largest request body read from a client.
        header_timeout: seconds a connection may take to send a request's headers (a
            connection that sends a byte now and then and never a request is closed).
        body_timeout: seconds a client may pause between two reads of a fitted
            request's body (then 408).
        max_connections: connections served at once; one more is answered 503 and
            closed (the proxy raises its open-files limit to hold them).
        clamp_tool_results: cut any single tool result over this many tokens to its
            start and end (:class:`~windowguard.ClampToolResults`); None: no clamp.
        spill_dir: keep each clamped output whole in this private directory (a
            :class:`~windowguard.SpillStore`: ``0700``, files ``0600``). The proxy cannot
            run ``read_spilled`` for its clients: the marker's handle is for a client
            that offers its own tool over the same directory; the files stay private.
        clear_tool_results: replace old tool results by placeholders, keeping the
            newest this many turns whole (:class:`~windowguard.ClearToolResults`); None:
            no clearing.
        clear_at_least: the fewest tokens one clearing must free (None: the stage's
            default, 1,000).
        clear_trigger: also clear once the request passes this many tokens (an int) or
            this fraction of the input budget (a float; ``--clear-trigger``); None: only
            when turns would be lost.
        page: where the live page is served (``--page``): ``"root"`` (``GET /`` for a
            browser, and ``/windowguard/``), ``"path"`` (``/windowguard/`` only; ``/``
            passes through) or ``"off"`` (nowhere; those paths pass through).
        preload_tokenizers: load at startup, before serving, the exact tokenizers fits
            will use (``--no-preload-tokenizers``: on first use): the startup model's
            family, or when its family is unknown the first installed family tokenizer
            inference tries. Loading one holds the interpreter for 0.3-1.5 s,
            which on first use stalls every client for as long.
    """

    upstream: str
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    window: int | None = None
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    events: str | None = None
    otel: bool = False
    max_conversations: int = DEFAULT_MAX_CONVERSATIONS
    max_state_mb: float = DEFAULT_MAX_STATE_MB
    max_models: int = 256
    ttl_seconds: float | None = DEFAULT_TTL_SECONDS
    safety: int = DEFAULT_SAFETY_BUFFER
    pruning: PruningPolicy = "low_water"
    strict: bool = False
    discover: bool | None = None
    upstream_timeout: float = 600.0
    discovery_timeout: float = 5.0
    max_body_bytes: int = 32 * 1024 * 1024
    header_timeout: float = 15.0
    body_timeout: float = 60.0
    max_connections: int = 1000
    clamp_tool_results: int | None = None
    spill_dir: str | None = None
    clear_tool_results: int | None = None
    clear_at_least: int | None = None
    clear_trigger: int | float | None = None
    no_edits: bool = False
    page: PageMode = "root"
    preload_tokenizers: bool = True

    def __post_init__(self) -> None:
        upstream_root(self.upstream)
        if self.page not in PAGE_MODES:
            raise ConfigurationError(f"--page must be one of {PAGE_MODES}, got {self.page!r}")
        if self.window is not None and (isinstance(self.window, bool) or self.window < 1):
            raise ConfigurationError(f"--window must be a positive int, got {self.window!r}")
        if not 0 <= self.port <= 65535:
            raise ConfigurationError(f"--port must be 0..65535, got {self.port}")
        # None, as in ManagerOptions, reads as the default (500, "low_water", False).
        safety = self.safety
        if safety is not None and (
            isinstance(safety, bool) or not isinstance(safety, int) or safety < 0
        ):
            raise ConfigurationError(f"--safety must be a non-negative int, got {safety!r}")
        if self.pruning is not None and self.pruning not in POLICIES:
            raise ConfigurationError(f"--pruning must be one of {POLICIES}, got {self.pruning!r}")
        if self.strict is not None and not isinstance(self.strict, bool):
            raise ConfigurationError(f"strict must be True or False, got {self.strict!r}")
        if self.discover is not None and not isinstance(self.discover, bool):
            raise ConfigurationError(f"discover must be True, False or None, got {self.discover!r}")
        state = self.max_state_mb
        if (
            isinstance(state, bool)
            or not isinstance(state, (int, float))
            or not state * 1024 * 1024 >= 1
            or state == float("inf")
        ):
            raise ConfigurationError(
                f"--max-state-mb must be a positive number of MiB, got {state!r}"
            )
        if isinstance(self.max_models, bool) or self.max_models < 1:
            raise ConfigurationError(f"max_models must be >= 1, got {self.max_models}")
        if self.max_body_bytes < 1:
            raise ConfigurationError(f"max_body_bytes must be >= 1, got {self.max_body_bytes}")
        for name in ("header_timeout", "body_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ConfigurationError(f"{name} must be a positive number, got {value!r}")
        if isinstance(self.max_connections, bool) or self.max_connections < 1:
            raise ConfigurationError(f"max_connections must be >= 1, got {self.max_connections!r}")
        if self.api_key is not None and not (
            self.api_key and self.api_key.isascii() and self.api_key.isprintable()
        ):
            # It goes into a header: a newline would add headers of its own, and the
            # key itself is never shown.
            raise ConfigurationError(
                "the proxy's api_key (--api-key-env) must be printable ASCII characters (it is "
                "sent as a header)"
            )
        self._edits(spill=None)  # every edit option checked now, naming its flag

    def edit_stages(self) -> tuple[EditStage, ...] | None:
        """The edit stages the flags ask for, cheapest first (None: the default,
        :data:`~windowguard.DEFAULT_EDITS`; ``()``: drop only, ``--no-edits``).

        Makes the spill directory (``0700``) when ``spill_dir`` is set.

        Raises:
            SpillError: the spill directory cannot be used (named, with why).
        """
        spill = SpillStore(self.spill_dir) if self.spill_dir is not None else None
        return self._edits(spill=spill)

    def _edits(self, *, spill: SpillStore | None) -> tuple[EditStage, ...] | None:
        return stages_from_flags(
            clamp_tool_results=self.clamp_tool_results,
            spill=spill,
            spill_dir=self.spill_dir,
            clear_tool_results=self.clear_tool_results,
            clear_at_least=self.clear_at_least,
            clear_trigger=self.clear_trigger,
            no_edits=self.no_edits,
        )


def upstream_root(upstream: str) -> str:
    """The upstream URL without a trailing ``/`` or ``/v1``: client paths go after it.

    Raises:
        ConfigurationError: not an http(s) URL with a host.
    """
    parts = urlsplit(upstream.strip()) if isinstance(upstream, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"--upstream must be an http(s) URL such as http://127.0.0.1:8000, got {upstream!r}"
        )
    if parts.query or parts.fragment:
        raise ConfigurationError(f"--upstream takes no query or fragment, got {upstream!r}")
    root = upstream.strip().rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamInfo:
    """What the proxy knows about its upstream when it starts.

    Attributes:
        root: the upstream's root URL (no ``/v1``).
        model: the startup model, or None when none was named or listed.
        model_info: its limits (``--window`` applied), or None when nothing is known.
        explicit: the limits every model gets (``--window`` given), else None.
        counter: the upstream's count endpoint, or None.
        listed: the models ``GET /v1/models`` listed (empty when it answered nothing).
        listing_problem: why ``GET /v1/models`` listed nothing (``connection refused``,
            ``timed out``, ``HTTP 401`` ...), or None.
    """

    root: str
    model: str | None
    model_info: ModelInfo | None
    explicit: ModelInfo | None
    counter: RemoteCounter | None
    listed: tuple[str, ...] = ()
    listing_problem: str | None = None

    def describe(self) -> list[str]:
        """Lines saying what was found, for the startup banner (no secret in them)."""
        lines = [f"upstream: {self.root}"]
        listed = ", ".join(self.listed[:5]) + (" ..." if len(self.listed) > 5 else "")
        none = f"(none: {self.listing_problem})" if self.listing_problem else "(none)"
        lines.append(f"models listed: {listed or none}")
        info = self.model_info
        if info is None:
            lines.append(f"model {self.model or '(unknown)'}: window unknown")
        else:
            origin = f" ({info.origin})" if info.origin else ""
            lines.append(
                f"model {self.model or '(any)'}: window {info.context_window} tokens, "
                f"source {info.source_of('context_window')}{origin}"
            )
            lines.append(
                f"tokenizer family: {info.tokenizer or 'unknown (the most conservative priors)'}"
            )
            if info.max_output_tokens is not None:
                lines.append(f"max output tokens: {info.max_output_tokens}")
        counter = self.counter.name if self.counter is not None else "none found"
        lines.append(f"count endpoint: {counter}")
        if self.explicit is not None:
            lines.append(f"--window {self.explicit.context_window} applies to every model")
        return lines


def discover_upstream(config: ProxyConfig) -> UpstreamInfo:
    """Find the upstream's model, window, tokenizer family and count endpoint.

    Args:
        config: the proxy's settings.

    Returns:
        What was found.

    Raises:
        ConfigurationError: nothing is known of the window and ``config.window`` is None.
    """
    root = upstream_root(config.upstream)
    base_url = root + "/v1"
    asks = config.discover is not False
    listed: tuple[str, ...] = ()
    problem: str | None = "not asked (--no-discover)"
    if asks:
        listed, problem = _listed_models(base_url, config.api_key, config.discovery_timeout)
    model = config.model or (listed[0] if listed else None)
    discovered: ModelInfo | None = None
    catalog: ModelInfo | None = None
    counter: RemoteCounter | None = None
    if model is not None:
        if asks:
            discovered = discover_model_info(
                base_url, model, api_key=config.api_key, timeout=config.discovery_timeout
            )
        catalog = lookup_model(model)
    known = discovered is not None or catalog is not None
    info: ModelInfo | None = None
    if known:
        info = resolve_model_info(model, discovered=discovered)
    explicit: ModelInfo | None = None
    if config.window is not None:
        family = info.tokenizer if info is not None else None
        explicit = ModelInfo(config.window, tokenizer=family, source="explicit", origin="--window")
        info = explicit
    if info is None and problem is not None and problem.startswith(_UNREACHABLE):
        raise ConfigurationError(
            f"the upstream {root} could not be reached "
            f"({problem.removeprefix(_UNREACHABLE + ': ')}): is it running, and is "
            "--upstream its address? (With --window N the proxy starts anyway, and answers "
            "502 until the upstream is up.)"
        )
    if info is None and not asks:
        raise ConfigurationError(
            "with --no-discover the proxy asks the upstream nothing, and the catalog does not "
            f"know {'model ' + repr(model) if model else 'the model (no --model)'}; pass "
            "--window N (the upstream's context window in tokens)"
        )
    if info is None:
        named = f"model {model!r}" if model else "any model (GET /v1/models listed none)"
        raise ConfigurationError(
            f"the upstream {root} did not say what window it serves for {named}, and the "
            "catalog does not know it; pass --window N (the upstream's context window in "
            "tokens)"
            + ("" if model else " and --model NAME")
            + (
                ""
                if config.api_key or listed
                else "; if the upstream needs a key to list its models, "
                "--api-key-env VAR lets the proxy ask with it"
            )
        )
    if model is not None and asks:
        template = TEMPLATE_OF.get(info.tokenizer or "")
        counter = discover_counter(
            base_url,
            model,
            api_key=config.api_key,
            timeout=config.discovery_timeout,
            template=template if template in TEXT_TEMPLATES else None,
        )
    return UpstreamInfo(
        root=root,
        model=model,
        model_info=info,
        explicit=explicit,
        counter=counter,
        listed=listed,
        listing_problem=problem,
    )


_UNREACHABLE: Final = "upstream unreachable"


def _listed_models(
    base_url: str, api_key: str | None, timeout: float
) -> tuple[tuple[str, ...], str | None]:
    """The model ids ``GET /v1/models`` lists, and why it listed none (None when it
    answered a list): ``unreachable: ...`` when no answer came at all."""
    headers = {}
    if api_key is not None:
        headers = {"authorization": f"Bearer {api_key}", "x-api-key": api_key}
    try:
        response = httpx2.get(f"{base_url}/models", headers=headers, timeout=timeout)
    except httpx2.TimeoutException:
        return (), f"{_UNREACHABLE}: no answer within {timeout:g} s"
    except httpx2.ConnectError as exc:
        return (), f"{_UNREACHABLE}: cannot connect ({exc})"
    except httpx2.HTTPError as exc:
        return (), f"{_UNREACHABLE}: {type(exc).__name__} ({exc})"
    if response.status_code != 200:
        return (), f"GET /v1/models answered HTTP {response.status_code}"
    try:
        data: Any = response.json()
    except ValueError:
        return (), "GET /v1/models did not answer JSON"
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return (), "GET /v1/models answered no list of models"
    models = tuple(
        entry["id"]
        for entry in entries
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"]
    )
    return models, None


def state_bytes(config: ProxyConfig) -> int:
    """``--max-state-mb`` in bytes."""
    return max(1, int(config.max_state_mb * 1024 * 1024))


def with_port(config: ProxyConfig, port: int) -> ProxyConfig:
    """``config`` with another port (the one actually bound)."""
    return dataclasses.replace(config, port=port)
