"""ContextWindowManager: per-run state tying shapes, accounting, budget and pruning.

Before every provider send, :meth:`ContextWindowManager.fit` returns the transcript
to send — the caller's own message objects, in order, a subsequence of what was
given — with the head and the newest turn always kept and the oldest whole turns
dropped until the request fits ``window - reserve - safety``; and the ``max_tokens``
that fits what is left (the shrink guard), so prompt + tools + output never exceed the
window. When even head + newest turn cannot fit it raises
:class:`~windowguard.ContextTruncatedError` and no provider call may follow.

Counting, from the best source available (DESIGN.md "Accounting"):

* the **ledger** (:mod:`windowguard.accounting.ledger`): the prompt tokens the provider
  reported for each earlier request (``last_usage``) are exact; the difference between
  consecutive reports is the exact cost of the turns appended in between, and measured
  turns keep their cost after a prune;
* a caller's own **counter** (``counter=``), authoritative: it counts every message the
  ledger has not measured, and ``Fit.sources`` names it;
* a **local exact tokenizer** with the family's template accounting
  (:mod:`windowguard.accounting.local`), found automatically, used near the edge;
* a **remote count** (:mod:`windowguard.accounting.remote`): the serving endpoint's own
  count, asked only near the edge, at most ``max_remote_counts`` times per send;
* the over-counting **heuristic** (:mod:`windowguard.accounting.estimate`) for the rest.

**The edge rule** (:mod:`windowguard.pipeline._decide`, decision 0004): whenever an exact source
exists, decisions rest on an upper count (exact where measured or counted, a guaranteed
bound — the UTF-8 bytes a template shows, plus framing — elsewhere); near the edge the
unmeasured part is counted exactly first. Only with no exact source at all does the
heuristic's estimate decide (ADR-107).

Calibration (ADR-107) applies to the estimated part only, one factor per estimating
source (the heuristic's starts at 1.05, the local tokenizer's at 1.0): each only rises,
by at most x1.5 per report, to measured / estimated of what a report newly measured
(tokens the request does not show are kept apart), and resets on a run's first send
(``last_usage=None``). A later send whose provider reported no usage passes
:data:`~windowguard.NO_USAGE`.

Refusals rest on the best count: with any exact source, head + newest turn + tools
(exact where counted) plus the output floor must exceed the window for
:class:`~windowguard.ContextTruncatedError`; otherwise they are sent with ``max_tokens``
shrunk to fit. With no exact source at all, when the estimate exceeds the input budget
(ADR-107). See ``docs/decisions/0004-token-accounting.md``.

Work per send is proportional to what was appended since the previous send when no
decision is near the edge: only new messages are shaped and estimated, the ledger
attributes the report to them in O(log n), and pruning searches prefix sums. Messages
are assumed not to be mutated after they were sent; appending, dropping or replacing
whole messages is handled (a changed prefix rebuilds from the per-message cache, keeping
what the ledger measured of messages that are still there).

Damaged input (orphaned result, unanswered call, unknown role, content of a wrong
type) is passed on unchanged with ``Fit.deferred`` set and a ``transcript_deferred``
event, or raises :class:`~windowguard.InvalidTranscriptError` with ``strict=True``.
"""

from __future__ import annotations

import copy as _copy
import logging
import operator
from bisect import bisect_left
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import replace
from itertools import repeat
from typing import Any

from ..accounting import CounterArg, choose_sources, infer_family
from ..accounting.bounds import message_costs
from ..accounting.catalog import ModelInfo, OverridesArg, resolve_model_info
from ..accounting.estimate import Estimator
from ..accounting.ledger import Factors
from ..accounting.local import TEMPLATE_OF, TemplateAccounting
from ..accounting.remote import CountQuery, RemoteCounter, RemoteCountError
from ..accounting.templates import TEXT_TEMPLATES
from ..accounting.usage import (
    NO_USAGE,
    Calibration,
    cached_tokens_from_usage,
    prompt_tokens_from_usage,
)
from ..core.adapters import check_format, check_messages, shaper
from ..core.budget import Budget, compute_budget
from ..core.edits.config import EditStage, check_edits, trigger_tokens
from ..core.edits.records import EditRecord
from ..core.edits.summary import render_turns, summary_message
from ..core.events import (
    Event,
    RemoteCounted,
    RemoteCountFailed,
    TokenizerInferred,
    TranscriptDeferred,
    TranscriptPruned,
    UsageExcludesCached,
    UsageMismatch,
)
from ..core.exceptions import ConfigurationError, InvalidTranscriptError
from ..core.prune import POLICIES, PruningPolicy, turns_to_drop
from ..core.shrink import DEFAULT_FLOOR, DEFAULT_SAFETY_BUFFER
from ..core.turns import Problem, segment
from ._damaged import damaged_stretch, plan_damaged
from ._decide import Policy, candidate, choose, near_edge, refuse_or_keep
from ._editing import (
    BytesBounded,
    EditState,
    Stages,
    SummaryQuery,
    SummaryState,
    clamp_new,
    clamp_to_fit,
    clear_block,
    newest_results,
    summarize_now,
    summary_key,
)
from ._fitting import Composition, Count, Fit, FitContext, Summarized, build_fit, learn
from ._transcript import Fixed, RequestParts, Transcript, same_message, update_transcript

__all__ = ["DEFAULT_MAX_REMOTE_COUNTS", "ContextWindowManager", "Fit"]

logger = logging.getLogger("windowguard")

DEFAULT_FALLBACK_WINDOW = 8192
DEFAULT_MAX_REMOTE_COUNTS = 2
"""Remote counts one send may ask for (a confirmation, then the pruned request)."""
LOCAL_CALIBRATION_SEED = 1.0
"""Local exact counts start uncalibrated: they are the template's own count, within a
token or two; their factor grows only if reports show them short."""
DEFAULT_HOLD_TURNS = 4
"""A low-water prune must free room for this many typical turns (decision 0003)."""
MISMATCH_TOLERANCE = 0.02
"""How far a report may differ from the local exact count of the same request (plus 8
tokens) before a ``usage_mismatch`` event says so."""

RemoteAnswer = int | BaseException
Query = CountQuery | SummaryQuery
"""What :meth:`ContextWindowManager.fit_steps` asks its driver for."""


