"""Concurrent sends of one conversation never corrupt each other's counts (issue 18.7).

Branches of one conversation (``history + [new]``, sharing the history's message
objects) are sent at once through one guarded client: asyncio tasks through
``wg.guard(openai.AsyncOpenAI(...))``, threads through ``wg.guard(openai.OpenAI(...))``,
and clients of ``windowguard proxy``. Every request goes through the official SDK's HTTP
stack to the emulator in its vLLM flavour, whose ``/tokenize`` count API the guard finds
and uses near the edge, and which answers an overflow with vLLM's 400.

The truth is the emulator's: a refusal (``ContextTruncatedError``, raised before any
request) is wrong unless the smallest request the guard may send (head plus newest
turn) counted by the emulator's own ``/tokenize`` route, plus the smallest reply, is
over the window; an overflow is any 400 the emulator answers. After the concurrent
rounds, sequential sends must still use the window as a conversation that never saw
concurrency does (the bug left them with head + newest turn only).

Below those, the pieces: the conversation's fit gate (FIFO hand-off across threads and
event loops, cancellation, the deadlock it refuses), a Hypothesis property that drives
concurrent fits of one conversation through random interleavings of their remote counts
and usage reports with a deterministic scheduler, and what a usage report is
attributed to.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import windowguard as wg
from windowguard.accounting.counters import load_counter
from windowguard.accounting.discovery import clear_discovery_cache
from windowguard.accounting.remote import CountQuery
from windowguard.accounting.templates import count_prompt
from windowguard.core.events import Event, RemoteCounted
from windowguard.core.shrink import DEFAULT_FLOOR
from windowguard.emulator import DEFAULT_TOKENIZER, Emulator, EmulatorRequest, Reply
from windowguard.pipeline._fit_gate import FitGate
from windowguard.proxy import ProxyConfig, ProxyServer
from windowguard.run._conversations import ConversationStore

MODEL = "emulated-model"
WINDOW = 8_192
MAX_TOKENS = 256
SYSTEM = "You are a careful coding agent."
TASK = "TASK-c0n: find the bug and fix it."
PREFILLED = 22  # turns of ~330 tokens: ~7.6k tokens of history, at the window's edge
BRANCHES = 8
ROUNDS = 4


def _code(n: int, lines: int = 20) -> str:
    return "\n".join(f"def f{n}_{j}(x):\n    return x * {j}  # line {j}" for j in range(lines))


def _turn(history: list[dict[str, Any]], n: int) -> None:
    """Append one tool-call turn (an assistant call and its result) to ``history``."""
    call = {"name": "read_file", "arguments": json.dumps({"path": f"src/m{n}.py"})}
    history.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": f"call_{n}", "type": "function", "function": call}],
        }
    )
    history.append({"role": "tool", "tool_call_id": f"call_{n}", "content": _code(n)})


def _history(turns: int = PREFILLED) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    for n in range(1000, 1000 + turns):
        _turn(history, n)
    return history


def _branch(history: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """``history + [new]``: the history's own objects, and one new user message."""
    return [*history, {"role": "user", "content": f"branch {name}: " + _code(hash(name) % 997, 3)}]


def _answer(request: EmulatorRequest) -> Reply:
    return Reply(text="Looked at it.")


