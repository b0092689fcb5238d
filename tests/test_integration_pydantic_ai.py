"""pydantic-ai end to end: a real Agent on OpenAIChatModel (the openai SDK's HTTP stack)
against the emulator, in a window its tool results overflow.

The emulator counts every prompt exactly and answers an overflow with OpenAI's own
400; its policy here calls a tool whose result is large, again and again, sometimes
twice in parallel, and once gets a ``ModelRetry`` back. Without windowguard the run
dies on the emulator's overflow; with it no request is refused, every request keeps
the system prompt and the task, and no tool result ever reaches the model without
the call it answers.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from pydantic_ai import Agent, ModelRetry, PydanticAIDeprecationWarning
from pydantic_ai import messages as pm
from pydantic_ai._utils import get_event_loop
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import windowguard as wg
from windowguard.emulator import Emulator, EmulatorRequest, Reply
from windowguard.emulator.scenarios import ToolCall
from windowguard.integrations.pydantic_ai import WindowGuard, history_processor, to_openai_chat
from windowguard.run._conversations import DEFAULT_MAX_MODELS

from .surface_edits import (
    EDITS,
    HUGE_AT,
    PLACEHOLDER,
    REPLY_TOKENS,
    STEPS,
    Received,
    check_clamped_and_cleared,
    result_text,
    step_of,
    tool_texts,
)
from .surface_edits import WINDOW as EDIT_WINDOW

WINDOW = 8192
SYSTEM = "You are a careful reader. Read every chunk the user asks for."
TASK = "Read chunks 1 to 24 and summarise them."
CALLS = 24


class Script:
    """The emulator's policy: read chunks (two at once every fifth call), then answer.
    It keeps every request it was sent."""

    def __init__(self, calls: int = CALLS) -> None:
        self.calls = calls
        self.requests: list[EmulatorRequest] = []

    def __call__(self, request: EmulatorRequest) -> Reply:
        self.requests.append(request)
        n = len(self.requests)
        if n > self.calls:
            return Reply(text="All chunks read.")
        chunk = ToolCall(name="read_chunk", arguments={"n": n})
        if n % 5 == 0:
            return Reply(tool_calls=(chunk, ToolCall(name="read_chunk", arguments={"n": n + 100})))
        return Reply(tool_calls=(chunk,))


def _chunk(n: int) -> str:
    if n == 7:
        raise ModelRetry("chunk 7 is being rewritten; read chunk 8 instead")
    return " ".join(f"chunk{n}-word{i}" for i in range(300))


def _model(emu: Emulator) -> OpenAIChatModel:
    model = OpenAIChatModel(
        "emulated-model", provider=OpenAIProvider(base_url=emu.base_url, api_key="x")
    )
    _OPEN.append(model)
    return model


_OPEN: list[OpenAIChatModel] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    """Close each model's HTTP client on the loop ``run_sync`` used (async tests close
    theirs inside their own loop)."""
    yield
    loop = get_event_loop()
    while _OPEN:
        client = _OPEN.pop().client
        if not client.is_closed():
            loop.run_until_complete(client.close())
    loop.close()  # run_sync's loop stays current for the thread until closed
    asyncio.set_event_loop(None)


def _agent(emu: Emulator, **options: Any) -> Agent[None, str]:
    model = _model(emu)
    agent: Agent[None, str] = Agent(model, system_prompt=SYSTEM, retries=3, **options)

    @agent.tool_plain
    def read_chunk(n: int) -> str:
        """Read one chunk of the document.

        Args:
            n: the chunk's number.
        """
        return _chunk(n)

    return agent


@pytest.fixture
def script() -> Script:
    return Script()


def _guard(**options: Any) -> WindowGuard:
    return WindowGuard(model_info=wg.ModelInfo(context_window=WINDOW), **options)


def _assert_well_formed(requests: Sequence[EmulatorRequest]) -> None:
    """Every request keeps the head, and every tool result follows its call."""
    for request in requests:
        messages = request.messages
        assert messages[0] == {"role": "system", "content": SYSTEM}
        assert messages[1]["role"] == "user" and messages[1]["content"] == TASK
        open_ids: set[str] = set()
        for message in messages[2:]:
            if message["role"] == "assistant":
                open_ids = {call["id"] for call in message.get("tool_calls") or ()}
            elif message["role"] == "tool":
                assert message["tool_call_id"] in open_ids, "orphan tool result"
                open_ids.discard(message["tool_call_id"])
        # the answers of each call came along
        for i, message in enumerate(messages):
            for call in message.get("tool_calls") or ():
                assert any(
                    m.get("role") == "tool" and m.get("tool_call_id") == call["id"]
                    for m in messages[i + 1 :]
                ), "call without its result"


def _tool_results(messages: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for m in messages if m["role"] == "tool")


CLEARED = "[cleared to save context: "
CUT = "tokens of this output cut here"


def _assert_cut(
    requests: Sequence[EmulatorRequest], results: int, *, drop_only: bool = False
) -> None:
    """The run outgrew the window, so its requests were cut (never the run's own
    history): with ``drop_only`` (``edits=()``) whole turns were dropped and nothing
    edited; with the default edits turns were dropped or old tool results cleared (or
    clamped), whichever the pipeline chose."""
    texts = [str(m["content"]) for r in requests for m in r.messages if m["role"] == "tool"]
    edited = [t for t in texts if t.startswith(CLEARED) or CUT in t]
    dropped = _tool_results(requests[-1].messages) < results
    assert dropped or edited, "the requests were never cut"
    if drop_only:
        assert dropped and not edited


def test_without_the_guard_the_run_overflows(script: Script) -> None:
    with Emulator(flavor="openai", context_window=WINDOW, scenario=script) as emu:
        agent = _agent(emu)
        with pytest.raises(ModelHTTPError) as caught:
            agent.run_sync(TASK, model_settings={"max_tokens": 1000})
        statuses = [record.status for record in emu.records]
    assert caught.value.status_code == 400
    assert statuses[-1] == 400 and statuses.count(400) == 1
    failure = wg.classify_failure(caught.value.__cause__ or caught.value)
    assert failure.kind is wg.FailureKind.CONTEXT_OVERFLOW


@pytest.mark.parametrize("edits", [None, ()], ids=["default_edits", "drop_only"])
def test_capability_keeps_a_long_run_inside_the_window(
    script: Script, edits: tuple[()] | None
) -> None:
    events = wg.capture_events()
    with (
        events as recorder,
        Emulator(flavor="openai", context_window=WINDOW, scenario=script) as emu,
    ):
        agent = _agent(emu, capabilities=[_guard(sinks=[recorder], edits=edits)])
        result = agent.run_sync(TASK, model_settings={"max_tokens": 1000})
        records = emu.records
    assert result.output == "All chunks read."
    assert [r.status for r in records] == [200] * (CALLS + 1)
    assert all(r.prompt_tokens is not None for r in records)
    assert max(r.prompt_tokens or 0 for r in records) + 1000 <= WINDOW
    _assert_well_formed(script.requests)
    _assert_cut(script.requests, CALLS + CALLS // 5, drop_only=edits == ())
    made = {e.edit for e in recorder.of_kind(wg.ContextEdited)}
    assert (made == {"drop"}) if edits == () else ("clear" in made)
    returns = [
        part
        for message in result.all_messages()
        for part in getattr(message, "parts", ())
        if isinstance(part, (pm.ToolReturnPart, pm.RetryPromptPart))
    ]
    assert len(returns) == CALLS + CALLS // 5
    # usage fed back: every report reached the ledger, in order
    usage = [e.total_tokens for e in recorder.of_kind(wg.UsageMeasured)]
    assert usage == [r.prompt_tokens for r in records[:-1]]


def test_max_tokens_is_fitted_into_what_the_prompt_leaves(script: Script) -> None:
    with Emulator(flavor="openai", context_window=WINDOW, scenario=script) as emu:
        agent = _agent(emu, capabilities=[_guard()])
        agent.run_sync(TASK, model_settings={"max_tokens": 50_000})
        records = emu.records
    assert [r.status for r in records] == [200] * (CALLS + 1)
    sent = [
        request.body.get("max_completion_tokens", request.body.get("max_tokens"))
        for request in script.requests
    ]
    assert all(value < 50_000 for value in sent)
    for record, value in zip(records, sent, strict=True):
        assert (record.prompt_tokens or 0) + value <= WINDOW


def test_async_run_and_streaming(script: Script) -> None:
    events = wg.capture_events()
    with (
        events as recorder,
        Emulator(flavor="openai", context_window=WINDOW, scenario=script) as emu,
    ):
        agent = _agent(emu, capabilities=[_guard(sinks=[recorder])])

        async def main() -> str:
            async with agent.run_stream(TASK, model_settings={"max_tokens": 1000}) as run:
                output = await run.get_output()
            await _OPEN.pop().client.close()
            return output

        output = asyncio.run(main())
        records = emu.records
    assert output == "All chunks read."
    assert all(request.stream for request in script.requests)
    assert [r.status for r in records] == [200] * (CALLS + 1)
    _assert_well_formed(script.requests)
    _assert_cut(script.requests, CALLS + CALLS // 5)
    usage = [e.total_tokens for e in recorder.of_kind(wg.UsageMeasured)]
    assert usage == [r.prompt_tokens for r in records[:-1]]


def test_async_run_many_conversations_at_once() -> None:
    scripts = {name: Script(calls=12) for name in ("a", "b")}

    def policy(request: EmulatorRequest) -> Reply:
        name = "a" if "conversation a" in str(request.messages[1]["content"]) else "b"
        return scripts[name](request)

    with Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as emu:
        agent = _agent(emu, capabilities=[_guard()])

        async def main() -> list[str]:
            runs = [
                agent.run(f"{TASK} (conversation {name})", model_settings={"max_tokens": 1000})
                for name in scripts
            ]
            results = await asyncio.gather(*runs)
            await _OPEN.pop().client.close()
            return [result.output for result in results]

        outputs = asyncio.run(main())
        records = emu.records
    assert outputs == ["All chunks read."] * 2
    assert {r.status for r in records} == {200}
    for name, each in scripts.items():
        assert all(name in str(r.messages[1]["content"]) for r in each.requests)
        _assert_cut(each.requests, 12 + 12 // 5)


@pytest.mark.parametrize("edits", [None, ()], ids=["default_edits", "drop_only"])
def test_history_processor_through_process_history(script: Script, edits: tuple[()] | None) -> None:
    events = wg.capture_events()
    with (
        events as recorder,
        Emulator(flavor="openai", context_window=WINDOW, scenario=script) as emu,
    ):
        processor = history_processor(
            model_info=wg.ModelInfo(context_window=WINDOW, tokenizer="o200k"),
            safety=700,
            sinks=[recorder],
            edits=edits,
        )
        agent = _agent(emu, capabilities=[ProcessHistory(processor)])
        result = agent.run_sync(TASK, model_settings={"max_tokens": 1000})
        records = emu.records
    assert result.output == "All chunks read."
    assert [r.status for r in records] == [200] * (CALLS + 1)
    _assert_well_formed(script.requests)
    _assert_cut(script.requests, CALLS + CALLS // 5, drop_only=edits == ())
    made = {e.edit for e in recorder.of_kind(wg.ContextEdited)}
    assert (made == {"drop"}) if edits == () else ("clear" in made)
    # the processor finds the usage of its own previous request in the history
    usage = [e.total_tokens for e in recorder.of_kind(wg.UsageMeasured)]
    assert usage == [r.prompt_tokens for r in records[:-1]]


def _reading_everything(emu: Emulator, **options: Any) -> Agent[None, str]:
    """An agent whose one tool returns more than the window (12,000 words)."""
    agent: Agent[None, str] = Agent(
        _model(emu), system_prompt=SYSTEM, capabilities=[_guard(**options)]
    )

    @agent.tool_plain
    def read_everything() -> str:
        """Read the whole document."""
        return " ".join(f"w{i}" for i in range(12_000))

    return agent


def _read_everything_then_answer(request: EmulatorRequest) -> Reply:
    if request.call_number == 1:
        return Reply(tool_calls=(ToolCall(name="read_everything", arguments={}),))
    return Reply(text="Read it.")


def test_a_request_that_cannot_fit_is_refused_before_any_http_request() -> None:
    # Drop-only: head + the newest turn (the result larger than the window) cannot fit.
    with Emulator(
        flavor="openai", context_window=WINDOW, scenario=_read_everything_then_answer
    ) as emu:
        agent = _reading_everything(emu, edits=())
        with pytest.raises(wg.ContextTruncatedError):
            agent.run_sync(TASK)
        records = emu.records
    assert [r.status for r in records] == [200]


def test_with_the_default_edits_a_result_larger_than_the_window_is_clamped() -> None:
    requests: list[EmulatorRequest] = []

    def policy(request: EmulatorRequest) -> Reply:
        requests.append(request)
        return _read_everything_then_answer(request)

    with Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as emu:
        result = _reading_everything(emu).run_sync(TASK)
        records = emu.records
    assert result.output == "Read it."
    assert [r.status for r in records] == [200, 200]
    (sent,) = [str(m["content"]) for m in requests[-1].messages if m["role"] == "tool"]
    assert sent.startswith("w0 w1 w2") and CUT in sent  # head and tail, with the marker
    assert sent.endswith("w11999")
    # the run's own history keeps the whole result
    (kept,) = _returns(result.all_messages())
    assert kept == " ".join(f"w{i}" for i in range(12_000))


def test_reading_messages_keeps_a_request_with_its_response() -> None:
    call_a = pm.ToolCallPart("read_chunk", {"n": 1}, tool_call_id="a")
    call_b = pm.ToolCallPart("read_chunk", {"n": 2}, tool_call_id="b")
    # The deprecated part still comes back through DeferredToolResults and old code.
    with pytest.warns(PydanticAIDeprecationWarning, match="RetryPromptPart"):
        retry = pm.RetryPromptPart("try again", tool_name="read_chunk", tool_call_id="b")
    history: list[pm.ModelRequest | pm.ModelResponse] = [
        pm.ModelRequest(parts=[pm.SystemPromptPart(SYSTEM), pm.UserPromptPart(TASK)]),
        pm.ModelResponse(parts=[pm.ThinkingPart("plan"), pm.TextPart("reading"), call_a, call_b]),
        pm.ModelRequest(
            parts=[
                pm.ToolReturnPart("read_chunk", "one", tool_call_id="a"),
                retry,
                pm.UserPromptPart("and hurry"),
            ]
        ),
    ]
    dicts, owners = to_openai_chat(history, instructions="Be brief.")
    assert [d["role"] for d in dicts] == [
        "system",
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
    ]
    assert owners == [None, 0, 0, 1, 2, 2, 2]
    assert [c["id"] for c in dicts[3]["tool_calls"]] == ["a", "b"]
    assert dicts[3]["reasoning_content"] == "plan"
    assert dicts[5]["tool_call_id"] == "b"
    # well paired: a strict manager accepts it as it is
    fit = wg.ContextWindowManager(strict=True).fit(dicts)
    assert fit.messages == dicts and not fit.deferred


def test_bad_options_are_named() -> None:
    with pytest.raises(wg.ConfigurationError, match="manager"):
        WindowGuard(manager="gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(wg.ConfigurationError, match="safety"):
        WindowGuard(safety=-1)
    with pytest.raises(wg.ConfigurationError, match="sink"):
        history_processor(sinks=["not callable"])  # type: ignore[list-item]
    with pytest.raises(wg.ConfigurationError, match="ModelRequest"):
        to_openai_chat([{"role": "user", "content": "hi"}])  # type: ignore[list-item]


def test_per_model_state_stays_bounded_when_model_names_cycle() -> None:
    # A caller cycling model names: the least recently used model is forgotten, so its
    # next request starts a new conversation, and memory holds at most DEFAULT_MAX_MODELS.
    fitter = WindowGuard()._fitter
    dicts, _ = to_openai_chat([pm.ModelRequest(parts=[pm.UserPromptPart("Fix the test.")])])
    first = fitter.conversation("model-0", dicts, None)
    assert fitter.conversation("model-0", dicts, None) is first
    for index in range(1, DEFAULT_MAX_MODELS + 40):
        fitter.conversation(f"model-{index}", dicts, None)
    assert len(fitter._stores) == DEFAULT_MAX_MODELS
    newest = f"model-{DEFAULT_MAX_MODELS + 39}"
    assert fitter.conversation(newest, dicts, None) is fitter.conversation(newest, dicts, None)
    assert fitter.conversation("model-0", dicts, None) is not first


# -- edit stages (issue 19) --------------------------------------------------------------


def _reading_agent(emu: Emulator, **options: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(_model(emu), system_prompt=SYSTEM, **options)

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file of the repository.

        Args:
            path: the file's path.
        """
        return result_text(step_of({"path": path}))

    return agent


