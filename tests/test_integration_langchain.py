"""End to end: LangChain v1 agents and LangGraph's ReAct agent against the emulator.

The agents run unchanged (``create_agent`` / ``create_react_agent`` with a real
``ChatOpenAI``, so every call goes through the openai SDK's HTTP stack). The emulator
counts each prompt exactly and refuses an overflow with OpenAI's own 400. A scripted
policy keeps calling a tool whose result is large, then answers: the transcript grows
well past the window, which overflows without the integration and never with it.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

import windowguard as wg
from windowguard.emulator import Emulator
from windowguard.emulator.scenarios import EmulatorRequest, Reply, ToolCall
from windowguard.integrations.langchain import ContextWindowMiddleware, pre_model_hook
from windowguard.run._conversations import DEFAULT_MAX_MODELS

from .surface_edits import (
    EDITS,
    PLACEHOLDER,
    REPLY_TOKENS,
    STEPS,
    Received,
    check_clamped_and_cleared,
    result_text,
    step_of,
)
from .surface_edits import WINDOW as EDIT_WINDOW

WINDOW = 8192
TOOL_TURNS = 14  # about 1,200 tokens per result: ~17k tokens in all, twice the window
SYSTEM = "You are a careful research agent. Read the chunks you need, then answer."
TASK = "Summarise chunks 1 to 14 of the archive."
ANSWER = "All fourteen chunks are summarised."


@tool
def read_chunk(index: int) -> str:
    """Read one chunk of the archive.

    Args:
        index: the chunk's number.
    """
    return f"chunk {index}: " + " ".join(f"item{index}x{n}" for n in range(400))


TOOLS = [read_chunk]


class Scripted:
    """Reads chunk 1, then the chunk after the newest one read, up to ``turns``; then
    answers. Stateless per request (the newest tool result says where the run is), so it
    plays the same run however the transcript was pruned and however many run at once.

    Keeps every request body it answered (refused requests never reach a policy).
    """

    def __init__(self, turns: int = TOOL_TURNS) -> None:
        self.turns = turns
        self.bodies: list[Mapping[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, request: EmulatorRequest) -> Reply:
        with self._lock:
            self.bodies.append(request.body)
        last = request.messages[-1]
        done = int(last["content"].split(":")[0].split()[1]) if last["role"] == "tool" else 0
        if done < self.turns:
            return Reply(tool_calls=(ToolCall(name="read_chunk", arguments={"index": done + 1}),))
        return Reply(text=ANSWER)


@pytest.fixture
def policy() -> Scripted:
    return Scripted()


@pytest.fixture
def emu(policy: Scripted) -> Iterator[Emulator]:
    with Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as server:
        yield server


def _llm(emu: Emulator, **options: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model="emulated-model", base_url=emu.base_url, api_key="x", max_retries=0, **options
    )


def _info() -> wg.ModelInfo:
    return wg.ModelInfo(context_window=WINDOW)


def _overflows(emu: Emulator) -> int:
    return sum(1 for record in emu.records if record.status == 400)


CLEARED = "[cleared to save context: "
CUT = "tokens of this output cut here"


def _check_requests(
    policy: Scripted, emu: Emulator, *, system: bool = True, drop_only: bool = False
) -> None:
    """Every request kept the head, orphaned nothing and carried a fitted reply budget;
    the window was exercised: with ``drop_only`` (``edits=()``) whole turns were dropped
    and nothing edited; with the default edits turns were dropped or old tool results
    cleared or clamped (whichever the pipeline chose)."""
    assert policy.bodies, "the model was never called"
    head = [{"role": "system", "content": SYSTEM}] if system else []
    head.append({"role": "user", "content": TASK})
    for body in policy.bodies:
        messages = body["messages"]
        assert messages[: len(head)] == head
        _assert_paired(messages)
        assert isinstance(body.get("max_completion_tokens"), int)
    for record in emu.records:
        assert record.status == 200
        assert record.prompt_tokens is not None and record.max_output_tokens is not None
        assert record.prompt_tokens + record.max_output_tokens <= WINDOW
    assert max(r.prompt_tokens or 0 for r in emu.records) < WINDOW
    # The transcript outgrew the window, so requests were cut. Request i of the run holds
    # the head and i assistant/tool pairs when nothing is dropped (plus one user message
    # per further invoke of the same agent).
    full = [len(head) + 2 * i for i in range(len(policy.bodies))]
    dropped = any(len(b["messages"]) < n for b, n in zip(policy.bodies, full, strict=True))
    results = [m["content"] for b in policy.bodies for m in b["messages"] if m["role"] == "tool"]
    edited = [t for t in results if t.startswith(CLEARED) or CUT in t]
    assert dropped or edited, "the requests were never cut"
    if drop_only:
        assert dropped and not edited


def _assert_paired(messages: Sequence[Mapping[str, Any]]) -> None:
    """Each tool message answers a call of the assistant message before it, and each
    call is answered."""
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "assistant":
            assert not open_calls, f"unanswered tool calls {open_calls}"
            open_calls = {call["id"] for call in message.get("tool_calls") or ()}
        elif message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, "an orphaned tool message"
            open_calls.discard(message["tool_call_id"])


def _origins(sent: Sequence[Any], messages: Sequence[Any]) -> list[int]:
    """For each sent message, the index of the caller's message it stands for: the
    caller's own object, or (an edit) a new object of the caller's type that differs from
    it only in what edits replace (a tool result's content; a call's arguments)."""
    out: list[int] = []
    for message in sent:
        index = next((i for i, m in enumerate(messages) if m is message), None)
        if index is None:
            index = next((i for i, m in enumerate(messages) if _edited_copy(message, m)), None)
        assert index is not None, f"a sent message that is no caller's message: {message!r}"
        out.append(index)
    return out


def _edited_copy(copy: Any, original: Any) -> bool:
    """Whether ``copy`` is a new object of ``original``'s type with only its content (a
    tool message) or its calls' arguments (an AI message) replaced."""
    if type(copy) is not type(original) or copy == original:
        return False
    if isinstance(original, ToolMessage):
        return bool(
            copy.model_dump(exclude={"content"}) == original.model_dump(exclude={"content"})
        )
    if isinstance(original, AIMessage):
        calls = ("tool_calls", "invalid_tool_calls", "additional_kwargs")
        named = [
            [(c["id"], c["name"]) for c in [*m.tool_calls, *m.invalid_tool_calls]]
            for m in (copy, original)
        ]
        return bool(
            named[0] == named[1]
            and copy.model_dump(exclude=set(calls)) == original.model_dump(exclude=set(calls))
        )
    return False


