"""Running one turn's tool calls for the loop's drivers, and checking a resume.

The machine yields :class:`~windowguard.run._machine.RunTools`; a driver hands it to its
loop's :class:`ToolRunner`, which answers with a
:class:`~windowguard.run._machine.ToolsAnswer`. The sync driver runs the calls one after
another, the async driver concurrently; results keep the calls' order either way.

Invariants:

- A call whose result the journal holds is never run again; every live result is
  journalled before the turn moves on. A call in flight when the process dies has no
  result in the journal and runs again on restart: tools run at least once, and each
  gets a :class:`~windowguard.run.tools.ToolContext` whose ``idempotency_key`` is the same
  on every restart, so a tool can deduplicate its own side effects.
- Sync tools with a timeout run on the loop's own bounded
  :class:`~windowguard.run.tools.ToolThreads` (daemon threads never joined at exit); the
  async driver runs every sync tool there, never on the event loop's default executor
  (which ``asyncio.run`` waits for).
- A tool that pauses the run with ``SuspendRun`` data that cannot be stored as JSON is
  refused at once (:class:`~windowguard.core.exceptions.RunStateError`), before any later call of
  the turn runs: a state that cannot be saved is never produced.
- A resume is checked before anything runs: the state must be a ``RunState``, the
  results a mapping of the paused turn's call ids (without a result yet) to text, and a
  journal that already holds another result for a call refuses it
  (:class:`~windowguard.core.exceptions.JournalMismatchError`) instead of overwriting it
  under a transcript that was built on the old one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping

from ..core.exceptions import ConfigurationError, JournalMismatchError, RunStateError, SuspendRun
from ._machine import LoopMachine, RunTools, Suspension, ToolsAnswer
from .journal import Journal, RunState, jsonable
from .providers.base import ToolCall, ToolResult
from .tools import Tool, ToolContext, ToolThreads, execute_tool, execute_tool_async

__all__ = ["ToolRunner", "check_resume"]


class ToolRunner:
    """Runs the tool calls of one loop on the loop's own threads.

    Args:
        max_threads: the most threads the loop's sync tools may hold at once.
    """

    def __init__(self, max_threads: int) -> None:
        self.threads = ToolThreads(max_threads)

    def run(
        self,
        machine: LoopMachine,
        run_id: str,
        action: RunTools,
        *,
        tools: Mapping[str, Tool],
        journal: Journal | None,
        timeout: float | None,
    ) -> ToolsAnswer:
        """Run ``action``'s calls one after another (the sync driver)."""
        results: list[ToolResult | None] = []
        replayed: list[bool] = []
        suspension: Suspension | None = None
        for position, call in enumerate(action.calls):
            if position in action.done:
                results.append(action.done[position])
                replayed.append(False)
                _record(journal, run_id, action.step, position, action.done[position])
                continue
            known = _journalled(journal, run_id, action.step, position)
            if known is not None:
                results.append(known)
                replayed.append(True)
                continue
            if suspension is not None:
                results.append(None)
                replayed.append(False)
                continue
            machine.tool_started(action.step, call)
            context = ToolContext(
                run_id=run_id, call_id=call.id, step=action.step, position=position
            )
            try:
                result = execute_tool(
                    call, tools, timeout=timeout, executor=self.threads, context=context
                )
            except SuspendRun as pause:
                suspension = _suspension(call, pause)
                results.append(None)
                replayed.append(False)
                continue
            _record(journal, run_id, action.step, position, result)
            results.append(result)
            replayed.append(False)
        return ToolsAnswer(results=tuple(results), replayed=tuple(replayed), suspension=suspension)

    async def arun(
        self,
        machine: LoopMachine,
        run_id: str,
        action: RunTools,
        *,
        tools: Mapping[str, Tool],
        journal: Journal | None,
        timeout: float | None,
    ) -> ToolsAnswer:
        """Run ``action``'s calls concurrently (the async driver)."""
        results: list[ToolResult | None] = [None] * len(action.calls)
        replayed = [False] * len(action.calls)
        live: list[tuple[int, ToolCall]] = []
        for position, call in enumerate(action.calls):
            if position in action.done:
                results[position] = action.done[position]
                _record(journal, run_id, action.step, position, action.done[position])
                continue
            known = _journalled(journal, run_id, action.step, position)
            if known is not None:
                results[position], replayed[position] = known, True
                continue
            live.append((position, call))

        suspensions: list[tuple[int, Suspension | RunStateError]] = []

        async def one(position: int, call: ToolCall) -> None:
            machine.tool_started(action.step, call)
            context = ToolContext(
                run_id=run_id, call_id=call.id, step=action.step, position=position
            )
            try:
                result = await execute_tool_async(
                    call, tools, timeout=timeout, executor=self.threads, context=context
                )
            except SuspendRun as pause:
                try:
                    suspensions.append((position, _suspension(call, pause)))
                except RunStateError as refused:  # raised once the other calls settled
                    suspensions.append((position, refused))
                return
            _record(journal, run_id, action.step, position, result)
            results[position] = result

        await asyncio.gather(*(one(p, c) for p, c in live))
        suspensions.sort(key=lambda s: s[0])
        for _, outcome in suspensions:
            if isinstance(outcome, RunStateError):
                raise outcome
        suspension = suspensions[0][1] if suspensions else None
        assert not isinstance(suspension, RunStateError)
        return ToolsAnswer(results=tuple(results), replayed=tuple(replayed), suspension=suspension)


