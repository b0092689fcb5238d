"""A large request's fit runs on a worker thread (issue 20, item 1): the event loop
keeps serving while it shapes, estimates and counts, the fit is the one it would have
been on the loop, and a cancelled fit leaves its conversation usable."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import windowguard as wg
from windowguard.run._conversations import ConversationStore

WINDOW = 16_384


class ThreadSpyCounter:
    """An exact-enough counter (bytes) that records the thread each count ran on, and
    can hold a count until released."""

    def __init__(self) -> None:
        self.threads: set[int] = set()
        self.hold = threading.Event()
        self.hold.set()
        self.entered = threading.Event()

    def count(self, text: str) -> int:
        self.threads.add(threading.get_ident())
        self.entered.set()
        self.hold.wait(timeout=30)
        return len(text.encode("utf-8"))


def _transcript(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "TASK: fix the build."},
    ]
    for i in range(turns):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": f"step {i}", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"out {i} " * 300})
    return messages


def _conversation(counter: ThreadSpyCounter) -> Any:
    manager = wg.ContextWindowManager(
        "m", model_info=wg.ModelInfo(context_window=WINDOW), counter=counter
    )
    return ConversationStore(lambda: manager).get("k")


@pytest.mark.parametrize("offload", [False, True])
def test_an_offloaded_fit_runs_off_the_loop_and_fits_the_same(offload: bool) -> None:
    messages = _transcript(40)
    reference = wg.ContextWindowManager(
        "m", model_info=wg.ModelInfo(context_window=WINDOW), counter=ThreadSpyCounter()
    ).fit(messages, max_tokens=512)
    counter = ThreadSpyCounter()
    conversation = _conversation(counter)

    async def main() -> tuple[Any, int]:
        fitted = await conversation.aprepare(messages, max_tokens=512, offload=offload)
        return fitted.fit, threading.get_ident()

    fit, loop_thread = asyncio.run(main())
    assert counter.threads  # the user's counter was asked
    assert (loop_thread in counter.threads) is not offload
    assert fit.messages == reference.messages
    assert fit.estimated_tokens == reference.estimated_tokens


def test_the_loop_serves_other_tasks_while_an_offloaded_fit_counts() -> None:
    counter = ThreadSpyCounter()
    counter.hold.clear()  # the fit's first count waits until the loop has moved on
    conversation = _conversation(counter)
    ticks: list[int] = []

    async def main() -> None:
        fit = asyncio.ensure_future(
            conversation.aprepare(_transcript(30), max_tokens=512, offload=True)
        )
        while not counter.entered.is_set():
            await asyncio.sleep(0.001)
        for i in range(20):  # the loop runs while the fit is inside a count
            ticks.append(i)
            await asyncio.sleep(0)
        assert not fit.done()
        counter.hold.set()
        await fit

    asyncio.run(main())
    assert ticks == list(range(20))


def test_a_cancelled_offloaded_fit_leaves_the_conversation_usable() -> None:
    counter = ThreadSpyCounter()
    counter.hold.clear()
    conversation = _conversation(counter)
    messages = _transcript(30)

    async def main() -> Any:
        fit = asyncio.ensure_future(conversation.aprepare(messages, max_tokens=512, offload=True))
        while not counter.entered.is_set():
            await asyncio.sleep(0.001)
        fit.cancel()
        counter.hold.set()  # the step in the thread finishes; the fit is then closed
        with pytest.raises(asyncio.CancelledError):
            await fit
        again = await conversation.aprepare(messages, max_tokens=512, offload=True)
        return again.fit

    fit = asyncio.run(main())
    assert fit.messages[-1] is messages[-1]  # the next fit of the conversation ran whole
