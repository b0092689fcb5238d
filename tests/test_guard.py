"""wg.guard through the official SDKs' real HTTP stack against the emulator.

Every model call goes through ``openai`` / ``anthropic`` over HTTP to an
:class:`~windowguard.emulator.Emulator` started by the test, which counts every prompt
exactly and answers an overflow with the real provider's 400. No SDK method is patched.
The emulator's policy sees what was actually sent, so "the task is still there" and
"nothing was sent" are read from the server side.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import anthropic
import openai
import pytest

import windowguard as wg
from windowguard.accounting.discovery import clear_discovery_cache
from windowguard.core.events import Event
from windowguard.emulator import Emulator, EmulatorRequest, Reply, ToolCall
from windowguard.guard import AsyncGuardedClient, GuardedClient, guard

MODEL = "emulated-model"
TASK = "TASK-7f3: find the bug in the parser and fix it."
SYSTEM = "You are a careful coding agent."
SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
}
CHAT_TOOLS = [
    {
        "type": "function",
        "function": {"name": "read_file", "description": "Read a file.", "parameters": SCHEMA},
    }
]
RESPONSES_TOOLS = [
    {"type": "function", "name": "read_file", "description": "Read a file.", "parameters": SCHEMA}
]
ANTHROPIC_TOOLS = [{"name": "read_file", "description": "Read a file.", "input_schema": SCHEMA}]


def big_result(n: int, lines: int = 60) -> str:
    return "\n".join(f"def f{n}_{j}(x):\n    return x * {j}  # line {j}" for j in range(lines))


_SYNC_CLIENTS: list[Any] = []


@pytest.fixture(autouse=True)
def _fresh_discovery() -> Iterator[None]:
    clear_discovery_cache()
    wg.clear_counter_cache()
    yield
    clear_discovery_cache()
    wg.clear_counter_cache()
    while _SYNC_CLIENTS:
        _SYNC_CLIENTS.pop().close()


def sync_client(client: Any) -> Any:
    """Close this client when the test ends (its sockets would warn otherwise)."""
    _SYNC_CLIENTS.append(client)
    return client


@dataclass
class Seen:
    """What the emulator's policy saw, call by call."""

    task_present: list[bool] = field(default_factory=list)
    messages: list[int] = field(default_factory=list)


def agent_policy(seen: Seen) -> Callable[[EmulatorRequest], Reply]:
    """Always calls read_file once (a tool loop that never ends by itself)."""

    def policy(request: EmulatorRequest) -> Reply:
        text = " ".join(str(m.get("content") or "") for m in request.messages)
        seen.task_present.append(TASK in text)
        seen.messages.append(len(request.messages))
        n = request.call_number
        return Reply(
            text=f"Reading file {n}.",
            tool_calls=(ToolCall(name="read_file", arguments={"path": f"src/m{n}.py"}),),
        )

    return policy


# -- one agent step per API, sync and async, streamed or not ---------------------------


def _chat_kwargs(transcript: list[Any], stream: bool) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "messages": transcript,
        "tools": CHAT_TOOLS,
        "max_tokens": 256,
    }
    if stream:
        kwargs["stream"] = True
    return kwargs


def _chat_from_response(response: Any) -> tuple[list[Any], list[str]]:
    message = response.choices[0].message
    calls = message.tool_calls or []
    assistant = {
        "role": "assistant",
        "content": message.content,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in calls
        ],
    }
    return [assistant], [c.id for c in calls]


def _chat_from_chunks(chunks: list[Any]) -> tuple[list[Any], list[str]]:
    text = ""
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:
                entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] = call.id or entry["id"]
                if call.function is not None:
                    entry["name"] += call.function.name or ""
                    entry["arguments"] += call.function.arguments or ""
    tool_calls: list[dict[str, Any]] = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": c["arguments"]},
        }
        for c in calls.values()
    ]
    message = {"role": "assistant", "content": text, "tool_calls": tool_calls}
    return [message], [c["id"] for c in calls.values()]


def chat_step(client: Any, transcript: list[Any], stream: bool) -> tuple[list[Any], list[str]]:
    result = client.chat.completions.create(**_chat_kwargs(transcript, stream))
    if stream:
        with result:
            return _chat_from_chunks(list(result))
    return _chat_from_response(result)


async def achat_step(
    client: Any, transcript: list[Any], stream: bool
) -> tuple[list[Any], list[str]]:
    result = await client.chat.completions.create(**_chat_kwargs(transcript, stream))
    if stream:
        async with result:
            return _chat_from_chunks([chunk async for chunk in result])
    return _chat_from_response(result)


def chat_helper_step(
    client: Any, transcript: list[Any], stream: bool
) -> tuple[list[Any], list[str]]:
    kwargs = _chat_kwargs(transcript, False)
    with client.chat.completions.stream(**kwargs) as helper:
        if stream:  # iterate the events first, then ask for the final completion
            list(helper)
        final = helper.get_final_completion()
    return _chat_from_response(final)


