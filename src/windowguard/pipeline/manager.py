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
heuristic's estimate decide (the tool-loop design, docs/background.md).

Calibration (the tool-loop design's) applies to the estimated part only, one factor per estimating
source (the heuristic's starts at 1.05, the local tokenizer's at 1.0): each only rises,
by at most x1.5 per report, to measured / estimated of what a report newly measured
(tokens the request does not show are kept apart). A run starts only when the caller
says so: a fresh manager is at the start of one, and :meth:`ContextWindowManager.reset`
or ``fit(..., new_run=True)`` starts the next, forgetting calibration, the ledger and
the low-water cut. A send whose provider reported no usage passes ``last_usage=None``
or :data:`~windowguard.NO_USAGE` (the same): it neither resets nor calibrates (decision
0007).

Refusals rest on the best count: with any exact source, head + newest turn + tools
(exact where counted) plus the output floor must exceed the window for
:class:`~windowguard.ContextTruncatedError`; otherwise they are sent with ``max_tokens``
shrunk to fit. With no exact source at all, when the estimate exceeds the input budget
(the tool-loop design). See ``docs/decisions/0004-token-accounting.md``.

Work per send is proportional to what was appended since the previous send when no
decision is near the edge: only new messages are shaped and estimated, the ledger
attributes the report to them in O(log n), and pruning searches prefix sums. Messages
are assumed not to be mutated after they were sent; appending, dropping or replacing
whole messages is handled (a changed prefix rebuilds from the per-message cache, keeping
what the ledger measured of messages that are still there).

Damaged input (orphaned result, unanswered call, unknown role, content of a wrong
type) is passed on unchanged with ``Fit.deferred`` set and a ``transcript_deferred``
event, or raises :class:`~windowguard.InvalidTranscriptError` with ``strict=True``.

Layout: this module holds the manager's configuration, its public methods, and
:meth:`fit_steps`, which reads top to bottom as the stages one send walks, each a function
in a room of its own (bound into the class body, so it reads the run state the manager
keeps): learn the last report (``_reports``), the view of this send (``_view``), edit and
decide (``_edit_stage``, which asks ``_edge`` what to drop after each edit), the guard
after a refusal (``_edge``), and the :class:`Fit` (``_outcome``). Where counts come from
is ``_sources``. ``docs/architecture.md`` walks one send through them.
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Generator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..accounting import CounterArg, choose_sources
from ..accounting.catalog import ModelInfo, OverridesArg, resolve_model_info
from ..accounting.estimate import Estimator
from ..accounting.ledger import Entry, Factors
from ..accounting.local import TemplateAccounting
from ..accounting.remote import RemoteCounter
from ..accounting.usage import (
    NO_USAGE,
    Calibration,
    cached_tokens_from_usage,
    prompt_tokens_from_usage,
)
from ..core.adapters import check_format, check_messages
from ..core.budget import Budget
from ..core.edits.config import EditStage, check_edits
from ..core.edits.records import EditRecord
from ..core.events import Event
from ..core.exceptions import ConfigurationError, InvalidTranscriptError
from ..core.prune import POLICIES, PruningPolicy
from ..core.shrink import DEFAULT_FLOOR, DEFAULT_SAFETY_BUFFER
from . import _edge, _edit_stage, _outcome, _reports, _sources, _view
from ._editing import EditState, Stages, SummaryQuery, summarize_now
from ._fitting import Composition, Fit, M
from ._settings import DEFAULT_FALLBACK_WINDOW, DEFAULT_HOLD_TURNS, LOCAL_CALIBRATION_SEED
from ._settings import DEFAULT_MAX_REMOTE_COUNTS as DEFAULT_MAX_REMOTE_COUNTS
from ._settings import Query as Query
from ._settings import RemoteAnswer as RemoteAnswer
from ._transcript import RequestParts, Transcript

__all__ = ["DEFAULT_MAX_REMOTE_COUNTS", "ContextWindowManager", "Fit"]


class ContextWindowManager:
    """Fits each request of one agent run into the model's context window.

    Examples:
        >>> import windowguard as wg
        >>> mgr = wg.ContextWindowManager(model="gpt-4o")
        >>> fit = mgr.fit([{"role": "user", "content": "hi"}], max_tokens=1024)
        >>> fit.messages, fit.dropped_turns, fit.max_tokens
        ([{'role': 'user', 'content': 'hi'}], 0, 1024)

    Args:
        model: the model name; picks catalog limits and the tokenizer family.
        model_info: explicit limits; override the catalog's numbers.
        safety: tokens kept free below the window (500: the shrink guard's margin).
        fallback_window: the window of an unknown model (a conservative 8192).
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
        floor: the smallest ``max_tokens`` ever returned (200: the shrink guard's floor).
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
        """Start a new run: forget calibration, the ledger, the low-water cut and cached
        estimates (what ``fit(..., new_run=True)`` does before it fits)."""
        self._reset_run_state()

    def copy(self) -> ContextWindowManager:
        """A manager with the same configuration and fresh per-run state."""
        clone = _copy.copy(self)
        clone._reset_run_state()
        return clone

    def observe_usage(self, last_usage: object) -> None:
        """Attribute the prompt tokens reported for the last fitted request (the ledger),
        and grow the calibration from what they newly measured. None and
        :data:`~windowguard.NO_USAGE` (no report) change nothing.

        A report of 0 prompt tokens measures nothing: every request the manager fits has
        framing at least, and servers and SDKs (the Agents SDK, LiteLLM, pydantic-ai)
        report a missing usage as zeros. Taken as exact, it would leave the whole
        request uncounted and ``max_tokens`` sized into what it fills."""
        if last_usage is None or last_usage is NO_USAGE:
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

    def fit(
        self,
        messages: Sequence[M],
        *,
        tools: Sequence[object] | None = None,
        max_tokens: int | None = None,
        last_usage: object = None,
        system: object = None,
        format: str | None = None,
        safety: int | None = None,
        new_run: bool = False,
    ) -> Fit[M]:
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
            last_usage: the provider-reported usage of the previous request of this run
                (an SDK usage object, a dict, or an int of prompt tokens); None or
                ``NO_USAGE`` when it reported none (or on a run's first send). Never
                resets anything.
            system: Anthropic's separate system argument.
            format: ``"openai_chat"``, ``"anthropic"`` or ``"responses"``; detected
                when None.
            safety: overrides the manager's safety for this send (the reactive retry
                after an overflow uses 100).
            new_run: this send starts a new run: calibration, the ledger and the
                low-water cut are forgotten first (:meth:`reset`). A fresh manager is
                at the start of a run already.

        Returns:
            A :class:`Fit` of the caller's message type (``Sequence[M]`` in,
            ``Fit[M]`` out).

        Raises:
            ContextTruncatedError: head + newest turn cannot fit; send nothing.
            InvalidTranscriptError: damaged input with ``strict=True``, or input that is
                not a transcript at all.
            ConfigurationError: an unusable ``max_tokens`` or ``safety``, a ``new_run``
                that is not a bool, or a usage report given with ``new_run=True``
                (a new run has no previous send to report on).
        """
        steps = self.fit_steps(
            messages,
            tools=tools,
            max_tokens=max_tokens,
            last_usage=last_usage,
            system=system,
            format=format,
            safety=safety,
            new_run=new_run,
        )
        try:
            query = next(steps)
            while True:
                if isinstance(query, SummaryQuery):
                    query = steps.send(summarize_now(query))
                else:
                    query = steps.send(self._count_now(query))
        except StopIteration as done:
            result: Fit[M] = done.value
            return result

    def fit_steps(
        self,
        messages: Sequence[M],
        *,
        tools: Sequence[object] | None = None,
        max_tokens: int | None = None,
        last_usage: object = None,
        system: object = None,
        format: str | None = None,
        safety: int | None = None,
        new_run: bool = False,
    ) -> Generator[Query, Any, Fit[M]]:
        """:meth:`fit` as a sans-I/O generator: it yields a :class:`CountQuery` when it
        wants the remote counter's count (send it the count, or the exception the count
        raised) and a :class:`~windowguard.pipeline._editing.SummaryQuery` when it folds turns
        into the summary (send it the summarizer's text, or its exception), and returns
        the :class:`Fit`. Arguments and errors as for :meth:`fit`.
        """
        messages = _as_transcript(messages)
        explicit = check_format(format)
        if new_run is not False:
            _check_new_run(new_run, last_usage)
            self.reset()  # only when asked: a missing usage (None) starts no run
        self.observe_usage(last_usage)  # the reports room: what the last send cost
        events: list[Event] = self._pending
        self._pending = []
        refitted, self._pending_edits = self._pending_edits, []
        refused, self._refused = self._refused, None
        ctx = self._view_of(messages, explicit, system, tools, max_tokens, safety, events)
        if ctx.seg.problems:
            if self.strict:
                first = ctx.seg.problems[0]
                raise InvalidTranscriptError(first.problem, index=first.index)
            return self._fit_damaged(messages, ctx, ctx.seg.problems, events)
        distrust, self._distrust = self._distrust or refused is not None, False
        dropped, calls, made = yield from self._edit_and_decide(
            ctx, messages, system, events, refitted, distrust
        )
        dropped, calls = yield from self._guard(
            ctx, system, events, dropped, calls, refused, distrust, max_tokens, safety
        )
        fit: Fit[M] = yield from self._finish(
            messages,
            ctx,
            dropped,
            events,
            calls,
            made,
            tools=tools,
            max_tokens=max_tokens,
            system=system,
            format=format,
            safety=safety,
        )
        # The copy of the caller's list made to compare it is the sent list when every
        # message was kept; else it would hold this send's objects until the next fit.
        ctx.run.snapshot = None
        return fit

    def retained(self) -> tuple[Sequence[Entry], Mapping[int, object]]:
        """What this run's view of the transcript keeps (its store sizes it): the entries
        of the messages last fitted, in order (each with the caller's message), and the
        edited copies sent in place of some of them, by index. Read them, never change
        them."""
        run = self._run
        if run is None:
            return (), {}
        return run.ledger.entries, run.edited_at

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

    # The stages, in the order one send walks them (fit_steps), each in its room.
    _view_of = _view.view
    _edit_and_decide = _edit_stage.edit_and_decide
    _guard = _edge.guard
    _finish = _outcome.finish
    # What the stages and the public methods share, bound from the rooms that hold them.
    _budget = _view._budget
    _check_cached_apart = _reports._check_cached_apart
    _assume_window = _reports._assume_window
    _learn_sent = _reports._learn_sent
    _factors = property(_reports._factors)
    _learn = _reports._learn
    from_endpoint = classmethod(_sources.from_endpoint)
    _counter_sources = property(_sources._counter_sources)
    _count_now = _sources._count_now
    _text_count = _sources._text_count
    _count_locally = _sources._count_locally
    _source_of = _sources._source_of
    _counted = _sources._counted
    _edit = _edit_stage._edit
    _summarized = _edit_stage._summarized
    _decide = _edge._decide
    _fitted = _outcome._fitted
    _fit_damaged = _outcome._fit_damaged


def _check_new_run(new_run: object, last_usage: object) -> None:
    """``new_run=True`` is a bool and comes with no report (the run has no last send)."""
    if new_run is not True:
        raise ConfigurationError(f"new_run must be True or False, got {new_run!r}")
    if last_usage is not None and last_usage is not NO_USAGE:
        raise ConfigurationError(
            "fit(new_run=True) starts a run, which has no previous send to report on: "
            f"got last_usage={last_usage!r}; pass last_usage=None on a run's first send"
        )


def _as_transcript(messages: Sequence[M]) -> Sequence[M]:
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
