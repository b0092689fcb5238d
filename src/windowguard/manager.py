"""ContextWindowManager: per-run state tying shapes, estimate, budget and pruning.

Before every provider send, :meth:`ContextWindowManager.fit` returns the transcript
to send — the caller's own message objects, in order, a subsequence of what was
given — with the head and the newest turn always kept and the oldest whole turns
dropped until the calibrated estimate fits ``window - reserve - safety``; and the
``max_tokens`` that fits what is left (the shrink guard), so prompt + tools + output
never exceed the window. When even head + newest turn cannot fit it raises
:class:`~windowguard.ContextTruncatedError` and no provider call may follow.

Per-run state (ADR-107): the calibration factor and the per-message estimate cache.
``last_usage=None`` marks the first send of a run and resets the calibration; a
later send passes the prompt tokens the provider reported for the previous request
(an int or any usage object), or :data:`~windowguard.NO_USAGE` when the provider
reported none. The factor starts above 1.0 and only rises, to the ratio reported /
raw estimate of the previous request, so the estimate errs high throughout.

Work per send is proportional to what was appended since the previous send: when the
new transcript extends the previous one (same objects, in order), only the new
messages are shaped, estimated and segmented. Messages are assumed not to be mutated
after they were sent; appending, dropping or replacing whole messages is always
handled correctly (a changed prefix rebuilds from the per-message cache).

Damaged input (orphaned result, unanswered call, unknown role, content of a wrong
type) is passed on unchanged with ``Fit.deferred`` set and a ``transcript_deferred``
event — the manager never makes a transcript worse — or raises
:class:`~windowguard.InvalidTranscriptError` with ``strict=True``.
"""

from __future__ import annotations

import copy as _copy
import logging
import operator
from collections.abc import Sequence
from dataclasses import dataclass, replace

from .adapters import check_format, check_messages, format_evidence, shaper
from .adapters.anthropic import shape_system
from .budget import Budget, compute_budget
from .catalog import ModelInfo, OverridesArg, resolve_model_info
from .counters import TokenCounter
from .estimate import NO_USAGE, Calibration, Estimator, prompt_tokens_from_usage
from .events import (
    ContextEmergencyShrink,
    ContextEstimate,
    Event,
    MaxTokensShrunk,
    TranscriptDeferred,
    TranscriptPruned,
)
from .exceptions import ConfigurationError, ContextTruncatedError, InvalidTranscriptError
from .prune import POLICIES, PruningPolicy, calibrated, choose_drop
from .shapes import Format, Shape
from .shrink import DEFAULT_FLOOR, DEFAULT_SAFETY_BUFFER, fit_max_tokens
from .turns import Problem, TurnIndex, segment

__all__ = ["ContextWindowManager", "Fit"]

logger = logging.getLogger("windowguard")

DEFAULT_FALLBACK_WINDOW = 8192


@dataclass(frozen=True, slots=True, kw_only=True)
class Fit:
    """What to send.

    Attributes:
        messages: the caller's own message objects to send, in order.
        estimated_tokens: calibrated estimate of the fitted request (messages, the
            separate system argument, tool schemas and framing).
        budget: the input budget, ``min(window - reserve - safety, max_input_tokens)``.
        context_window: the window the budget came from.
        dropped_turns: oldest whole turns dropped.
        dropped_messages: messages those turns held.
        pressure: ``estimated_tokens / context_window``.
        max_tokens: the reply budget that fits (shrink guard applied).
        deferred: damaged input was passed on unchanged.
        problems: the damage found, if any.
        format: the wire format the transcript was read in.
        events: what happened (``context_estimate``, ``transcript_pruned``,
            ``max_tokens_shrunk`` / ``context_emergency_shrink``, ``transcript_deferred``).
    """

    messages: list[object]
    estimated_tokens: int
    budget: int
    context_window: int
    dropped_turns: int
    dropped_messages: int
    pressure: float
    max_tokens: int
    deferred: bool
    problems: tuple[Problem, ...]
    format: Format
    events: tuple[Event, ...]