def _task() -> dict[str, Any]:
    return {"messages": [HumanMessage(TASK)]}


def _with_edits(options: dict[str, Any], edits: tuple[()] | None) -> dict[str, Any]:
    """``options`` with ``edits`` (None: left out, the default edits); a ``manager=``
    takes them itself."""
    if edits is None:
        return options
    if "manager" in options:
        manager = wg.ContextWindowManager("emulated-model", model_info=_info(), edits=edits)
        return {**options, "manager": manager}
    return {**options, "edits": edits}


# -- LangChain v1: create_agent + ContextWindowMiddleware -------------------------------


def test_create_agent_overflows_without_the_middleware(emu: Emulator) -> None:
    agent = create_agent(_llm(emu), TOOLS, system_prompt=SYSTEM)
    with pytest.raises(Exception) as raised:  # noqa: PT011 - classified below
        agent.invoke(_task(), {"recursion_limit": 100})
    assert wg.classify_failure(raised.value).kind is wg.FailureKind.CONTEXT_OVERFLOW
    assert _overflows(emu) == 1


@pytest.mark.parametrize(
    "options",
    [
        {"model_info": _info()},
        {"model_info": _info(), "pruning": "minimal", "safety": 200},
        {"manager": wg.ContextWindowManager("emulated-model", model_info=_info())},
    ],
    ids=["model_info", "minimal", "manager"],
)
@pytest.mark.parametrize("edits", [None, ()], ids=["default_edits", "drop_only"])
def test_create_agent_with_the_middleware_never_overflows(
    emu: Emulator, policy: Scripted, options: dict[str, Any], edits: tuple[()] | None
) -> None:
    events: list[Any] = []
    middleware = ContextWindowMiddleware(sinks=events.append, **_with_edits(options, edits))
    agent = create_agent(_llm(emu), TOOLS, system_prompt=SYSTEM, middleware=[middleware])
    result = agent.invoke(_task(), {"recursion_limit": 100})

    assert _overflows(emu) == 0
    _check_requests(policy, emu, drop_only=edits == ())
    # The state keeps the whole history; only the model calls saw it fitted.
    messages = result["messages"]
    assert len(messages) == 1 + 2 * TOOL_TURNS + 1
    assert messages[-1].content == ANSWER
    # Usage fed back: each reply's input_tokens reached the gauge, exactly as counted.
    pressures = [e.tokens for e in events if e.kind == "context_pressure"]
    assert pressures == [r.prompt_tokens for r in emu.records]