async def achat_helper_step(
    client: Any, transcript: list[Any], stream: bool
) -> tuple[list[Any], list[str]]:
    kwargs = _chat_kwargs(transcript, False)
    async with client.chat.completions.stream(**kwargs) as helper:
        if stream:
            [event async for event in helper]
        final = await helper.get_final_completion()
    return _chat_from_response(final)


def chat_result(call_id: str, n: int) -> Any:
    return {"role": "tool", "tool_call_id": call_id, "content": big_result(n)}


def _responses_kwargs(transcript: list[Any], stream: bool) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "input": transcript[1:],
        "instructions": SYSTEM,
        "tools": RESPONSES_TOOLS,
        "max_output_tokens": 256,
    }
    if stream:
        kwargs["stream"] = True
    return kwargs


def _responses_from(output: list[Any]) -> tuple[list[Any], list[str]]:
    items = [item.model_dump(exclude_none=True) for item in output]
    return items, [item.call_id for item in output if item.type == "function_call"]


def _completed(events: list[Any]) -> Any:
    done = [e for e in events if e.type == "response.completed"]
    assert len(done) == 1
    return done[0].response


def responses_step(client: Any, transcript: list[Any], stream: bool) -> tuple[list[Any], list[str]]:
    result = client.responses.create(**_responses_kwargs(transcript, stream))
    if stream:
        with result:
            return _responses_from(_completed(list(result)).output)
    return _responses_from(result.output)


async def aresponses_step(
    client: Any, transcript: list[Any], stream: bool
) -> tuple[list[Any], list[str]]:
    result = await client.responses.create(**_responses_kwargs(transcript, stream))
    if stream:
        async with result:
            return _responses_from(_completed([e async for e in result]).output)
    return _responses_from(result.output)


def responses_helper_step(
    client: Any, transcript: list[Any], stream: bool
) -> tuple[list[Any], list[str]]:
    with client.responses.stream(**_responses_kwargs(transcript, False)) as helper:
        if stream:
            list(helper)
        final = helper.get_final_response()
    return _responses_from(final.output)


async def aresponses_helper_step(
    client: Any, transcript: list[Any], stream: bool
) -> tuple[list[Any], list[str]]:
    async with client.responses.stream(**_responses_kwargs(transcript, False)) as helper:
        if stream:
            [event async for event in helper]
        final = await helper.get_final_response()
    return _responses_from(final.output)


def responses_result(call_id: str, n: int) -> Any:
    return {"type": "function_call_output", "call_id": call_id, "output": big_result(n)}


def _anthropic_kwargs(transcript: list[Any]) -> dict[str, Any]:
    return {
        "model": MODEL,
        "system": SYSTEM,
        "messages": transcript[1:],
        "tools": ANTHROPIC_TOOLS,
        "max_tokens": 256,
    }


def _anthropic_from(content: list[Any]) -> tuple[list[Any], list[str]]:
    blocks = [block.model_dump(exclude_none=True) for block in content]
    return [{"role": "assistant", "content": blocks}], [
        b.id for b in content if b.type == "tool_use"
    ]


def _anthropic_from_events(events: list[Any]) -> tuple[list[Any], list[str]]:
    blocks: dict[int, dict[str, Any]] = {}
    for event in events:
        if event.type == "content_block_start":
            blocks[event.index] = event.content_block.model_dump(exclude_none=True)
            if blocks[event.index]["type"] == "tool_use":
                blocks[event.index]["input"] = ""
        elif event.type == "content_block_delta":
            block = blocks[event.index]
            if event.delta.type == "text_delta":
                block["text"] = block.get("text", "") + event.delta.text
            elif event.delta.type == "input_json_delta":
                block["input"] += event.delta.partial_json
    content = []
    for block in blocks.values():
        if block["type"] == "tool_use":
            import json

            block["input"] = json.loads(block["input"] or "{}")
        content.append(block)
    ids = [b["id"] for b in content if b["type"] == "tool_use"]
    return [{"role": "assistant", "content": content}], ids


def anthropic_step(client: Any, transcript: list[Any], stream: bool) -> tuple[list[Any], list[str]]:
    if stream:
        with client.messages.create(**_anthropic_kwargs(transcript), stream=True) as events:
            return _anthropic_from_events(list(events))
    return _anthropic_from(client.messages.create(**_anthropic_kwargs(transcript)).content)


async def aanthropic_step(
    client: Any, transcript: list[Any], stream: bool
) -> tuple[list[Any], list[str]]:
    if stream:
        events = await client.messages.create(**_anthropic_kwargs(transcript), stream=True)
        async with events:
            return _anthropic_from_events([e async for e in events])
    message = await client.messages.create(**_anthropic_kwargs(transcript))
    return _anthropic_from(message.content)


def anthropic_stream_step(
    client: Any, transcript: list[Any], stream: bool
) -> tuple[list[Any], list[str]]:
    with client.messages.stream(**_anthropic_kwargs(transcript)) as helper:
        if stream:  # consume through text_stream, then ask for the final message
            "".join(helper.text_stream)
        final = helper.get_final_message()
    return _anthropic_from(final.content)


