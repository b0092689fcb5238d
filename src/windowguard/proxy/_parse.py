"""Parsing request bodies without stalling the proxy's other clients (issue 20, item 1).

A body is parsed where it costs the others least:

- under :data:`THREAD_BYTES` (64 KiB), on the event loop: the parse costs less than a
  thread hop;
- up to :data:`PROCESS_BYTES` (4 MiB), on a worker thread, with quick GIL hand-overs
  (:class:`~windowguard.proxy._http.QuickSwitches`);
- beyond, in a helper process: ``json.loads`` is one C call that holds the interpreter
  for its whole length (60 ms for 30 MiB, during which no other client is served), so it
  runs where it holds another interpreter. What comes back is unpickled here, which
  builds the same strings from UTF-8 at memory speed. The helper is started on the
  first such body and kept; if it dies, that body is parsed on a thread and the next
  one starts a new helper.

Invariants: the result is :func:`~windowguard.proxy._http.parse_body`'s wherever it
runs (the helper runs that same function); the helper is shut down with the app.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Final

from ._http import QuickSwitches, parse_body

__all__ = ["PROCESS_BYTES", "THREAD_BYTES", "BodyParser"]

THREAD_BYTES: Final = 64 * 1024
PROCESS_BYTES: Final = 4 * 1024 * 1024

logger = logging.getLogger("windowguard.proxy")


class BodyParser:
    """Parses request bodies on the loop, a thread or a helper process, by size.

    Args:
        switches: the quick GIL hand-overs held while a large body is worked on.
        thread_bytes: the size from which a body is parsed off the event loop.
        process_bytes: the size from which a helper process parses (None: never).
    """

    def __init__(
        self,
        switches: QuickSwitches,
        *,
        thread_bytes: int = THREAD_BYTES,
        process_bytes: int | None = PROCESS_BYTES,
    ) -> None:
        self._switches = switches
        self._thread_bytes = thread_bytes
        self._process_bytes = process_bytes
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self.process_parses = 0  # bodies a helper process parsed (for tests and metrics)

    async def parse(self, raw: bytes) -> dict[str, Any] | str:
        """``raw`` as a JSON object, or what is wrong with it (:func:`parse_body`)."""
        if len(raw) < self._thread_bytes:
            return parse_body(raw)
        with self._switches.held():
            if self._process_bytes is not None and len(raw) >= self._process_bytes:
                pool = self._helper()
                try:
                    parsed: dict[str, Any] | str = await asyncio.get_running_loop().run_in_executor(
                        pool, parse_body, raw
                    )
                except BrokenProcessPool:
                    logger.warning("the body-parsing helper process died; parsing on a thread")
                    self._discard(pool)
                else:
                    self.process_parses += 1
                    return parsed
            return await asyncio.to_thread(parse_body, raw)

    def _helper(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                # spawn: a clean interpreter (forking one that runs threads can deadlock).
                context = multiprocessing.get_context("spawn")
                self._pool = ProcessPoolExecutor(max_workers=1, mp_context=context)
            return self._pool

    def _discard(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Stop the helper process, if one was started."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
