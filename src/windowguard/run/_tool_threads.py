"""``ToolThreads``: the bounded daemon threads one tool loop runs its sync tools on.

A timeout abandons a tool call; Python cannot stop the thread running it. So the
threads a loop's calls run on must be its own (bounded: one loop's hung calls never
starve another loop's tools) and daemon threads nobody joins at exit (a hung call never
keeps the process, or ``asyncio.run``, alive). ``concurrent.futures.ThreadPoolExecutor``
gives neither: its threads are joined at interpreter exit, and a module-wide pool is
shared by every loop.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import queue
import threading
from collections.abc import Callable
from typing import Any

from ..core.exceptions import ConfigurationError

__all__ = ["ToolThreads"]


class ToolThreads(concurrent.futures.Executor):
    """At most ``max_workers`` daemon threads running one loop's sync tools.

    Unlike a ``ThreadPoolExecutor``, whose threads the interpreter joins at exit, these
    are daemon threads nobody waits for: a call the loop gave up on keeps its thread
    until it returns, but never keeps the process alive. Each loop has its own, so one
    loop's hung tools cannot starve another loop's; within one loop, a call that finds
    every thread busy waits for one, and its timeout counts the wait. A thread idle for
    ``idle_seconds`` ends, so a loop that no longer runs tools holds no thread.

    Args:
        max_workers: the most threads at once, hung ones included.
        idle_seconds: how long an idle thread waits for work before it ends.
    """

    _names = itertools.count(1)

    def __init__(self, max_workers: int = 8, *, idle_seconds: float = 30.0) -> None:
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ConfigurationError(f"max_workers must be an int >= 1, got {max_workers!r}")
        self.max_workers = max_workers
        self._idle_seconds = idle_seconds
        self._queue: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0  # alive
        self._idle = 0  # waiting for work, and not yet promised a queued call
        self._backlog = 0  # queued calls no thread was free or startable for
        self._shutdown = False

    @property
    def threads(self) -> int:
        """Threads alive now (busy, idle, or running a call that was given up on)."""
        return self._threads

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> _Future:
        """Run ``fn(*args, **kwargs)`` on a free thread, a new one, or the next to free up."""
        future: _Future = concurrent.futures.Future()
        with self._lock:
            if self._shutdown:
                raise RuntimeError("ToolThreads: cannot run a tool after shutdown")
            self._queue.put((future, fn, args, kwargs))
            if self._idle:
                self._idle -= 1
            elif self._threads < self.max_workers:
                self._threads += 1
                name = f"windowguard-tool-{next(self._names)}"
                threading.Thread(target=self._work, name=name, daemon=True).start()
            else:
                self._backlog += 1
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Take no more calls (``cancel_futures`` cancels the queued ones). Threads are
        never joined, whatever ``wait`` says: they end when idle."""
        with self._lock:
            self._shutdown = True
        if cancel_futures:
            while True:
                try:
                    future, *_ = self._queue.get_nowait()
                except queue.Empty:
                    break
                future.cancel()

    def _work(self) -> None:
        promised = True  # a new thread, or one taking a queued call, has work waiting
        while True:
            try:
                future, fn, args, kwargs = self._queue.get(
                    timeout=None if promised else self._idle_seconds
                )
            except queue.Empty:
                with self._lock:
                    if self._queue.empty():  # nobody was promised this thread: end it
                        self._idle -= 1
                        self._threads -= 1
                        return
                continue
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, fn, args, kwargs  # drop the call's references while idle
            with self._lock:
                promised = self._backlog > 0
                if promised:
                    self._backlog -= 1
                else:
                    self._idle += 1


_Future = concurrent.futures.Future[Any]
_Work = tuple[_Future, Callable[..., Any], tuple[Any, ...], dict[str, Any]]