class ContextWindowManager:
    """Fits each request of one agent run into the model's context window.

    Example:
        >>> import windowguard as wg
        >>> mgr = wg.ContextWindowManager(model="gpt-4o")
        >>> fit = mgr.fit([{"role": "user", "content": "hi"}], max_tokens=1024)
        >>> fit.messages, fit.dropped_turns, fit.max_tokens
        ([{'role': 'user', 'content': 'hi'}], 0, 1024)

    Args:
        model: the model name; picks catalog limits and the tokenizer family.
        model_info: explicit limits; override the catalog's numbers.
        safety: tokens kept free below the window (seed 003's proactive 500).
        fallback_window: the window of an unknown model (ADR-107's conservative 8192).
        counter: how to count what the ledger has not measured. None or ``"auto"``
            (default): the family's exact local tokenizer when one is installed, and a
            remote counter when :meth:`from_endpoint` or a ``ToolLoop`` finds one;
            ``"heuristic"``: neither (the ledger and the heuristic only); a
            :class:`~windowguard.TokenCounter`: that exact tokenizer, through the
            family's chat template; a :class:`~windowguard.accounting.remote.RemoteCounter`:
            that count endpoint (plus the local tokenizer, if any).
        strict: raise :class:`~windowguard.InvalidTranscriptError` on damaged input
            instead of passing it on unchanged.
        tokenizer: the tokenizer family, overriding the catalog's.
        floor: the smallest ``max_tokens`` ever returned (seed 003's 200).
        overrides: per-model limit overrides (a dict or a JSON/TOML path; else the
            file named by ``WINDOWGUARD_MODELS``).
        pruning: ``"low_water"`` (default) drops down to ``low_water`` x budget and then
            keeps that cut while requests fit, so the prompt prefix stays stable for the
            provider's cache; ``"minimal"`` drops just enough to fit each send.
        low_water: the fraction of the budget a low-water prune drops down to.
        hold_turns: a low-water prune drops below what fits only when the room it frees
            holds this many typical recent turns; with turns that large against the
            window the cut would move again at once, so it drops just enough (0: always
            drop to the mark).
        max_remote_counts: remote counts one send may ask for (0 disables them).
        edits: the edit stages to run before whole turns are dropped, cheapest first
            (:class:`~windowguard.ClampToolResults`, :class:`~windowguard.ClearToolResults`,
            :class:`~windowguard.Summarize`; ``docs/edits.md``). None (default):
            :data:`~windowguard.DEFAULT_EDITS`, clamping and clearing (decision 0006);
            ``()`` drops whole turns only, as before.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        model_info: ModelInfo | None = None,
        safety: int = DEFAULT_SAFETY_BUFFER,
        fallback_window: int = DEFAULT_FALLBACK_WINDOW,
        counter: CounterArg = None,
        strict: bool = False,
        tokenizer: str | None = None,
        floor: int = DEFAULT_FLOOR,
        overrides: OverridesArg = None,
        pruning: PruningPolicy = "low_water",
        low_water: float = 0.7,
        hold_turns: int = DEFAULT_HOLD_TURNS,
        max_remote_counts: int = DEFAULT_MAX_REMOTE_COUNTS,
        edits: Sequence[EditStage] | None = None,
    ) -> None:
        if model is not None and not isinstance(model, str):
            raise ConfigurationError(f"model must be a model name string, got {model!r}")
        if not isinstance(safety, int) or isinstance(safety, bool) or safety < 0:
            raise ConfigurationError(f"safety must be a non-negative int, got {safety!r}")
        if not isinstance(fallback_window, int) or fallback_window <= 0:
            raise ConfigurationError(
                f"fallback_window must be a positive int, got {fallback_window!r}"
            )
        if not isinstance(floor, int) or isinstance(floor, bool) or floor < 1:
            raise ConfigurationError(f"floor must be a positive int, got {floor!r}")
        if not isinstance(strict, bool):
            raise ConfigurationError(f"strict must be True or False, got {strict!r}")
        if tokenizer is not None and not isinstance(tokenizer, str):
            raise ConfigurationError(f"tokenizer must be a family name, got {tokenizer!r}")
        if pruning not in POLICIES:
            raise ConfigurationError(f"pruning must be one of {POLICIES}, got {pruning!r}")
        if not isinstance(low_water, (int, float)) or not 0.1 <= low_water <= 1.0:
            raise ConfigurationError(f"low_water must lie in [0.1, 1.0], got {low_water!r}")
        if not isinstance(hold_turns, int) or isinstance(hold_turns, bool) or hold_turns < 0:
            raise ConfigurationError(f"hold_turns must be a non-negative int, got {hold_turns!r}")
        if (
            not isinstance(max_remote_counts, int)
            or isinstance(max_remote_counts, bool)
            or max_remote_counts < 0
        ):
            raise ConfigurationError(
                f"max_remote_counts must be a non-negative int, got {max_remote_counts!r}"
            )
        self.pruning: PruningPolicy = pruning
        self.low_water = float(low_water)
        self.hold_turns = hold_turns
        self.model = model
        self.model_info = _resolve_model_info(
            model, model_info, fallback_window, tokenizer, overrides
        )
        self.safety = safety
        self.floor = floor
        self.strict = strict
        self.max_remote_counts = max_remote_counts
        self.edits: tuple[EditStage, ...] = check_edits(edits)
        self._stages = Stages.of(self.edits)
        self.estimator = Estimator(self.model_info.tokenizer)
        sources = choose_sources(counter, self.model_info.tokenizer)
        self.local: TemplateAccounting | None = sources.local
        self.remote: RemoteCounter | None = sources.remote
        self._auto_remote = sources.auto_remote
        self._auto_local = sources.auto_local
        # A caller's own counter is authoritative: it counts every unmeasured message.
        self._local_name = sources.local_name
        self._cached_apart = False  # the provider's prompt_tokens leave cached ones out
        self._reset_run_state()
        self._sources_cache: (
            tuple[RemoteCounter | None, TemplateAccounting | None, Estimator, tuple[str, ...]]
            | None
        ) = None
        self._budget_cache: tuple[tuple[int, object, object, object], object, Budget] | None = None

    def _reset_run_state(self) -> None:
        self.calibration = Calibration()
        self.local_calibration = Calibration(LOCAL_CALIBRATION_SEED)
        self._factors_cache = Factors(self.calibration.factor, self.local_calibration.factor)
        self._run: Transcript | None = None
        self._parts = RequestParts(self.estimator)
        self._sent: Composition | None = None
        self._sent_reply: int | None = None
        self._pending: list[Event] = []
        self._pending_edits: list[EditRecord] = []  # a re-fit's: its next pass receipts them
        # The request a provider refused without saying how large it was (its
        # composition and reply): the next fit sends strictly less.
        self._refused: tuple[Composition, int | None] | None = None
        self._distrust = False
        self._edit_state = EditState()

    @classmethod
    def from_endpoint(
        cls,
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
        Either may find nothing: the catalog (or the fallback window) and the ledger
        then do, and events say so.

        Args:
            base_url: the endpoint, with or without a trailing ``/v1``.
            model: the model name as the server knows it.
            api_key: sent to the discovery and count routes.
            timeout: seconds for each discovery (window; count endpoint).
            **options: any other :class:`ContextWindowManager` argument.

        Raises:
            ConfigurationError: a base URL that is not http(s), or a bad option.
        """
        from ..accounting.discovery import discover_model_info
        from ..accounting.remote import discover_counter

        info = options.pop("model_info", None)
        if info is None:
            discovered = discover_model_info(base_url, model, api_key=api_key, timeout=timeout)
            info = resolve_model_info(
                model,
                discovered=discovered,
                overrides=options.get("overrides"),
                fallback_window=options.get("fallback_window", DEFAULT_FALLBACK_WINDOW),
            )
        manager = cls(model, model_info=info, **options)
        if manager.wants_remote_counter:
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

    # -- per-run state ---------------------------------------------------------------

    @property
    def context_window(self) -> int:
        """The window enforced (and measured by the gauge)."""
        return self.model_info.context_window

    @property
    def counter_name(self) -> str:
        """What counts the unmeasured parts: remote, local (or the caller's counter) and
        the heuristic's family."""
        return ", ".join(self._counter_sources)

    @property
    def _counter_sources(self) -> tuple[str, ...]:
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

    @property
    def has_exact_source(self) -> bool:
        """Whether anything can count the unmeasured part exactly (a caller's counter, a
        local tokenizer, a count API): then decisions rest on upper counts."""
        return self.local is not None or self.remote is not None

    @property
    def wants_remote_counter(self) -> bool:
        """Whether a count API found later would be used (``counter=`` left it open)."""
        return self._auto_remote and self.remote is None

    def use_remote_counter(
        self, counter: RemoteCounter | None, *, model: str | None = None
    ) -> None:
        """Give the manager the serving endpoint's count API (a ``ToolLoop`` does this
        with what its provider discovered); ignored when ``counter=`` chose otherwise.

        Args:
            counter: the count API, or None.
            model: the model name to count for, when the manager was built without one.
        """
        if self._auto_remote and self.remote is None:
            self.remote = counter
        if self.model is None and model:
            self.model = model

    def reset(self) -> None:
        """Start a new run: forget calibration, the ledger and cached estimates."""
        self._reset_run_state()

    def copy(self) -> ContextWindowManager:
        """A manager with the same configuration and fresh per-run state."""
        clone = _copy.copy(self)
        clone._reset_run_state()
        return clone

    def observe_usage(self, last_usage: object) -> None:
        """Attribute the prompt tokens reported for the last fitted request (the ledger),
        and grow the calibration from what they newly measured.

        A report of 0 prompt tokens measures nothing: every request the manager fits has
        framing at least, and servers and SDKs (the Agents SDK, LiteLLM, pydantic-ai)
        report a missing usage as zeros. Taken as exact, it would leave the whole
        request uncounted and ``max_tokens`` sized into what it fills."""
        if last_usage is NO_USAGE:
            return
        reported = prompt_tokens_from_usage(last_usage)
        if not reported:
            return
        cached = cached_tokens_from_usage(last_usage)
        if cached:
            self._check_cached_apart(reported, cached)
        if cached and self._cached_apart:
            reported += cached
        self._learn_sent(reported, "usage")

    def _check_cached_apart(self, reported: int, cached: int) -> None:
        """Whether ``reported`` leaves out the ``cached`` tokens reported beside it: it
        does when it is below them, or below what is already known exactly of the same
        request, or when adding them brings it closer to a local exact count of the whole
        request. Once that is believed, every later report is checked again: when adding
        them would overshoot what the request can hold (its local count, else its
        guaranteed bound), they were inside ``prompt_tokens`` after all, and the belief is
        dropped.

        Only what is certain is evidence. Fewer prompt tokens than cached ones always
        is. A local count of a request holding media (an allowance each) is not, nor is
        a caller's counter's (it may count high). Reasoning is what a template may show
        less of than was counted or measured (Qwen3 drops it before the last user query,
        the Llama 3 and Mistral templates always), so with reasoning in the request
        neither a count nor a measurement it falls short of is evidence."""
        sent = self._sent
        if sent is None or sent.run is not self._run:
            return
        counted = sent.counted
        tolerance = max(8, int(MISMATCH_TOLERANCE * counted)) if counted is not None else 0
        if self._cached_apart:
            total = reported + cached
            if counted is not None and total > counted + tolerance:
                if abs(reported - counted) < total - counted and not self._request_holds(sent)[0]:
                    self._cached_counted_in(reported, cached, f"its local count is {counted}")
                return
            if counted is None:
                costs, entries = sent.costs, sent.run.ledger.entries
                bound = costs.fixed_bound + costs.summary_bound
                bound += sum(e.bound for e in entries[: sent.head_stop])
                bound += sum(e.bound for e in entries[sent.kept_from : sent.end])
                if total > bound and not self._request_holds(sent)[0]:
                    self._cached_counted_in(reported, cached, f"it can hold at most {bound}")
            return
        known = sent.measured
        evidence = ""
        if reported < cached:
            evidence = "fewer than the cached tokens, which a prompt count includes"
        elif reported + 8 < known <= reported + cached + 8:
            if not self._request_holds(sent)[1]:
                evidence = f"below the {known} tokens already measured of the same request"
        elif (
            counted is not None
            and self._local_name is None
            and abs(reported - counted) > tolerance
            and abs(reported + cached - counted) < abs(reported - counted)
            and not any(self._request_holds(sent))
        ):
            evidence = f"the local exact count of the request is {counted}"
        if not evidence:
            return
        self._cached_apart = True
        self._pending.append(
            UsageExcludesCached(reported_tokens=reported, cached_tokens=cached, evidence=evidence)
        )
        logger.warning(
            "the provider's prompt_tokens (%d) leave out the %d cached tokens (%s); adding them",
            reported,
            cached,
            evidence,
        )
        # Earlier reports may have left them out too: what they measured is forgotten.
        run = self._run
        if run is not None:
            run.ledger.forget_measurements()

    def _cached_counted_in(self, reported: int, cached: int, why: str) -> None:
        """The provider's ``prompt_tokens`` include its cached tokens after all: stop
        adding them, and forget what the reports they were added to measured."""
        self._cached_apart = False
        logger.warning(
            "the provider's prompt_tokens (%d) include the %d cached tokens after all "
            "(adding them overshoots the request: %s); no longer adding them",
            reported,
            cached,
            why,
        )
        run = self._run
        if run is not None:
            run.ledger.forget_measurements()

    @staticmethod
    def _request_holds(sent: Composition) -> tuple[bool, bool]:
        """Whether the request holds what no count or bound covers (media, items that
        stand for tokens they do not show), and whether it holds reasoning."""
        entries = sent.run.ledger.entries
        unbounded = reasoning = False
        for entry in (*entries[: sent.head_stop], *entries[sent.kept_from : sent.end]):
            shape = entry.shape
            unbounded = unbounded or shape.media_items > 0 or entry.opaque
            reasoning = reasoning or shape.reasoning or any(p.reasoning for p in shape.segments)
        return unbounded, reasoning

    def observe_overflow(
        self,
        prompt_tokens: int | None = None,
        context_window: int | None = None,
        *,
        attributed: bool = True,
    ) -> None:
        """Learn from a provider's overflow refusal of the last fitted request.

        Args:
            prompt_tokens: the prompt size the provider stated, when exact (never a
                lower bound): the ledger attributes it like a usage report.
            context_window: the window the provider stated; adopted when smaller than
                the one in use (the provider knows what it serves).
            attributed: whether the refused request is the last fitted one. False for
                another send's refusal (a concurrent branch's, an older stream's): only
                the window it stated is learnt, since nothing else about it describes
                the last fitted request.

        The next fit treats its decision as near the edge: it counts exactly, when it
        can, before sending again. When the provider gave no numbers, the next fit sends
        strictly less than the refused request: it assumes a window below what that
        request was counted to need, so it drops at least one whole turn or shrinks
        ``max_tokens`` — never the same request twice.
        """
        info = self.model_info
        if not attributed:
            if context_window is not None and 0 < context_window < info.context_window:
                self._assume_window(context_window, "the provider's overflow error")
            return
        if prompt_tokens is not None:
            self._learn_sent(prompt_tokens, "overflow error")
        self._distrust = True
        if context_window is not None and 0 < context_window < info.context_window:
            self._assume_window(context_window, "the provider's overflow error")
        elif prompt_tokens is None and context_window is None:
            sent = self._sent
            if sent is not None and sent.run is self._run:
                self._refused = (sent, self._sent_reply)

    def _assume_window(self, window: int, origin: str) -> None:
        info = self.model_info
        self.model_info = replace(
            info,
            context_window=window,
            max_output_tokens=_at_most(info.max_output_tokens, window),
            max_input_tokens=_at_most(info.max_input_tokens, window),
            source="discovered",
            origin=origin,
        )

    # -- fitting ---------------------------------------------------------------------

    def fit(
        self,
        messages: Sequence[object],
        *,
        tools: Sequence[object] | None = None,
        max_tokens: int | None = None,
        last_usage: object = None,
        system: object = None,
        format: str | None = None,
        safety: int | None = None,
    ) -> Fit:
        """Fit one request into the window.

        A remote count, when the manager has a counter and the decision is near the
        edge, is made here synchronously (bounded by the counter's timeout). The async
        tool loop drives :meth:`fit_steps` instead, so it never blocks its event loop.

        Args:
            messages: the full transcript (dicts or SDK objects) in its wire format.
            tools: the request's tool schemas (wire-format dicts); None for a plain
                completion, so no schema tokens are counted.
            max_tokens: the reply budget the caller wants; None lets the manager pick
                the largest that fits (capped by the model's output cap).
            last_usage: None on a run's first send (resets the run's state); afterwards
                the provider-reported usage of the previous request, or ``NO_USAGE``.
            system: Anthropic's separate system argument.
            format: ``"openai_chat"``, ``"anthropic"`` or ``"responses"``; detected
                when None.
            safety: overrides the manager's safety for this send (the reactive retry
                after an overflow uses 100).

        Returns:
            A :class:`Fit`.

        Raises:
            ContextTruncatedError: head + newest turn cannot fit; send nothing.
            InvalidTranscriptError: damaged input with ``strict=True``, or input that is
                not a transcript at all.
            ConfigurationError: an unusable ``max_tokens`` or ``safety``.
        """
        steps = self.fit_steps(
            messages,
            tools=tools,
            max_tokens=max_tokens,
            last_usage=last_usage,
            system=system,
            format=format,
            safety=safety,
        )
        try:
            query = next(steps)
            while True:
                if isinstance(query, SummaryQuery):
                    query = steps.send(summarize_now(query))
                else:
                    query = steps.send(self._count_now(query))
        except StopIteration as done:
            result: Fit = done.value
            return result

    def _count_now(self, query: CountQuery) -> RemoteAnswer:
        remote = self.remote
        if remote is None:
            return RemoteCountError("no remote counter")
        try:
            return int(remote.count(query))
        except Exception as exc:  # a counter must never break a send: fall back
            return exc

    def fit_steps(
        self,
        messages: Sequence[object],
        *,
        tools: Sequence[object] | None = None,
        max_tokens: int | None = None,
        last_usage: object = None,
        system: object = None,
        format: str | None = None,
        safety: int | None = None,
    ) -> Generator[Query, Any, Fit]:
        """:meth:`fit` as a sans-I/O generator: it yields a :class:`CountQuery` when it
        wants the remote counter's count (send it the count, or the exception the count
        raised) and a :class:`~windowguard.pipeline._editing.SummaryQuery` when it folds turns
        into the summary (send it the summarizer's text, or its exception), and returns
        the :class:`Fit`. Arguments and errors as for :meth:`fit`.
        """
        messages = _as_transcript(messages)
        explicit = check_format(format)
        if last_usage is None:
            self.reset()
        else:
            self.observe_usage(last_usage)
        events: list[Event] = self._pending
        self._pending = []
        refitted, self._pending_edits = self._pending_edits, []
        run = self._run = update_transcript(self._run, messages, explicit, system, self.estimator)
        seg = run.index.segmentation()
        fixed = self._parts.fixed(run.format, system, tools)
        refused, self._refused = self._refused, None
        budget = self._budget(max_tokens, self.safety if safety is None else safety)
        self._infer_tokenizer_from_base(run, seg.head_stop, fixed, events)
        ctx = FitContext(
            run=run,
            seg=seg,
            fixed=fixed,
            budget=budget,
            requested=max_tokens,
            use_upper=self.has_exact_source,
        )
        if self._stages.summarize is not None:
            self._resume_summary(ctx)
        if self._local_name is not None:
            self._count_locally(ctx)  # a caller's counter counts everything unmeasured
        if seg.problems:
            if self.strict:
                first = seg.problems[0]
                raise InvalidTranscriptError(first.problem, index=first.index)
            return self._fit_damaged(messages, ctx, seg.problems, events)
        made = refitted + self._clamp_arrivals(ctx)
        distrust, self._distrust = self._distrust or refused is not None, False
        dropped, calls = yield from self._decide(ctx, messages, system, events, distrust, 0)
        if self._stages and (
            self._loses_context(ctx, dropped) or self._clear_triggered(ctx, dropped)
        ):
            edited = self._edit(ctx, dropped)
            if edited:
                made += edited
                dropped, calls = yield from self._decide(
                    ctx, messages, system, events, False, calls
                )
        if self._stages.summarize is not None and dropped is not None:
            folded = yield from self._fold(ctx, dropped)
            if folded is not None:
                made.append(folded)
                dropped, calls = yield from self._decide(
                    ctx, messages, system, events, False, calls
                )
        if refused is not None and self._shrink_below(ctx, refused, max_tokens, safety):
            if not ctx.use_upper:
                # With only the heuristic, its error may be more than the token the new
                # window takes off: send less again, down to the low-water mark.
                lowered = int(ctx.budget.input_tokens * self.low_water)
                ctx.budget = replace(ctx.budget, input_tokens=lowered)
            dropped = choose(ctx, self._factors, self._policy)
        elif (
            distrust
            and not ctx.use_upper
            and dropped is not None
            and not ctx.count(ctx.kept_from(dropped), self._factors).exact
        ):
            # The provider refused the last request although it was counted to fit, and
            # nothing exact says otherwise now: send less than that count allows, down to
            # the low-water mark, rather than the same request again.
            lowered = int(ctx.budget.input_tokens * self.low_water)
            ctx.budget = replace(ctx.budget, input_tokens=lowered)
            dropped = choose(ctx, self._factors, self._policy)
        if dropped is None:
            minimal = len(seg.turn_starts) - 1 if seg.turn_starts else 0
            count = ctx.count(ctx.kept_from(minimal), self._factors)
            if not count.exact and self.remote is not None and calls < self.max_remote_counts:
                answer = yield ctx.query(ctx.kept_from(minimal), system, self.model or "")
                calls += 1
                if self._counted(ctx, ctx.kept_from(minimal), answer, events, "refusal check"):
                    dropped = choose(ctx, self._factors, self._policy)
                    count = ctx.count(ctx.kept_from(minimal), self._factors)
            if (
                dropped is None
                and not count.exact
                and count.tokens + self.floor > ctx.budget.context_window
                and self.local is None
                and any(isinstance(event, RemoteCountFailed) for event in events)
            ):
                # The bound would refuse, and the count API, the only exact source, failed
                # for this send: the ledger and the estimates decide (decision 0004), as
                # with no exact source, rather than a refusal resting on the bound alone.
                ctx.use_upper = False
                ctx.refresh()
                dropped = choose(ctx, self._factors, self._policy)
                count = ctx.count(ctx.kept_from(minimal), self._factors)
            if dropped is None:
                refuse_or_keep(ctx, count, floor=self.floor, source=self._source_of(count))
                dropped = minimal
        kept_from = ctx.kept_from(dropped)
        if not run.verify(messages, kept_from):
            # A message before the previous cut was replaced, and this cut keeps it: fit
            # again from a view rebuilt of every message (what was measured stays, and so
            # do the edits made and the previous cut, which the messages it kept still
            # place); the edits this pass made are receipted by the next.
            self._pending, self._pending_edits = events, made
            run.verified_from = len(run.seen) + 1  # compare everything next time
            fit: Fit = yield from self.fit_steps(
                messages,
                tools=tools,
                max_tokens=max_tokens,
                last_usage=NO_USAGE,
                system=system,
                format=format,
                safety=safety,
            )
            return fit
        return self._fitted(messages, ctx, dropped, events, calls, made)

    def _decide(
        self,
        ctx: FitContext,
        messages: Sequence[object],
        system: object,
        events: list[Event],
        distrust: bool,
        calls: int,
    ) -> Generator[Query, Any, tuple[int | None, int]]:
        """Choose what to drop; near the edge (or after a refusal), count exactly first
        and choose again. Returns the choice and the remote counts made so far."""
        dropped = choose(ctx, self._factors, self._policy)
        if not ctx.use_upper or not (distrust or self._near_edge(ctx, dropped)):
            return dropped, calls
        if self._count_locally(ctx):
            dropped = choose(ctx, self._factors, self._policy)
        first = calls
        counted: int | None = None
        while calls < self.max_remote_counts and self.remote is not None:
            if not (distrust and calls == first) and not self._near_edge(ctx, dropped):
                break
            guess = choose(ctx, self._factors, self._policy, best=True)
            kept_from = candidate(ctx, dropped, self._factors, guess, counted)
            if kept_from is None:
                break
            counted = kept_from if counted is None else min(counted, kept_from)
            answer = yield ctx.query(kept_from, system, self.model or "")
            calls += 1
            if not self._counted(ctx, kept_from, answer, events, "confirm"):
                break
            dropped = choose(ctx, self._factors, self._policy)
        return dropped, calls

    # -- edit stages -------------------------------------------------------------------

    def _text_count(self) -> Callable[[str], int]:
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

    def _clamp_arrivals(self, ctx: FitContext) -> list[EditRecord]:
        """Clamp the tool results that arrived since the previous send."""
        clamp = self._stages.clamp
        run = ctx.run
        start, run.edits_checked = run.edits_checked, ctx.end
        if clamp is None or start >= ctx.end:
            return []
        return clamp_new(ctx, clamp, start, self._text_count(), self._edit_state, self.estimator)

    def _loses_context(self, ctx: FitContext, dropped: int | None) -> bool:
        """Whether the choice refuses, or drops turns the previous send kept."""
        if dropped is None:
            return True
        if not dropped:
            return False
        anchor = ctx.run.anchor
        return anchor is None or ctx.kept_from(dropped) > anchor

    @staticmethod
    def _kept_whole(ctx: FitContext, keep: int) -> int:
        """Where the newest ``keep`` turns begin (their results are never cleared)."""
        starts = ctx.seg.turn_starts
        return starts[len(starts) - keep] if len(starts) > keep else ctx.seg.head_stop

    def _clear_triggered(self, ctx: FitContext, dropped: int | None) -> bool:
        """Whether the clear stage's ``trigger`` is passed by what this send keeps."""
        clear = self._stages.clear
        if clear is None or clear.trigger is None or dropped is None:
            return False
        limit = trigger_tokens(clear.trigger, ctx.budget.input_tokens)
        assert limit is not None
        # On the best count, not the guaranteed bound: the bound of a new turn's bytes
        # may be several times its tokens, and a policy is not a safety margin.
        return ctx.count(ctx.kept_from(dropped), self._factors).best > limit

    def _edit(self, ctx: FitContext, dropped: int | None) -> list[EditRecord]:
        """Edit before dropping: clear a block of old results down to the low-water
        mark; when even head + newest turn cannot fit, clamp the newest turn's results
        to what fits."""
        stages, state, count = self._stages, self._edit_state, self._text_count()
        made: list[EditRecord] = []
        anchor = ctx.run.anchor
        least = ctx.seg.head_stop if anchor is None else anchor
        if stages.clear is not None:
            # Down to the low-water mark, and far enough below the budget to hold the
            # next few typical turns (as a low-water drop does): one block of clears
            # then lasts several sends, and each of them extends the previous request.
            budget = ctx.budget.input_tokens
            target = budget
            if self.pruning == "low_water" or stages.clear.low_water is not None:
                mark = stages.clear.low_water or self.low_water
                target = int(budget * mark)
                if self.hold_turns:
                    hold = self.hold_turns * ctx.typical_turn(self._factors)
                    target = max(min(target, budget - hold), budget // 4)
            kept = ctx.count(least, self._factors)
            forced = self._loses_context(ctx, dropped)
            size = kept.tokens if forced else kept.best  # as _clear_triggered measures it
            need = size - target
            at_least = stages.clear.clear_at_least
            if not forced:
                # Cleared for the trigger alone: only a block that brings the request at
                # least halfway from the trigger down to the mark. Once the cleared turns'
                # placeholders alone come near the trigger, clearing each new result as
                # it ages would rewrite the prompt on every send; the request then grows
                # to the budget and drops old turns instead.
                limit = trigger_tokens(stages.clear.trigger, budget) or budget
                halfway = max(target, (limit + target) // 2)
                at_least = max(at_least, size - halfway)
                futile = state.futile_clear
                if futile is not None and futile[0] == anchor:
                    _, then, reach = futile
                    if reach + (size - then) < at_least:
                        need = 0  # nothing new could reach it: not worth a scan
            if need > 0:
                cleared = clear_block(
                    ctx,
                    stages.clear,
                    least,
                    need,
                    count,
                    state,
                    self.estimator,
                    at_least=at_least,
                )
                made += cleared
                state.futile_clear = None
                if not cleared and not forced:
                    protected = ctx.count(self._kept_whole(ctx, stages.clear.keep), self._factors)
                    head = ctx.count(ctx.end, self._factors)
                    reach = state.clear_reach + protected.best - head.best
                    state.futile_clear = (anchor, size, reach)
        if stages.clamp is not None:
            factors = self._factors
            minimal = ctx.count(ctx.newest, factors) if ctx.seg.turn_starts else None
            if minimal is not None and minimal.tokens > ctx.budget.input_tokens:
                over = minimal.tokens - ctx.budget.input_tokens
                results = sum(
                    count(r.text) for r in newest_results(ctx, stages.clamp.exclude_tools)
                )
                room = max(results - over, 0)
                made += clamp_to_fit(ctx, stages.clamp, room, count, state, self.estimator)
        del dropped
        return made

    def _resume_summary(self, ctx: FitContext) -> None:
        """Send the run's summary again, after the head, if the turns it stands for are
        still where they were (a transcript that changed under it loses it: the turns
        after it are then counted and dropped as without one)."""
        summary = self._edit_state.summary
        if summary is None:
            return
        seg = ctx.seg
        starts = seg.turn_starts
        at = seg.head_stop + len(summary.covers)  # where the kept turns begin again
        turn = bisect_left(starts, at)
        if turn >= len(starts) or starts[turn] != at or not self._still_there(ctx, at):
            logger.warning("the summarized turns changed; the summary is no longer sent")
            self._edit_state.summary = None
            return
        resumed = self._edit_state.summary  # (with this send's objects)
        assert resumed is not None
        ctx.summarize(self._summarized(ctx, resumed), turn)

    def _still_there(self, ctx: FitContext, at: int) -> bool:
        """Whether the messages the run's summary folded, and the one it resumes at
        (``at``), are where they were: the same objects, or equal ones (in the Anthropic
        format, apart from ``cache_control``), as a proxy parsing each request or a
        client copying its history sends them. The summary then remembers this send's
        objects, found by identity again while they are sent. A message the caller
        changed after it was folded is not in the summary, which must not stand for it."""
        state = self._edit_state
        summary = state.summary
        assert summary is not None
        now = ctx.run.seen[ctx.seg.head_stop : at + 1]
        then = [*summary.covers, summary.resumes_at]
        if len(now) != len(then):
            return False
        if all(map(operator.is_, now, then)):
            return True
        try:
            same = now == then  # at C speed; each pair compared by identity first
        except Exception:  # a message whose == raises (arrays in its content)
            same = False
        if not same and not all(map(same_message, now, then, repeat(ctx.run.format))):
            return False
        state.summary = replace(summary, covers=tuple(now[:-1]), resumes_at=now[-1])
        return True

    def _summarized(self, ctx: FitContext, summary: SummaryState) -> Summarized:
        shape = shaper(ctx.run.format)(summary.message)
        raw, bound = message_costs(self.estimator)(shape)
        key = summary_key(None, summary.text)
        return Summarized(message=summary.message, key=key, shape=shape, raw=raw, bound=bound)

    def _fold(self, ctx: FitContext, dropped: int) -> Generator[Query, Any, EditRecord | None]:
        """Fold the whole turns this send would lose (or, once the request reaches the
        stage's ``trigger``, old turns) into the run's summary: the turns after the
        previous summary up to the cut and beyond, in one block down to the low-water
        mark (never the newest ``keep_turns``), with room kept for the summary itself.
        A summary that would not be smaller than what it stands for is not used (and the
        next send drops without asking again)."""
        config = self._stages.summarize
        state = self._edit_state
        assert config is not None
        budget = ctx.budget.input_tokens
        cost = ctx.cost_function(self._factors)
        limit = trigger_tokens(config.trigger, budget)
        if dropped <= ctx.first_turn and (limit is None or cost(ctx.first_turn) < limit):
            return None  # no turn would be lost and no trigger is reached: nothing to fold
        if state.barren:
            state.barren = False  # one send without a summary, then try again
            return None
        starts = ctx.seg.turn_starts
        last_foldable = len(starts) - config.keep_turns
        previous = state.summary
        reserve = (previous.tokens if previous is not None else 0) + min(1_024, budget // 10)
        target = dropped
        # Fold a block, down to the low-water mark of the budget (of the trigger, when it
        # is lower) and far enough below it to hold the next ``hold_turns`` typical turns
        # (as the clear stage does), with room kept for the summary: the summarizer is
        # then not asked again on the next few sends.
        ceiling = budget if limit is None else min(budget, limit)
        mark = int(ceiling * self.low_water)
        if self.hold_turns:
            hold = self.hold_turns * ctx.typical_turn(self._factors)
            mark = max(min(mark, ceiling - hold), ceiling // 4)
        threshold = mark - reserve
        if cost(target) > threshold:
            found = turns_to_drop(cost=cost, turns=len(starts), budget=threshold)
            target = len(starts) - 1 if found is None else max(found, target)
        new_first = min(target, last_foldable)
        if new_first <= ctx.first_turn:
            return None
        run = ctx.run
        fold_from = ctx.kept_from(ctx.first_turn)
        fold_to = starts[new_first]
        turns = tuple(run.effective[fold_from:fold_to])
        previous_text = previous.text if previous is not None else None
        key = summary_key(previous_text, render_turns(list(turns), run.format))
        text = state.summaries.get(key)
        if text is None:
            answer = yield SummaryQuery(config=config, turns=turns, previous=previous_text, key=key)
            if not isinstance(answer, str) or not answer.strip():
                logger.warning("the summarizer failed (%s); dropping the turns instead", answer)
                state.barren = True
                return None
            text = state.summaries[key] = answer
        count = self._text_count()
        tokens = count(text) + 8
        folded = ctx.count(fold_from, self._factors).best - ctx.count(fold_to, self._factors).best
        folded += previous.tokens if previous is not None else 0
        if tokens >= folded:
            logger.warning(
                "a summary of %d tokens would stand for %d: dropping the turns instead",
                tokens,
                folded,
            )
            state.barren = True
            return None
        head_last = run.effective[ctx.seg.head_stop - 1] if ctx.seg.head_stop else None
        message = summary_message(run.format, text, like=head_last)
        state.summary = SummaryState(
            text=text,
            message=message,
            resumes_at=run.seen[fold_to],
            tokens=tokens,
            covers=tuple(run.seen[ctx.seg.head_stop : fold_to]),
        )
        ctx.summarize(self._summarized(ctx, state.summary), new_first)
        return EditRecord(
            kind="summarize",
            messages=tuple(range(fold_from, fold_to)),
            tokens_before=folded,
            tokens_after=tokens,
        )

    @property
    def summaries(self) -> dict[str, str]:
        """The summaries this run made, by the key of what they were made from (a
        journal keeps them, so a resumed run uses the same text)."""
        return dict(self._edit_state.summaries)

    def remember_summaries(self, summaries: Mapping[str, str]) -> None:
        """Give the run summaries made before (a resumed or replayed run's journal):
        the same turns are then folded into the same text, without the summarizer."""
        for key, text in summaries.items():
            if isinstance(key, str) and isinstance(text, str) and text.strip():
                self._edit_state.summaries[key] = text

    @property
    def _policy(self) -> Policy:
        return Policy(pruning=self.pruning, low_water=self.low_water, hold_turns=self.hold_turns)

    def _near_edge(self, ctx: FitContext, dropped: int | None) -> bool:
        remote = self.remote
        media = remote is not None and ctx.run.format in getattr(remote, "media_formats", ())
        return near_edge(
            ctx,
            dropped,
            self._factors,
            self.model_info,
            cheap_exact=self.local is not None,
            counts_media=media,
        )

    def _shrink_below(
        self,
        ctx: FitContext,
        refused: tuple[Composition, int | None],
        max_tokens: int | None,
        safety: int | None,
    ) -> bool:
        """A provider refused the last request without numbers: assume a window below
        what that request is now counted to need (exactly, when it could be counted, else
        its decision count) plus its reply, so the next request is strictly smaller: at
        least one whole turn fewer, or a smaller ``max_tokens``. Returns whether the
        window changed (the budget is made again)."""
        sent, reply = refused
        if sent.run is ctx.run and sent.end <= ctx.end:
            found = ctx.run.ledger.count(
                key=sent.key,
                head_stop=sent.head_stop,
                kept_from=sent.kept_from,
                end=sent.end,
                costs=ctx.costs,
                factors=self._factors,
            )
            tokens = found.best if found.exact or not ctx.use_upper else found.upper
        else:
            tokens = sent.upper if ctx.use_upper else sent.best
        needed = tokens + (reply or 0)
        window = max(needed - 1, self.floor + 1)
        if not 0 < window < self.model_info.context_window:
            return False
        self._assume_window(window, "a provider's overflow error without numbers")
        logger.warning(
            "the provider refused a request counted at %d tokens (+%d reply) as too long, "
            "without saying its window: assuming %d",
            tokens,
            reply or 0,
            window,
        )
        ctx.budget = self._budget(max_tokens, self.safety if safety is None else safety)
        return True

    def _budget(self, max_tokens: int | None, safety: int) -> Budget:
        """The input budget, made again only when what it depends on changes."""
        info = self.model_info
        key = (info.context_window, max_tokens, info.max_output_tokens, info.max_input_tokens)
        cached = self._budget_cache
        plain = type(safety) is int and (max_tokens is None or type(max_tokens) is int)
        if plain and cached is not None and cached[0] == key and cached[1] == safety:
            return cached[2]  # (a bool or a float is validated again, never equal to a hit)
        budget = compute_budget(
            context_window=info.context_window,
            max_tokens=max_tokens,
            max_output_tokens=info.max_output_tokens,
            max_input_tokens=info.max_input_tokens,
            safety=safety,
        )
        self._budget_cache = (key, safety, budget)
        return budget

    # -- counting ----------------------------------------------------------------------

    def _infer_tokenizer_from_base(
        self, run: Transcript, head_stop: int, fixed: Fixed, events: list[Event]
    ) -> None:
        """For a model of unknown family, name its tokenizer from the first exact base
        (framing + tools + head, reported alone), once per run."""
        if not self._auto_local or self.local is not None:
            return
        key = run.base_key[2] if run.base_key is not None else None
        base = run.ledger.bases.get(key) if key is not None else None
        if base is None or base.span is not None:
            return
        self._auto_local = False
        head = [e.shape for e in run.ledger.entries[:head_stop]]
        tools, system_shapes = fixed.tools, fixed.system_shapes

        def count_with(accounting: TemplateAccounting) -> int:
            counted = accounting.fixed_tokens(tools)
            counted += sum(accounting.message_tokens(shape) for shape in system_shapes)
            return counted + sum(accounting.message_tokens(shape) for shape in head)

        found = infer_family(base.tokens, count_with)
        if found is not None:
            self.local, counted = found
            events.append(
                TokenizerInferred(
                    family=self.local.family, reported_tokens=base.tokens, counted_tokens=counted
                )
            )
            family = self.local.family
            logger.info("the model counts like %s (%d of %d tokens)", family, counted, base.tokens)

    def _count_locally(self, ctx: FitContext) -> bool:
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

    def _source_of(self, count: Count) -> str:
        if count.exact:
            return "ledger" if self.remote is None else f"ledger / remote:{self.remote.name}"
        return self.counter_name

    def _counted(
        self, ctx: FitContext, kept_from: int, answer: RemoteAnswer, events: list[Event], why: str
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

    def _learn_sent(self, total: int, origin: str) -> None:
        sent = self._sent
        if sent is None or sent.run is not self._run:
            return
        counted = sent.counted
        if counted is not None and origin == "usage":
            tolerance = 8 + int(MISMATCH_TOLERANCE * counted)
            if abs(total - counted) > tolerance:
                name = self._local_name or (
                    f"local:{self.local.family}" if self.local is not None else "local"
                )
                self._pending.append(
                    UsageMismatch(reported_tokens=total, counted_tokens=counted, counter=name)
                )
        self._learn(sent, total, origin, self._pending)

    @property
    def _factors(self) -> Factors:
        heuristic, local = self.calibration.factor, self.local_calibration.factor
        cached = self._factors_cache
        if cached.heuristic != heuristic or cached.local != local:
            cached = self._factors_cache = Factors(heuristic, local)
        return cached

    def _learn(self, sent: Composition, total: int, origin: str, events: list[Event]) -> None:
        event = learn(
            sent,
            total,
            calibration=self.calibration,
            local_calibration=self.local_calibration,
            family=self.local.family if self.local is not None else self.estimator.tokenizer,
            origin=origin,
            factors=self._factors,
            events=events,
        )
        events.append(event)

    # -- results ---------------------------------------------------------------------

    def _fitted(
        self,
        messages: Sequence[object],
        ctx: FitContext,
        dropped: int,
        events: list[Event],
        calls: int,
        made: list[EditRecord],
    ) -> Fit:
        run, seg = ctx.run, ctx.seg
        previous_cut = run.anchor
        dropped = max(dropped, ctx.first_turn)
        kept_from = ctx.kept_from(dropped)
        run.anchor = kept_from if dropped else None
        count = ctx.count(kept_from, self._factors)
        if dropped:
            cut_from, cut_to = seg.head_stop, kept_from
            kept = run.sent_from(messages, cut_from, cut_to)
            if ctx.summary is not None:
                kept.insert(cut_from, ctx.summary.message)
            new_cut = cut_to != previous_cut
            if new_cut:
                # The post-fit pairing guard: re-segment what will be sent. Whole turns
                # cannot orphan anything, so this only ever catches a bug of ours; it runs
                # when the cut moves (a kept cut only gains turns already validated).
                entries = run.ledger.entries
                shapes = [e.shape for e in entries[:cut_from]] + [e.shape for e in entries[cut_to:]]
                if ctx.summary is not None:
                    shapes.insert(cut_from, ctx.summary.shape)
                guard = segment(shapes)
                if guard.problems:
                    run.anchor = None
                    return self._deferred(messages, ctx, guard.problems, events)
            before = ctx.cost_function(self._factors)(0)
            events.append(
                TranscriptPruned(
                    dropped_turns=dropped,
                    dropped_messages=cut_to - cut_from,
                    kept_messages=len(kept),
                    tokens_before=before,
                    tokens_after=count.tokens,
                    budget=ctx.budget.input_tokens,
                    new_cut=new_cut,
                )
            )
            if new_cut:
                newly_from = cut_from if previous_cut is None else min(previous_cut, cut_to)
                folded = [r for r in made if r.kind == "summarize"]
                if folded:  # what a summary stands for is not lost
                    newly_from = max(newly_from, folded[-1].messages[-1] + 1)
                # An edit this send made to a message it then drops was never sent: its
                # receipt goes, and the drop's counts what the message was before it.
                moot = [
                    r
                    for r in made
                    if r.kind != "summarize"
                    and r.messages
                    and r.messages[0] >= newly_from
                    and r.messages[-1] < cut_to
                ]
                if moot:
                    gone = {id(r) for r in moot}
                    made[:] = [r for r in made if id(r) not in gone]
                if newly_from < cut_to:
                    dropped_now = ctx.count(newly_from, self._factors).tokens - count.tokens
                    dropped_now += sum(r.tokens_freed for r in moot)
                    made.append(
                        EditRecord(
                            kind="drop",
                            messages=tuple(range(newly_from, cut_to)),
                            tokens_before=max(dropped_now, 0),
                            tokens_after=0,
                        )
                    )
                logger.info(
                    "pruned %d oldest turns (%d messages): ~%d -> ~%d tokens, budget %d",
                    dropped,
                    cut_to - cut_from,
                    before,
                    count.tokens,
                    ctx.budget.input_tokens,
                )
        else:
            kept = run.take(messages)
        events.extend(record.event() for record in made)
        self._sent = ctx.composition(kept_from, self._factors)
        dropped_messages = len(messages) - len(kept)
        if dropped and ctx.summary is not None:
            dropped_messages += 1  # the summary is sent, but it is none of the caller's
        return self._result(
            kept, ctx, count, dropped, dropped_messages, (), events, calls, tuple(made)
        )

    def _result(
        self,
        kept: list[object],
        ctx: FitContext,
        count: Count,
        dropped_turns: int,
        dropped_messages: int,
        problems: tuple[Problem, ...],
        events: list[Event],
        calls: int,
        edits: tuple[EditRecord, ...] = (),
    ) -> Fit:
        fit = build_fit(
            kept,
            ctx,
            count,
            dropped_turns=dropped_turns,
            dropped_messages=dropped_messages,
            problems=problems,
            events=events,
            remote_counts=calls,
            model_info=self.model_info,
            floor=self.floor,
            factors=self._factors,
            counter_sources=self._counter_sources,
            edits=edits,
        )
        self._sent_reply = fit.max_tokens
        return fit

    def _fit_damaged(
        self,
        messages: Sequence[object],
        ctx: FitContext,
        problems: tuple[Problem, ...],
        events: list[Event],
    ) -> Fit:
        """Keep the damaged stretch whole and prune whole turns around it (``_damaged``),
        with the run's summary after the head standing for the turns it folded (unless
        the damage lies among them: they are then sent, and the summary is not)."""
        if ctx.summary is not None:
            start, stop = damaged_stretch(ctx, problems)
            if stop > ctx.seg.head_stop and start < ctx.kept_from(0):
                ctx.summarize(None, 0)
        plan = plan_damaged(ctx, problems, self._factors)
        if not plan.fits and self._count_locally(ctx):
            plan = plan_damaged(ctx, problems, self._factors)
        described = tuple(str(p) for p in problems)
        if not plan.fits:
            refuse_or_keep(
                ctx,
                plan.count,
                floor=self.floor,
                source=self._source_of(plan.count),
                damage="; ".join(described[:3]),
            )
        ctx.run.anchor = None
        self._sent = (
            ctx.composition(plan.kept_from, self._factors) if plan.kept_from is not None else None
        )
        sent = ctx.run.patched(list(messages), 0)
        kept = [sent[i] for i in plan.kept]
        dropped_messages = len(messages) - len(kept)
        if ctx.summary is not None:
            kept.insert(ctx.seg.head_stop, ctx.summary.message)
        logger.warning(
            "transcript is damaged (%s); the damaged stretch is sent whole%s",
            "; ".join(described[:3]),
            f", {plan.dropped_turns} whole turns around it pruned" if plan.dropped_turns else "",
        )
        events.append(
            TranscriptDeferred(
                reason="damaged input: the damaged stretch is kept whole"
                + (
                    f"; {plan.dropped_turns} whole turns around it pruned"
                    if plan.dropped_turns
                    else ""
                ),
                problems=described,
            )
        )
        if plan.dropped_turns:
            events.append(
                TranscriptPruned(
                    dropped_turns=plan.dropped_turns,
                    dropped_messages=dropped_messages,
                    kept_messages=len(kept),
                    tokens_before=ctx.cost_function(self._factors)(0),
                    tokens_after=plan.count.tokens,
                    budget=ctx.budget.input_tokens,
                )
            )
        return self._result(
            kept, ctx, plan.count, plan.dropped_turns, dropped_messages, problems, events, 0
        )

    def _deferred(
        self,
        messages: Sequence[object],
        ctx: FitContext,
        problems: tuple[Problem, ...],
        events: list[Event],
    ) -> Fit:
        count = ctx.count(ctx.seg.head_stop, self._factors)
        self._sent = ctx.composition(ctx.seg.head_stop, self._factors)
        described = tuple(str(p) for p in problems)
        logger.warning(
            "transcript is damaged (%s); sending it unchanged for the provider to judge",
            "; ".join(described[:3]),
        )
        events.append(TranscriptDeferred(reason="damaged input: not pruned", problems=described))
        return self._result(
            ctx.run.patched(list(messages), 0), ctx, count, 0, 0, problems, events, 0
        )


def _as_transcript(messages: object) -> Sequence[object]:
    """The transcript as an indexable sequence (a ``deque`` becomes a list), refusing what
    cannot be one: not a sequence, or empty."""
    check_messages(messages)
    assert isinstance(messages, Sequence)
    if not isinstance(messages, (list, tuple)):
        messages = list(messages)
    if not messages:
        raise InvalidTranscriptError(
            "the transcript is empty: a request needs at least the user's message"
        )
    return messages  # each message's type: update_transcript, for the ones it has not seen


def _at_most(value: int | None, limit: int) -> int | None:
    return None if value is None else min(value, limit)


def _resolve_model_info(
    model: str | None,
    model_info: ModelInfo | None,
    fallback_window: int,
    tokenizer: str | None,
    overrides: OverridesArg,
) -> ModelInfo:
    info = resolve_model_info(
        model, model_info=model_info, overrides=overrides, fallback_window=fallback_window
    )
    if tokenizer is not None:
        info = replace(info, tokenizer=tokenizer)
    return info