def _journalled(
    journal: Journal | None, run_id: str, step: int, position: int
) -> ToolResult | None:
    return None if journal is None else journal.tool_result(run_id, step, position)


def _record(
    journal: Journal | None, run_id: str, step: int, position: int, result: ToolResult
) -> None:
    if journal is not None:
        journal.record_tool_result(run_id, step, position, result)


def _suspension(call: ToolCall, pause: SuspendRun) -> Suspension:
    """The pause ``call`` asked for, refused when its state could not be saved.

    Raises:
        RunStateError: a reason that is not text, or data that is not JSON data.
    """
    if not isinstance(pause.reason, str):
        raise RunStateError(
            f"tool {call.name!r} (call {call.id!r}) paused the run with the reason "
            f"{pause.reason!r}: SuspendRun's reason must be a str"
        )
    try:
        json.dumps(jsonable(pause.data), allow_nan=False)
    except (ConfigurationError, TypeError, ValueError) as exc:
        raise RunStateError(
            f"tool {call.name!r} (call {call.id!r}) paused the run with data that cannot be "
            f"saved in its state ({exc}); SuspendRun data must be JSON data: dicts, lists, "
            "str, finite numbers, bool, None"
        ) from exc
    return Suspension(call_id=call.id, reason=pause.reason, data=pause.data)


def check_resume(state: object, results: object, journal: Journal | None) -> dict[str, str]:
    """The results of a resume, checked against its state and its journal.

    Args:
        state: what ``resume`` was given as the state.
        results: what it was given as the results (None: none).
        journal: the loop's journal, if any.

    Returns:
        The results by call id.

    Raises:
        RunStateError: ``state`` is not a RunState; ``results`` is not a mapping of
            str to str; it names a call the paused turn does not have, or one that
            already has a result in the state.
        JournalMismatchError: the journal holds a different result for a call (the
            state was resumed before with another answer).
    """
    if not isinstance(state, RunState):
        hint = (
            "; rebuild it with RunState.from_dict() or RunState.from_json()"
            if isinstance(state, (Mapping, str, bytes))
            else ""
        )
        raise RunStateError(
            f"resume() takes the RunState of a suspended run (RunResult.state), got "
            f"{type(state).__name__}{hint}"
        )
    if state.suspended_call not in {call.id for call in state.pending}:
        raise RunStateError(
            f"the state of run {state.run_id!r} is not a paused turn: its paused call "
            f"{state.suspended_call!r} is not among its pending calls"
        )
    if results is None:
        return {}
    if not isinstance(results, Mapping):
        raise RunStateError(
            "results must map the paused calls' ids to their result text, got "
            f"{type(results).__name__}: {results!r:.120}"
        )
    pending = {call.id for call in state.pending}
    answered = {result.call_id for result in state.completed}
    checked: dict[str, str] = {}
    for call_id, text in results.items():
        if not isinstance(call_id, str) or not isinstance(text, str):
            raise RunStateError(
                f"results must map call ids (str) to result text (str), got {call_id!r}: "
                f"{text!r:.120}"
            )
        if call_id not in pending:
            raise RunStateError(
                f"results name the call {call_id!r}, which the paused turn of run "
                f"{state.run_id!r} does not have; its calls are "
                f"{', '.join(repr(c.id) for c in state.pending)} (the paused one: "
                f"{state.suspended_call!r})"
            )
        if call_id in answered:
            raise RunStateError(
                f"results name the call {call_id!r}, which already has a result in the "
                "state; give results only for calls that have none"
            )
        checked[call_id] = text
    if journal is not None:
        _check_journal(state, checked, journal)
    return checked


def _check_journal(state: RunState, results: Mapping[str, str], journal: Journal) -> None:
    """Refuse a result that differs from the one the journal holds for its call."""
    step = state.step - 1
    for position, call in enumerate(state.pending):
        if call.id not in results:
            continue
        held = journal.tool_result(state.run_id, step, position)
        if held is not None and (held.content, held.is_error) != (results[call.id], False):
            raise JournalMismatchError(
                f"run {state.run_id!r} in {journal.where} was resumed before with another "
                f"result for call {call.id!r} ({held.content!r:.80}, now "
                f"{results[call.id]!r:.80}); the run went on from that answer, so resume "
                "it with the same results, or start a new run id",
                run_id=state.run_id,
            )