async def aanthropic_stream_step(
    client: Any, transcript: list[Any], stream: bool
) -> tuple[list[Any], list[str]]:
    async with client.messages.stream(**_anthropic_kwargs(transcript)) as helper:
        if stream:
            [text async for text in helper.text_stream]
        final = await helper.get_final_message()
    return _anthropic_from(final.content)


def anthropic_result(call_id: str, n: int) -> Any:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call_id, "content": big_result(n)}],
    }


@dataclass(frozen=True)
class Flavour:
    name: str
    emulator: str
    step: Callable[..., tuple[list[Any], list[str]]]
    astep: Callable[..., Any]
    result: Callable[[str, int], Any]

    def client(self, emu: Emulator, *, is_async: bool = False) -> Any:
        if self.emulator == "anthropic":
            if is_async:
                return anthropic.AsyncAnthropic(base_url=emu.root_url, api_key="k", max_retries=0)
            return sync_client(
                anthropic.Anthropic(base_url=emu.root_url, api_key="k", max_retries=0)
            )
        if is_async:
            return openai.AsyncOpenAI(base_url=emu.base_url, api_key="k", max_retries=0)
        return sync_client(
            sync_client(openai.OpenAI(base_url=emu.base_url, api_key="k", max_retries=0))
        )

    def start(self) -> list[Any]:
        """The transcript as the caller keeps it: [system, task] (Anthropic and
        Responses callers pass the system prompt separately: the tests slice it off)."""
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]


FLAVOURS = {
    "chat": Flavour("chat", "openai", chat_step, achat_step, chat_result),
    "responses": Flavour("responses", "openai", responses_step, aresponses_step, responses_result),
    "chat-stream-helper": Flavour(
        "chat-stream-helper", "openai", chat_helper_step, achat_helper_step, chat_result
    ),
    "responses-stream-helper": Flavour(
        "responses-stream-helper",
        "openai",
        responses_helper_step,
        aresponses_helper_step,
        responses_result,
    ),
    "anthropic": Flavour(
        "anthropic", "anthropic", anthropic_step, aanthropic_step, anthropic_result
    ),
    "anthropic-stream-helper": Flavour(
        "anthropic-stream-helper",
        "anthropic",
        anthropic_stream_step,
        aanthropic_stream_step,
        anthropic_result,
    ),
}


def run_loop(
    flavour: Flavour, client: Any, calls: int, *, stream: bool, is_async: bool
) -> list[BaseException]:
    """Run ``calls`` agent steps re-sending the whole growing transcript; return the
    errors raised (the loop stops at the first)."""
    transcript = flavour.start()

    def grow(step: tuple[list[Any], list[str]], n: int) -> None:
        items, ids = step
        transcript.extend(items)
        for call_id in ids:
            transcript.append(flavour.result(call_id, n))

    if is_async:

        async def main() -> list[BaseException]:
            try:
                for n in range(calls):
                    try:
                        grow(await flavour.astep(client, transcript, stream), n)
                    except Exception as exc:
                        return [exc]
                return []
            finally:
                await client.close()

        return asyncio.run(main())
    for n in range(calls):
        try:
            grow(flavour.step(client, transcript, stream), n)
        except Exception as exc:
            return [exc]
    return []


def is_usage(event: Event) -> TypeGuard[wg.UsageMeasured]:
    """A ``usage_measured`` event for a provider's usage report (not a remote count)."""
    return isinstance(event, wg.UsageMeasured) and event.origin == "usage"


def kinds(events: list[Event]) -> list[str]:
    return [event.kind for event in events]


# -- every flavour, sync and async, streamed and not ------------------------------------


