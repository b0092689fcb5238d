"""The streaming drivers, ``RunStream`` and ``AsyncRunStream``, and the remote-count
helpers every driver shares.

A stream drives the same :class:`~windowguard.run._machine.LoopMachine` as ``run()``, through
its loop's own methods (replay, journalling, tools, sleeping), and yields each text delta
and event as it happens. Text a stream yielded from an answer that turns out incomplete
stays yielded; the machine never takes it into the transcript.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from ..core.events import Event
from ..core.exceptions import ConfigurationError, ProviderError
from ._machine import CountTokens, MakeSummary, ModelAnswer, RunResult, RunTools, SendModel
from .providers.base import ModelResponse, StreamDelta

if TYPE_CHECKING:
    from .loop import AsyncToolLoop, ToolLoop

__all__ = ["AsyncRunStream", "RunStream", "acount_tokens", "count_tokens"]


def count_tokens(action: CountTokens) -> int | BaseException:
    """A remote count, or the exception it raised (the manager falls back on it)."""
    try:
        return int(action.counter.count(action.query))
    except Exception as exc:
        return exc


async def acount_tokens(action: CountTokens) -> int | BaseException:
    """Async twin of :func:`count_tokens`; the counter never blocks the event loop."""
    try:
        return int(await action.counter.acount(action.query))
    except Exception as exc:
        return exc


class RunStream:
    """Iterate to get :class:`StreamDelta` values and events as a run progresses.

    After iteration ends, :attr:`result` holds the :class:`RunResult`.
    """

    def __init__(
        self,
        loop: ToolLoop,
        transcript: list[Any],
        run_id: str,
        system: Any,
        *,
        restarted: bool = False,
    ) -> None:
        self._loop = loop
        self._transcript = transcript
        self._run_id = run_id
        self._system = system
        self._restarted = restarted
        self.result: RunResult | None = None

    def __iter__(self) -> Iterator[StreamDelta | Event]:
        with self._loop._kept(self._run_id):
            yield from self._items()

    def _items(self) -> Iterator[StreamDelta | Event]:
        pending: list[StreamDelta | Event] = []
        loop = self._loop
        machine = loop._machine(extra_sink=pending.append, counter=loop._count_endpoint())
        flow = machine.run(
            self._transcript, run_id=self._run_id, system=self._system, restarted=self._restarted
        )
        answer: Any = None
        while True:
            try:
                action = flow.send(answer)
            except StopIteration as stop:
                self.result = loop._finished(stop.value)
                yield from _drain(pending)
                return
            yield from _drain(pending)
            if isinstance(action, SendModel):
                replayed = loop._replayed_response(self._run_id, action)
                if replayed is not None:
                    answer = replayed
                    continue
                try:
                    final: ModelResponse | None = None
                    for chunk in loop._provider.stream(action.request):
                        if isinstance(chunk, StreamDelta):
                            yield chunk
                        else:
                            final = chunk
                    if final is None:
                        raise ConfigurationError("the provider's stream ended without a response")
                except ProviderError as exc:
                    answer = ModelAnswer(failure=exc.failure)
                    continue
                loop._record_response(self._run_id, action.step, final)
                answer = ModelAnswer(response=final)
            elif isinstance(action, RunTools):
                answer = loop._run_tools(machine, self._run_id, action)
            elif isinstance(action, CountTokens):
                answer = count_tokens(action)
            elif isinstance(action, MakeSummary):
                answer = loop._summary(self._run_id, action)
            else:
                loop._sleep(action.seconds)
                answer = None


def _drain(pending: list[Any]) -> Iterator[Any]:
    while pending:
        yield pending.pop(0)


class AsyncRunStream:
    """Async-iterate to get text deltas and events; :attr:`result` is set at the end."""

    def __init__(
        self,
        loop: AsyncToolLoop,
        transcript: list[Any],
        run_id: str,
        system: Any,
        *,
        restarted: bool = False,
    ) -> None:
        self._loop = loop
        self._transcript = transcript
        self._run_id = run_id
        self._system = system
        self._restarted = restarted
        self.result: RunResult | None = None

    async def __aiter__(self) -> AsyncIterator[StreamDelta | Event]:
        async with self._loop._akept(self._run_id):
            async for item in self._items():
                yield item

    async def _items(self) -> AsyncIterator[StreamDelta | Event]:
        pending: list[StreamDelta | Event] = []
        loop = self._loop
        counter = await loop._count_endpoint()
        machine = loop._machine(extra_sink=pending.append, counter=counter)
        flow = machine.run(
            self._transcript, run_id=self._run_id, system=self._system, restarted=self._restarted
        )
        answer: Any = None
        while True:
            try:
                action = flow.send(answer)
            except StopIteration as stop:
                self.result = loop._finished(stop.value)
                for item in _drain(pending):
                    yield item
                return
            for item in _drain(pending):
                yield item
            if isinstance(action, SendModel):
                replayed = loop._replayed_response(self._run_id, action)
                if replayed is not None:
                    answer = replayed
                    continue
                final: ModelResponse | None = None
                try:
                    async for chunk in loop._provider.stream(action.request):
                        if isinstance(chunk, StreamDelta):
                            yield chunk
                        else:
                            final = chunk
                except ProviderError as exc:
                    answer = ModelAnswer(failure=exc.failure)
                    continue
                if final is None:
                    raise ConfigurationError("the provider's stream ended without a response")
                loop._record_response(self._run_id, action.step, final)
                answer = ModelAnswer(response=final)
            elif isinstance(action, RunTools):
                answer = await loop._run_tools(machine, self._run_id, action)
            elif isinstance(action, CountTokens):
                answer = await acount_tokens(action)
            elif isinstance(action, MakeSummary):
                answer = await loop._asummary(self._run_id, action)
            else:
                await loop._sleep(action.seconds)
                answer = None