def test_create_agent_async_with_the_middleware_never_overflows(
    emu: Emulator, policy: Scripted
) -> None:
    middleware = ContextWindowMiddleware(model_info=_info())
    agent = create_agent(_llm(emu), TOOLS, system_prompt=SYSTEM, middleware=[middleware])
    result = asyncio.run(agent.ainvoke(_task(), {"recursion_limit": 100}))

    assert _overflows(emu) == 0
    _check_requests(policy, emu)
    assert result["messages"][-1].content == ANSWER


def test_create_agent_async_overflows_without_the_middleware(emu: Emulator) -> None:
    agent = create_agent(_llm(emu), TOOLS, system_prompt=SYSTEM)
    with pytest.raises(Exception) as raised:  # noqa: PT011 - classified below
        asyncio.run(agent.ainvoke(_task(), {"recursion_limit": 100}))
    assert wg.classify_failure(raised.value).kind is wg.FailureKind.CONTEXT_OVERFLOW


@pytest.mark.parametrize(
    ("model_option", "middleware_option", "usage_fed"),
    [
        ({}, {}, True),  # the middleware asks the model for usage in streams
        ({}, {"stream_usage": False}, False),  # ... unless told not to
        ({"stream_usage": False}, {}, False),  # an explicit choice of the model stands
    ],
)
def test_create_agent_streams_through_the_middleware(
    emu: Emulator,
    policy: Scripted,
    model_option: dict[str, Any],
    middleware_option: dict[str, Any],
    usage_fed: bool,
) -> None:
    events: list[Any] = []
    middleware = ContextWindowMiddleware(
        model_info=_info(), sinks=events.append, **middleware_option
    )
    llm = _llm(emu, **model_option)
    agent = create_agent(llm, TOOLS, system_prompt=SYSTEM, middleware=[middleware])
    chunks = [
        chunk
        for chunk, _ in agent.stream(_task(), {"recursion_limit": 100}, stream_mode="messages")
    ]

    assert _overflows(emu) == 0
    _check_requests(policy, emu)
    assert all(body.get("stream") is True for body in policy.bodies)
    asked = [bool((b.get("stream_options") or {}).get("include_usage")) for b in policy.bodies]
    assert asked == [usage_fed] * len(policy.bodies)
    streamed = "".join(c.content for c in chunks if isinstance(c, AIMessage) and c.content)
    assert ANSWER in streamed
    pressures = [e.tokens for e in events if e.kind == "context_pressure"]
    assert pressures == ([r.prompt_tokens for r in emu.records] if usage_fed else [])
    assert llm.stream_usage is model_option.get("stream_usage")  # the user's model as it was


def test_middleware_fits_max_tokens_asked_for(emu: Emulator, policy: Scripted) -> None:
    middleware = ContextWindowMiddleware(model_info=_info())
    llm = _llm(emu, max_tokens=WINDOW)  # as much as the window: never fits with a prompt
    agent = create_agent(llm, TOOLS, system_prompt=SYSTEM, middleware=[middleware])
    agent.invoke(_task(), {"recursion_limit": 100})

    assert _overflows(emu) == 0
    asked = [body["max_completion_tokens"] for body in policy.bodies]
    assert all(0 < n < WINDOW for n in asked)
    _check_requests(policy, emu)


def test_middleware_discovers_the_window_from_the_base_url(policy: Scripted) -> None:
    with Emulator(flavor="vllm", context_window=WINDOW, scenario=policy) as emu:
        agent = create_agent(
            _llm(emu), TOOLS, system_prompt=SYSTEM, middleware=[ContextWindowMiddleware()]
        )
        agent.invoke(_task(), {"recursion_limit": 100})
        assert _overflows(emu) == 0
        _check_requests(policy, emu)