def _minimal(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The smallest request the guard may send: the head and the newest turn (the last
    call, its result and the branch's user message)."""
    return [*messages[:2], *messages[-3:]]


def _tokens(emu: Emulator, messages: Sequence[dict[str, Any]]) -> int:
    """The emulator's own count of a request (vLLM ``POST /tokenize``, chat form)."""
    body = {"model": MODEL, "messages": list(messages)}
    answer = httpx.post(f"{emu.root_url}/tokenize", json=body, timeout=30)
    answer.raise_for_status()
    count = answer.json()["count"]
    assert isinstance(count, int)
    return count


@dataclass
class Tally:
    """What happened to the sends of one test."""

    ok: int = 0
    overflows: int = 0
    refused: list[list[dict[str, Any]]] = field(default_factory=list)
    after: list[int] = field(default_factory=list)  # prompt tokens of the sends afterwards
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wrong_refusals(self, emu: Emulator) -> int:
        return sum(
            1
            for messages in self.refused
            if _tokens(emu, _minimal(messages)) + DEFAULT_FLOOR <= WINDOW
        )


@pytest.fixture(autouse=True)
def _fresh_discovery() -> Iterator[None]:
    clear_discovery_cache()
    wg.clear_counter_cache()
    yield
    clear_discovery_cache()
    wg.clear_counter_cache()


def _check(emu: Emulator, tally: Tally, events: Sequence[Event], reference: list[int]) -> None:
    assert tally.ok + tally.overflows + len(tally.refused) == ROUNDS * BRANCHES
    assert tally.wrong_refusals(emu) == 0, f"{len(tally.refused)} refusals"
    assert tally.overflows == 0
    assert all(record.status == 200 for record in emu.records)
    assert any(isinstance(e, RemoteCounted) for e in events), "the count API was never used"
    # Afterwards the conversation keeps at least what a conversation that never saw
    # concurrency keeps, and far more than head + newest turn.
    assert len(tally.after) == len(reference) == 3
    assert all(kept >= fresh for kept, fresh in zip(tally.after, reference, strict=True))
    assert min(tally.after) > 2 * _tokens(emu, _minimal(_branch(_history(), "after")))


ACCOUNTING_ONLY: tuple[wg.EditStage, ...] = ()
"""The guards here drop whole turns only: what they check is the accounting (counts,
refusals, what a report is attributed to, the window used afterwards against a client
that never saw concurrency), which the default edits would blur by clearing old results
at 55 % of the budget, far from the edge where counts are asked."""


# -- wg.guard over the async client: asyncio tasks -----------------------------------------


async def _async_send(
    client: Any,
    messages: list[dict[str, Any]],
    tally: Tally,
    *,
    stream: bool = False,
    delay: float = 0,
) -> int | None:
    try:
        if stream:
            chunks = await client.chat.completions.create(
                model=MODEL,
                messages=messages,
                max_tokens=MAX_TOKENS,
                stream=True,
                # the reference reads the usage, so ask for it (unasked, the guard
                # withholds the usage chunk it asked for itself)
                stream_options={"include_usage": True},
            )
            await asyncio.sleep(delay)  # streams are read in another order than fitted
            usage = [chunk.usage async for chunk in chunks if chunk.usage is not None]
            reply_usage = usage[-1]
        else:
            reply = await client.chat.completions.create(
                model=MODEL, messages=messages, max_tokens=MAX_TOKENS
            )
            reply_usage = reply.usage
    except wg.ContextTruncatedError:
        tally.refused.append(messages)
        return None
    except openai.BadRequestError:
        tally.overflows += 1
        return None
    tally.ok += 1
    tokens = reply_usage.prompt_tokens
    assert isinstance(tokens, int)
    return tokens


async def _async_rounds(
    emu: Emulator, events: list[Event], *, stream: bool
) -> tuple[Tally, list[int]]:
    tally = Tally()
    history = _history()
    async with openai.AsyncOpenAI(base_url=emu.base_url, api_key="k", max_retries=0) as raw:
        client = wg.guard(raw, sinks=[events.append], edits=ACCOUNTING_ONLY)
        for r in range(ROUNDS):
            branches = [_branch(history, f"{r}-{i}") for i in range(BRANCHES)]
            await asyncio.gather(
                *(
                    _async_send(client, b, tally, stream=stream, delay=0.01 * (BRANCHES - i))
                    for i, b in enumerate(branches)
                )
            )
            _turn(history, r)
        for k in range(3):  # one at a time now
            tokens = await _async_send(client, _branch(history, f"after-{k}"), tally)
            assert tokens is not None
            tally.after.append(tokens)
        # The same sends through a client that never saw concurrency: the reference.
        fresh = wg.guard(raw, edits=ACCOUNTING_ONLY)
        reference = []
        for k in range(3):
            tokens = await _async_send(fresh, _branch(history, f"after-{k}"), Tally())
            assert tokens is not None
            reference.append(tokens)
    tally.ok -= 3
    return tally, reference


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_concurrent_branches_through_one_async_guarded_client(stream: bool) -> None:
    events: list[Event] = []
    with Emulator(flavor="vllm", context_window=WINDOW, scenario=_answer) as emu:
        tally, reference = asyncio.run(_async_rounds(emu, events, stream=stream))
        _check(emu, tally, events, reference)


# -- wg.guard over the sync client: threads -------------------------------------------------


def _sync_send(client: Any, messages: list[dict[str, Any]], tally: Tally) -> int | None:
    try:
        reply = client.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=MAX_TOKENS
        )
    except wg.ContextTruncatedError:
        with tally.lock:
            tally.refused.append(messages)
        return None
    except openai.BadRequestError:
        with tally.lock:
            tally.overflows += 1
        return None
    with tally.lock:
        tally.ok += 1
    tokens = reply.usage.prompt_tokens
    assert isinstance(tokens, int)
    return tokens


def test_concurrent_branches_from_threads_through_one_sync_guarded_client() -> None:
    events: list[Event] = []
    tally = Tally()
    history = _history()
    with (
        Emulator(flavor="vllm", context_window=WINDOW, scenario=_answer) as emu,
        openai.OpenAI(base_url=emu.base_url, api_key="k", max_retries=0) as raw,
        ThreadPoolExecutor(max_workers=BRANCHES) as pool,
    ):
        client = wg.guard(raw, sinks=[events.append], edits=ACCOUNTING_ONLY)
        for r in range(ROUNDS):
            branches = [_branch(history, f"{r}-{i}") for i in range(BRANCHES)]
            list(pool.map(lambda b: _sync_send(client, b, tally), branches))
            _turn(history, r)
        after = [_sync_send(client, _branch(history, f"after-{k}"), tally) for k in range(3)]
        fresh = wg.guard(raw, edits=ACCOUNTING_ONLY)
        reference = [_sync_send(fresh, _branch(history, f"after-{k}"), Tally()) for k in range(3)]
        tally.ok -= 3
        tally.after = [t for t in after if t is not None]
        _check(emu, tally, events, [t for t in reference if t is not None])


# -- the proxy: concurrent clients ------------------------------------------------------------


def test_concurrent_branches_through_the_proxy() -> None:
    tally = Tally()
    history = _history()

    async def rounds(base_url: str) -> None:
        async with openai.AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0) as client:

            async def send(messages: list[dict[str, Any]]) -> int | None:
                try:
                    reply = await client.chat.completions.create(
                        model=MODEL, messages=messages, max_tokens=MAX_TOKENS
                    )
                except openai.BadRequestError as exc:
                    body = exc.body if isinstance(exc.body, dict) else {}
                    if body.get("code") == "context_truncated":  # the proxy refused it
                        tally.refused.append(messages)
                    else:
                        tally.overflows += 1
                    return None
                tally.ok += 1
                return reply.usage.prompt_tokens if reply.usage else None

            for r in range(ROUNDS):
                branches = [_branch(history, f"{r}-{i}") for i in range(BRANCHES)]
                await asyncio.gather(*(send(b) for b in branches))
                _turn(history, r)
            for k in range(3):
                tokens = await send(_branch(history, f"after-{k}"))
                assert tokens is not None
                tally.after.append(tokens)

    with (
        Emulator(flavor="vllm", context_window=WINDOW, scenario=_answer) as emu,
        ProxyServer(ProxyConfig(upstream=emu.root_url, port=0)) as proxy,
    ):
        asyncio.run(rounds(proxy.base_url))
        tally.ok -= 3
        assert tally.ok + tally.overflows + len(tally.refused) == ROUNDS * BRANCHES
        assert tally.wrong_refusals(emu) == 0 and tally.overflows == 0
        assert all(record.status == 200 for record in emu.records)
        # Each send afterwards keeps more than head + newest turn.
        minimal = _tokens(emu, _minimal(_branch(history, "after-0")))
        assert min(tally.after) > 2 * minimal