class _Transcript:
    """Incremental per-run view of the transcript last fitted."""

    __slots__ = (
        "anchor",
        "cache",
        "format",
        "format_certain",
        "index",
        "prefix",
        "seen",
        "shapes",
    )

    def __init__(self, fmt: Format, certain: bool) -> None:
        self.format: Format = fmt
        self.format_certain = certain
        self.seen: list[object] = []
        self.shapes: list[Shape] = []
        self.prefix: list[int] = [0]
        self.index = TurnIndex()
        # id(message) -> (message, shape, raw tokens); the reference keeps the id valid.
        self.cache: dict[int, tuple[object, Shape, int]] = {}
        # Where the previous send's kept turns began (message index), for low-water pruning.
        self.anchor: int | None = None


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
        counter: an exact :class:`~windowguard.TokenCounter` used instead of the heuristic.
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
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        model_info: ModelInfo | None = None,
        safety: int = DEFAULT_SAFETY_BUFFER,
        fallback_window: int = DEFAULT_FALLBACK_WINDOW,
        counter: TokenCounter | None = None,
        strict: bool = False,
        tokenizer: str | None = None,
        floor: int = DEFAULT_FLOOR,
        overrides: OverridesArg = None,
        pruning: PruningPolicy = "low_water",
        low_water: float = 0.7,
    ) -> None:
        if model is not None and not isinstance(model, str):
            raise ConfigurationError(f"model must be a model name string, got {model!r}")
        if not isinstance(safety, int) or isinstance(safety, bool) or safety < 0:
            raise ConfigurationError(f"safety must be a non-negative int, got {safety!r}")
        if not isinstance(fallback_window, int) or fallback_window <= 0:
            raise ConfigurationError(
                f"fallback_window must be a positive int, got {fallback_window!r}"
            )
        if pruning not in POLICIES:
            raise ConfigurationError(f"pruning must be one of {POLICIES}, got {pruning!r}")
        if not isinstance(low_water, (int, float)) or not 0.1 <= low_water <= 1.0:
            raise ConfigurationError(f"low_water must lie in [0.1, 1.0], got {low_water!r}")
        self.pruning: PruningPolicy = pruning
        self.low_water = float(low_water)
        self.model = model
        self.model_info = _resolve_model_info(
            model, model_info, fallback_window, tokenizer, overrides
        )
        self.safety = safety
        self.floor = floor
        self.strict = strict
        self.counter = counter
        self.estimator = Estimator(self.model_info.tokenizer, counter=counter)
        self.calibration = Calibration()
        self._run: _Transcript | None = None
        self._system: tuple[object, tuple[Shape, ...], int] | None = None
        self._tools: tuple[object, int, int] | None = None
        self._last_raw: int | None = None

    # -- per-run state ---------------------------------------------------------------

    @property
    def context_window(self) -> int:
        """The window enforced (and measured by the gauge)."""
        return self.model_info.context_window

    def reset(self) -> None:
        """Start a new run: forget calibration and cached estimates."""
        self.calibration.reset()
        self._run = None
        self._system = None
        self._tools = None
        self._last_raw = None

    def copy(self) -> ContextWindowManager:
        """A manager with the same configuration and fresh per-run state."""
        clone = _copy.copy(self)
        clone.calibration = Calibration()
        clone._run = None
        clone._system = None
        clone._tools = None
        clone._last_raw = None
        return clone

    def observe_usage(self, last_usage: object) -> None:
        """Grow the calibration from the prompt tokens reported for the last request."""
        if last_usage is NO_USAGE:
            return
        reported = prompt_tokens_from_usage(last_usage)
        if reported is not None and self._last_raw:
            self.calibration.observe(reported, self._last_raw)

    def observe_overflow(
        self, prompt_tokens: int | None = None, context_window: int | None = None
    ) -> None:
        """Learn from a provider's overflow refusal of the last fitted request.

        Args:
            prompt_tokens: the prompt size the provider stated, when exact (never a
                lower bound): the calibration grows to match it.
            context_window: the window the provider stated; adopted when smaller than
                the one in use (the provider knows what it serves).
        """
        if prompt_tokens is not None and self._last_raw:
            self.calibration.observe(prompt_tokens, self._last_raw)
        info = self.model_info
        if context_window is not None and 0 < context_window < info.context_window:
            self.model_info = replace(
                info,
                context_window=context_window,
                max_output_tokens=_at_most(info.max_output_tokens, context_window),
                max_input_tokens=_at_most(info.max_input_tokens, context_window),
                source="discovered",
                origin="the provider's overflow error",
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

        Args:
            messages: the full transcript (dicts or SDK objects) in its wire format.
            tools: the request's tool schemas (wire-format dicts); None for a plain
                completion, so no schema tokens are counted.
            max_tokens: the reply budget the caller wants; None lets the manager pick
                the largest that fits (capped by the model's output cap).
            last_usage: None on a run's first send (resets calibration); afterwards the
                provider-reported usage of the previous request, or ``NO_USAGE``.
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
        check_messages(messages)
        explicit = check_format(format)
        if last_usage is None:
            self.reset()
        else:
            self.observe_usage(last_usage)
        run = self._update(messages, explicit, system)
        seg = run.index.segmentation()
        fixed = self._fixed_tokens(run.format, system, tools)
        budget = compute_budget(
            context_window=self.model_info.context_window,
            max_tokens=max_tokens,
            max_output_tokens=self.model_info.max_output_tokens,
            max_input_tokens=self.model_info.max_input_tokens,
            safety=self.safety if safety is None else safety,
        )
        factor = self.calibration.factor
        if seg.problems:
            if self.strict:
                first = seg.problems[0]
                raise InvalidTranscriptError(first.problem, index=first.index)
            return self._deferred(messages, run, seg.problems, fixed, budget, max_tokens)
        dropped = choose_drop(
            prefix=run.prefix,
            head_stop=seg.head_stop,
            turn_starts=seg.turn_starts,
            fixed_tokens=fixed,
            factor=factor,
            budget=budget.input_tokens,
            policy=self.pruning,
            low_water=self.low_water,
            anchor=run.anchor,
        )
        if dropped is None:
            newest = seg.turn_starts[-1] if seg.turn_starts else seg.length
            floor_raw = fixed + run.prefix[seg.head_stop] + run.prefix[-1] - run.prefix[newest]
            raise ContextTruncatedError(
                estimated_tokens=calibrated(floor_raw, factor),
                budget=budget.input_tokens,
                context_window=budget.context_window,
            )
        previous_cut, run.anchor = run.anchor, (seg.turn_starts[dropped] if dropped else None)
        events: list[Event] = []
        total_before = fixed + run.prefix[-1]
        if dropped:
            cut_from, cut_to = seg.head_stop, seg.turn_starts[dropped]
            kept = list(messages[:cut_from])
            kept.extend(messages[cut_to:])
            raw = total_before - (run.prefix[cut_to] - run.prefix[cut_from])
            new_cut = cut_to != previous_cut
            if new_cut:
                # The post-fit pairing guard: re-segment what will be sent. Whole turns
                # cannot orphan anything, so this only ever catches a bug of ours; it runs
                # when the cut moves (a kept cut only gains turns already validated).
                guard = segment(run.shapes[:cut_from] + run.shapes[cut_to:])
                if guard.problems:
                    run.anchor = None
                    return self._deferred(messages, run, guard.problems, fixed, budget, max_tokens)
            estimated = calibrated(raw, factor)
            events.append(
                TranscriptPruned(
                    dropped_turns=dropped,
                    dropped_messages=cut_to - cut_from,
                    kept_messages=len(kept),
                    tokens_before=calibrated(total_before, factor),
                    tokens_after=estimated,
                    budget=budget.input_tokens,
                    new_cut=new_cut,
                )
            )
            if new_cut:
                logger.info(
                    "pruned %d oldest turns (%d messages): ~%d -> ~%d tokens, budget %d",
                    dropped,
                    cut_to - cut_from,
                    calibrated(total_before, factor),
                    estimated,
                    budget.input_tokens,
                )
        else:
            kept, raw = list(messages), total_before
            estimated = calibrated(raw, factor)
        self._last_raw = raw
        return self._result(
            kept,
            run.format,
            estimated,
            budget,
            dropped,
            len(messages) - len(kept),
            max_tokens,
            (),
            events,
        )

    def _deferred(
        self,
        messages: Sequence[object],
        run: _Transcript,
        problems: tuple[Problem, ...],
        fixed: int,
        budget: Budget,
        max_tokens: int | None,
    ) -> Fit:
        raw = fixed + run.prefix[-1]
        self._last_raw = raw
        described = tuple(str(p) for p in problems)
        logger.warning(
            "transcript is damaged (%s); sending it unchanged for the provider to judge",
            "; ".join(described[:3]),
        )
        event = TranscriptDeferred(reason="damaged input: not pruned", problems=described)
        return self._result(
            list(messages),
            run.format,
            calibrated(raw, self.calibration.factor),
            budget,
            0,
            0,
            max_tokens,
            problems,
            [event],
        )

    def _result(
        self,
        kept: list[object],
        fmt: Format,
        estimated: int,
        budget: Budget,
        dropped_turns: int,
        dropped_messages: int,
        max_tokens: int | None,
        problems: tuple[Problem, ...],
        events: list[Event],
    ) -> Fit:
        window = budget.context_window
        shrink = fit_max_tokens(
            estimated_input_tokens=estimated,
            context_window=window,
            requested=max_tokens,
            safety_buffer=budget.safety,
            floor=self.floor,
            max_output_tokens=self.model_info.max_output_tokens,
        )
        if isinstance(shrink.event, (MaxTokensShrunk, ContextEmergencyShrink)):
            events.append(shrink.event)
        estimate = ContextEstimate(
            estimated_tokens=estimated,
            window=window,
            budget=budget.input_tokens,
            pressure=estimated / window,
            calibration=self.calibration.factor,
            source=self.model_info.source,
        )
        return Fit(
            messages=kept,
            estimated_tokens=estimated,
            budget=budget.input_tokens,
            context_window=window,
            dropped_turns=dropped_turns,
            dropped_messages=dropped_messages,
            pressure=estimated / window,
            max_tokens=shrink.max_tokens,
            deferred=bool(problems),
            problems=problems,
            format=fmt,
            events=(estimate, *events),
        )

    # -- incremental bookkeeping -----------------------------------------------------

    def _update(
        self, messages: Sequence[object], explicit: Format | None, system: object
    ) -> _Transcript:
        run = self._run
        if run is not None and explicit is not None and explicit != run.format:
            run = None
        if (
            run is not None
            and len(run.seen) <= len(messages)
            and all(map(operator.is_, run.seen, messages))
        ):
            new = messages[len(run.seen) :]
            if not run.format_certain and explicit is None:
                found = format_evidence(new, system=system)
                if found is not None and found != run.format:
                    run = self._rebuild(messages, found, True, None)
                    return run
                run.format_certain = found is not None
            self._append(run, new)
            return run
        if explicit is not None:
            return self._rebuild(messages, explicit, True, run)
        found = format_evidence(messages, system=system)
        return self._rebuild(messages, found or "openai_chat", found is not None, run)

    def _rebuild(
        self, messages: Sequence[object], fmt: Format, certain: bool, old: _Transcript | None
    ) -> _Transcript:
        run = _Transcript(fmt, certain)
        if old is not None and old.format == fmt:
            live = {id(m) for m in messages}
            run.cache = {k: v for k, v in old.cache.items() if k in live}
        self._run = run
        self._append(run, messages)
        return run

    def _append(self, run: _Transcript, new: Sequence[object]) -> None:
        shape_of = shaper(run.format)
        estimate = self.estimator.message_tokens
        cache = run.cache
        total = run.prefix[-1]
        added: list[Shape] = []
        add_shape, add_total = added.append, run.prefix.append
        for message in new:
            key = id(message)
            hit = cache.get(key)
            if hit is not None and hit[0] is message:
                shape, tokens = hit[1], hit[2]
            else:
                shape = shape_of(message)
                tokens = estimate(shape)
                cache[key] = (message, shape, tokens)
            add_shape(shape)
            total += tokens
            add_total(total)
        run.seen.extend(new)
        run.shapes.extend(added)
        run.index.extend(added)

    def _fixed_tokens(self, fmt: Format, system: object, tools: Sequence[object] | None) -> int:
        fixed = self.estimator.request_tokens
        if system is not None:
            if fmt != "anthropic":
                raise InvalidTranscriptError(
                    f"a separate system argument is only used by the Anthropic format, not {fmt}"
                )
            cached = self._system
            if cached is None or cached[0] is not system:
                shapes = shape_system(system)
                cached = (system, shapes, sum(self.estimator.message_tokens(s) for s in shapes))
                self._system = cached
            fixed += cached[2]
        if tools:
            tools_cached = self._tools
            if (
                tools_cached is None
                or tools_cached[0] is not tools
                or tools_cached[1] != len(tools)
            ):
                tools_cached = (tools, len(tools), self.estimator.tools_tokens(tools))
                self._tools = tools_cached
            fixed += tools_cached[2]
        return fixed


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