def test_an_overflow_refusal_teaches_the_window_to_a_retry(emu: Emulator, policy: Scripted) -> None:
    from langchain.agents.middleware import ModelRetryMiddleware

    def overflowed(exc: Exception) -> bool:
        return wg.classify_failure(exc).kind is wg.FailureKind.CONTEXT_OVERFLOW

    retry = ModelRetryMiddleware(
        max_retries=1, retry_on=overflowed, on_failure="error", initial_delay=0, jitter=False
    )
    # The middleware is told the window is twice what the server serves.
    wrong = ContextWindowMiddleware(model_info=wg.ModelInfo(context_window=2 * WINDOW))
    agent = create_agent(_llm(emu), TOOLS, system_prompt=SYSTEM, middleware=[retry, wrong])
    result = agent.invoke(_task(), {"recursion_limit": 100})

    assert result["messages"][-1].content == ANSWER
    statuses = [r.status for r in emu.records]
    assert statuses.count(400) == 1  # the refusal stated the window; nothing overflowed after
    assert statuses[statuses.index(400) + 1 :] == [200] * (len(statuses) - statuses.index(400) - 1)


def test_a_send_that_cannot_fit_raises_before_any_request(emu: Emulator) -> None:
    middleware = ContextWindowMiddleware(model_info=_info())
    agent = create_agent(_llm(emu), TOOLS, system_prompt=SYSTEM, middleware=[middleware])
    huge = " ".join(f"word{n}" for n in range(12_000))
    with pytest.raises(wg.ContextTruncatedError):
        agent.invoke({"messages": [HumanMessage(huge)]})
    assert emu.records == ()


def test_conversations_are_kept_apart(emu: Emulator) -> None:
    events: list[Any] = []
    middleware = ContextWindowMiddleware(model_info=_info(), sinks=events.append)
    agent = create_agent(_llm(emu), TOOLS, system_prompt=SYSTEM, middleware=[middleware])
    agent.invoke(_task(), {"recursion_limit": 100})
    assert any(e.kind == "usage_measured" for e in events)
    events.clear()
    other = {"messages": [HumanMessage("Summarise chunks 1 to 14 of the other archive.")]}
    result = agent.invoke(other, {"recursion_limit": 100})
    assert result["messages"][-1].content == ANSWER
    assert _overflows(emu) == 0
    # A new head is a new conversation: its first send starts a run, so no usage of the
    # first conversation is attributed to it.
    first_pressure = next(i for i, e in enumerate(events) if e.kind == "context_pressure")
    assert all(e.kind != "usage_measured" for e in events[:first_pressure])


def test_concurrent_threads_with_the_same_head_never_overflow(
    emu: Emulator, policy: Scripted
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    middleware = ContextWindowMiddleware(model_info=_info())
    agent = create_agent(
        _llm(emu),
        TOOLS,
        system_prompt=SYSTEM,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )

    async def run_all() -> list[Any]:
        runs = [
            agent.ainvoke(_task(), {"recursion_limit": 100, "configurable": {"thread_id": f"t{n}"}})
            for n in range(3)
        ]
        return await asyncio.gather(*runs)

    results = asyncio.run(run_all())
    assert _overflows(emu) == 0
    assert [r["messages"][-1].content for r in results] == [ANSWER] * 3
    assert len(policy.bodies) == 3 * (TOOL_TURNS + 1)
    for body in policy.bodies:
        _assert_paired(body["messages"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"safety": -1}, "safety"),
        ({"pruning": "oldest"}, "pruning"),
        ({"strict": "yes"}, "strict"),
        ({"max_conversations": 0}, "max_conversations"),
        ({"model_info": {"context_window": 8192}}, "model_info"),
        ({"manager": "gpt-4o"}, "manager"),
        (
            {"manager": wg.ContextWindowManager("gpt-4o"), "safety": 100},
            "safety to the .* manager=",
        ),
        ({"sinks": [1]}, "sinks"),
    ],
)
def test_bad_options_are_named(options: dict[str, Any], message: str) -> None:
    with pytest.raises(wg.ConfigurationError, match=message):
        ContextWindowMiddleware(**options)


# -- LangGraph: create_react_agent + pre_model_hook ----------------------------------------

_DEPRECATED = pytest.mark.filterwarnings(
    # create_react_agent announces its move to langchain.agents.create_agent (LangGraph
    # 1.x's own deprecation); the prebuilt agent still works and is what this hook serves.
    "ignore::langgraph.warnings.LangGraphDeprecatedSinceV10"
)


@_DEPRECATED
def test_react_agent_overflows_without_the_hook(emu: Emulator) -> None:
    from langgraph.prebuilt import create_react_agent

    agent = create_react_agent(_llm(emu), TOOLS, prompt=SYSTEM)
    with pytest.raises(Exception) as raised:  # noqa: PT011 - classified below
        agent.invoke(_task(), {"recursion_limit": 100})
    assert wg.classify_failure(raised.value).kind is wg.FailureKind.CONTEXT_OVERFLOW