# -- the fit gate -----------------------------------------------------------------------------


def test_the_gate_hands_over_in_arrival_order_across_threads() -> None:
    gate = FitGate()
    gate.acquire()
    order: list[int] = []
    started = []

    def worker(n: int) -> None:
        started[n].set()
        gate.acquire()
        order.append(n)
        gate.release()

    started = [threading.Event() for _ in range(4)]
    threads = []
    for n in range(4):
        thread = threading.Thread(target=worker, args=(n,))
        thread.start()
        started[n].wait()
        while len(gate._waiters) < n + 1:  # queued before the next one starts
            pass
        threads.append(thread)
    gate.release()
    for thread in threads:
        thread.join(5)
    assert order == [0, 1, 2, 3]
    assert not gate.held


def test_the_gate_serves_tasks_of_several_event_loops_and_threads() -> None:
    gate = FitGate()
    inside = 0
    most = 0
    lock = threading.Lock()

    async def task() -> None:
        nonlocal inside, most
        await gate.aacquire()
        try:
            with lock:
                inside += 1
                most = max(most, inside)
            await asyncio.sleep(0.001)  # suspended while holding the gate
            with lock:
                inside -= 1
        finally:
            gate.release()

    async def loop_body() -> None:
        await asyncio.gather(*(task() for _ in range(20)))

    def sync_body() -> None:
        for _ in range(20):
            gate.acquire()
            with lock:
                nonlocal_inside = inside
            assert nonlocal_inside == 0
            gate.release()

    threads = [threading.Thread(target=asyncio.run, args=(loop_body(),)) for _ in range(3)]
    threads.append(threading.Thread(target=sync_body))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert most == 1 and inside == 0 and not gate.held