@pytest.mark.parametrize("edits", [None, ()], ids=["default-edits", "drop-only"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("name", list(FLAVOURS))
def test_guarded_loop_fits_every_send_and_feeds_usage_back(
    name: str, stream: bool, is_async: bool, edits: tuple[wg.EditStage, ...] | None
) -> None:
    flavour = FLAVOURS[name]
    seen = Seen()
    events: list[Event] = []
    with Emulator(flavor=flavour.emulator, context_window=4096, scenario=agent_policy(seen)) as emu:
        raw = flavour.client(emu, is_async=is_async)
        guarded = guard(
            raw, sinks=[events.append], model_info=wg.ModelInfo(context_window=4096), edits=edits
        )
        assert isinstance(guarded, AsyncGuardedClient if is_async else GuardedClient)
        errors = run_loop(flavour, guarded, 12, stream=stream, is_async=is_async)
        records = emu.records

    assert errors == []
    assert [r.status for r in records] == [200] * 12
    assert all(seen.task_present)
    prompts = [r.prompt_tokens for r in records]
    assert max(p for p in prompts if p is not None) < 4096
    # The window was exercised: a 12-step loop of 600-token results outgrows 4k. The
    # default edits clear old results first (and drop turns when that is not enough);
    # drop-only drops whole turns.
    pruned = [e for e in events if isinstance(e, wg.TranscriptPruned)]
    edited = {e.edit for e in events if isinstance(e, wg.ContextEdited)}
    if edits == ():
        assert pruned, "a 12-step loop of 600-token results must prune a 4k window"
        assert edited <= {"drop"}
    else:
        assert "clear" in edited, "a 12-step loop of 600-token results must clear in 4k"
    # Usage came back after every send and was attributed by the ledger: each send's
    # reported prompt tokens are the total measured at the next fit.
    measured = [e.total_tokens for e in events if is_usage(e)]
    assert measured == prompts[:-1]
    pressures = [e for e in events if isinstance(e, wg.ContextPressure)]
    assert [p.tokens for p in pressures] == prompts
    assert all(p.window == 4096 for p in pressures)


@pytest.mark.parametrize("name", list(FLAVOURS))
def test_without_the_guard_the_same_loop_overflows(name: str) -> None:
    flavour = FLAVOURS[name]
    with Emulator(
        flavor=flavour.emulator, context_window=4096, scenario=agent_policy(Seen())
    ) as emu:
        errors = run_loop(flavour, flavour.client(emu), 12, stream=False, is_async=False)
        records = emu.records
    assert len(errors) == 1
    assert wg.classify_failure(errors[0]).kind is wg.FailureKind.CONTEXT_OVERFLOW
    assert records[-1].status == 400


def test_the_sdk_objects_come_back_untouched() -> None:
    with Emulator(flavor="openai", context_window=4096) as emu:
        guarded = guard(
            sync_client(openai.OpenAI(base_url=emu.base_url, api_key="k")), discover=False
        )
        transcript = FLAVOURS["chat"].start()
        completion = guarded.chat.completions.create(model=MODEL, messages=transcript)
        stream = guarded.chat.completions.create(model=MODEL, messages=transcript, stream=True)
        response = guarded.responses.create(model=MODEL, input="hello")
    assert type(completion) is openai.types.chat.ChatCompletion
    assert type(stream) is openai.Stream
    assert type(response) is openai.types.responses.Response
    with Emulator(flavor="anthropic", context_window=4096) as emu:
        guarded = guard(
            sync_client(anthropic.Anthropic(base_url=emu.root_url, api_key="k")), discover=False
        )
        message = guarded.messages.create(model=MODEL, messages=transcript[1:], max_tokens=50)
        with guarded.messages.stream(model=MODEL, messages=transcript[1:], max_tokens=50) as s:
            assert type(s) is anthropic.MessageStream
            assert s.get_final_text() == message.content[0].text
    assert type(message) is anthropic.types.Message


async def astep_and_close(flavour: Flavour, client: Any, transcript: list[Any]) -> None:
    try:
        await flavour.astep(client, transcript, False)
    finally:
        await client.close()


# -- refusing before any request -----------------------------------------------------


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", list(FLAVOURS))
def test_a_send_that_cannot_fit_raises_and_makes_no_request(name: str, is_async: bool) -> None:
    flavour = FLAVOURS[name]
    transcript = flavour.start()
    transcript[1] = {"role": "user", "content": TASK + "\n" + big_result(0, lines=400)}
    with Emulator(flavor=flavour.emulator, context_window=4096, count_apis="none") as emu:
        guarded = guard(flavour.client(emu, is_async=is_async), discover=False)
        step: Callable[[], Any] = (
            (lambda: asyncio.run(astep_and_close(flavour, guarded, transcript)))
            if is_async
            else (lambda: flavour.step(guarded, transcript, False))
        )
        with pytest.raises(wg.ContextTruncatedError) as refused:
            step()
        records = emu.records
    assert records == ()
    assert refused.value.context_window == 8192  # nothing discovered: the fallback window


def test_a_refused_stream_helper_makes_no_request() -> None:
    transcript = [{"role": "user", "content": big_result(0, lines=400)}]
    with Emulator(flavor="anthropic", context_window=4096, count_apis="none") as emu:
        guarded = guard(
            sync_client(anthropic.Anthropic(base_url=emu.root_url, api_key="k")), discover=False
        )
        manager = guarded.messages.stream(model=MODEL, messages=transcript, max_tokens=100)
        with pytest.raises(wg.ContextTruncatedError), manager:
            pass
        assert emu.records == ()


# -- the provider's own overflow ------------------------------------------------------


@pytest.mark.parametrize("flavor", ["openai", "vllm", "anthropic"])
def test_an_upstream_overflow_is_learned_from_and_re_raised_unchanged(flavor: str) -> None:
    name = "anthropic" if flavor == "anthropic" else "chat"
    flavour = FLAVOURS[name]
    events: list[Event] = []
    seen = Seen()
    with Emulator(flavor=flavor, context_window=4096, scenario=agent_policy(seen)) as emu:
        raw = flavour.client(emu)
        # The caller claims a window four times the served one: the guard lets the
        # transcript grow past 4096 and the server refuses.
        guarded = guard(raw, model_info=wg.ModelInfo(context_window=16_384), sinks=[events.append])
        transcript = flavour.start()
        sdk_error = anthropic.BadRequestError if flavor == "anthropic" else openai.BadRequestError
        refused = None
        for n in range(20):
            try:
                items, ids = flavour.step(guarded, transcript, False)
            except sdk_error as exc:
                refused = exc
                break
            transcript.extend(items)
            transcript.extend(flavour.result(i, n) for i in ids)
        assert refused is not None, "the served window is 4096: the loop must overflow"
        assert type(refused) is sdk_error  # the SDK's own error, unchanged
        failure = wg.classify_failure(refused)
        assert failure.kind is wg.FailureKind.CONTEXT_OVERFLOW
        overflows = sum(r.status == 400 for r in emu.records)
        # The next sends of the same conversation fit the window the error stated.
        for n in range(20, 26):
            items, ids = flavour.step(guarded, transcript, False)
            transcript.extend(items)
            transcript.extend(flavour.result(i, n) for i in ids)
        records = emu.records
    assert overflows == 1
    assert sum(r.status == 400 for r in records) == 1  # never the same overflow again
    assert all(seen.task_present)
    if failure.context_window is not None:
        estimates = [e for e in events if isinstance(e, wg.ContextEstimate)]
        assert estimates[-1].window == failure.context_window


# -- pass-through ---------------------------------------------------------------------


def test_everything_else_passes_through() -> None:
    with Emulator(flavor="openai", context_window=4096) as emu:
        raw = sync_client(openai.OpenAI(base_url=emu.base_url, api_key="k"))
        guarded = guard(raw, discover=False)
        assert guarded.api_key == "k"
        assert guarded.base_url == raw.base_url
        assert guarded.wrapped_client is raw
        assert {"chat", "responses", "models", "conversation"} <= set(dir(guarded))
        assert guarded.models is raw.models
        assert [m.id for m in guarded.models.list()] == [MODEL]
        assert guarded.chat.completions.with_raw_response is not None
        copy = guarded.with_options(timeout=7.0)
        assert isinstance(copy, GuardedClient)
        assert copy.wrapped_client.timeout == 7.0
        assert isinstance(guarded.copy(max_retries=1), GuardedClient)
        with pytest.raises(AttributeError):
            guarded.no_such_attribute  # noqa: B018
        with guarded as entered:
            assert entered is guarded


def test_with_options_shares_the_conversations() -> None:
    events: list[Event] = []
    with Emulator(flavor="openai", context_window=4096) as emu:
        guarded = guard(
            sync_client(openai.OpenAI(base_url=emu.base_url, api_key="k")),
            discover=False,
            sinks=[events.append],
        )
        transcript = FLAVOURS["chat"].start()
        guarded.chat.completions.create(model=MODEL, messages=transcript)
        transcript.append({"role": "assistant", "content": "ok"})
        transcript.append({"role": "user", "content": "more"})
        guarded.with_options(timeout=9.0).chat.completions.create(model=MODEL, messages=transcript)
        first = emu.records[0].prompt_tokens
    assert [e.total_tokens for e in events if is_usage(e)] == [first]


# -- conversations --------------------------------------------------------------------


def test_interleaved_conversations_keep_separate_state() -> None:
    events: list[Event] = []
    with Emulator(flavor="openai", context_window=8192, scenario=agent_policy(Seen())) as emu:
        guarded = guard(
            sync_client(openai.OpenAI(base_url=emu.base_url, api_key="k")),
            discover=False,
            sinks=[events.append],
        )
        a = FLAVOURS["chat"].start()
        b = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Other task."}]
        measured: list[list[int]] = []
        for n in range(4):
            for transcript in (a, b):
                before = len(events)
                items, ids = chat_step(guarded, transcript, False)
                transcript.extend(items)
                transcript.extend(chat_result(i, n) for i in ids[:1])
                measured.append([e.total_tokens for e in events[before:] if is_usage(e)])
        prompts = [r.prompt_tokens for r in emu.records]
    # Call k of a conversation measures that conversation's call k-1, two sends back.
    assert measured[:2] == [[], []]
    assert measured[2:] == [[p] for p in prompts[:-2]]


def test_conversation_key_pins_one_state() -> None:
    events: list[Event] = []
    with Emulator(flavor="anthropic", context_window=8192) as emu:
        guarded = guard(
            sync_client(anthropic.Anthropic(base_url=emu.root_url, api_key="k")),
            discover=False,
            sinks=[events.append],
        )
        pinned = guarded.conversation("ticket-42")
        assert pinned.conversation("ticket-42") is not pinned
        pinned.messages.create(
            model=MODEL, messages=[{"role": "user", "content": "first head"}], max_tokens=50
        )
        # A different head: unpinned it would be another conversation, pinned it is not.
        pinned.messages.create(
            model=MODEL, messages=[{"role": "user", "content": "second head"}], max_tokens=50
        )
        guarded.messages.create(
            model=MODEL, messages=[{"role": "user", "content": "third head"}], max_tokens=50
        )
        first = emu.records[0].prompt_tokens
    assert [e.total_tokens for e in events if is_usage(e)] == [first]


def test_conversations_are_bounded_by_an_lru() -> None:
    events: list[Event] = []
    with Emulator(flavor="openai", context_window=8192) as emu:
        guarded = guard(
            sync_client(openai.OpenAI(base_url=emu.base_url, api_key="k")),
            discover=False,
            max_conversations=1,
            sinks=[events.append],
        )
        a = [{"role": "user", "content": "task a"}]
        b = [{"role": "user", "content": "task b"}]
        for transcript in (a, b, a):
            guarded.chat.completions.create(model=MODEL, messages=transcript)
    # a was evicted by b, so its second send starts a new run: nothing is measured.
    assert not [e for e in events if is_usage(e)]


def test_a_stream_closed_early_reports_no_usage() -> None:
    events: list[Event] = []
    with Emulator(flavor="openai", context_window=8192) as emu:
        guarded = guard(
            sync_client(openai.OpenAI(base_url=emu.base_url, api_key="k")),
            discover=False,
            sinks=[events.append],
        )
        transcript = [{"role": "user", "content": "task"}]
        stream = guarded.chat.completions.create(model=MODEL, messages=transcript, stream=True)
        next(iter(stream))
        stream.close()
        guarded.chat.completions.create(model=MODEL, messages=transcript)
    assert not [e for e in events if is_usage(e)]
    assert len([e for e in events if isinstance(e, wg.ContextPressure)]) == 1


def test_a_stale_stream_never_measures_a_later_send() -> None:
    events: list[Event] = []
    with Emulator(flavor="openai", context_window=8192) as emu:
        guarded = guard(
            sync_client(openai.OpenAI(base_url=emu.base_url, api_key="k")),
            discover=False,
            sinks=[events.append],
        )
        transcript = [{"role": "user", "content": "task"}]
        early = guarded.chat.completions.create(model=MODEL, messages=transcript, stream=True)
        guarded.chat.completions.create(model=MODEL, messages=transcript)
        list(early)  # read after the later send was fitted: its usage is dropped
        guarded.chat.completions.create(model=MODEL, messages=transcript)
        second = emu.records[1].prompt_tokens
    assert [e.total_tokens for e in events if is_usage(e)] == [second]


# -- what is sent ---------------------------------------------------------------------


def test_chat_stream_asks_for_usage_and_keeps_the_callers_options() -> None:
    bodies: list[dict[str, Any]] = []

    def policy(request: EmulatorRequest) -> Reply:
        bodies.append(dict(request.body))
        return Reply(text="ok")

    with Emulator(flavor="openai", context_window=4096, scenario=policy) as emu:
        guarded = guard(
            sync_client(openai.OpenAI(base_url=emu.base_url, api_key="k")), discover=False
        )
        messages = [{"role": "user", "content": "task"}]
        kwargs: dict[str, Any] = {"model": MODEL, "messages": messages, "stream": True}
        list(guarded.chat.completions.create(**kwargs))
        options = {"include_obfuscation": False}
        list(guarded.chat.completions.create(**kwargs, stream_options=options))
    assert bodies[0]["stream_options"] == {"include_usage": True}
    assert bodies[1]["stream_options"] == {"include_obfuscation": False, "include_usage": True}
    assert options == {"include_obfuscation": False}  # the caller's dict is not changed
    assert "max_tokens" not in bodies[0]  # OpenAI bounds an unset reply by the window


def test_max_tokens_is_fitted_and_set_where_the_api_requires_it() -> None:
    bodies: list[dict[str, Any]] = []

    def policy(request: EmulatorRequest) -> Reply:
        bodies.append(dict(request.body))
        return Reply(text="ok")

    long_task = [{"role": "user", "content": big_result(0, lines=100)}]
    with Emulator(flavor="anthropic", context_window=4096, scenario=policy) as emu:
        guarded = guard(
            sync_client(anthropic.Anthropic(base_url=emu.root_url, api_key="k")),
            model_info=wg.ModelInfo(context_window=4096),
        )
        kwargs = {"model": MODEL, "messages": long_task}
        guarded.messages.create(**kwargs)  # no max_tokens: the API requires one
        guarded.messages.create(**kwargs, max_tokens=100_000)  # more than fits
        guarded.messages.create(
            **kwargs,
            max_tokens=100_000,
            thinking={"type": "enabled", "budget_tokens": 50_000},
        )
        records = emu.records
    assert all(r.status == 200 for r in records)
    assert isinstance(bodies[0]["max_tokens"], int)
    prompts = [r.prompt_tokens or 0 for r in records]
    assert prompts[0] + bodies[0]["max_tokens"] <= 4096
    assert prompts[1] + bodies[1]["max_tokens"] <= 4096
    assert bodies[2]["thinking"]["budget_tokens"] < bodies[2]["max_tokens"]


def test_caller_objects_and_order_are_what_is_sent() -> None:
    """The transcript sent is a subsequence of the caller's messages, SDK objects too."""
    seen = Seen()
    with Emulator(flavor="openai", context_window=4096, scenario=agent_policy(seen)) as emu:
        guarded = guard(
            sync_client(openai.OpenAI(base_url=emu.base_url, api_key="k")),
            model_info=wg.ModelInfo(context_window=4096),
        )
        transcript: list[Any] = FLAVOURS["chat"].start()
        for n in range(10):
            response = guarded.chat.completions.create(
                model=MODEL, messages=transcript, tools=CHAT_TOOLS, max_tokens=200
            )
            message = response.choices[0].message
            transcript.append(message)  # the SDK's own object, as callers often do
            transcript.extend(chat_result(c.id, n) for c in message.tool_calls or [])
        assert all(r.status == 200 for r in emu.records)
    assert all(seen.task_present)
    assert seen.messages[-1] < len(transcript)


# -- Responses server-side state --------------------------------------------------------


def test_previous_response_id_passes_through_with_an_event() -> None:
    events: list[Event] = []
    with Emulator(flavor="openai", context_window=4096) as emu:
        guarded = guard(
            sync_client(openai.OpenAI(base_url=emu.base_url, api_key="k", max_retries=0)),
            discover=False,
            sinks=[events.append],
        )
        with pytest.raises(openai.BadRequestError):  # the emulator keeps no responses
            guarded.responses.create(model=MODEL, input="next", previous_response_id="resp_1")
        assert [r.status for r in emu.records] == [400]  # sent, unchanged
    assert kinds(events) == ["guard_passthrough"]
    assert "previous_response_id" in events[0].to_dict()["reason"]


# -- bad arguments --------------------------------------------------------------------


def test_bad_arguments_get_typed_errors() -> None:
    with pytest.raises(wg.ConfigurationError, match=r"openai\.OpenAI"):
        guard(object())
    with Emulator(flavor="openai", context_window=4096) as emu:
        raw = sync_client(openai.OpenAI(base_url=emu.base_url, api_key="k"))
        guarded = guard(raw, discover=False)
        with pytest.raises(wg.ConfigurationError, match="guarded already"):
            guard(guarded)
        with pytest.raises(wg.ConfigurationError, match="manager="):
            guard(raw, manager=wg.ContextWindowManager(), safety=100)
        with pytest.raises(wg.ConfigurationError, match="max_conversations"):
            guard(raw, max_conversations=0)
        with pytest.raises(wg.ConfigurationError, match="pruning"):
            guard(raw, pruning="oldest")  # type: ignore[arg-type]
        with pytest.raises(wg.ConfigurationError, match="sink"):
            guard(raw, sinks=["not callable"])  # type: ignore[list-item]
        with pytest.raises(wg.InvalidTranscriptError, match="must be a list of messages"):
            guarded.chat.completions.create(model=MODEL, messages="hello")
        with pytest.raises(wg.InvalidTranscriptError, match="got dict"):
            guarded.chat.completions.create(model=MODEL, messages={"role": "user"})
        with pytest.raises(wg.ConfigurationError, match="model name"):
            guarded.chat.completions.create(messages=[{"role": "user", "content": "x"}])
        with pytest.raises(wg.ConfigurationError, match="max_tokens"):
            guarded.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "x"}], max_tokens=0
            )
        with pytest.raises(wg.ConfigurationError, match="conversation key"):
            guarded.conversation("")
        assert emu.records == ()


