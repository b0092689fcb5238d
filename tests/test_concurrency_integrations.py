"""Concurrent branched calls through each integration with its own conversation handling
(issue 18.7): LangChain's middleware (async path), the OpenAI Agents SDK's
``call_model_input_filter``, pydantic-ai's ``history_processor`` and capability, and
LiteLLM's ``acompletion`` / ``completion``.

Every framework runs unchanged against the emulator's vLLM flavour (its real SDK's HTTP
stack), in an 8k window whose edge the shared history reaches, with the count endpoint
in use (discovered by the LangChain hook, given as a ``from_endpoint`` manager to the
others). Several runs start from the same history at once, each with its own new user
message: one conversation, branched. Wrong refusals (the smallest request, head plus
newest turn, fits by the emulator's own count) and overflows (the emulator's 400s) must
both be zero.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import litellm
import openai
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    set_tracing_disabled,
)
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_openai import ChatOpenAI
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import messages as pm
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import windowguard as wg
from windowguard.accounting.discovery import clear_discovery_cache
from windowguard.core.events import Event, RemoteCounted
from windowguard.core.shrink import DEFAULT_FLOOR
from windowguard.emulator import Emulator, EmulatorRequest, Reply
from windowguard.integrations import litellm as wgl
from windowguard.integrations.langchain import ContextWindowMiddleware
from windowguard.integrations.openai_agents import call_model_input_filter
from windowguard.integrations.pydantic_ai import WindowGuard, history_processor

from .test_integration_litellm import _no_callbacks as _no_callbacks

pytestmark = [
    # LiteLLM's own pydantic usage warns (see tests/test_integration_litellm.py).
    pytest.mark.filterwarnings("ignore:.*using the `ReadOnly` qualifier:UserWarning"),
    pytest.mark.filterwarnings(
        "ignore:Accessing the 'model_.*' attribute on the instance is deprecated"
    ),
]

MODEL = "emulated-model"
WINDOW = 8_192
MAX_TOKENS = 256
SYSTEM = "You are a careful reviewer."
TASK = "TASK-i7: review the module, one part at a time."
TURNS = 24  # exchanges of ~330 tokens: ~8k tokens of history, past the window's edge
BRANCHES = 6
ROUNDS = 2


def _code(n: int, lines: int = 20) -> str:
    return "\n".join(f"def f{n}_{j}(x):\n    return x * {j}  # line {j}" for j in range(lines))


def _exchanges(turns: int = TURNS) -> list[tuple[str, str]]:
    """(assistant text, next user text) of each earlier exchange."""
    return [(_code(n), f"continue with part {n + 1}") for n in range(turns)]


def _branch_text(name: str) -> str:
    return f"branch {name}: " + _code(hash(name) % 997, 3)


def _answer(request: EmulatorRequest) -> Reply:
    return Reply(text="Reviewed.")


def _dicts(exchanges: Sequence[tuple[str, str]], branch: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    for assistant, user in exchanges:
        messages += [{"role": "assistant", "content": assistant}, {"role": "user", "content": user}]
    messages.append({"role": "user", "content": _branch_text(branch)})
    return messages


def _smallest_fits(emu: Emulator) -> None:
    """The smallest request any branch may be cut to (head and its newest turn: the last
    assistant message and the users' messages after it) fits by the emulator's count,
    so every refusal would be a wrong one."""
    messages = _dicts(_exchanges(), "0-0")
    body = {"model": MODEL, "messages": [*messages[:2], *messages[-3:]]}
    count = httpx.post(f"{emu.root_url}/tokenize", json=body, timeout=30).json()["count"]
    assert count + MAX_TOKENS + DEFAULT_FLOOR < WINDOW


def _check(emu: Emulator, refused: int, overflows: int, events: Sequence[Event]) -> None:
    _smallest_fits(emu)
    assert refused == 0, f"{refused} wrong refusals"
    assert overflows == 0
    assert emu.records and all(record.status == 200 for record in emu.records)
    assert any(isinstance(e, RemoteCounted) for e in events), "the count API was never used"


@pytest.fixture(autouse=True)
def _fresh_discovery() -> Iterator[None]:
    clear_discovery_cache()
    wg.clear_counter_cache()
    set_tracing_disabled(True)  # the Agents SDK would export spans to api.openai.com
    yield
    set_tracing_disabled(False)
    clear_discovery_cache()
    wg.clear_counter_cache()


def _counting_manager(emu: Emulator) -> wg.ContextWindowManager:
    """A template manager with the emulator's window and its count endpoint."""
    return wg.ContextWindowManager.from_endpoint(emu.base_url, MODEL)


# -- LangChain: the middleware's async path ------------------------------------------------------


def test_langchain_middleware_concurrent_branches() -> None:
    events: list[Event] = []
    refused = overflows = 0

    def history() -> list[BaseMessage]:
        messages: list[BaseMessage] = [HumanMessage(TASK)]
        for assistant, user in _exchanges():
            messages += [AIMessage(assistant), HumanMessage(user)]
        return messages

    async def rounds(emu: Emulator) -> None:
        nonlocal refused, overflows
        llm = ChatOpenAI(model=MODEL, base_url=emu.base_url, api_key="x", max_retries=0)  # type: ignore[arg-type]
        agent = create_agent(
            llm,
            tools=[],
            system_prompt=SYSTEM,
            middleware=[ContextWindowMiddleware(sinks=[events.append])],
        )
        shared = history()  # one history, its message objects shared by every branch

        async def run(name: str) -> None:
            nonlocal refused, overflows
            try:
                await agent.ainvoke({"messages": [*shared, HumanMessage(_branch_text(name))]})
            except wg.ContextTruncatedError:
                refused += 1
            except openai.BadRequestError:
                overflows += 1

        for r in range(ROUNDS):
            await asyncio.gather(*(run(f"{r}-{i}") for i in range(BRANCHES)))

    with Emulator(flavor="vllm", context_window=WINDOW, scenario=_answer) as emu:
        asyncio.run(rounds(emu))
        _check(emu, refused, overflows, events)


# -- the OpenAI Agents SDK: call_model_input_filter ------------------------------------------------


def test_openai_agents_filter_concurrent_branches() -> None:
    events: list[Event] = []
    refused = overflows = 0

    async def rounds(emu: Emulator) -> None:
        nonlocal refused, overflows
        guard = call_model_input_filter(manager=_counting_manager(emu), sinks=[events.append])
        async with openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0) as client:
            agent: Agent[Any] = Agent(
                name="reviewer",
                instructions=SYSTEM,
                model=OpenAIChatCompletionsModel(MODEL, client),
                model_settings=ModelSettings(max_tokens=MAX_TOKENS),
            )
            shared: list[Any] = [{"role": "user", "content": TASK}]
            for assistant, user in _exchanges():
                shared += [
                    {"role": "assistant", "content": assistant},
                    {"role": "user", "content": user},
                ]

            async def run(name: str) -> None:
                nonlocal refused, overflows
                items = [*shared, {"role": "user", "content": _branch_text(name)}]
                try:
                    await Runner.run(
                        agent,
                        items,
                        run_config=RunConfig(call_model_input_filter=guard),
                        hooks=guard.hooks,
                    )
                except wg.ContextTruncatedError:
                    refused += 1
                except openai.BadRequestError:
                    overflows += 1

            for r in range(ROUNDS):
                await asyncio.gather(*(run(f"{r}-{i}") for i in range(BRANCHES)))

    with Emulator(flavor="vllm", context_window=WINDOW, scenario=_answer) as emu:
        asyncio.run(rounds(emu))
        _check(emu, refused, overflows, events)


