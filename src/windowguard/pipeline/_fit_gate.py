"""A lock one conversation's fits take in turn, from threads and event loops alike.

A :class:`~windowguard.ContextWindowManager` holds one run's state (the per-run view of
the transcript, the ledger, the composition its next usage report is attributed to),
and a fit reads and rewrites all of it. Two fits of one manager must therefore never
interleave. A sync fit runs start to end in its thread, but an async fit awaits its
remote counts: a plain ``threading.Lock`` cannot be held across an ``await`` (another
task of the same loop, in the same thread, would deadlock on it, or walk through a
reentrant one), and an ``asyncio.Lock`` serves one event loop only, while a guarded
client, an integration or the proxy may share a conversation between several loops and
threads.

:class:`FitGate` is a first-in, first-out lock with *hand-off*: whoever releases it
passes the ownership directly to the first waiter, waking a thread through its
``threading.Event`` or a task through ``loop.call_soon_threadsafe`` on that task's own
loop. It never spins, never blocks an event loop while waiting (:meth:`FitGate.aacquire`
awaits a future) and never needs to know how many loops there are.

Invariants:

- At most one owner at a time; ownership passes in arrival order.
- A waiter cancelled while queued leaves the queue; one cancelled after the ownership
  was handed to it passes it on, so a cancellation never leaves the gate held.
- A waiter whose loop has closed is skipped.
- A sync :meth:`FitGate.acquire` that could only wait forever raises
  :class:`~windowguard.ConfigurationError` instead, saying what to do: on the thread
  that holds the gate already (a fit inside a fit), or on a thread whose running event
  loop holds it (an async fit of the same conversation, suspended at an ``await``).
- The gate's own mutex is a leaf: it is held only to read or change the gate's fields,
  never while waiting and never while anything else is taken, so no caller's lock order
  can deadlock with it.
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from typing import TYPE_CHECKING

from ..core.exceptions import ConfigurationError

if TYPE_CHECKING:
    import asyncio

__all__ = ["FitGate"]


class _Waiter:
    """One queued acquirer: a thread (``event``) or a task (``loop`` and ``future``)."""

    __slots__ = ("event", "future", "loop", "owner", "thread")

    def __init__(
        self,
        *,
        event: threading.Event | None = None,
        thread: int | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        future: asyncio.Future[None] | None = None,
    ) -> None:
        self.event = event
        self.thread = thread
        self.loop = loop
        self.future = future
        self.owner = False  # set (under the gate's mutex) when the ownership is handed over


class FitGate:
    """A FIFO hand-off lock for sync and async callers on any thread or event loop.

    Examples:
        >>> gate = FitGate()
        >>> gate.acquire()
        >>> gate.try_acquire()
        False
        >>> gate.release()
    """

    __slots__ = ("_held", "_holder_loop", "_holder_thread", "_mutex", "_waiters")

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held = False
        # The loop of an async owner, to refuse a sync acquire that would deadlock on it.
        self._holder_loop: asyncio.AbstractEventLoop | None = None
        # The thread of a sync owner, to refuse the same thread waiting for itself.
        self._holder_thread: int | None = None
        self._waiters: deque[_Waiter] = deque()

    @property
    def held(self) -> bool:
        """Whether someone owns the gate now."""
        return self._held

    def try_acquire(self) -> bool:
        """Take the gate if nobody holds it or waits for it; never waits."""
        with self._mutex:
            if self._held or self._waiters:
                return False
            self._owned_by(None, threading.get_ident())
            return True

    def acquire(self) -> None:
        """Take the gate, waiting in this thread for the owners before.

        Raises:
            ConfigurationError: the gate is held by an async fit of the event loop
                running on this very thread, which cannot go on while this thread waits.
        """
        with self._mutex:
            me = threading.get_ident()
            if not self._held:
                self._owned_by(None, me)
                return
            running = _running_loop()
            if self._holder_thread == me or (running is not None and running is self._holder_loop):
                raise ConfigurationError(
                    "a sync fit of this conversation was started while this thread (or the "
                    "event loop running on it) is in the middle of another fit of the same "
                    "conversation: it would wait forever; use the async client or hook in "
                    "async code, or make the inner call in another thread"
                )
            waiter = _Waiter(event=threading.Event(), thread=me)
            self._waiters.append(waiter)
        assert waiter.event is not None
        waiter.event.wait()

    async def aacquire(self) -> None:
        """Take the gate, awaiting the owners before (the event loop keeps running)."""
        import asyncio  # on first use: only async callers need it

        loop = asyncio.get_running_loop()
        with self._mutex:
            if not self._held:
                self._owned_by(loop, None)
                return
            future: asyncio.Future[None] = loop.create_future()
            waiter = _Waiter(loop=loop, future=future)
            self._waiters.append(waiter)
        try:
            await future
        except BaseException:  # cancelled (or the loop is going away)
            with self._mutex:
                handed = waiter.owner
                if not handed and waiter in self._waiters:
                    self._waiters.remove(waiter)
            if handed:
                self.release()
            raise

    def release(self) -> None:
        """Give the gate up: to the first waiter still waiting, else free it."""
        with self._mutex:
            if not self._held:
                raise RuntimeError("FitGate.release() of a gate nobody holds")
            while self._waiters:
                waiter = self._waiters.popleft()
                if waiter.event is not None:
                    waiter.owner = True
                    self._owned_by(None, waiter.thread)
                    waiter.event.set()
                    return
                assert waiter.loop is not None and waiter.future is not None
                if waiter.future.done():  # cancelled, and leaving the queue itself
                    continue
                waiter.owner = True
                self._owned_by(waiter.loop, None)
                try:
                    waiter.loop.call_soon_threadsafe(_wake, waiter.future)
                except RuntimeError:  # its loop is closed: nobody will take it up
                    waiter.owner = False
                    continue
                return
            self._held = False
            self._holder_loop = self._holder_thread = None

    def _owned_by(self, loop: asyncio.AbstractEventLoop | None, thread: int | None) -> None:
        # Called under the mutex: the gate is now held, by a task of ``loop`` or by
        # ``thread`` (a sync owner).
        self._held = True
        self._holder_loop = loop
        self._holder_thread = thread


def _wake(future: asyncio.Future[None]) -> None:
    # Runs on the waiter's loop. A waiter cancelled meanwhile finds ``owner`` set and
    # passes the gate on itself (FitGate.aacquire).
    if not future.done():
        future.set_result(None)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    if "asyncio" not in sys.modules:  # no event loop runs without asyncio imported
        return None
    import asyncio

    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