def test_a_template_manager_is_copied_per_conversation() -> None:
    template = wg.ContextWindowManager(model_info=wg.ModelInfo(context_window=4096), safety=64)
    events: list[Event] = []
    with Emulator(flavor="openai", context_window=4096) as emu:
        guarded = guard(
            sync_client(openai.OpenAI(base_url=emu.base_url, api_key="k")),
            manager=template,
            sinks=[events.append],
        )
        guarded.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "a"}])
    estimates = [e for e in events if isinstance(e, wg.ContextEstimate)]
    assert estimates[0].window == 4096
    assert template.calibration.factor == wg.ContextWindowManager().calibration.factor


@pytest.mark.parametrize(
    ("flavor", "window", "source"),
    [("vllm", 5000, "discovered"), ("llamacpp", 5000, "discovered"), ("openai", 8192, "fallback")],
)
def test_the_window_is_discovered_from_the_clients_endpoint(
    flavor: str, window: int, source: str
) -> None:
    """vLLM and llama.cpp report the window they serve; the OpenAI flavour (like OpenAI)
    does not, and an unknown model then gets the fallback window, which events say."""
    events: list[Event] = []
    with Emulator(flavor=flavor, context_window=5000) as emu:
        guarded = guard(
            sync_client(openai.OpenAI(base_url=emu.base_url, api_key="k")), sinks=[events.append]
        )
        for _ in range(2):
            guarded.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "a"}]
            )
    estimates = [e for e in events if isinstance(e, wg.ContextEstimate)]
    assert [(e.window, e.source) for e in estimates] == [(window, source)] * 2


