"""windowguard.integrations.openai_agents with the real OpenAI Agents SDK, end to end.

An Agent whose function tool returns a large result runs against the emulator in an
8k window, through the SDK's own Runner, models and openai client (HTTP): without the
filter the transcript outgrows the window and the run fails with the provider's
overflow; with it, no call overflows, the head is in every call, calls stay paired
with their outputs, and usage flows back to the conversation.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.items import ModelResponse
from agents.models.default_models import get_default_model
from agents.run_config import CallModelData, ModelInputData
from agents.run_context import RunContextWrapper
from agents.usage import Usage

import windowguard as wg
from windowguard.emulator import Emulator, EmulatorRequest, Reply
from windowguard.emulator.scenarios import ToolCall
from windowguard.integrations.openai_agents import ContextWindowFilter, call_model_input_filter
from windowguard.run._conversations import DEFAULT_MAX_MODELS

from .surface_edits import (
    EDITS,
    REPLY_TOKENS,
    STEPS,
    Received,
    check_clamped_and_cleared,
    result_text,
    step_of,
)
from .surface_edits import WINDOW as EDIT_WINDOW

WINDOW = 8192
TASK = "Read the whole log and tell me what failed."
INSTRUCTIONS = "You are a log analyst. Read every part of the log before answering."
PARTS = 40  # tool results of ~480 tokens each: ~19k tokens of transcript in an 8k window


@pytest.fixture(autouse=True)
def _no_tracing() -> Iterator[None]:
    # Tracing would export spans to api.openai.com: nothing may leave the machine.
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


@function_tool
def read_log(part: int) -> str:
    """Read one part of the build log."""
    return f"part {part}: " + "error: assertion failed in test_window " * 50


class LogReader:
    """The emulator's policy: read parts 0..PARTS-1 (sometimes two at once), then answer.

    The next part is one past the highest part visible, so the policy needs no state and
    still progresses when old turns are pruned, or their calls' arguments cleared to
    ``{}`` (the default edits; the newest turn's are never cleared). It also records what
    each call received.
    """

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: EmulatorRequest) -> Reply:
        self.bodies.append(dict(request.body))
        seen = [
            int(arguments["part"])
            for message in request.messages
            if message.get("role") == "assistant"
            for call in message.get("tool_calls") or ()
            if "part" in (arguments := json.loads(call["function"]["arguments"]))
        ]
        part = max(seen) + 1 if seen else 0
        if part >= PARTS:
            return Reply(text=f"finished: read {part} parts")
        if part % 3 == 0 and part + 1 < PARTS:  # parallel calls, with some text
            return Reply(
                text="Reading two parts.",
                tool_calls=(
                    ToolCall(name="read_log", arguments={"part": part}),
                    ToolCall(name="read_log", arguments={"part": part + 1}),
                ),
            )
        return Reply(tool_calls=(ToolCall(name="read_log", arguments={"part": part}),))


def _client(emu: Emulator) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0)


def _agent(client: openai.AsyncOpenAI, kind: str, *, max_tokens: int | None = 256) -> Agent[Any]:
    model: Any
    if kind == "responses":
        model = OpenAIResponsesModel("gpt-4o", client)
    else:
        model = OpenAIChatCompletionsModel("gpt-4o", client)
    return Agent(
        name="log-analyst",
        instructions=INSTRUCTIONS,
        tools=[read_log],
        model=model,
        model_settings=ModelSettings(max_tokens=max_tokens),
    )


EDITED_FIELD = {"function_call_output": "output", "function_call": "arguments"}
"""What an edit replaces in an item of each type (a result's output, a call's arguments)."""


def _origins(kept: list[Any], given: list[Any]) -> tuple[list[int], int]:
    """For each kept item, the index of the caller's item it stands for, and how many
    kept items are edited copies. A kept item is the caller's own object, or a new item
    of its type with only its output (a result) or arguments (a call) replaced."""
    positions: list[int] = []
    edited = 0
    for item in kept:
        index = next((i for i, g in enumerate(given) if g is item), None)
        if index is None:
            index = next((i for i, g in enumerate(given) if _edited_copy(item, g)), None)
            edited += 1
        assert index is not None, f"a kept item that is no caller's item: {item!r}"
        positions.append(index)
    return positions, edited


def _edited_copy(copy: Any, original: Any) -> bool:
    if type(copy) is not type(original) or not isinstance(original, dict) or copy == original:
        return False
    field = EDITED_FIELD.get(str(original.get("type")))
    if field is None:
        return False
    return {k: v for k, v in copy.items() if k != field} == {
        k: v for k, v in original.items() if k != field
    }


class Recording:
    """Wraps the filter to check, on every call, what it returned against what it got."""

    def __init__(self, guard: ContextWindowFilter) -> None:
        self.guard = guard
        self.calls = 0
        self.pruned = 0  # calls that dropped items
        self.edited = 0  # calls that sent edited copies
        self.cut = 0  # calls that did either

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        given = list(data.model_data.input)
        result = await self.guard(data)
        kept = result.input
        # the caller's own objects or edited copies of them, in order, never reordered
        positions, edited = _origins(kept, given)
        assert positions == sorted(positions) and len(set(positions)) == len(positions)
        assert kept[0] is given[0]  # the first user input
        assert result.instructions == data.model_data.instructions
        self.calls += 1
        self.pruned += len(kept) < len(given)
        self.edited += edited > 0
        self.cut += len(kept) < len(given) or edited > 0
        return result


def _check_request(body: dict[str, Any]) -> None:
    """The head (instructions, then the task) leads every request."""
    items = body["input"] if "input" in body else body["messages"]
    if "instructions" in body:
        assert body["instructions"] == INSTRUCTIONS
    else:  # chat completions: the instructions travel as the first message
        assert items[0] == {"role": "system", "content": INSTRUCTIONS}
        items = items[1:]
    assert items[0]["role"] == "user" and items[0]["content"] == TASK


def _responses_pairs(body: dict[str, Any]) -> None:
    items = body["input"]
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    assert sorted(calls) == sorted(outputs)


def _run_sync(
    emu: Emulator,
    guard: Any,
    *,
    hooks: Any = None,
    task: str = TASK,
    max_tokens: int | None = 256,
    kind: str = "responses",
) -> Any:
    """``Runner.run_sync`` on a fresh client, closed afterwards on the loop that used it.

    ``run_sync`` runs on the thread's default event loop and leaves it open; the client's
    connections belong to that loop, so they are closed there, and the loop after them.
    """
    client = _client(emu)
    config = RunConfig(call_model_input_filter=guard, tracing_disabled=True)
    try:
        return Runner.run_sync(
            _agent(client, kind, max_tokens=max_tokens),
            task,
            max_turns=100,
            run_config=config,
            hooks=hooks,
        )
    finally:
        loop = asyncio.get_event_loop_policy().get_event_loop()
        loop.run_until_complete(client.close())
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
        asyncio.set_event_loop(None)


RUNS = [("responses", "sync"), ("responses", "async"), ("responses", "streamed"), ("chat", "async")]


@pytest.mark.parametrize(("kind", "runner"), RUNS)
def test_without_the_filter_the_run_overflows(kind: str, runner: str) -> None:
    policy = LogReader()
    with Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as emu:
        with pytest.raises(openai.BadRequestError) as caught:
            _run(emu, kind, runner, None, None)
        statuses = [record.status for record in emu.records]
    assert caught.value.code == "context_length_exceeded"
    assert wg.classify_failure(caught.value).kind is wg.FailureKind.CONTEXT_OVERFLOW
    assert statuses[-1] == 400 and statuses.count(400) == 1
    assert len(statuses) < PARTS  # it failed partway through the task


def _run(emu: Emulator, kind: str, runner: str, guard: Any, hooks: Any) -> Any:
    """One run of the task: ``Runner.run_sync``, ``Runner.run`` or ``Runner.run_streamed``."""
    if runner == "sync":
        return _run_sync(emu, guard, hooks=hooks, kind=kind)
    config = RunConfig(call_model_input_filter=guard, tracing_disabled=True)

    async def run_async() -> Any:
        async with _client(emu) as client:
            agent = _agent(client, kind)
            if runner == "async":
                return await Runner.run(agent, TASK, max_turns=100, run_config=config, hooks=hooks)
            run = Runner.run_streamed(agent, TASK, max_turns=100, run_config=config, hooks=hooks)
            async for _ in run.stream_events():
                pass
            return run

    return asyncio.run(run_async())


def _guarded_run(
    kind: str, runner: str, edits: tuple[()] | None = None
) -> tuple[LogReader, Emulator, Recording, list[Any], Any]:
    policy = LogReader()
    events: list[Any] = []
    guard = call_model_input_filter(
        model_info=wg.ModelInfo(context_window=WINDOW), sinks=events.append, edits=edits
    )
    recording = Recording(guard)
    with Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as emu:
        result = _run(emu, kind, runner, recording, guard.hooks)
    return policy, emu, recording, events, result


@pytest.mark.parametrize(("kind", "runner"), RUNS)
@pytest.mark.parametrize("edits", [None, ()], ids=["default_edits", "drop_only"])
def test_with_the_filter_the_run_never_overflows(
    kind: str, runner: str, edits: tuple[()] | None
) -> None:
    policy, emu, recording, events, result = _guarded_run(kind, runner, edits)
    records = emu.records
    assert [record.status for record in records] == [200] * len(records)  # 0 overflows
    assert result.final_output == f"finished: read {PARTS} parts"
    # the run really outgrew the window: its history would not fit, and calls were cut
    # (drop-only: whole turns dropped; the default edits: old outputs cleared first, then
    # turns dropped as needed)
    assert len(result.to_input_list()) > 2 * PARTS
    assert recording.cut > 10
    edits_made = {e.edit for e in events if e.kind == "context_edited"}
    if edits == ():
        assert recording.edited == 0 and edits_made == {"drop"}
    else:
        assert "clear" in edits_made
    for body in policy.bodies:
        _check_request(body)
        if kind == "responses":
            _responses_pairs(body)
    # max_tokens reserved: every prompt left the requested 256 free, and got them
    assert all(r.prompt_tokens is not None and r.prompt_tokens + 256 <= WINDOW for r in records)
    assert {r.max_output_tokens for r in records} == {256}
    # usage fed back: every call after the first was measured, each response gauged
    kinds = Counter(event.kind for event in events)
    assert kinds["context_estimate"] == len(records) == recording.calls
    assert kinds["usage_measured"] == len(records) - 1
    reported = [e.tokens for e in events if e.kind == "context_pressure"]
    assert reported == [r.prompt_tokens for r in records]


def test_without_max_tokens_the_default_reserve_keeps_the_run_inside() -> None:
    policy = LogReader()
    guard = call_model_input_filter(model_info=wg.ModelInfo(context_window=WINDOW))
    with Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as emu:
        result = _run_sync(emu, guard, hooks=guard.hooks, max_tokens=None)
        records = emu.records
    assert result.final_output == f"finished: read {PARTS} parts"
    assert all(record.status == 200 for record in records)


def test_a_head_that_cannot_fit_raises_before_any_request() -> None:
    guard = call_model_input_filter(model_info=wg.ModelInfo(context_window=WINDOW))
    with Emulator(flavor="openai", context_window=WINDOW) as emu:
        with pytest.raises(wg.ContextTruncatedError):
            _run_sync(emu, guard, hooks=guard.hooks, task="word " * 9000)
        assert emu.records == ()


def test_a_reply_budget_that_cannot_be_left_free_raises_before_any_request() -> None:
    # The filter cannot lower ModelSettings.max_tokens, so a call whose input leaves less
    # room than it asks for is refused here rather than by the provider.
    guard = call_model_input_filter(model_info=wg.ModelInfo(context_window=WINDOW))
    task = "word " * 3000
    with Emulator(flavor="openai", context_window=WINDOW) as emu:
        with pytest.raises(wg.ContextTruncatedError) as caught:
            _run_sync(emu, guard, hooks=guard.hooks, task=task, max_tokens=6000)
        assert emu.records == ()
        assert caught.value.floor == 6000
        with pytest.raises(openai.BadRequestError):  # what the provider says without it
            _run_sync(emu, None, task=task, max_tokens=6000)


def _data(agent: Agent[Any], items: list[Any], instructions: str | None) -> CallModelData[Any]:
    return CallModelData(
        model_data=ModelInputData(input=items, instructions=instructions),
        agent=agent,
        context=None,
    )


def _reasoning_transcript(turns: int) -> list[Any]:
    items: list[Any] = [{"role": "user", "content": "Investigate."}]
    for turn in range(turns):
        items.append(
            {
                "type": "reasoning",
                "id": f"rs_{turn}",
                "summary": [{"type": "summary_text", "text": "thinking " * 20}],
                "encrypted_content": "e" * 400,
            }
        )
        for call in range(2):
            items.append(
                {
                    "type": "function_call",
                    "id": f"fc_{turn}_{call}",
                    "call_id": f"call_{turn}_{call}",
                    "name": "read_log",
                    "arguments": json.dumps({"part": turn}),
                }
            )
        for call in range(2):  # outputs after both calls, as the runner appends them
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": f"call_{turn}_{call}",
                    "output": "log line " * 120,
                }
            )
    return items


@pytest.mark.parametrize("edits", [None, ()], ids=["default_edits", "drop_only"])
def test_reasoning_items_and_parallel_calls_are_dropped_as_whole_turns(
    edits: tuple[()] | None,
) -> None:
    agent: Agent[Any] = Agent(name="a", instructions="Be brief.", tools=[read_log], model="gpt-4o")
    guard = call_model_input_filter(model_info=wg.ModelInfo(context_window=4096), edits=edits)
    items = _reasoning_transcript(20)
    result = asyncio.run(guard(_data(agent, items, "Be brief.")))
    kept = result.input
    assert kept[0] is items[0]
    assert kept[-1] is items[-1]
    assert len(kept) < len(items)
    positions, edited = _origins(kept, items)
    assert positions == sorted(positions)
    if edits == ():
        assert edited == 0
    # reasoning items and the calls of their turns are never edited (outputs may be)
    assert all(
        item is items[at]
        for item, at in zip(kept, positions, strict=True)
        if items[at].get("type") != "function_call_output"
    )
    # whole turns: each kept reasoning item has both its calls and both outputs
    for start in range(1, len(items), 5):
        assert len({at in positions for at in range(start, start + 5)}) == 1


def test_each_run_is_its_own_conversation_and_shares_across_its_calls() -> None:
    agent: Agent[Any] = Agent(name="a", instructions="Be brief.", model="gpt-4o")
    guard = call_model_input_filter(model_info=wg.ModelInfo(context_window=4096))
    first = [{"role": "user", "content": "Task one."}]
    second = [{"role": "user", "content": "Task two."}]
    asyncio.run(guard(_data(agent, first, "Be brief.")))
    asyncio.run(guard(_data(agent, second, "Be brief.")))
    one = guard.find_conversation("gpt-4o", first, "Be brief.")
    two = guard.find_conversation("gpt-4o", second, "Be brief.")
    assert one is not None and two is not None and one is not two
    later = [*first, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    assert guard.find_conversation("gpt-4o", later, "Be brief.") is one
    assert guard.find_conversation("gpt-4o", first, "Other instructions.") is None


def test_a_manager_template_is_copied_per_conversation() -> None:
    template = wg.ContextWindowManager(model_info=wg.ModelInfo(context_window=4096))
    guard = call_model_input_filter(manager=template)
    agent: Agent[Any] = Agent(name="a", model="gpt-4o")
    items = [{"role": "user", "content": "Task."}]
    asyncio.run(guard(_data(agent, items, None)))
    conversation = guard.find_conversation("gpt-4o", items, None)
    assert conversation is not None
    assert conversation.manager is not template
    assert conversation.manager.context_window == 4096


@pytest.mark.parametrize(
    "options",
    [
        {"manager": object()},
        {"manager": wg.ContextWindowManager(), "safety": 10},
        {"max_tokens": 0},
        {"max_tokens": True},
        {"safety": -1},
        {"pruning": "sometimes"},
        {"strict": "yes"},
        {"model": ""},
        {"model_info": {"context_window": 10}},
        {"sinks": [42]},
        {"max_conversations": 0},
        {"ttl_seconds": -1},
    ],
)
def test_bad_options_raise_configuration_error(options: dict[str, Any]) -> None:
    with pytest.raises(wg.ConfigurationError):
        call_model_input_filter(**options)


def test_a_bad_agent_max_tokens_or_input_is_named() -> None:
    guard = call_model_input_filter(model_info=wg.ModelInfo(context_window=4096))
    agent: Agent[Any] = Agent(name="a", model="gpt-4o", model_settings=ModelSettings(max_tokens=-5))
    with pytest.raises(wg.ConfigurationError, match="max_tokens"):
        asyncio.run(guard(_data(agent, [{"role": "user", "content": "x"}], None)))
    with pytest.raises(wg.InvalidTranscriptError, match="list of Responses input items"):
        asyncio.run(guard(_data(Agent(name="a"), "not a list", None)))  # type: ignore[arg-type]


def test_the_model_name_comes_from_the_option_the_agent_or_the_sdk_default() -> None:
    guard = call_model_input_filter()
    client = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="x")
    assert guard.model_name(Agent(name="a", model="gpt-4o-mini")) == "gpt-4o-mini"
    assert guard.model_name(Agent(name="a", model=OpenAIResponsesModel("o3", client))) == "o3"
    assert guard.model_name(Agent(name="a")) == get_default_model()
    assert call_model_input_filter(model="m").model_name(Agent(name="a", model="x")) == "m"


def test_usage_is_recorded_only_for_the_conversations_latest_call() -> None:
    agent: Agent[Any] = Agent(name="a", instructions="Be brief.", model="gpt-4o")
    events: list[Any] = []
    guard = call_model_input_filter(
        model_info=wg.ModelInfo(context_window=4096), sinks=events.append
    )
    items = [{"role": "user", "content": "Task."}]
    hooks = guard.hooks
    run_a: RunContextWrapper[Any] = RunContextWrapper(context=None)
    run_b: RunContextWrapper[Any] = RunContextWrapper(context=None)

    def answer(tokens: int) -> ModelResponse:
        return ModelResponse(
            output=[], usage=Usage(requests=1, input_tokens=tokens), response_id=None
        )

    async def calls() -> None:
        await guard(_data(agent, items, "Be brief."))
        await hooks.on_llm_start(run_a, agent, "Be brief.", items)  # type: ignore[arg-type]
        await guard(_data(agent, items, "Be brief."))  # a later fit of the same conversation
        await hooks.on_llm_start(run_b, agent, "Be brief.", items)  # type: ignore[arg-type]
        await hooks.on_llm_end(run_a, agent, answer(111))  # stale: ignored
        await hooks.on_llm_end(run_b, agent, answer(222))
        await hooks.on_llm_end(run_b, agent, answer(333))  # nothing pending: ignored
        await guard(_data(agent, items, "Be brief."))

    asyncio.run(calls())
    assert [e.tokens for e in events if e.kind == "context_pressure"] == [222]
    measured = [e for e in events if e.kind == "usage_measured"]
    assert len(measured) == 1 and measured[0].total_tokens == 222


class Sends:
    """Wraps the filter to note, per fitted call, which run made it and the events its
    fit emitted (a fit without a remote counter never awaits, so they are its own)."""

    def __init__(self, guard: ContextWindowFilter, events: list[Any]) -> None:
        self.guard = guard
        self.events = events
        self.calls: list[tuple[int, list[Any]]] = []  # (the run's max_tokens, its events)

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        start = len(self.events)
        result = await self.guard(data)
        budget = data.agent.model_settings.max_tokens
        assert budget is not None
        self.calls.append((budget, self.events[start:]))
        return result


def test_concurrent_runs_with_one_head_feed_each_usage_to_its_own_send() -> None:
    # Two runs with the same instructions and task share one conversation (the head
    # key); the SDK calls on_llm_start after its own gather, so a run's hook can come
    # after the other run's filter. Each usage must be recorded for the send it answers:
    # a usage_measured total is the exact prompt of the conversation's previous call.
    events: list[Any] = []
    guard = call_model_input_filter(
        model_info=wg.ModelInfo(context_window=WINDOW), sinks=events.append
    )
    sends = Sends(guard, events)
    config = RunConfig(call_model_input_filter=sends, tracing_disabled=True)

    async def both(emu: Emulator) -> list[Any]:
        async with _client(emu) as client:
            # the runs are told apart by their max_tokens, which the emulator records
            runs = [
                Runner.run(
                    _agent(client, "responses", max_tokens=budget),
                    TASK,
                    max_turns=100,
                    run_config=config,
                    hooks=guard.hooks,
                )
                for budget in (256, 200)
            ]
            return list(await asyncio.gather(*runs))

    with Emulator(flavor="openai", context_window=WINDOW, scenario=LogReader()) as emu:
        results = asyncio.run(both(emu))
        records = emu.records
    assert [r.final_output for r in results] == [f"finished: read {PARTS} parts"] * 2
    assert [record.status for record in records] == [200] * len(records)  # 0 overflows
    prompts = {
        budget: [r.prompt_tokens for r in records if r.max_output_tokens == budget]
        for budget in (256, 200)
    }
    assert len(sends.calls) == len(records)
    seen = dict.fromkeys(prompts, 0)  # calls of each run so far
    measured = 0
    previous: tuple[int, int] | None = None  # (run, index) of the latest fitted call
    for budget, fitted in sends.calls:
        for event in fitted:
            if event.kind == "usage_measured":
                assert previous is not None
                assert event.total_tokens == prompts[previous[0]][previous[1]]
                measured += 1
        previous = (budget, seen[budget])
        seen[budget] += 1
    assert measured > 0


def test_per_model_state_stays_bounded_when_model_names_cycle() -> None:
    # A caller cycling model names: the least recently used model is forgotten (its
    # conversations too), and memory holds at most DEFAULT_MAX_MODELS.
    guard = call_model_input_filter()
    items: list[Any] = [{"role": "user", "content": "Fix the failing test."}]
    first = guard.conversation_for("model-0", items, "Be brief.")
    assert guard.find_conversation("model-0", items, "Be brief.") is first
    for index in range(1, DEFAULT_MAX_MODELS + 40):
        guard.conversation_for(f"model-{index}", items, "Be brief.")
    assert len(guard._stores) == DEFAULT_MAX_MODELS
    newest = f"model-{DEFAULT_MAX_MODELS + 39}"
    assert guard.find_conversation(newest, items, "Be brief.") is not None
    assert guard.find_conversation("model-0", items, "Be brief.") is None
    assert guard.conversation_for("model-0", items, "Be brief.") is not first


# -- edit stages (issue 19) --------------------------------------------------------------


@function_tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    return result_text(step_of({"path": path}))


@pytest.mark.parametrize("kind", ["responses", "chat"])
def test_the_filter_clamps_and_clears(kind: str) -> None:
    received = Received()
    events: list[Any] = []
    guard = call_model_input_filter(
        model_info=wg.ModelInfo(context_window=EDIT_WINDOW), edits=EDITS, sinks=events.append
    )
    config = RunConfig(call_model_input_filter=guard, tracing_disabled=True)
    with Emulator(flavor="openai", context_window=EDIT_WINDOW, scenario=received) as emu:

        async def main() -> Any:
            async with _client(emu) as client:
                model: Any = (
                    OpenAIResponsesModel("emulated-model", client)
                    if kind == "responses"
                    else OpenAIChatCompletionsModel("emulated-model", client)
                )
                agent: Agent[Any] = Agent(
                    name="reader",
                    instructions=INSTRUCTIONS,
                    tools=[read_file],
                    model=model,
                    model_settings=ModelSettings(max_tokens=REPLY_TOKENS),
                )
                return await Runner.run(
                    agent, TASK, max_turns=100, run_config=config, hooks=guard.hooks
                )

        result = asyncio.run(main())
        statuses = [r.status for r in emu.records]
    check_clamped_and_cleared(received, statuses)
    # the run's own history keeps every output whole: only the calls' input was edited
    outputs = [
        item["output"]
        for item in result.to_input_list()
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    assert outputs == [result_text(n) for n in range(STEPS)]
    assert {e.edit for e in events if isinstance(e, wg.ContextEdited)} == {"clamp", "clear"}
    # usage still reaches the gauge for every call (the last item sent may be an edited copy)
    assert len([e for e in events if e.kind == "context_pressure"]) == len(statuses)


def test_bad_edits_are_refused_when_the_filter_is_made() -> None:
    with pytest.raises(wg.ConfigurationError, match=r"call_model_input_filter\(\): edits must"):
        call_model_input_filter(edits=[wg.ClampToolResults(max_tokens=500), "clear"])  # type: ignore[list-item]
    with pytest.raises(wg.ConfigurationError, match="pass edits to the ContextWindowManager"):
        call_model_input_filter(edits=EDITS, manager=wg.ContextWindowManager("gpt-4o"))
