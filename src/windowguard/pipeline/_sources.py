"""Where a fit's counts come from: the caller's counter, the family's local tokenizer,
the endpoint's count API or the heuristic; and a manager built from an endpoint.

Functions of the manager's run state, bound into
:class:`~windowguard.pipeline.manager.ContextWindowManager`'s class body.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..accounting.catalog import resolve_model_info
from ..accounting.local import TEMPLATE_OF
from ..accounting.remote import CountQuery, RemoteCountError
from ..accounting.templates import TEXT_TEMPLATES
from ..core.events import Event, RemoteCounted, RemoteCountFailed
from ..core.exceptions import ModelInfoError
from ._editing import BytesBounded
from ._fitting import Count, FitContext
from ._settings import DEFAULT_FALLBACK_WINDOW, RemoteAnswer, logger

if TYPE_CHECKING:
    from .manager import ContextWindowManager


def from_endpoint(
    cls: type[ContextWindowManager],
    /,
    base_url: str,
    model: str,
    api_key: str | None = None,
    *,
    timeout: float = 5.0,
    **options: Any,
) -> ContextWindowManager:
    """A manager for ``model`` as served at ``base_url``: window, family and counter.

    Discovery (:func:`windowguard.discover_model_info`) asks the server what window
    it serves; :func:`windowguard.accounting.remote.discover_counter` finds its count
    endpoint (vLLM/SGLang ``/tokenize``, llama.cpp, TGI, Anthropic, OpenAI, Gemini).
    What discovery does not say, the catalog and ``overrides`` do; the count endpoint
    may be missing too, and then the ledger and the local counters count.

    A window nobody states is never guessed silently. When the server states none
    (unreachable, no answer in time, or no window in what it answered) and neither the
    catalog nor ``overrides`` know ``model``, this raises :class:`ModelInfoError`
    naming the URL and why, unless you pass ``fallback_window=N`` yourself: then the
    manager runs with that window, a warning is logged saying why, and its events say
    ``source="fallback"``. An unreachable server whose model the catalog knows is
    logged as a warning too (the catalog's window is used, and no count endpoint is
    looked for).

    Args:
        base_url: the endpoint, with or without a trailing ``/v1``.
        model: the model name as the server knows it.
        api_key: sent to the discovery and count routes.
        timeout: seconds for each discovery (window; count endpoint).
        **options: any other :class:`ContextWindowManager` argument;
            ``fallback_window=N`` accepts a window of ``N`` tokens when nothing states one.

    Raises:
        ConfigurationError: a base URL that is not http(s), or a bad option.
        ModelInfoError: nobody states the window (the server, the catalog, overrides)
            and ``fallback_window`` was not passed; the message says why the server
            did not (unreachable: the URL tried and the operating system's error).
    """
    from ..accounting.discovery import discover_endpoint
    from ..accounting.remote import discover_counter

    info = options.pop("model_info", None)
    unreachable = False
    if info is None:
        found = discover_endpoint(base_url, model, api_key=api_key, timeout=timeout)
        unreachable = found.unreachable
        info = resolve_model_info(
            model,
            discovered=found.info,
            overrides=options.get("overrides"),
            fallback_window=options.get("fallback_window", DEFAULT_FALLBACK_WINDOW),
        )
        if info.source_of("context_window") == "fallback":
            if "fallback_window" not in options:
                raise ModelInfoError(
                    f"the context window of {model!r} at {base_url} is unknown: "
                    f"{found.problem}, and neither the catalog nor overrides know "
                    f"{model!r}. Pass fallback_window=N to run with an assumed window of "
                    "N tokens, or model_info=ModelInfo(context_window=N) if you know it."
                )
            logger.warning(
                "%s: %s; using fallback_window=%d for %r",
                base_url,
                found.problem,
                info.context_window,
                model,
            )
        elif unreachable:
            logger.warning(
                "%s: %s; the window of %r comes from the %s",
                base_url,
                found.problem,
                model,
                info.source_of("context_window"),
            )
    manager = cls(model, model_info=info, **options)
    if manager.wants_remote_counter and not unreachable:
        # Text-only count APIs (llama-cpp-python, older SGLang/TGI) count a chat the
        # family's template renders here.
        template = TEMPLATE_OF.get(manager.model_info.tokenizer or "")
        manager.remote = discover_counter(
            base_url,
            model,
            api_key=api_key,
            timeout=timeout,
            template=template if template in TEXT_TEMPLATES else None,
        )
    return manager


def _counter_sources(self: ContextWindowManager) -> tuple[str, ...]:
    """:attr:`counter_name`'s parts, made again only when a counter is replaced."""
    remote, local, estimator = self.remote, self.local, self.estimator
    cached = self._sources_cache
    if (
        cached is None
        or cached[0] is not remote
        or cached[1] is not local
        or (cached[2] is not estimator)
    ):
        names = []
        if remote is not None:
            names.append(f"remote:{remote.name}")
        if local is not None:
            names.append(self._local_name or f"local:{local.family}")
        names.append(f"heuristic:{estimator.tokenizer}")
        cached = self._sources_cache = (remote, local, estimator, tuple(names))
    return cached[3]


def _count_now(self: ContextWindowManager, query: CountQuery) -> RemoteAnswer:
    remote = self.remote
    if remote is None:
        return RemoteCountError("no remote counter")
    try:
        return int(remote.count(query))
    except Exception as exc:  # a counter must never break a send: fall back
        return exc


def _text_count(self: ContextWindowManager) -> Callable[[str], int]:
    """How the edit stages count a text: the local exact tokenizer when there is one,
    else the heuristic (dense). Deterministic for a run, so an edit made once is the
    same bytes on every later send."""
    local = self.local
    if local is not None:
        try:
            counter = local.counter
        except Exception as exc:  # a tokenizer that cannot load: the heuristic
            logger.warning("edits count with the heuristic: %s", exc)
        else:
            # A family's own tokenizer is a byte-level BPE; a caller's may be anything.
            return counter.count if local.explicit else BytesBounded(counter.count)
    estimator = self.estimator
    return lambda text: estimator.text_tokens(text, "dense")


def _count_locally(self: ContextWindowManager, ctx: FitContext) -> bool:
    """Count the unmeasured parts exactly with the local tokenizer, if any."""
    if self.local is None:
        return False
    try:
        return ctx.count_locally(self.local, self._factors) > 0
    except Exception as exc:  # a broken tokenizer falls back
        logger.warning("local exact counting failed (%s); using the heuristic", exc)
        self.local = None
        self._local_name = None
        ctx.local_fixed = None
        ctx.use_upper = self.has_exact_source
        return False


def _source_of(self: ContextWindowManager, count: Count) -> str:
    if count.exact:
        return "ledger" if self.remote is None else f"ledger / remote:{self.remote.name}"
    return self.counter_name


def _counted(
    self: ContextWindowManager,
    ctx: FitContext,
    kept_from: int,
    answer: RemoteAnswer,
    events: list[Event],
    why: str,
) -> bool:
    """Feed a remote count to the ledger (True), or note its failure (False)."""
    name = self.remote.name if self.remote is not None else "remote"
    if isinstance(answer, (BaseException, bool)) or answer < 0:
        error = str(answer) if isinstance(answer, BaseException) else f"bad count {answer!r}"
        fallback = self.counter_name
        events.append(RemoteCountFailed(counter=name, error=error, fallback=fallback))
        logger.warning("remote count by %s failed (%s); using %s", name, error, fallback)
        return False
    kept = ctx.seg.head_stop + ctx.end - kept_from
    events.append(RemoteCounted(counter=name, tokens=answer, messages=kept, purpose=why))
    sent = ctx.composition(kept_from, self._factors)
    self._learn(sent, answer, f"remote:{name}", events)
    return True