def test_importing_the_guard_imports_no_sdk() -> None:
    code = (
        "import sys, windowguard, windowguard.guard\n"
        "assert 'openai' not in sys.modules and 'anthropic' not in sys.modules, "
        "sorted(m for m in sys.modules if m in ('openai', 'anthropic'))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_async_clients_pass_through_and_copy_guarded() -> None:
    async def main(emu: Emulator) -> None:
        raw = openai.AsyncOpenAI(base_url=emu.base_url, api_key="k")
        async with guard(raw, discover=False) as guarded:
            assert isinstance(guarded, AsyncGuardedClient)
            copy = guarded.with_options(timeout=3.0)
            assert isinstance(copy, AsyncGuardedClient)
            assert [m.id async for m in guarded.models.list()] == [MODEL]
            pinned = copy.conversation("k1")
            reply = await pinned.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}]
            )
            assert type(reply) is openai.types.chat.ChatCompletion

    with Emulator(flavor="openai", context_window=4096) as emu:
        asyncio.run(main(emu))
        assert [r.status for r in emu.records] == [200]


# -- bounds and the vendors' count APIs ---------------------------------------------------


class _Endpoint:
    """What the guard reads from a client: where it sends, and with which key."""

    def __init__(self, base_url: str, api_key: str | None = None) -> None:
        self.base_url = base_url
        self.api_key = api_key