# -- pydantic-ai: history_processor and the WindowGuard capability -------------------------------


@pytest.mark.parametrize("hook", ["history_processor", "capability"])
def test_pydantic_ai_concurrent_branches(hook: str) -> None:
    events: list[Event] = []
    refused = overflows = 0

    async def rounds(emu: Emulator) -> None:
        nonlocal refused, overflows
        manager = _counting_manager(emu)
        capability: Any = (
            ProcessHistory(history_processor(manager=manager, sinks=[events.append]))
            if hook == "history_processor"
            else WindowGuard(manager=manager, sinks=[events.append])
        )
        model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=emu.base_url, api_key="x"))
        agent: PydanticAgent[None, str] = PydanticAgent(model, capabilities=[capability])
        shared: list[pm.ModelMessage] = [
            pm.ModelRequest(parts=[pm.SystemPromptPart(SYSTEM), pm.UserPromptPart(TASK)])
        ]
        for assistant, user in _exchanges():
            shared += [
                pm.ModelResponse(parts=[pm.TextPart(assistant)]),
                pm.ModelRequest(parts=[pm.UserPromptPart(user)]),
            ]
        shared.append(pm.ModelResponse(parts=[pm.TextPart("Next part?")]))

        async def run(name: str) -> None:
            nonlocal refused, overflows
            try:
                await agent.run(
                    _branch_text(name),
                    message_history=shared,
                    conversation_id="review",  # one conversation, branched
                    model_settings={"max_tokens": MAX_TOKENS},
                )
            except wg.ContextTruncatedError:
                refused += 1
            except Exception as exc:  # pydantic-ai wraps the provider's 400
                if getattr(exc, "status_code", None) != 400:
                    raise
                overflows += 1

        try:
            for r in range(ROUNDS):
                await asyncio.gather(*(run(f"{r}-{i}") for i in range(BRANCHES)))
        finally:
            await model.client.close()

    with Emulator(flavor="vllm", context_window=WINDOW, scenario=_answer) as emu:
        asyncio.run(rounds(emu))
        _check(emu, refused, overflows, events)


