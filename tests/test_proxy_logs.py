"""The proxy's log lines are rate-limited (issue 20, item 4): a flood of one error is a
few lines and a count, repeated tracebacks are one line each, and distinct messages
all get through. Real ``logging`` records, through real handlers; the filter's clock is
the test's own (no timing)."""

from __future__ import annotations

import asyncio
import errno
import io
import logging
from collections.abc import Iterator

import pytest

from windowguard.emulator import Emulator
from windowguard.proxy import ProxyConfig, ProxyServer
from windowguard.proxy._logs import LOGGERS, RateLimitFilter


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def logged() -> Iterator[tuple[logging.Logger, io.StringIO, RateLimitFilter, _Clock]]:
    clock = _Clock()
    limit = RateLimitFilter(burst=5, interval=60.0, clock=clock)
    logger = logging.getLogger("windowguard.test_proxy_logs")
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.addFilter(limit)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield logger, out, limit, clock
    finally:
        logger.removeHandler(handler)
        logger.removeFilter(limit)
        logger.propagate = True


def _fail(n: int) -> OSError:
    try:
        raise OSError(errno.EMFILE, "Too many open files")
    except OSError as exc:
        return exc


def test_a_flood_of_one_error_is_a_few_lines_and_a_count(
    logged: tuple[logging.Logger, io.StringIO, RateLimitFilter, _Clock],
) -> None:
    logger, out, _, clock = logged
    for n in range(10_000):
        logger.error("accept failed on socket %d", n, exc_info=_fail(n))
    text = out.getvalue()
    lines = [line for line in text.splitlines() if line.startswith("windowguard.")]
    assert len(lines) == 6  # five, and the one saying the rest are held back
    assert text.count("Traceback (most recent call last)") == 1  # the first line's only
    assert "OSError: [Errno 24] Too many open files" in lines[1]  # the others: one line
    assert "further similar lines suppressed" in lines[5]
    assert len(text) < 4_000
    clock.now += 61  # the next window: the count held back is said once
    logger.error("accept failed on socket %d", 10_000, exc_info=_fail(0))
    last = out.getvalue().splitlines()[-1]
    assert "[9994 similar lines suppressed]" in last
    assert "Traceback" not in out.getvalue()[len(text) :]


def test_distinct_messages_are_not_suppressed(
    logged: tuple[logging.Logger, io.StringIO, RateLimitFilter, _Clock],
) -> None:
    logger, out, _, _ = logged
    for n in range(300):
        logger.warning(f"distinct message number {n}")
    for n in range(3):
        logger.warning("the same template, another value %d", n)
    lines = out.getvalue().splitlines()
    assert len(lines) == 303
    assert not any("suppressed" in line for line in lines)


def test_one_message_with_different_exceptions_are_different_kinds(
    logged: tuple[logging.Logger, io.StringIO, RateLimitFilter, _Clock],
) -> None:
    logger, out, _, _ = logged
    for n in range(20):
        error: Exception = ValueError("bad") if n % 2 else KeyError("gone")
        try:
            raise error
        except Exception:
            logger.exception("a request failed")
    text = out.getvalue()
    assert text.count("Traceback (most recent call last)") == 2  # one per exception type
    assert text.count("further similar lines suppressed") == 2
    assert sum(line.startswith("windowguard.") for line in text.splitlines()) == 12


def test_asyncios_accept_errors_are_limited_once_a_proxy_serves() -> None:
    """The flood a tester saw: asyncio's 'socket.accept() out of system resource' with
    its traceback, once per accept. Logged through asyncio's own exception handler."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    asyncio_logger = logging.getLogger("asyncio")
    asyncio_logger.addHandler(handler)
    try:
        with (
            Emulator(flavor="vllm", context_window=4096) as emu,
            ProxyServer(ProxyConfig(upstream=emu.root_url, port=0)),
        ):
            assert all(
                any(isinstance(f, RateLimitFilter) for f in logging.getLogger(name).filters)
                for name in LOGGERS
            )

            async def flood() -> None:
                loop = asyncio.get_running_loop()
                for _ in range(2_000):
                    loop.call_exception_handler(
                        {"message": "socket.accept() out of system resource", "exception": _fail(0)}
                    )

            asyncio.run(flood())
        text = out.getvalue()
        assert text.count("socket.accept() out of system resource") <= 6
        assert text.count("Traceback (most recent call last)") == 1
    finally:
        asyncio_logger.removeHandler(handler)
    # The last proxy stopped: the filter is off again.
    assert not any(
        isinstance(f, RateLimitFilter) for name in LOGGERS for f in logging.getLogger(name).filters
    )


def test_a_bad_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="burst"):
        RateLimitFilter(burst=0)