def _bare_guard(**options: Any) -> Any:
    from windowguard.guard._core import Guard

    settings: dict[str, Any] = {
        "vendor": "openai",
        "model_info": None,
        "safety": None,
        "pruning": None,
        "sinks": (),
        "strict": None,
        "manager": None,
        "max_conversations": 16,
        "discover": False,
        "discovery_timeout": 1.0,
    }
    return Guard(**{**settings, **options})


def test_a_client_cycling_model_names_keeps_the_guards_state_bounded() -> None:
    from windowguard.guard._apis import CHAT

    guard_state = _bare_guard(max_models=4)
    endpoint = _Endpoint("http://127.0.0.1:9/v1")  # discover=False: never contacted
    messages = [{"role": "user", "content": TASK}]
    kept = guard_state.request(CHAT, {"model": MODEL, "messages": messages})
    first, _ = guard_state.conversation_for(kept, endpoint, None)
    for n in range(40):
        request = guard_state.request(CHAT, {"model": f"cycled-{n}", "messages": messages})
        conversation, _ = guard_state.conversation_for(request, endpoint, None)
        assert conversation.manager.model == f"cycled-{n}"
        again, _ = guard_state.conversation_for(kept, endpoint, None)
        assert again is first  # the model in use stays; the cycled ones go
        assert len(guard_state._models) <= 4