def test_a_cancelled_waiter_never_leaves_the_gate_held() -> None:
    async def main() -> None:
        gate = FitGate()
        await gate.aacquire()
        waiting = asyncio.create_task(gate.aacquire())
        await asyncio.sleep(0)
        waiting.cancel()  # cancelled while queued
        with pytest.raises(asyncio.CancelledError):
            await waiting
        handed = asyncio.create_task(gate.aacquire())
        await asyncio.sleep(0)
        gate.release()  # handed to ``handed`` ...
        handed.cancel()  # ... which is cancelled before it runs: it passes the gate on
        with pytest.raises(asyncio.CancelledError):
            await handed
        assert not gate.held
        assert gate.try_acquire()
        gate.release()

    asyncio.run(main())


def test_a_sync_fit_that_would_wait_forever_is_refused() -> None:
    async def main() -> None:
        gate = FitGate()
        await gate.aacquire()  # an async fit of this loop holds it
        with pytest.raises(wg.ConfigurationError, match="would wait forever"):
            gate.acquire()  # a sync fit on the same loop's thread
        gate.release()

    asyncio.run(main())
    gate = FitGate()
    gate.acquire()
    with pytest.raises(wg.ConfigurationError, match="would wait forever"):
        gate.acquire()  # a fit inside a fit, on one thread
    gate.release()


# -- random interleavings of one conversation's fits (deterministic scheduler) --------------

_COUNTER = load_counter(DEFAULT_TOKENIZER)


def _exact(messages: Sequence[object]) -> int:
    """The emulator's count of a chat request (its tokenizer and template)."""
    return count_prompt(_COUNTER, [dict(m) for m in messages], None, template="openai")  # type: ignore[call-overload]


class ScheduledCounter:
    """A remote counter whose answers a scheduler releases, one pending count at a time,
    in an order the test chooses: the interleavings of concurrent fits."""

    name = "scheduled"

    def __init__(self) -> None:
        self.pending: list[tuple[asyncio.Future[int], CountQuery]] = []
        self.most_pending = 0

    def count(self, query: CountQuery) -> int:
        return _exact(query.messages)

    async def acount(self, query: CountQuery) -> int:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.pending.append((future, query))
        self.most_pending = max(self.most_pending, len(self.pending))
        return await future


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_interleavings_of_branch_fits_keep_counts_true(data: st.DataObject) -> None:
    history = _history(PREFILLED - 4)
    counter = ScheduledCounter()
    manager = wg.ContextWindowManager(
        MODEL, model_info=wg.ModelInfo(context_window=WINDOW), counter=counter
    )
    conversation = ConversationStore(lambda: manager).get("k")
    tasks_per_round = data.draw(st.integers(2, 5), label="branches")
    rounds = data.draw(st.integers(1, 3), label="rounds")
    fits: list[tuple[wg.Fit, list[dict[str, Any]]]] = []
    reports: list[tuple[int, int]] = []  # (send, the prompt tokens its reply reports)

    async def branch(messages: list[dict[str, Any]]) -> None:
        fitted = await conversation.aprepare(messages, max_tokens=MAX_TOKENS, format="openai_chat")
        fits.append((fitted.fit, messages))
        reports.append((fitted.send, _exact(fitted.fit.messages)))

    async def schedule() -> None:
        for r in range(rounds):
            tasks = [
                asyncio.ensure_future(branch(_branch(history, f"{r}-{i}")))
                for i in range(tasks_per_round)
            ]
            while not all(task.done() for task in tasks):
                for _ in range(3):
                    await asyncio.sleep(0)  # let every task run to its next await
                if counter.pending:
                    pick = data.draw(st.integers(0, len(counter.pending) - 1), label="answer")
                    future, query = counter.pending.pop(pick)
                    future.set_result(_exact(query.messages))
                if reports and data.draw(st.booleans(), label="a reply arrives"):
                    send, tokens = reports.pop(data.draw(st.integers(0, len(reports) - 1)))
                    conversation.record({"prompt_tokens": tokens}, send=send)
            for task in tasks:
                task.result()  # a wrong refusal would raise here
            _turn(history, r)

    asyncio.run(schedule())  # a wrong refusal raises out of a task here
    for fit, messages in fits:
        truth = _exact(fit.messages)
        assert fit.estimated_tokens >= truth  # an upper bound, never an under-count
        if fit.exact:
            assert fit.estimated_tokens == truth
        assert fit.estimated_tokens <= 2 * _exact(messages)  # never absurd (265k for 10k)
    assert counter.most_pending <= 1  # fits never interleave: one count in flight at most


