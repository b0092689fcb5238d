"""The tool loop as a sans-I/O state machine (httpx ``Auth.auth_flow`` style).

:meth:`LoopMachine.run` is a generator. It yields *actions* — "send this request to
the model" (:class:`SendModel`), "run these tool calls" (:class:`RunTools)`, "wait"
(:class:`Sleep`) — and is sent the answers (:class:`ModelAnswer`, :class:`ToolsAnswer`,
None). It never touches the network, the clock, a thread or the journal itself: the
drivers in :mod:`windowguard.run.loop` (sync and async) do, so both share every rule here.

The tool-loop design's three provider-send sites live here: the in-loop send with tools
(``tool_send``), the plain completion when the loop has no tools (``plain``), and the
cap-hit synthesis call without tools when ``max_iterations`` is reached
(``synthesis``, ending MAX_ITERATIONS). With a manager each send is fitted (turns
pruned, ``max_tokens`` shrunk, calibration fed from the previous call's usage);
``ContextTruncatedError`` ends the run with CONTEXT_TRUNCATED before any provider
call. Without a manager every send is the full transcript, unchanged. Failures go
through the reactive retry policy. The full transcript — not the pruned view — is what
the run keeps and returns.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..accounting.remote import CountQuery, RemoteCounter
from ..accounting.usage import NO_USAGE
from ..core.events import (
    CalibrationUpdated,
    Event,
    ModelCall,
    ProviderErrorEvent,
    RetryScheduled,
    RunFinished,
    RunStarted,
    ToolCallEvent,
    ToolResultEvent,
)
from ..core.exceptions import ContextTruncatedError
from ..core.failures import Failure, FailureKind, TerminationReason
from ..core.gauge import ContextGauge
from ..core.shapes import Format
from ..pipeline._editing import SummaryQuery
from ..pipeline.manager import ContextWindowManager
from .journal import RunState, jsonable
from .providers.base import ModelRequest, ModelResponse, Site, ToolCall, ToolResult, ToolSpec
from .retry import Backoff, ClampOutput, Refit, RetryPolicy, SendHistory, Stop

__all__ = [
    "SYNTHESIS_PROMPT",
    "CountTokens",
    "LoopMachine",
    "MakeSummary",
    "ModelAnswer",
    "RunResult",
    "RunTools",
    "RunUsage",
    "SendModel",
    "Sleep",
    "Suspension",
    "ToolsAnswer",
]

SYNTHESIS_PROMPT = (
    "You have reached the maximum number of tool-use iterations for this task. "
    "Do not call any more tools. Using what you have found so far, give your final answer now."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SendModel:
    """Action: send ``request`` (model call number ``step``, try ``attempt``)."""

    kind: Literal["send_model"] = "send_model"
    request: ModelRequest
    step: int
    attempt: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RunTools:
    """Action: run ``calls`` (requested by model call ``step``); ``done`` are known."""

    kind: Literal["run_tools"] = "run_tools"
    step: int
    calls: tuple[ToolCall, ...]
    done: Mapping[int, ToolResult]


@dataclass(frozen=True, slots=True, kw_only=True)
class CountTokens:
    """Action: ask ``counter`` for the exact prompt tokens of ``query`` (a remote count
    the manager wants near the edge); answer with the count, or the exception raised."""

    kind: Literal["count_tokens"] = "count_tokens"
    counter: RemoteCounter
    query: CountQuery


@dataclass(frozen=True, slots=True, kw_only=True)
class MakeSummary:
    """Action: the manager folds whole turns into its summary before model call
    ``step``: answer with the summarizer's text for ``query`` (a journal's, when it
    holds this summary), or the exception the summarizer raised."""

    kind: Literal["make_summary"] = "make_summary"
    step: int
    query: SummaryQuery


@dataclass(frozen=True, slots=True, kw_only=True)
class Sleep:
    """Action: wait ``seconds`` before the next try."""

    kind: Literal["sleep"] = "sleep"
    seconds: float


Action = SendModel | RunTools | CountTokens | MakeSummary | Sleep


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelAnswer:
    """The driver's answer to :class:`SendModel`: a response or a classified failure."""

    response: ModelResponse | None = None
    failure: Failure | None = None
    replayed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Suspension:
    """A tool paused the run."""

    call_id: str
    reason: str
    data: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolsAnswer:
    """The driver's answer to :class:`RunTools`: results by position (None: not run)."""

    results: tuple[ToolResult | None, ...]
    replayed: tuple[bool, ...]
    suspension: Suspension | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunUsage:
    """Token totals over a run's model calls (replayed calls included)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    model_calls: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """How a run ended.

    Attributes:
        termination: why it ended.
        messages: the full transcript (never the pruned view), as a list.
        usage: token totals.
        events: every event of the run, in order.
        failure: the classified provider failure that ended it, if any.
        state: the paused run's state when ``termination`` is SUSPENDED.
        text: the final reply's text, if any.
        error: the ContextTruncatedError that ended it, if any.
    """

    termination: TerminationReason
    messages: list[Any]
    usage: RunUsage
    events: tuple[Event, ...]
    failure: Failure | None = None
    state: RunState | None = None
    text: str = ""
    run_id: str = ""
    iterations: int = 0
    error: Exception | None = None


@dataclass(slots=True)
class _Run:
    run_id: str
    transcript: list[Any]
    system: Any
    manager: ContextWindowManager | None
    # The run's manager is a fresh copy (ContextWindowManager.copy), at the start of its
    # run: the first fit has no report to pass, and nothing to reset.
    last_usage: object = NO_USAGE
    step: int = 0
    iteration: int = 0
    output_cap: int | None = None
    usage: RunUsage = field(default_factory=RunUsage)
    text: str = ""
    reported: int | None = None
    # The tool schemas as the manager sizes them: one list per run, so its estimate and
    # content digest are computed once, not on every send.
    schemas: list[dict[str, Any]] | None = None


class _Ended(Exception):
    """Internal: a send ended the run."""

    def __init__(self, result: RunResult) -> None:
        self.result = result


class LoopMachine:
    """The rules of one tool loop, shared by the sync and async drivers."""

    def __init__(
        self,
        *,
        provider_format: Format,
        model: str,
        window: int,
        window_source: str,
        tool_specs: Sequence[ToolSpec],
        tool_result_messages: Callable[[Sequence[ToolResult]], list[Any]],
        user_message: Callable[[str], Any],
        manager: ContextWindowManager | None,
        max_iterations: int,
        max_tokens: int | None,
        policy: RetryPolicy,
        random: Callable[[], float] | None,
        emit: Callable[[Event], None],
        thresholds: Sequence[float] = (),
        cancelled: Callable[[], bool] = lambda: False,
        remote_counter: RemoteCounter | None = None,
    ) -> None:
        self.format = provider_format
        self.remote_counter = remote_counter
        self.model = model
        self.window = window
        self.window_source = window_source
        self.tool_specs = tuple(tool_specs)
        self._tool_result_messages = tool_result_messages
        self._user_message = user_message
        self.manager = manager
        self.max_iterations = max_iterations
        self.max_tokens = max_tokens
        self.policy = policy
        self.random = random
        self._emit_to_sinks = emit
        self.thresholds = tuple(thresholds)
        self._cancelled = cancelled
        self.events: list[Event] = []
        self._gauge = ContextGauge(window, thresholds=self.thresholds)
        self._run: _Run | None = None

    # -- events ----------------------------------------------------------------------

    def emit(self, event: Event) -> None:
        """Record ``event`` and pass it to the sinks."""
        self.events.append(event)
        self._emit_to_sinks(event)

    def tool_started(self, step: int, call: ToolCall) -> None:
        """Drivers call this before running a tool live (not when replaying)."""
        run_id = self._run.run_id if self._run else ""
        self.emit(
            ToolCallEvent(
                run_id=run_id, step=step, call_id=call.id, name=call.name, arguments=call.arguments
            )
        )

    # -- the run ---------------------------------------------------------------------

    def run(
        self,
        messages: Sequence[Any],
        *,
        run_id: str,
        system: Any = None,
        resume: RunState | None = None,
        supplied: Mapping[str, str] | None = None,
        restarted: bool = False,
    ) -> Generator[Action, Any, RunResult]:
        """Drive one run; yields actions, receives answers, returns the RunResult.

        ``restarted`` says the journal already held this run (a restart, or a replay of
        a finished run): ``run_started`` then reports ``resumed=True``, as for ``resume``.
        """
        manager = self.manager.copy() if self.manager is not None else None
        if manager is not None:
            manager.use_remote_counter(self.remote_counter, model=self.model)
        run = _Run(run_id=run_id, transcript=list(messages), system=system, manager=manager)
        self._run = run
        self._gauge.reset()
        self.emit(
            RunStarted(
                run_id=run_id,
                model=self.model,
                context_window=self.window,
                window_source=self.window_source,
                resumed=resume is not None or restarted,
            )
        )
        try:
            if resume is not None:
                run.step, run.iteration = resume.step, resume.iteration
                known = {r.call_id: r for r in resume.completed}
                done = {i: known[c.id] for i, c in enumerate(resume.pending) if c.id in known}
                for position, call in enumerate(resume.pending):
                    if supplied and call.id in supplied and position not in done:
                        done[position] = ToolResult(
                            call_id=call.id, name=call.name, content=supplied[call.id]
                        )
                yield from self._tools(run, resume.step - 1, resume.pending, done)
            while True:
                if self._cancelled():
                    return self._finish(run, TerminationReason.CANCELLED)
                if not self.tool_specs:
                    response = yield from self._send(run, "plain")
                    run.transcript.append(response.message)
                    run.text = response.text
                    return self._finish(run, TerminationReason.COMPLETED)
                if run.iteration >= self.max_iterations:
                    run.transcript.append(self._user_message(SYNTHESIS_PROMPT))
                    response = yield from self._send(run, "synthesis")
                    run.transcript.append(response.message)
                    run.text = response.text
                    return self._finish(run, TerminationReason.MAX_ITERATIONS)
                response = yield from self._send(run, "tool_send")
                run.transcript.append(response.message)
                run.text = response.text
                if not response.tool_calls:
                    return self._finish(run, TerminationReason.COMPLETED)
                run.iteration += 1
                yield from self._tools(run, run.step - 1, response.tool_calls, {})
        except _Ended as ended:
            return ended.result

    def _tools(
        self, run: _Run, step: int, calls: tuple[ToolCall, ...], done: Mapping[int, ToolResult]
    ) -> Generator[Action, Any, None]:
        answer: ToolsAnswer = yield RunTools(step=step, calls=calls, done=dict(done))
        for position, (result, replayed) in enumerate(
            zip(answer.results, answer.replayed, strict=True)
        ):
            if result is not None and not replayed and position not in done:
                self.emit(
                    ToolResultEvent(
                        run_id=run.run_id,
                        step=step,
                        call_id=result.call_id,
                        name=result.name,
                        is_error=result.is_error,
                        chars=len(result.content),
                    )
                )
        if answer.suspension is not None:
            completed = tuple(r for r in answer.results if r is not None)
            state = RunState(
                run_id=run.run_id,
                messages=tuple(jsonable(run.transcript)),
                system=jsonable(run.system),
                step=run.step,
                iteration=run.iteration,
                pending=calls,
                completed=completed,
                suspended_call=answer.suspension.call_id,
                reason=answer.suspension.reason,
                data=answer.suspension.data,
            )
            raise _Ended(self._finish(run, TerminationReason.SUSPENDED, state=state))
        results = [r for r in answer.results if r is not None]
        run.transcript.extend(self._tool_result_messages(results))

    def _send(self, run: _Run, site: Site) -> Generator[Action, Any, ModelResponse]:
        specs = self.tool_specs if site == "tool_send" else ()
        tool_choice: Literal["none"] | None = None
        if site == "synthesis" and self.format == "anthropic" and self.tool_specs:
            # The Messages API refuses a history with tool_use/tool_result blocks and no
            # tool definitions: send them (and count them), but forbid calls.
            specs, tool_choice = self.tool_specs, "none"
        history = SendHistory()
        safety: int | None = None
        attempt = 0
        while True:
            request = yield from self._request(run, site, specs, safety, tool_choice)
            answer: ModelAnswer = yield SendModel(request=request, step=run.step, attempt=attempt)
            attempt += 1
            if answer.response is not None:
                self._received(run, site, request, answer)
                return answer.response
            failure = answer.failure
            assert failure is not None
            decision = self.policy.decide(failure, history, random=self.random)
            if isinstance(decision, Refit) and run.manager is None:
                decision = Stop(
                    termination=TerminationReason.PROVIDER_ERROR,
                    reason="context overflow and no manager to refit the transcript",
                )
            history = history.after(failure)
            self.emit(
                ProviderErrorEvent(
                    run_id=run.run_id,
                    step=run.step,
                    site=site,
                    failure_kind=failure.kind.value,
                    retryable=failure.retryable,
                    status=failure.status,
                    message=failure.message or "",
                    decision=decision.kind,
                )
            )
            if isinstance(decision, Refit):
                assert run.manager is not None
                run.manager.observe_overflow(
                    decision.observed_prompt_tokens, decision.context_window
                )
                safety = decision.safety
            elif isinstance(decision, ClampOutput):
                run.output_cap = decision.max_output_tokens
            elif isinstance(decision, Backoff):
                self.emit(
                    RetryScheduled(
                        run_id=run.run_id,
                        step=run.step,
                        attempt=decision.attempt,
                        delay_seconds=decision.delay,
                        reason=decision.reason,
                    )
                )
                yield Sleep(seconds=decision.delay)
            else:
                termination = decision.termination
                raise _Ended(self._finish(run, termination, failure=failure))

    def _request(
        self,
        run: _Run,
        site: Site,
        specs: tuple[ToolSpec, ...],
        safety: int | None,
        tool_choice: Literal["none"] | None,
    ) -> Generator[Action, Any, ModelRequest]:
        max_tokens = self.max_tokens
        if run.output_cap is not None:
            max_tokens = min(max_tokens or run.output_cap, run.output_cap)
        manager = run.manager
        if manager is None:
            return ModelRequest(
                messages=list(run.transcript),
                tools=specs,
                max_tokens=max_tokens,
                system=run.system,
                site=site,
                tool_choice=tool_choice,
            )
        before = manager.calibration.factor
        if specs and run.schemas is None:
            run.schemas = [_estimate_schema(s) for s in specs]
        try:
            steps = manager.fit_steps(
                run.transcript,
                tools=(run.schemas if specs else None),
                max_tokens=max_tokens,
                last_usage=run.last_usage,
                system=run.system,
                format=self.format,
                safety=safety,
            )
            query = next(steps)
            while True:
                answer: object
                if isinstance(query, SummaryQuery):
                    answer = yield MakeSummary(step=run.step, query=query)
                else:
                    counter = manager.remote
                    assert counter is not None  # the manager only asks when it has one
                    answer = yield CountTokens(counter=counter, query=query)
                query = steps.send(answer)
        except StopIteration as done:
            fit = done.value
        except ContextTruncatedError as exc:
            raise _Ended(
                self._finish(run, TerminationReason.CONTEXT_TRUNCATED, error=exc)
            ) from None
        finally:
            run.last_usage = NO_USAGE
        if manager.calibration.factor > before and isinstance(run.reported, int):
            self.emit(
                CalibrationUpdated(factor=manager.calibration.factor, reported_tokens=run.reported)
            )
        for event in fit.events:
            self.emit(event)
        return ModelRequest(
            messages=fit.messages,
            tools=specs,
            max_tokens=fit.max_tokens,
            system=run.system,
            site=site,
            tool_choice=tool_choice,
        )

    def _received(self, run: _Run, site: Site, request: ModelRequest, answer: ModelAnswer) -> None:
        response = answer.response
        assert response is not None
        usage = response.usage
        reported = usage.input_tokens if usage is not None else None
        if reported is not None and reported <= 0:
            # No request is 0 tokens: servers and SDKs report a missing usage as zeros,
            # and a negative count is no count (it would break the gauge and the ledger).
            reported = None
        run.last_usage = reported if reported is not None else NO_USAGE
        cached = usage.cache_read_tokens if usage is not None else 0
        if reported is not None and cached and self.format != "anthropic":
            # Hand the manager the cached tokens beside the prompt count, as the provider
            # reported them: some OpenAI-compatible servers leave them out of
            # prompt_tokens, which the manager detects and corrects (decision 0004).
            # (Anthropic's input_tokens is already the sum of its three fields.)
            run.last_usage = {
                "prompt_tokens": reported,
                "prompt_tokens_details": {"cached_tokens": cached},
            }
        run.reported = reported
        run.usage = RunUsage(
            input_tokens=run.usage.input_tokens + (reported or 0),
            output_tokens=run.usage.output_tokens + ((usage.output_tokens or 0) if usage else 0),
            cache_read_tokens=run.usage.cache_read_tokens
            + (usage.cache_read_tokens if usage else 0),
            cache_write_tokens=run.usage.cache_write_tokens
            + (usage.cache_write_tokens if usage else 0),
            model_calls=run.usage.model_calls + 1,
        )
        step = run.step
        run.step += 1
        if answer.replayed:
            return
        self.emit(
            ModelCall(
                run_id=run.run_id,
                step=step,
                site=site,
                input_tokens=reported,
                output_tokens=usage.output_tokens if usage else None,
                cache_read_tokens=usage.cache_read_tokens if usage else 0,
                cache_write_tokens=usage.cache_write_tokens if usage else 0,
                max_tokens=request.max_tokens,
                stop_reason=response.stop_reason,
                tool_calls=len(response.tool_calls),
            )
        )
        if reported is not None:
            window = run.manager.context_window if run.manager is not None else self.window
            if window != self._gauge.window:
                self._gauge = ContextGauge(window, thresholds=self.thresholds)
            for event in self._gauge.observe(reported):
                self.emit(event)

    def _finish(
        self,
        run: _Run,
        termination: TerminationReason,
        *,
        failure: Failure | None = None,
        state: RunState | None = None,
        error: Exception | None = None,
    ) -> RunResult:
        self.emit(
            RunFinished(
                run_id=run.run_id,
                termination=termination.name,
                iterations=run.iteration,
                model_calls=run.usage.model_calls,
                input_tokens=run.usage.input_tokens,
                output_tokens=run.usage.output_tokens,
            )
        )
        return RunResult(
            termination=termination,
            messages=run.transcript,
            usage=run.usage,
            events=tuple(self.events),
            failure=failure,
            state=state,
            text=run.text,
            run_id=run.run_id,
            iterations=run.iteration,
            error=error,
        )


def _estimate_schema(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


def default_run_id(messages: Sequence[Any], system: Any, model: str) -> str:
    """A deterministic run id derived from the starting transcript."""
    body = json.dumps(
        [jsonable(list(messages)), jsonable(system), model], sort_keys=True, default=str
    )
    return "run-" + hashlib.sha256(body.encode()).hexdigest()[:16]


def is_overflow(failure: Failure) -> bool:
    """Whether a failure is a context overflow."""
    return failure.kind is FailureKind.CONTEXT_OVERFLOW