@pytest.mark.parametrize(
    ("vendor", "make", "counter"),
    [
        ("openai", lambda: openai.OpenAI(api_key="sk-test"), "OpenAIInputTokens"),
        ("anthropic", lambda: anthropic.Anthropic(api_key="sk-ant-test"), "AnthropicCountTokens"),
    ],
)
def test_the_vendors_own_host_uses_its_count_api_by_default(
    vendor: str, make: Callable[[], Any], counter: str
) -> None:
    from windowguard.guard._apis import ANTHROPIC_MESSAGES, CHAT

    client = sync_client(make())
    api = CHAT if vendor == "openai" else ANTHROPIC_MESSAGES
    model = "gpt-4o" if vendor == "openai" else "claude-sonnet-4-5"
    kwargs = {"model": model, "messages": [{"role": "user", "content": TASK}], "max_tokens": 64}
    for discover, expected in ((None, counter), (True, counter), (False, None)):
        guarded = guard(client, discover=discover)
        state = guarded._guard
        conversation, _ = state.conversation_for(state.request(api, kwargs), client, "k")
        remote = conversation.manager.remote  # made, never called: no network
        assert (type(remote).__name__ if remote is not None else None) == expected


def test_an_async_guard_with_a_template_manager_never_blocks_the_loop_discovering() -> None:
    import http.server
    import threading
    import time

    from windowguard.guard._apis import CHAT

    class Slow(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            time.sleep(0.4)  # every discovery and probe request is slow
            self.send_response(404)
            self.send_header("content-length", "0")
            self.end_headers()

        do_GET = _answer
        do_POST = _answer

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    template = wg.ContextWindowManager(model_info=wg.ModelInfo(context_window=8_192))
    state = _bare_guard(discover=True, manager=template, discovery_timeout=1.0)
    endpoint = _Endpoint(f"http://127.0.0.1:{server.server_address[1]}/v1")
    request = state.request(CHAT, {"model": MODEL, "messages": [{"role": "user", "content": TASK}]})

    async def run() -> float:
        gaps: list[float] = []
        done = False

        async def tick() -> None:
            last = time.monotonic()
            while not done:
                await asyncio.sleep(0.01)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0.05)  # the ticker is running
        conversation, _ = await state.aconversation_for(request, endpoint, "k")
        done = True
        await ticker
        assert conversation.manager.context_window == 8_192  # the template's own window
        return max(gaps)

    try:
        assert asyncio.run(run()) < 0.3
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
