"""Log lines the proxy lets through: a flood of one error becomes a few lines and a count.

A proxy past its open-files limit fails every ``accept()`` the same way, many times a
second, and asyncio logs each with its traceback (a tester's log grew 209 MB in 45 s).
:class:`RateLimitFilter` lets at most ``burst`` lines of one *kind* through per
``interval`` seconds; a kind is the logger, the message template (before its arguments
are filled in) and the exception's type. Then:

- the line that passes the limit goes out as one line saying further ones are held
  back, and the rest are counted, not written;
- the first line of the kind to pass after that says how many were held back
  (``[K similar lines suppressed]``);
- only the first line of a kind keeps its traceback: later ones carry the exception as
  one line (``ExcType: message``).

:func:`install` puts one filter on the loggers a serving proxy writes through
(``windowguard.proxy``, uvicorn's, asyncio's) while a proxy serves, and
:func:`uninstall` takes it off when the last one stops. Kinds are
bounded (``max_kinds``, the oldest forgotten), so varied messages cannot grow it.
Messages of distinct kinds never hold each other back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

__all__ = ["LOGGERS", "RateLimitFilter", "install", "uninstall"]

LOGGERS: Final = ("windowguard.proxy", "uvicorn", "uvicorn.error", "asyncio")
"""The loggers a serving proxy writes through. A filter on a logger applies to the
records made there, not to those its children pass up, so each is named. The library's
own ``windowguard`` logger is left alone: a program's :class:`~windowguard.LoggingSink`
writes every event through it, and must not lose any."""


@dataclass(slots=True)
class _Kind:
    window_start: float
    passed: int = 0
    suppressed: int = 0
    held_back: int = 0  # suppressed in earlier windows, not reported yet
    traced: bool = False


class RateLimitFilter(logging.Filter):
    """At most ``burst`` lines of a kind per ``interval`` seconds; tracebacks of a kind
    after its first shortened to one line.

    Args:
        burst: lines of one kind let through per interval (then one "held back" line).
        interval: seconds.
        max_kinds: kinds remembered (the least recently seen forgotten first).
        clock: the time (``time.monotonic``; a test passes its own).
    """

    def __init__(
        self,
        *,
        burst: int = 5,
        interval: float = 60.0,
        max_kinds: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        if burst < 1 or not interval > 0 or max_kinds < 1:
            raise ValueError("burst and max_kinds must be >= 1, interval > 0")
        self.burst = burst
        self.interval = interval
        self.max_kinds = max_kinds
        self._clock = clock
        self._kinds: OrderedDict[tuple[str, str, str], _Kind] = OrderedDict()
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        exc_type = record.exc_info[0] if record.exc_info else None
        # The first line: asyncio appends its context (a socket, a handle) below it.
        template = str(record.msg).split("\n", 1)[0]
        key = (record.name, template, exc_type.__name__ if exc_type else "")
        now = self._clock()
        with self._lock:
            kind = self._kinds.get(key)
            if kind is None:
                kind = self._kinds[key] = _Kind(window_start=now)
                while len(self._kinds) > self.max_kinds:
                    self._kinds.popitem(last=False)
            else:
                self._kinds.move_to_end(key)
            if now - kind.window_start >= self.interval:
                kind.window_start, kind.passed = now, 0
                kind.held_back += kind.suppressed
                kind.suppressed = 0
            if kind.passed > self.burst:
                kind.suppressed += 1
                return False
            kind.passed += 1
            notes: list[str] = []
            if kind.held_back:
                notes.append(f"[{kind.held_back} similar lines suppressed]")
                kind.held_back = 0
            if kind.passed > self.burst:
                notes.append(
                    f"[repeated {self.burst} times: further similar lines suppressed for "
                    f"up to {self.interval:g} s]"
                )
            shorten = kind.traced and record.exc_info is not None
            kind.traced = kind.traced or record.exc_info is not None
        if shorten or notes:
            _rewrite(record, notes, shorten=shorten)
        return True


def _rewrite(record: logging.LogRecord, notes: list[str], *, shorten: bool) -> None:
    """Put the notes (and, ``shorten``, the exception in one line) into the message."""
    try:
        message = record.getMessage()
    except Exception:  # arguments that do not fit the template: logging reports it
        return
    if shorten and record.exc_info is not None:
        exc = record.exc_info[1]
        if exc is not None:
            message = f"{message} ({type(exc).__name__}: {exc})"
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
    record.msg = " ".join([message, *notes])
    record.args = None


_INSTALLED: RateLimitFilter | None = None
_USERS = 0
_INSTALL_LOCK: Final = threading.Lock()


def install(loggers: Iterable[str] = LOGGERS) -> RateLimitFilter:
    """Put the process's one :class:`RateLimitFilter` on ``loggers`` (once each), for
    one more serving proxy; :func:`uninstall` when it stops."""
    global _INSTALLED, _USERS
    with _INSTALL_LOCK:
        if _INSTALLED is None:
            _INSTALLED = RateLimitFilter()
        installed = _INSTALLED
        _USERS += 1
        for name in loggers:
            logger = logging.getLogger(name)
            if installed not in logger.filters:
                logger.addFilter(installed)
    return installed


def uninstall(loggers: Iterable[str] = LOGGERS) -> None:
    """One proxy stopped: the last one takes the filter off ``loggers``."""
    global _INSTALLED, _USERS
    with _INSTALL_LOCK:
        _USERS = max(0, _USERS - 1)
        if _USERS or _INSTALLED is None:
            return
        for name in loggers:
            logging.getLogger(name).removeFilter(_INSTALLED)
        _INSTALLED = None