# -- LiteLLM: acompletion from tasks, completion from threads --------------------------------------


def _litellm_call(emu: Emulator, guard: wgl.LiteLLMGuard, name: str, sync: bool) -> Any:
    shared = _SHARED_DICTS
    messages = [*shared, {"role": "user", "content": _branch_text(name)}]
    kwargs = {"api_base": emu.base_url, "api_key": "x", "max_tokens": MAX_TOKENS}
    if sync:
        return guard.completion(f"openai/{MODEL}", messages, **kwargs)
    return guard.acompletion(f"openai/{MODEL}", messages, **kwargs)


_SHARED_DICTS = _dicts(_exchanges(), "unused")[:-1]  # the history's objects, shared


@pytest.mark.parametrize("mode", ["acompletion", "completion"])
def test_litellm_concurrent_branches(mode: str) -> None:
    events: list[Event] = []
    refused = overflows = 0

    def outcome(call: Any) -> None:
        nonlocal refused, overflows
        try:
            call()
        except wg.ContextTruncatedError:
            refused += 1
        except litellm.BadRequestError:  # ContextWindowExceededError is one
            overflows += 1

    with Emulator(flavor="vllm", context_window=WINDOW, scenario=_answer) as emu:
        guard = wgl.LiteLLMGuard(manager=_counting_manager(emu), sinks=[events.append])
        if mode == "acompletion":

            async def rounds() -> None:
                async def run(name: str) -> None:
                    nonlocal refused, overflows
                    try:
                        await _litellm_call(emu, guard, name, sync=False)
                    except wg.ContextTruncatedError:
                        refused += 1
                    except litellm.BadRequestError:
                        overflows += 1

                for r in range(ROUNDS):
                    await asyncio.gather(*(run(f"{r}-{i}") for i in range(BRANCHES)))

            asyncio.run(rounds())
        else:
            with ThreadPoolExecutor(max_workers=BRANCHES) as pool:
                for r in range(ROUNDS):
                    names = [f"{r}-{i}" for i in range(BRANCHES)]
                    list(
                        pool.map(
                            lambda n: outcome(lambda: _litellm_call(emu, guard, n, sync=True)),
                            names,
                        )
                    )
        _check(emu, refused, overflows, events)


def test_pydantic_ai_capability_never_records_an_overtaken_runs_reply() -> None:
    """Run A is fitted, then run B; B's reply comes first, A's after it. A's usage must
    not be taken as the usage of B's request (the manager's last fit): the next fit
    measures B's request, never A's."""
    events: list[Event] = []
    b_answered = threading.Event()
    prompt_tokens: dict[str, int] = {}

    def policy(request: EmulatorRequest) -> Reply:
        text = str(request.messages[-1].get("content"))
        name = text.split(":")[0].removeprefix("branch ")
        prompt_tokens[name] = request.prompt_tokens
        if name == "A":
            b_answered.wait(10)
            time.sleep(0.2)  # B's reply is read before A's
        elif name == "B":
            b_answered.set()
        return Reply(text="Reviewed.")

    async def runs(emu: Emulator) -> None:
        model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=emu.base_url, api_key="x"))
        guard = WindowGuard(model_info=wg.ModelInfo(context_window=WINDOW), sinks=[events.append])
        agent: PydanticAgent[None, str] = PydanticAgent(model, capabilities=[guard])
        shared: list[pm.ModelMessage] = [
            pm.ModelRequest(parts=[pm.SystemPromptPart(SYSTEM), pm.UserPromptPart(TASK)]),
            pm.ModelResponse(parts=[pm.TextPart("Which part?")]),
        ]

        async def run(name: str, size: int) -> None:
            await agent.run(
                f"branch {name}: " + _code(size, size),
                message_history=shared,
                conversation_id="review",
                model_settings={"max_tokens": MAX_TOKENS},
            )

        try:
            first = asyncio.create_task(run("A", 30))  # A's request is the larger
            await asyncio.sleep(0.1)
            await run("B", 3)
            await first
            events.clear()
            await run("C", 3)  # its fit takes the usage recorded last
        finally:
            await model.client.close()

    with Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as emu:
        asyncio.run(runs(emu))
    measured = [e.total_tokens for e in events if isinstance(e, wg.UsageMeasured)]
    assert prompt_tokens["A"] != prompt_tokens["B"]
    assert prompt_tokens["A"] not in measured
    assert measured in ([], [prompt_tokens["B"]])