@_DEPRECATED
@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream"])
@pytest.mark.parametrize("edits", [None, ()], ids=["default_edits", "drop_only"])
def test_react_agent_with_the_hook_never_overflows(
    emu: Emulator, policy: Scripted, mode: str, edits: tuple[()] | None
) -> None:
    from langgraph.prebuilt import create_react_agent

    events: list[Any] = []
    llm = _llm(emu)
    hook = pre_model_hook(
        llm,
        tools=TOOLS,
        system=SYSTEM,
        model_info=_info(),
        sinks=events.append,
        edits=edits,
        stream_usage=True,  # a streamed reply reports usage only when asked
    )
    agent = create_react_agent(hook.model, TOOLS, prompt=SYSTEM, pre_model_hook=hook)
    config: Any = {"recursion_limit": 100}
    result: dict[str, Any]
    if mode == "invoke":
        result = agent.invoke(_task(), config)
    elif mode == "ainvoke":
        result = asyncio.run(agent.ainvoke(_task(), config))
    else:
        chunks = list(agent.stream(_task(), config, stream_mode="messages"))
        streamed = "".join(c.content for c, _ in chunks if isinstance(c, AIMessage))
        assert ANSWER in streamed
        assert all(body.get("stream") is True for body in policy.bodies)
        result = {}

    assert _overflows(emu) == 0
    _check_requests(policy, emu, drop_only=edits == ())
    if mode != "stream":
        assert len(result["messages"]) == 1 + 2 * TOOL_TURNS + 1  # state unchanged
    # Usage fed back: each reply's input_tokens, read from the history by the next hook
    # call (the last reply has no next call).
    pressures = [e.tokens for e in events if e.kind == "context_pressure"]
    assert pressures == [r.prompt_tokens for r in emu.records][:-1]


@_DEPRECATED
def test_react_agent_hook_without_hook_model_fits_messages_only(
    emu: Emulator, policy: Scripted
) -> None:
    from langgraph.prebuilt import create_react_agent

    llm = _llm(emu, max_tokens=1024)
    hook = pre_model_hook(llm, tools=TOOLS, system=SYSTEM, model_info=_info())
    agent = create_react_agent(llm, TOOLS, prompt=SYSTEM, pre_model_hook=hook)
    agent.invoke(_task(), {"recursion_limit": 100})
    assert _overflows(emu) == 0
    _check_requests(policy, emu)


def test_hook_feeds_usage_back_from_the_history() -> None:
    events: list[Any] = []
    hook = pre_model_hook(system=SYSTEM, model_info=_info(), sinks=events.append)
    first = [HumanMessage(TASK)]
    hook({"messages": first})
    # The provider's count of the first request: below the (over-counting) estimate.
    estimate = next(e for e in events if e.kind == "context_estimate").estimated_tokens
    reported = estimate * 3 // 4
    call = {"id": "call_1", "name": "read_chunk", "args": {"index": 1}}
    usage = {"input_tokens": reported, "output_tokens": 5, "total_tokens": reported + 5}
    reply = AIMessage("", tool_calls=[call], usage_metadata=usage)  # type: ignore[arg-type]
    second = [*first, reply, ToolMessage(read_chunk.invoke({"index": 1}), tool_call_id="call_1")]
    kept = hook({"messages": second})["llm_input_messages"]
    # Nothing dropped: each message sent, the caller's own or (the tool result, clamped
    # under the default edits: the heuristic prices it over a quarter of the budget) an
    # edited copy of it.
    assert _origins(kept, second) == list(range(len(second)))
    assert all(a is b for a, b in zip(kept[:-1], second[:-1], strict=True))
    assert kept[-1] is second[-1] or CUT in kept[-1].content
    measured = [e.total_tokens for e in events if e.kind == "usage_measured"]
    assert measured == [reported]