def _returns(messages: Sequence[Any]) -> list[Any]:
    return [
        part.content
        for message in messages
        for part in getattr(message, "parts", ())
        if isinstance(part, pm.ToolReturnPart)
    ]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_capability_clamps_and_clears(mode: str) -> None:
    received = Received()
    events: list[Any] = []
    guard = WindowGuard(
        model_info=wg.ModelInfo(context_window=EDIT_WINDOW), edits=EDITS, sinks=[events.append]
    )
    with Emulator(flavor="openai", context_window=EDIT_WINDOW, scenario=received) as emu:
        agent = _reading_agent(emu, capabilities=[guard])
        settings: Any = {"max_tokens": REPLY_TOKENS}
        if mode == "sync":
            result = agent.run_sync(TASK, model_settings=settings)
        else:

            async def main() -> Any:
                done = await agent.run(TASK, model_settings=settings)
                await _OPEN.pop().client.close()
                return done

            result = asyncio.run(main())
        statuses = [r.status for r in emu.records]
    check_clamped_and_cleared(received, statuses)
    # the run's own history keeps every result whole
    assert _returns(result.all_messages()) == [result_text(n) for n in range(STEPS)]
    assert {e.edit for e in events if isinstance(e, wg.ContextEdited)} == {"clamp", "clear"}