# -- what a usage report is attributed to ------------------------------------------------------


@pytest.mark.parametrize("edits", [None, ()], ids=["default-edits", "drop-only"])
def test_a_branch_reads_its_shared_history_exactly_after_a_switch(
    edits: tuple[wg.EditStage, ...] | None,
) -> None:
    """Alternating branches keep the shared history measured, never estimated as a whole
    again (decision 0005, item 8: 2.3x on these turns). Each branch's request is counted
    exactly, or over-counted by no more than the heuristic over-counts the messages that
    nothing has measured apart from another branch's own: the turns appended since the
    prefilled history (far from the edge only a count could measure them alone, and the
    edge rule asks for none; each report measures them with its branch's message) and
    the branch's message. With the default edits the cleared history stays far from the
    edge, so once it is counted a switch asks for no count, but after a send that cleared
    results again (one count: the cleared copies, measured with one branch only)."""
    history = _history()
    prefilled = len(history)
    counted: list[int] = []

    class Counter(ScheduledCounter):
        async def acount(self, query: CountQuery) -> int:
            counted.append(len(query.messages))
            return _exact(query.messages)

    manager = wg.ContextWindowManager(
        MODEL, model_info=wg.ModelInfo(context_window=WINDOW), counter=Counter(), edits=edits
    )
    conversation = ConversationStore(lambda: manager).get("k")

    async def alternate() -> list[tuple[wg.Fit, int, int]]:
        fits = []
        for r in range(3):
            for i in range(3):
                before = len(counted)
                fitted = await conversation.aprepare(
                    _branch(history, f"{r}-{i}"), max_tokens=MAX_TOKENS, format="openai_chat"
                )
                conversation.record(
                    {"prompt_tokens": _exact(fitted.fit.messages)}, send=fitted.send
                )
                unmeasured = _over_count(manager, fitted.fit, len(history) - prefilled + 1)
                fits.append((fitted.fit, unmeasured, len(counted) - before))
            _turn(history, r)
        return fits

    fits = asyncio.run(alternate())[1:]  # the first is the cold fit's upper bound
    for fit, unmeasured, _ in fits:
        exact = _exact(fit.messages)
        if fit.exact:
            assert fit.estimated_tokens == exact
        else:
            assert exact <= fit.estimated_tokens <= fit.upper_tokens
            assert fit.estimated_tokens - exact <= unmeasured + 8
    if edits is None:
        # the cleared history, far from the edge, is counted once: a switch asks for no
        # count unless the send or the one before it cleared results (the default clears
        # again once the request passes 55 % of the budget), and then for one at most
        for index in range(1, len(fits)):
            fit, _, counts = fits[index]
            fresh = bool(fit.edits) or bool(fits[index - 1][0].edits)
            assert counts <= (1 if fresh else 0), (index, counts)


def _over_count(manager: wg.ContextWindowManager, fit: wg.Fit, newest: int) -> int:
    """What the manager's calibrated heuristic over-counts of the ``newest`` messages of
    a fitted request (measured as the difference with the request without them)."""
    rest = fit.messages[:-newest]
    estimated = manager.estimator.count(fit.messages) - manager.estimator.count(rest)
    return math.ceil(estimated * manager.calibration.factor) - (_exact(fit.messages) - _exact(rest))