@pytest.mark.parametrize("edits", [None, ()], ids=["default_edits", "drop_only"])
def test_an_invalid_tool_call_pairs_with_its_answer(edits: tuple[()] | None) -> None:
    events: list[Any] = []
    hook = pre_model_hook(
        model_info=wg.ModelInfo(context_window=16_384), sinks=events.append, edits=edits
    )
    bad = {"id": "bad_0", "name": "read_chunk", "args": "{oops", "error": "not JSON"}
    messages: list[Any] = [
        HumanMessage(TASK),
        AIMessage("", invalid_tool_calls=[{**bad, "type": "invalid_tool_call"}]),
        ToolMessage("Error: the arguments were not JSON", tool_call_id="bad_0"),
    ]
    for n in range(1, 12):
        call = {"id": f"call_{n}", "name": "read_chunk", "args": {"index": n}}
        messages.append(AIMessage("", tool_calls=[call]))
        messages.append(ToolMessage(read_chunk.invoke({"index": n}), tool_call_id=f"call_{n}"))
    kept = hook({"messages": messages})["llm_input_messages"]
    assert kept[0] is messages[0]
    assert not any(e.kind == "transcript_deferred" for e in events)  # it paired
    origins = _origins(kept, messages)
    assert origins == sorted(origins)
    if edits == ():
        assert 1 not in origins and 2 not in origins  # dropped together
    else:  # the default edits may keep the turn (older results cleared) or drop it
        assert (1 in origins) == (2 in origins)  # sent or dropped together
        assert len(kept) < len(messages) or any(
            isinstance(m, ToolMessage) and m.content.startswith(CLEARED) for m in kept
        )
    _assert_pairs(kept)


def test_hook_rejects_a_state_without_messages() -> None:
    hook = pre_model_hook(model_info=_info())
    with pytest.raises(wg.ConfigurationError, match="messages"):
        hook({"input": "hi"})
    with pytest.raises(wg.ConfigurationError, match="LangChain message"):
        hook({"messages": [{"role": "user", "content": "hi"}]})
    with pytest.raises(wg.ConfigurationError, match="system"):
        pre_model_hook(system=42)
    with pytest.raises(wg.ConfigurationError, match="max_tokens"):
        pre_model_hook(max_tokens=0)


@pytest.mark.parametrize("edits", [None, ()], ids=["default_edits", "drop_only"])
def test_system_message_in_state_is_kept_and_returned(edits: tuple[()] | None) -> None:
    hook = pre_model_hook(model_info=wg.ModelInfo(context_window=16_384), edits=edits)
    messages: list[Any] = [SystemMessage(SYSTEM), HumanMessage(TASK)]
    for n in range(12):
        call = {"id": f"call_{n}", "name": "read_chunk", "args": {"index": n}}
        messages.append(AIMessage("", tool_calls=[call]))
        messages.append(ToolMessage(read_chunk.invoke({"index": n}), tool_call_id=f"call_{n}"))
    kept = hook({"messages": messages})["llm_input_messages"]
    assert kept[0] is messages[0] and kept[1] is messages[1]
    positions = _origins(kept, messages)
    assert positions == sorted(positions)
    assert positions[-2:] == [len(messages) - 2, len(messages) - 1]  # the newest turn
    assert kept[-2] is messages[-2]
    if edits == ():
        assert kept[-1] is messages[-1]
        assert len(kept) < len(messages)
        assert all(m is messages[i] for m, i in zip(kept, positions, strict=True))
    else:  # older results cleared or turns dropped (the newest result may be clamped:
        # the heuristic over-counts it past a quarter of the budget)
        assert kept[-1] is messages[-1] or CUT in kept[-1].content
        assert len(kept) < len(messages) or any(
            isinstance(m, ToolMessage) and m.content.startswith(CLEARED) for m in kept
        )
    _assert_pairs(kept)


def _assert_pairs(kept: Sequence[Any]) -> None:
    """Each tool message sent answers a call of the AI message sent before it."""
    for at, message in enumerate(kept):
        if isinstance(message, ToolMessage):
            before = kept[at - 1]
            assert isinstance(before, AIMessage)
            ids = [c["id"] for c in [*before.tool_calls, *before.invalid_tool_calls]]
            assert message.tool_call_id in ids


def _ahead(turns: int) -> dict[str, Any]:
    """The task with ``turns`` chunks already read: the same head as :func:`_task`, so
    the same conversation when no checkpointer tells the runs apart, but further on."""
    messages: list[Any] = [HumanMessage(TASK)]
    for n in range(1, turns + 1):
        call = {"id": f"ahead_{n}", "name": "read_chunk", "args": {"index": n}}
        messages.append(AIMessage("", tool_calls=[call]))
        messages.append(ToolMessage(read_chunk.invoke({"index": n}), tool_call_id=f"ahead_{n}"))
    return {"messages": messages}