def test_history_processor_clamps_and_clears() -> None:
    received = Received()
    # A processor cannot see the tool schemas, so the usage it is given cannot tell it the
    # tokenizer: it counts with the unknown family's heuristic, about twice the emulator's
    # count here. Its clamp limit is set so that only the huge result is over it.
    edits = (wg.ClampToolResults(max_tokens=4_000), EDITS[1])
    processor = history_processor(model_info=wg.ModelInfo(context_window=EDIT_WINDOW), edits=edits)
    with Emulator(flavor="openai", context_window=EDIT_WINDOW, scenario=received) as emu:
        agent = _reading_agent(emu, capabilities=[ProcessHistory(processor)])
        result = agent.run_sync(TASK, model_settings={"max_tokens": REPLY_TOKENS})
        statuses = [r.status for r in emu.records]
    check_clamped_and_cleared(received, statuses)
    # ProcessHistory writes what the processor returns into the run's history: the edited
    # copies stand there (the run's messages), as what was sent
    returns = _returns(result.all_messages())
    assert len(returns) == STEPS
    assert any(r.startswith(PLACEHOLDER) for r in returns)  # (the clamped one was cleared)
    assert result_text(HUGE_AT) not in returns
    # ... and are read back as the results they stand for: a placeholder is never cleared
    # again (its text would change, and the cached prefix with it)
    placeholders = [
        t for r in received.requests for t in tool_texts(r) if t.startswith(PLACEHOLDER)
    ]
    assert all(" tokens]" in t and "[cleared to save" not in t[10:] for t in placeholders)
    by_call: dict[str, set[str]] = {}
    for request in received.requests:
        for message in request:
            if message["role"] == "tool" and str(message["content"]).startswith(PLACEHOLDER):
                by_call.setdefault(message["tool_call_id"], set()).add(message["content"])
    assert by_call and all(len(texts) == 1 for texts in by_call.values())


@pytest.mark.parametrize(
    ("make", "caller"),
    [
        (lambda **o: WindowGuard(**o), "ContextWindowCapability()"),
        (lambda **o: history_processor(**o), "history_processor()"),
    ],
)
def test_bad_edits_are_refused_when_the_hook_is_made(make: Any, caller: str) -> None:
    with pytest.raises(wg.ConfigurationError, match=re.escape(f"{caller}: edits must hold")):
        make(edits=[object()])
    with pytest.raises(wg.ConfigurationError, match="pass edits to the ContextWindowManager"):
        make(edits=EDITS, manager=wg.ContextWindowManager("gpt-4o"))
