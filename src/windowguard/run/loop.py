"""The tool loop: ``ToolLoop`` and ``AsyncToolLoop``, thin drivers over one machine.

Every rule of the loop — the three guarded send sites, fitting, calibration, the
retry policy, termination reasons, suspension — lives in the sans-I/O
:class:`~windowguard.run._machine.LoopMachine`. A driver only performs the machine's
actions: it calls the provider (or replays the journalled answer), sleeps, journals
every model call before handing it back, and hands tool calls to its loop's
:class:`~windowguard.run._tool_runs.ToolRunner` (sync: one after another; async:
concurrently; on the loop's own daemon threads), which journals every tool result.
``resume`` checks its state and results before anything runs.

Examples:
    >>> import windowguard as wg
    >>> from windowguard.run.providers.fake import FakeCalls, FakeProvider
    >>> @wg.tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two numbers.'''
    ...     return a + b
    >>> provider = FakeProvider([FakeCalls(("add", {"a": 2, "b": 3})), "5"])
    >>> loop = wg.ToolLoop(provider, tools=[add], manager=wg.ContextWindowManager("gpt-4o"))
    >>> result = loop.run([{"role": "user", "content": "2 + 3?"}])
    >>> result.termination.name, result.text, len(result.messages)
    ('COMPLETED', '5', 4)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random as _random
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any

from ..accounting.remote import RemoteCounter
from ..core.edits import ClampToolResults
from ..core.edits.summary import arun_summarizer, run_summarizer
from ..core.events import Event
from ..core.exceptions import ConfigurationError, ProviderError
from ..pipeline.manager import ContextWindowManager
from ._machine import (
    CountTokens,
    LoopMachine,
    MakeSummary,
    ModelAnswer,
    RunResult,
    RunTools,
    RunUsage,
    SendModel,
    Sleep,
    ToolsAnswer,
    default_run_id,
)
from ._streams import AsyncRunStream, RunStream, acount_tokens, count_tokens
from ._tool_runs import ToolRunner, check_resume
from .journal import Journal, RunState, transcript_digest
from .providers.base import AsyncProvider, ModelResponse, Provider
from .retry import RetryPolicy
from .sinks import emit
from .spill import spill_tool
from .tools import Tool

__all__ = ["AsyncRunStream", "AsyncToolLoop", "RunResult", "RunStream", "RunUsage", "ToolLoop"]

logger = logging.getLogger("windowguard")


def _edit_tools(manager: ContextWindowManager | None) -> list[Tool]:
    """Tools the manager's edit stages need the model to have: ``read_spilled`` when it
    clamps with a spill store (so the model can page through what was cut)."""
    offered: list[Tool] = []
    for edit in getattr(manager, "edits", None) or ():
        if isinstance(edit, ClampToolResults) and edit.spill is not None:
            offered.append(spill_tool(edit.spill))
    return offered


class _LoopBase:
    def __init__(
        self,
        provider: Provider | AsyncProvider,
        *,
        tools: Sequence[Tool] = (),
        manager: ContextWindowManager | None = None,
        max_iterations: int = 25,
        max_tokens: int | None = None,
        sinks: Sequence[Callable[[Event], None]] = (),
        journal: Journal | None = None,
        tool_timeout: float | None = None,
        max_tool_threads: int = 8,
        retry_policy: RetryPolicy | None = None,
        pressure_thresholds: Sequence[float] = (0.8, 0.95),
        random: Callable[[], float] | None = None,
        sleep: Callable[[float], Any] | None = None,
    ) -> None:
        if not isinstance(max_iterations, int) or max_iterations < 0:
            raise ConfigurationError(f"max_iterations must be an int >= 0, got {max_iterations!r}")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens <= 0):
            raise ConfigurationError(f"max_tokens must be a positive int, got {max_tokens!r}")
        if type(max_tool_threads) is not int or max_tool_threads < 1:  # bool is no count
            raise ConfigurationError(
                f"max_tool_threads must be an int >= 1, got {max_tool_threads!r}"
            )
        by_name: dict[str, Tool] = {}
        for t in tools:
            if not isinstance(t, Tool):
                raise ConfigurationError(
                    f"tools must be windowguard Tool values (use @windowguard.tool), got {t!r}"
                )
            if t.name in by_name:
                raise ConfigurationError(f"two tools are named {t.name!r}")
            by_name[t.name] = t
        for offered in _edit_tools(manager):
            by_name.setdefault(offered.name, offered)  # a tool of the caller's name wins
        self.provider = provider
        self.tools = by_name
        self.manager = manager
        self.max_iterations = max_iterations
        self.max_tokens = max_tokens
        self.sinks = tuple(sinks)
        self.journal = journal
        self.tool_timeout = tool_timeout
        self._tool_runner = ToolRunner(max_tool_threads)  # this loop's own tool threads
        self.retry_policy = retry_policy or RetryPolicy()
        self.pressure_thresholds = tuple(pressure_thresholds)
        self.random = random if random is not None else _random.Random(0).random
        self._sleep: Callable[[float], Any] = sleep if sleep is not None else self._default_sleep()
        self._cancel = False

    def _default_sleep(self) -> Callable[[float], Any]:
        return time.sleep

    def cancel(self) -> None:
        """Ask running runs to stop at the next step boundary (termination CANCELLED)."""
        self._cancel = True

    def _wants_counter(self) -> bool:
        manager = self.manager
        return manager is not None and manager.wants_remote_counter

    def _machine(
        self,
        extra_sink: Callable[[Event], None] | None = None,
        counter: RemoteCounter | None = None,
    ) -> LoopMachine:
        if self.manager is not None:
            info = self.manager.model_info
        else:
            info = self.provider.model_info()
        sinks = self.sinks if extra_sink is None else (*self.sinks, extra_sink)
        return LoopMachine(
            provider_format=self.provider.format,
            model=self.provider.model,
            window=info.context_window,
            window_source=info.source,
            tool_specs=[t.spec for t in self.tools.values()],
            tool_result_messages=self.provider.tool_result_messages,
            user_message=self.provider.user_message,
            manager=self.manager,
            max_iterations=self.max_iterations,
            max_tokens=self.max_tokens,
            policy=self.retry_policy,
            random=self.random,
            emit=lambda event: emit(event, sinks),
            thresholds=self.pressure_thresholds,
            cancelled=lambda: self._cancel,
            remote_counter=counter,
        )

    def _start(
        self, messages: Sequence[Any], system: Any, run_id: str | None
    ) -> tuple[list[Any], str, bool]:
        """The transcript as a list, the run id, and whether the journal already held the
        run (a restart, or a finished run about to be replayed: both are said in a log
        line and in ``run_started``'s ``resumed`` flag)."""
        if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
            raise ConfigurationError(
                f"messages must be a list of messages, got {type(messages).__name__}"
            )
        transcript = list(messages)
        if run_id is None:
            if self.journal is not None:
                raise ConfigurationError("a journalled run needs an explicit run_id")
            run_id = default_run_id(transcript, system, self.provider.model)
        restarted = False
        if self.journal is not None:
            digest = transcript_digest(transcript, system, sorted(self.tools), self.provider.model)
            specs = [t.spec for t in self.tools.values()]
            restarted = self.journal.begin_run(run_id, digest, tools=specs)
            self.journal.hold(run_id)  # one runner at a time: RunLockedError for a second
            ended = self.journal.termination(run_id) if restarted else None
            if ended is not None:
                logger.warning(
                    "run %r already finished (%s) in %s: replaying it from the journal, "
                    "without calling the provider or running tools; use a new run_id for "
                    "a new run",
                    run_id,
                    ended,
                    self.journal.where,
                )
            elif restarted:
                logger.info(
                    "run %r restarts from the journal %s: journalled model calls are "
                    "replayed and journalled tools not run again",
                    run_id,
                    self.journal.where,
                )
        return transcript, run_id, restarted

    def _replayed_response(self, run_id: str, action: SendModel) -> ModelAnswer | None:
        if self.journal is None:
            return None
        found = self.journal.model_call(run_id, action.step)
        return None if found is None else ModelAnswer(response=found, replayed=True)

    def _journalled_summary(self, run_id: str, action: MakeSummary) -> str | None:
        if self.journal is None:
            return None
        return self.journal.summary(run_id, action.step, action.query.key)

    def _record_summary(self, run_id: str, action: MakeSummary, text: object) -> None:
        if self.journal is not None and isinstance(text, str):
            self.journal.record_summary(run_id, action.step, action.query.key, text)

    def _summary(self, run_id: str, action: MakeSummary) -> object:
        """A summary from the journal, else from the summarizer (recorded)."""
        known = self._journalled_summary(run_id, action)
        if known is not None:
            return known
        query = action.query
        try:
            text: object = run_summarizer(query.config, list(query.turns), query.previous)
        except Exception as exc:  # the manager drops the turns instead
            return exc
        self._record_summary(run_id, action, text)
        return text

    async def _asummary(self, run_id: str, action: MakeSummary) -> object:
        known = self._journalled_summary(run_id, action)
        if known is not None:
            return known
        query = action.query
        try:
            text: object = await arun_summarizer(query.config, list(query.turns), query.previous)
        except Exception as exc:  # the manager drops the turns instead
            return exc
        self._record_summary(run_id, action, text)
        return text

    def _record_response(self, run_id: str, step: int, response: ModelResponse) -> None:
        if self.journal is not None:
            self.journal.record_model_call(run_id, step, response)

    def _finished(self, result: RunResult) -> RunResult:
        if self.journal is not None:  # ends the run's lease too
            self.journal.finish_run(result.run_id, result.termination.name, result.state)
        return result

    def _kept(self, run_id: str) -> contextlib.AbstractContextManager[object]:
        """Hold the run's journal lease while driving it: renewed on a timer (long tools,
        long model calls), given back on any exit; ``finish_run`` ends it normally."""
        return contextlib.nullcontext() if self.journal is None else self.journal.keep(run_id)

    def _akept(self, run_id: str) -> contextlib.AbstractAsyncContextManager[object]:
        """:meth:`_kept` for the async drivers (waits for the run without blocking)."""
        return contextlib.nullcontext() if self.journal is None else self.journal.akeep(run_id)


class ToolLoop(_LoopBase):
    """Runs an agent tool loop with a synchronous provider.

    Args:
        provider: a synchronous provider (``OpenAIChatProvider``, ``AnthropicProvider``,
            ``FakeProvider`` ...).
        tools: the tools the model may call. When the manager clamps tool results with
            a spill store (``ClampToolResults(spill=...)``), ``read_spilled`` is offered
            too, unless a tool of that name is given.
        manager: fits every send into the window; None sends the full transcript
            unchanged (every enforcement site a no-op). Each run gets its own copy.
        max_iterations: tool iterations before the cap-hit synthesis call.
        max_tokens: the reply budget requested per send.
        sinks: event sinks (any ``Callable[[Event], None]``).
        journal: a :class:`~windowguard.run.journal.Journal` (``SqliteJournal``,
            ``PostgresJournal``) making runs durable, one runner per run at a time.
        tool_timeout: seconds before a tool call is abandoned (an error result); the
            call may still run to its end on its thread, its result discarded.
        max_tool_threads: the most threads this loop's sync tools hold at once, calls
            that timed out but still run included. They are daemon threads of this loop
            alone: hung calls never starve another loop, nor keep the process alive.
        retry_policy: how to react to provider failures.
        pressure_thresholds: context-pressure levels reported once when crossed.
        random: a ``() -> float`` source for backoff jitter (deterministic by default).
        sleep: the function that waits (injected in tests).
    """

    @property
    def _provider(self) -> Provider:
        return self.provider  # type: ignore[return-value]

    def run(
        self, messages: Sequence[Any], *, run_id: str | None = None, system: Any = None
    ) -> RunResult:
        """Run the loop on ``messages`` (the full transcript is returned, never pruned).

        Args:
            messages: the starting transcript in the provider's wire format.
            run_id: the run's id; required with a journal (a restart uses the same id).
            system: Anthropic's separate system prompt.
        """
        transcript, run_id, restarted = self._start(messages, system, run_id)
        machine = self._machine(counter=self._count_endpoint())
        flow = machine.run(transcript, run_id=run_id, system=system, restarted=restarted)
        with self._kept(run_id):
            return self._drive(machine, flow, run_id)

    def resume(self, state: RunState, *, results: Mapping[str, str] | None = None) -> RunResult:
        """Continue a SUSPENDED run.

        Args:
            state: the run's state (``RunResult.state``, possibly through JSON).
            results: tool results to use instead of running the calls again, by call id
                (for example the human's answer to an approval request).

        Raises:
            RunStateError: ``state`` is not a RunState, or ``results`` is not a mapping
                of the paused turn's call ids (without a result yet) to text; checked
                before anything runs.
            JournalMismatchError: the journal holds another result for a call: this
                state was resumed before with another answer.
        """
        results = check_resume(state, results, self.journal)
        machine = self._machine(counter=self._count_endpoint())
        flow = machine.run(
            list(state.messages),
            run_id=state.run_id,
            system=state.system,
            resume=state,
            supplied=results,
        )
        with self._kept(state.run_id):
            return self._drive(machine, flow, state.run_id)

    def stream(
        self, messages: Sequence[Any], *, run_id: str | None = None, system: Any = None
    ) -> RunStream:
        """Run the loop, yielding text deltas and events as they happen.

        Iterate the returned :class:`RunStream`; its ``result`` is set at the end.
        """
        transcript, run_id, restarted = self._start(messages, system, run_id)
        return RunStream(self, transcript, run_id, system, restarted=restarted)

    def _count_endpoint(self) -> RemoteCounter | None:
        find = getattr(self.provider, "count_endpoint", None)
        if not self._wants_counter() or not callable(find):
            return None
        found = find()
        return found if isinstance(found, RemoteCounter) else None

    def _drive(
        self,
        machine: LoopMachine,
        flow: Generator[Any, Any, RunResult],
        run_id: str,
    ) -> RunResult:
        answer: Any = None
        while True:
            try:
                action = flow.send(answer)
            except StopIteration as stop:
                return self._finished(stop.value)
            if isinstance(action, SendModel):
                answer = self._send(run_id, action)
            elif isinstance(action, RunTools):
                answer = self._run_tools(machine, run_id, action)
            elif isinstance(action, CountTokens):
                answer = count_tokens(action)
            elif isinstance(action, MakeSummary):
                answer = self._summary(run_id, action)
            elif isinstance(action, Sleep):
                self._sleep(action.seconds)
                answer = None
            else:  # pragma: no cover - the machine yields nothing else
                raise AssertionError(action)

    def _send(self, run_id: str, action: SendModel) -> ModelAnswer:
        replayed = self._replayed_response(run_id, action)
        if replayed is not None:
            return replayed
        try:
            response = self._provider.complete(action.request)
        except ProviderError as exc:
            return ModelAnswer(failure=exc.failure)
        self._record_response(run_id, action.step, response)
        return ModelAnswer(response=response)

    def _run_tools(self, machine: LoopMachine, run_id: str, action: RunTools) -> ToolsAnswer:
        return self._tool_runner.run(
            machine,
            run_id,
            action,
            tools=self.tools,
            journal=self.journal,
            timeout=self.tool_timeout,
        )


class AsyncToolLoop(_LoopBase):
    """Runs an agent tool loop with an asynchronous provider (same rules as ToolLoop).

    Parallel tool calls of one turn run concurrently; results keep the calls' order.
    Takes the same arguments as :class:`ToolLoop`; ``sleep`` is an async function
    (default ``asyncio.sleep``).
    """

    def _default_sleep(self) -> Callable[[float], Any]:
        return asyncio.sleep

    @property
    def _provider(self) -> AsyncProvider:
        return self.provider  # type: ignore[return-value]

    async def run(
        self, messages: Sequence[Any], *, run_id: str | None = None, system: Any = None
    ) -> RunResult:
        """Run the loop on ``messages``; see :meth:`ToolLoop.run`."""
        transcript, run_id, restarted = self._start(messages, system, run_id)
        machine = self._machine(counter=await self._count_endpoint())
        flow = machine.run(transcript, run_id=run_id, system=system, restarted=restarted)
        async with self._akept(run_id):
            return await self._drive(machine, flow, run_id)

    async def resume(
        self, state: RunState, *, results: Mapping[str, str] | None = None
    ) -> RunResult:
        """Continue a SUSPENDED run; see :meth:`ToolLoop.resume`."""
        results = check_resume(state, results, self.journal)
        machine = self._machine(counter=await self._count_endpoint())
        flow = machine.run(
            list(state.messages),
            run_id=state.run_id,
            system=state.system,
            resume=state,
            supplied=results,
        )
        async with self._akept(state.run_id):
            return await self._drive(machine, flow, state.run_id)

    def stream(
        self, messages: Sequence[Any], *, run_id: str | None = None, system: Any = None
    ) -> AsyncRunStream:
        """Run the loop, yielding text deltas and events; see :meth:`ToolLoop.stream`."""
        transcript, run_id, restarted = self._start(messages, system, run_id)
        return AsyncRunStream(self, transcript, run_id, system, restarted=restarted)

    async def _count_endpoint(self) -> RemoteCounter | None:
        find = getattr(self.provider, "acount_endpoint", None)
        if not self._wants_counter() or not callable(find):
            return None
        found = await find()
        return found if isinstance(found, RemoteCounter) else None

    async def _drive(
        self, machine: LoopMachine, flow: Generator[Any, Any, RunResult], run_id: str
    ) -> RunResult:
        answer: Any = None
        while True:
            try:
                action = flow.send(answer)
            except StopIteration as stop:
                return self._finished(stop.value)
            if isinstance(action, SendModel):
                answer = self._replayed_response(run_id, action)
                if answer is None:
                    try:
                        response = await self._provider.complete(action.request)
                    except ProviderError as exc:
                        answer = ModelAnswer(failure=exc.failure)
                    else:
                        self._record_response(run_id, action.step, response)
                        answer = ModelAnswer(response=response)
            elif isinstance(action, RunTools):
                answer = await self._run_tools(machine, run_id, action)
            elif isinstance(action, CountTokens):
                answer = await acount_tokens(action)
            elif isinstance(action, MakeSummary):
                answer = await self._asummary(run_id, action)
            else:
                await self._sleep(action.seconds)
                answer = None

    async def _run_tools(self, machine: LoopMachine, run_id: str, action: RunTools) -> ToolsAnswer:
        return await self._tool_runner.arun(
            machine,
            run_id,
            action,
            tools=self.tools,
            journal=self.journal,
            timeout=self.tool_timeout,
        )