def test_concurrent_same_head_runs_without_a_checkpointer_never_overflow(
    emu: Emulator, policy: Scripted
) -> None:
    # Two runs share one conversation (same head, no thread id); one is further on, so
    # their prompts differ. Each reply's usage may only be recorded for its own send.
    events: list[Any] = []
    middleware = ContextWindowMiddleware(model_info=_info(), sinks=events.append)
    agent = create_agent(_llm(emu), TOOLS, system_prompt=SYSTEM, middleware=[middleware])

    async def run_both() -> list[Any]:
        runs = [agent.ainvoke(task, {"recursion_limit": 100}) for task in (_task(), _ahead(6))]
        return await asyncio.gather(*runs)

    results = asyncio.run(run_both())
    assert _overflows(emu) == 0
    assert [r["messages"][-1].content for r in results] == [ANSWER] * 2
    assert len(policy.bodies) == (TOOL_TURNS + 1) + (TOOL_TURNS - 6 + 1)
    for body in policy.bodies:
        _assert_paired(body["messages"])
    # every measured total is the exact count of a request the emulator answered
    counted = {r.prompt_tokens for r in emu.records}
    assert {e.total_tokens for e in events if e.kind == "usage_measured"} <= counted


@_DEPRECATED
def test_concurrent_same_head_react_runs_bind_their_own_budgets(
    emu: Emulator, policy: Scripted
) -> None:
    # The hook fits max_tokens; hook.model binds it a graph step later. With two
    # same-head runs at once (no checkpointer) the other run's hook call may come in
    # between: each model call must still bind the budget fitted for its own messages.
    from langgraph.prebuilt import create_react_agent

    hook = pre_model_hook(_llm(emu), tools=TOOLS, system=SYSTEM, model_info=_info())
    fitted: dict[str, int] = {}  # last message id -> budget, read as the hook fitted it
    bound: list[tuple[int, int]] = []  # (budget bound, budget fitted) per model call

    def budget(model: Any) -> int:
        return int(model.kwargs["max_tokens"])

    def fitting(state: dict[str, Any]) -> dict[str, Any]:
        update = hook(state)
        fitted[state["messages"][-1].id] = budget(hook.model(state))  # same step: its own
        return update

    def model(state: dict[str, Any], runtime: Any) -> Any:
        chosen = hook.model(state, runtime)
        bound.append((budget(chosen), fitted[state["messages"][-1].id]))
        return chosen

    agent = create_react_agent(model, TOOLS, prompt=SYSTEM, pre_model_hook=fitting)

    async def run_both() -> list[Any]:
        runs = [agent.ainvoke(task, {"recursion_limit": 100}) for task in (_task(), _ahead(6))]
        return await asyncio.gather(*runs)

    results = asyncio.run(run_both())
    assert _overflows(emu) == 0
    assert [r["messages"][-1].content for r in results] == [ANSWER] * 2
    assert len(bound) == len(emu.records) == (TOOL_TURNS + 1) + (TOOL_TURNS - 6 + 1)
    assert all(mine == own for mine, own in bound)
    assert {body["max_completion_tokens"] for body in policy.bodies} == {b for b, _ in bound}
    for record in emu.records:
        assert record.prompt_tokens is not None and record.max_output_tokens is not None
        assert record.prompt_tokens + record.max_output_tokens <= WINDOW


def test_per_model_state_stays_bounded_when_model_names_cycle() -> None:
    # A caller cycling model names: the least recently used model is forgotten, so its
    # next send starts a new conversation, and memory holds at most DEFAULT_MAX_MODELS.
    fitter = ContextWindowMiddleware()._fitter
    messages = [HumanMessage("Fix the failing test.")]

    def conversation(name: str) -> object:
        chat_model = SimpleNamespace(model_name=name)
        return fitter.prepare(messages, chat_model=chat_model, tools=(), max_tokens=None)[0]

    first = conversation("model-0")
    assert conversation("model-0") is first
    for index in range(1, DEFAULT_MAX_MODELS + 40):
        conversation(f"model-{index}")
    assert len(fitter._served) == DEFAULT_MAX_MODELS
    newest = f"model-{DEFAULT_MAX_MODELS + 39}"
    assert conversation(newest) is conversation(newest)
    assert conversation("model-0") is not first


# -- edit stages (issue 19) --------------------------------------------------------------


