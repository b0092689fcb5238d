"""One conversation of a caller that keeps its own loop: its fits, in turn, and which
send each usage report answers.

``wg.guard``, the framework integrations and the proxy re-send a conversation's whole
transcript on every call, possibly from several tasks, threads or event loops at once,
and possibly as *branches* (``history + [new]``) that share message objects. A
:class:`Conversation` holds the conversation's :class:`~windowguard.ContextWindowManager`
and makes that safe. (Its stores and the options that make its manager are in
:mod:`windowguard.run._conversations`.)

Use::

    fitted = conversation.prepare(messages, tools=tools, max_tokens=1024)  # or aprepare
    try:
        response = send(fitted.fit.messages)
    except Exception as exc:
        conversation.failed(exc, send=fitted.send)
        raise
    conversation.record(response.usage, send=fitted.send)

Invariants:

- Fits of one conversation never interleave. A fit reads and rewrites its manager's
  whole per-run state (the view of the transcript, whose cached per-message entries
  are shared between the views of different branches; the ledger; the composition
  the next report is attributed to), so :meth:`Conversation.prepare` and
  :meth:`Conversation.aprepare` take the conversation's
  :class:`~windowguard.pipeline._fit_gate.FitGate`
  for the fit, and an async fit holds it across its remote counts' awaits (another
  task's fit waits; the event loop runs on). Threads and event loops alike take it in
  turn. It is held for the fit only, never for the provider call.
- Usage is attributed only to the send it answers. Every successful fit numbers its
  send (unique in the process); :meth:`Conversation.record` keeps a report only for
  the send the manager fitted last, and the next fit hands it to the manager only if
  no other fit came between, since the manager attributes ``last_usage`` to its own
  last fit. Any other report (another branch's, a stream read after the next send, a
  logger callback) is dropped: the next fit says ``NO_USAGE``, which costs a
  measurement, never correctness. A send that got no usage back is followed by
  ``NO_USAGE`` too.
- A fit that raises sends nothing: the next fit says ``NO_USAGE``, or, when the
  conversation never fitted successfully, starts the run over (``new_run=True``: the
  conversation's first fit always does; a missing usage never does).
- A conversation keeps one copy of its transcript: the manager's view. The caller's
  list is kept beside it (for :meth:`Conversation._shared`'s identity checks) only while
  the view holds those very objects. With a byte budget
  (:meth:`Conversation.measure_with`), what the view keeps is estimated after every fit
  (:mod:`windowguard.run._retained`), successful or not.
- A provider's overflow refusal (:meth:`Conversation.failed`) gives the manager the
  window it stated, and its prompt count only when exact (never an "at least" count)
  and only while the refused send is the manager's last fit; learnt at once when no
  fit is running, else by the next fit before it counts anything.
"""

from __future__ import annotations

import itertools
import operator
import threading
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, cast

from ..accounting.remote import RemoteCountError
from ..accounting.usage import NO_USAGE
from ..core.adapters._common import field
from ..core.edits.summary import arun_summarizer
from ..core.events import Event, RemoteCounted, RemoteCountFailed, TokenizerInferred, UsageMeasured
from ..core.exceptions import WindowGuardError
from ..core.failures import FailureKind, classify_failure
from ..pipeline._editing import SummaryQuery, summarize_now
from ..pipeline._fit_gate import FitGate
from ..pipeline._fitting import M
from ..pipeline.manager import ContextWindowManager, Fit, Query
from ._retained import RetainedSizer

__all__ = ["Conversation", "Fitted"]

_SEND_NUMBERS: Final = itertools.count(1)


_CARRIED: Final = (UsageMeasured, RemoteCounted, RemoteCountFailed, TokenizerInferred)
"""Events of a shared history's fit that belong to the send's fit too: what was
measured and counted (its decisions are about a request that is not sent)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Fitted:
    """One fitted send of a conversation.

    Attributes:
        fit: the manager's fit (what to send).
        send: the send's number, unique in the process: give it to
            :meth:`Conversation.record` with the usage that answers this send, or to
            :meth:`Conversation.failed` when the send raised.
    """

    fit: Fit
    send: int


@dataclass(frozen=True, slots=True, kw_only=True)
class _Overflow:
    """A provider's overflow refusal, waiting for the manager to learn it."""

    send: int | None
    prompt_tokens: int | None
    context_window: int | None