@tool
def read_file(path: str) -> str:
    """Read a file of the repository.

    Args:
        path: the file's path.
    """
    return result_text(step_of({"path": path}))


def _edits_emulator(received: Received) -> Emulator:
    return Emulator(flavor="openai", context_window=EDIT_WINDOW, scenario=received)


def _check_state(messages: Sequence[Any]) -> None:
    """The agent's state holds every result whole: only the model calls saw edits."""
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.content for m in results] == [result_text(n) for n in range(len(results))]
    assert len(results) == STEPS


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_create_agent_middleware_clamps_and_clears(mode: str) -> None:
    received = Received()
    events: list[Any] = []
    middleware = ContextWindowMiddleware(
        model_info=wg.ModelInfo(context_window=EDIT_WINDOW), edits=EDITS, sinks=events.append
    )
    with _edits_emulator(received) as server:
        llm = _llm(server, max_tokens=REPLY_TOKENS)
        agent = create_agent(llm, [read_file], system_prompt=SYSTEM, middleware=[middleware])
        task = {"messages": [HumanMessage(TASK)]}
        config: Any = {"recursion_limit": 100}
        result = (
            agent.invoke(task, config)
            if mode == "invoke"
            else asyncio.run(agent.ainvoke(task, config))
        )
        statuses = [r.status for r in server.records]
    check_clamped_and_cleared(received, statuses)
    _check_state(result["messages"])
    assert {e.edit for e in events if isinstance(e, wg.ContextEdited)} == {"clamp", "clear"}


@_DEPRECATED
def test_react_agent_hook_clamps_and_clears() -> None:
    from langgraph.prebuilt import create_react_agent

    received = Received()
    with _edits_emulator(received) as server:
        llm = _llm(server, max_tokens=REPLY_TOKENS)
        hook = pre_model_hook(
            llm,
            tools=[read_file],
            system=SYSTEM,
            model_info=wg.ModelInfo(context_window=EDIT_WINDOW),
            edits=EDITS,
        )
        agent = create_react_agent(hook.model, [read_file], prompt=SYSTEM, pre_model_hook=hook)
        result = agent.invoke({"messages": [HumanMessage(TASK)]}, {"recursion_limit": 100})
        statuses = [r.status for r in server.records]
    check_clamped_and_cleared(received, statuses)
    _check_state(result["messages"])


def test_cleared_call_arguments_reach_the_chat_model_as_sent() -> None:
    received = Received()
    middleware = ContextWindowMiddleware(
        model_info=wg.ModelInfo(context_window=EDIT_WINDOW),
        edits=[EDITS[0], wg.ClearToolResults(keep=2, clear_at_least=500, clear_inputs=True)],
    )
    with _edits_emulator(received) as server:
        llm = _llm(server, max_tokens=REPLY_TOKENS)
        agent = create_agent(llm, [read_file], system_prompt=SYSTEM, middleware=[middleware])
        result = agent.invoke({"messages": [HumanMessage(TASK)]}, {"recursion_limit": 100})
        statuses = [r.status for r in server.records]
    check_clamped_and_cleared(received, statuses)
    last = received.requests[-1]
    cleared = [m for m in last if m["role"] == "tool" and m["content"].startswith(PLACEHOLDER)]
    ids = {m["tool_call_id"] for m in cleared}
    calls = [c for m in last if m["role"] == "assistant" for c in m.get("tool_calls") or ()]
    assert ids and all(c["function"]["arguments"] == "{}" for c in calls if c["id"] in ids)
    assert all(c["function"]["arguments"] != "{}" for c in calls if c["id"] not in ids)
    # the agent's own messages keep their arguments
    assert all(
        c["args"] for m in result["messages"] if isinstance(m, AIMessage) for c in m.tool_calls
    )


@pytest.mark.parametrize(
    ("make", "caller"),
    [
        (lambda **o: ContextWindowMiddleware(**o), "ContextWindowMiddleware()"),
        (lambda **o: pre_model_hook(**o), "pre_model_hook()"),
    ],
)
def test_bad_edits_are_refused_when_the_hook_is_made(make: Any, caller: str) -> None:
    with pytest.raises(wg.ConfigurationError, match=re.escape(f"{caller}: edits must hold")):
        make(edits=["clear"])
    with pytest.raises(wg.ConfigurationError, match="pass edits to the ContextWindowManager"):
        make(edits=EDITS, manager=wg.ContextWindowManager("gpt-4o"))