def _advance(steps: Generator[Query, Any, Fit], answer: object, first: bool) -> tuple[bool, Any]:
    """One step of a fit: ``(False, query)``, or ``(True, fit)`` at its end (a
    StopIteration cannot cross a coroutine or a future, a value can)."""
    try:
        return False, next(steps) if first else steps.send(answer)
    except StopIteration as done:
        return True, done.value


async def _step(
    steps: Generator[Query, Any, Fit], answer: object, *, first: bool, offload: bool
) -> tuple[bool, Any]:
    """:func:`_advance`, on a worker thread with ``offload``. A cancelled wait still
    waits for the thread's step, so the generator is never closed while it runs."""
    if not offload:
        return _advance(steps, answer, first)
    import asyncio  # not at import time: the core loads no asyncio until a loop is used

    future = asyncio.get_running_loop().run_in_executor(None, _advance, steps, answer, first)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await asyncio.wait([future])
        raise


class Conversation:
    """One conversation's manager, its fits in turn, and the usage of its latest send.

    Use :meth:`prepare` (or :meth:`aprepare`) before a send, then :meth:`record` with
    the provider's usage and the send's number (None when it reported none), or
    :meth:`failed` when it raised.

    Attributes:
        key: the conversation's key in its store.
        manager: its :class:`~windowguard.ContextWindowManager`; fits read and change
            it, so use it only through this conversation.
        lock: a reentrant lock for a caller's own bookkeeping beside the conversation
            (which send a framework callback belongs to ...). Hold it briefly, and never
            around a fit: fits take the conversation's gate, not this lock.
        touched: when the conversation was last used (``time.monotonic()``).
    """

    __slots__ = (
        "_gate",
        "_latest",
        "_measure",
        "_mutex",
        "_overflowed",
        "_overflows",
        "_previous",
        "_report",
        "_sizer",
        "_started",
        "key",
        "lock",
        "manager",
        "retained_bytes",
        "touched",
    )

    def __init__(self, key: str, manager: ContextWindowManager) -> None:
        self.key = key
        self.manager = manager
        self.lock = threading.RLock()
        self.touched = time.monotonic()
        self._gate = FitGate()
        # A leaf lock over the fields below: never held while waiting for anything.
        self._mutex = threading.Lock()
        self._started = False
        self._latest: int | None = None
        self._report: tuple[int, object] | None = None
        self._overflows: list[_Overflow] = []
        # An overflow was learnt since the last fit: the next fit is the manager's
        # careful one (it distrusts its counts), so no shared-history fit may take that.
        self._overflowed = False
        # The transcript the manager fitted last (the caller's own list) and its length,
        # kept only while the manager's view holds the same message objects (else it
        # would be a second copy of the transcript, useless to the identity checks).
        self._previous: tuple[Sequence[object], int] = ((), 0)
        # What the manager keeps, estimated after each fit when a store budgets bytes
        # (see measure_with); told to the store's budget by ``_measure``.
        self.retained_bytes = 0
        self._sizer: RetainedSizer | None = None
        self._measure: Callable[[Conversation], None] | None = None

    def measure_with(self, measure: Callable[[Conversation], None]) -> None:
        """Estimate :attr:`retained_bytes` after every fit, and call ``measure`` with the
        conversation then (its store's byte budget)."""
        self._sizer = RetainedSizer()
        self._measure = measure

    def _measured(self) -> None:
        """After a fit, successful or not (the gate is held): size what the manager keeps."""
        sizer = self._sizer
        if sizer is None:
            return
        entries, edited = self.manager.retained()
        self.retained_bytes = sizer.update(entries, edited)
        if self._measure is not None:
            self._measure(self)

    @property
    def started(self) -> bool:
        """True once a request of this conversation was fitted (in its current run)."""
        return self._started

    @property
    def latest_send(self) -> int | None:
        """The number of the send the manager fitted last (None: none, or a fit is
        running now)."""
        with self._mutex:
            return self._latest

    def is_latest(self, send: int) -> bool:
        """Whether ``send`` is the send the manager fitted last: only its usage may be
        recorded, since the manager attributes a report to what it fitted last."""
        with self._mutex:
            return self._latest == send

    # -- fitting --------------------------------------------------------------------------

    def prepare(
        self, messages: Sequence[object], *, send: int | None = None, **options: Any
    ) -> Fitted:
        """Fit one request of this conversation (``last_usage`` is filled in) and number
        the send. Fits of one conversation run one at a time, from any thread.

        Args:
            messages: the full transcript, as the caller sends it.
            send: the number of a send fitted again (a refit after an overflow): the
                refit keeps it, so the usage of what is finally sent is recorded for it;
                None: a new send, with a new number.
            **options: any other :meth:`ContextWindowManager.fit` argument.

        Raises:
            ContextTruncatedError: the request cannot fit; send nothing.
            ConfigurationError: called in the middle of another fit of this conversation
                on the same thread or event loop (it would wait forever).
        """
        self._gate.acquire()
        try:
            steps = self._steps(messages, options)
            try:
                query = next(steps)
                while True:
                    remote = self.manager.remote
                    answer: object
                    if isinstance(query, SummaryQuery):
                        answer = summarize_now(query)
                    elif remote is None:
                        answer = RemoteCountError("no remote counter")
                    else:
                        try:
                            answer = int(remote.count(query))
                        except Exception as exc:  # a counter must never break a send
                            answer = exc
                    query = steps.send(answer)
            except StopIteration as done:
                fit: Fit = done.value
            finally:
                steps.close()
            return Fitted(fit=fit, send=self._sent(send))
        finally:
            self._gate.release()

    async def aprepare(
        self,
        messages: Sequence[object],
        *,
        send: int | None = None,
        offload: bool = False,
        **options: Any,
    ) -> Fitted:
        """:meth:`prepare` on an event loop: the conversation's turn is awaited, and so
        are the remote counts, never blocking the loop. The turn is held across those
        awaits (another task's fit of the same conversation waits), and only for the fit.

        Args:
            messages: the full transcript, as the caller sends it.
            send: as for :meth:`prepare`.
            offload: run the fit's own work (shaping, estimating, exact counting) on a
                worker thread, so that a large request does not hold the event loop
                (each step costs a thread hop: for large requests only).
            **options: any other :meth:`ContextWindowManager.fit_steps` argument.

        Raises:
            ContextTruncatedError: the request cannot fit; send nothing.
        """
        await self._gate.aacquire()
        try:
            steps = self._steps(messages, options)
            try:
                done, value = await _step(steps, None, first=True, offload=offload)
                while not done:
                    query: Query = value
                    remote = self.manager.remote
                    answer: object
                    if isinstance(query, SummaryQuery):
                        try:
                            answer = await arun_summarizer(
                                query.config, list(query.turns), query.previous
                            )
                        except Exception as exc:  # the manager drops the turns instead
                            answer = exc
                    elif remote is None:
                        answer = RemoteCountError("no remote counter")
                    else:
                        try:
                            answer = int(await remote.acount(query))
                        except Exception as exc:  # a counter must never break a send
                            answer = exc
                    done, value = await _step(steps, answer, first=False, offload=offload)
                fit: Fit = value
            finally:
                steps.close()  # a cancelled fit leaves nothing suspended in the manager
            return Fitted(fit=fit, send=self._sent(send))
        finally:
            self._gate.release()

    def _steps(
        self, messages: Sequence[object], options: dict[str, Any]
    ) -> Generator[Query, Any, Fit]:
        """One send's fit as a sans-I/O generator (the gate is held): the manager's
        :meth:`~windowguard.ContextWindowManager.fit_steps`, preceded, for a branch, by a
        fit of the history it shares with the previous send (see :meth:`_shared`)."""
        manager = self.manager
        last_usage, new_run = self._begin()
        shared = 0
        overflowed, self._overflowed = self._overflowed, False
        if not new_run and not overflowed and isinstance(messages, (list, tuple)):
            shared = self._shared(messages)
        carried: tuple[Event, ...] = ()
        try:
            if shared:
                try:
                    prefix: Fit = yield from manager.fit_steps(
                        messages[:shared], last_usage=last_usage, **options
                    )
                    carried = tuple(e for e in prefix.events if isinstance(e, _CARRIED))
                except WindowGuardError:
                    pass  # the shared part alone is not sendable: nothing is lost
                last_usage = NO_USAGE  # the prefix's fit took the report in
            fit: Fit = yield from manager.fit_steps(
                messages, last_usage=last_usage, new_run=new_run, **options
            )
        finally:
            self._previous = (messages, len(messages)) if self._holds(messages) else ((), 0)
            # Where the fit ran (a worker thread, for an offloaded one): sizing a rebuilt
            # view walks every message, which the event loop should not wait for.
            self._measured()
        return replace(fit, events=carried + fit.events) if carried else fit

    def _holds(self, messages: Sequence[object]) -> bool:
        """Whether the manager's view holds ``messages``' own objects (first and last):
        a caller that sends its own objects again, as ``wg.guard``'s do. A proxy parses
        each request anew, so its messages are copies the view compared by equality:
        keeping them would keep a second transcript, and an identity check never finds
        a shared history in copies."""
        entries, _ = self.manager.retained()
        if not messages or len(entries) != len(messages):
            return False
        return entries[0].origin is messages[0] and entries[-1].origin is messages[-1]

    def _shared(self, messages: Sequence[object]) -> int:
        """How much history a branch shares with the previous send, to fit first.

        A caller sending ``history + [new]`` from several branches alternates between
        transcripts that are not extensions of each other. Each such send rebuilds the
        manager's view, and what was measured together with the previous branch's own
        messages is forgotten (a measured total cannot be split without a count of its
        parts), so the shared history would be estimated again on every switch. Fitting
        the shared history first (a fit whose request is not sent) lets the manager
        count it without the other branch's messages, near the edge; the branch is then
        an extension of it, whose count adds only the branch's own messages.

        Returns:
            The length of the shared prefix, when ``messages`` branches off the previous
            send after a whole message that ends a turn (the next one is not a tool
            result), else 0.
        """
        previous, length = self._previous
        if previous is messages or length == 0 or len(previous) < length:
            return 0  # the caller's own list again (appended to), or nothing to compare
        if len(messages) >= length and messages[length - 1] is previous[length - 1]:
            return 0  # an extension, by its last message (the manager checks it whole)
        # Not an extension: the manager rebuilds its view, O(n) anyway.
        limit = min(length, len(messages))
        index = next(
            (i for i, same in enumerate(map(operator.is_, messages[:limit], previous)) if not same),
            limit,
        )
        if index < 2 or index >= len(messages):
            return 0  # a different conversation, or an older state of this one
        return index if _starts_turn(messages[index]) else 0

    def fit(self, messages: Sequence[M], **options: Any) -> Fit[M]:
        """:meth:`prepare`, for a caller that needs no send number (its reports are
        recorded with ``send=None``: for whatever send was fitted last)."""
        return cast("Fit[M]", self.prepare(messages, **options).fit)  # the manager's

    async def afit(self, messages: Sequence[M], **options: Any) -> Fit[M]:
        """:meth:`aprepare`, for a caller that needs no send number."""
        return cast("Fit[M]", (await self.aprepare(messages, **options)).fit)

    def _begin(self) -> tuple[object, bool]:
        """The ``last_usage`` and ``new_run`` of the fit starting now (the gate is held):
        ``(NO_USAGE, True)`` on a run's first send; else the usage recorded for the send
        the manager fitted last, or ``NO_USAGE``. Overflows reported meanwhile are learnt
        first."""
        self.touched = time.monotonic()
        with self._mutex:
            report, self._report = self._report, None
            latest, self._latest = self._latest, None  # a fit runs: no send is the latest
            overflows, self._overflows = self._overflows, []
        for overflow in overflows:
            self._observe_overflow(overflow, latest)
        if not self._started:
            return NO_USAGE, True  # a fit that raised before any succeeded starts over
        if report is not None and report[0] == latest:
            return report[1], False
        return NO_USAGE, False

    def _sent(self, send: int | None) -> int:
        """The fit succeeded (the gate is held): its send is now the latest."""
        number = next(_SEND_NUMBERS) if send is None else send
        with self._mutex:
            self._latest = number
            self._started = True
        return number

    # -- what came back ---------------------------------------------------------------------

    def record(self, usage: object, *, send: int | None = None) -> bool:
        """The provider's usage for one send (None: none came back).

        Kept only while that send is the one the manager fitted last: the manager
        attributes the next fit's ``last_usage`` to its own last fit, so a report for an
        older send (another branch's, a stream read late) would measure the wrong
        request. The next fit takes it.

        Args:
            usage: the usage (an SDK object, a dict or an int of prompt tokens), or None.
            send: the send it answers (:attr:`Fitted.send`); None: the latest send.

        Returns:
            Whether the report was kept.
        """
        with self._mutex:
            if send is None:
                send = self._latest
            if send is None or send != self._latest:
                return False
            self._report = (send, NO_USAGE if usage is None else usage)
            return True

    def failed(self, error: BaseException, *, send: int | None = None) -> None:
        """A send of this conversation raised: no usage came back, and a provider's
        overflow refusal teaches the manager what it stated.

        The window the provider stated is always learnt. Its prompt count is learnt
        only when exact (never an "at least" count) and only while that send is still
        the one the manager fitted last. When no fit is running it is learnt at once,
        else by the next fit, before it counts anything.

        Args:
            error: what the send raised.
            send: the send that raised (:attr:`Fitted.send`); None: the latest send.
        """
        with self._mutex:
            if send is None:
                send = self._latest
            latest = send is not None and send == self._latest
            if latest:
                self._report = None
        try:
            failure = classify_failure(error)
        except Exception:  # not something a provider said
            return
        if failure.kind is not FailureKind.CONTEXT_OVERFLOW:
            return
        exact = latest and not failure.prompt_tokens_is_lower_bound
        overflow = _Overflow(
            send=send if latest else None,
            prompt_tokens=failure.prompt_tokens if exact else None,
            context_window=failure.context_window,
        )
        with self._mutex:
            self._overflows.append(overflow)
        if self._gate.try_acquire():  # no fit is running: learn it now
            try:
                with self._mutex:
                    overflows, self._overflows = self._overflows, []
                    latest_now = self._latest
                for pending in overflows:
                    self._observe_overflow(pending, latest_now)
            finally:
                self._gate.release()

    def _observe_overflow(self, overflow: _Overflow, latest: int | None) -> None:
        # The gate is held. The count belongs to the manager's last fit only if the
        # refused send is that fit.
        attributed = overflow.send is not None and overflow.send == latest
        self._overflowed = True
        self.manager.observe_overflow(
            overflow.prompt_tokens if attributed else None,
            overflow.context_window,
            attributed=attributed,
        )


_RESULT_TYPES: Final = frozenset({"tool_result", "function_call_output"})


def _starts_turn(message: object) -> bool:
    """Whether a transcript may end just before ``message`` without leaving a tool call
    unanswered: it is not a tool result (a chat ``tool`` message, a Responses
    ``*_call_output`` item, an Anthropic user message of ``tool_result`` blocks). When
    in doubt, no."""
    role = field(message, "role")
    kind = field(message, "type")
    if role in ("tool", "function") or (isinstance(kind, str) and kind.endswith("_output")):
        return False
    if role == "user":
        content = field(message, "content")
        if isinstance(content, (list, tuple)):
            return not any(field(block, "type") in _RESULT_TYPES for block in content)
        return True
    return role in ("assistant", "system", "developer") or kind in ("reasoning", "function_call")
