"""LiteLLM end to end: ``windowguard.integrations.litellm`` against the emulator through
LiteLLM's openai provider (the real openai SDK HTTP stack), in a window that a loop
re-sending its growing transcript overflows.

The loop is the ordinary LiteLLM agent loop: send the whole transcript, append the
assistant's message (LiteLLM's own ``Message`` object) and one large result per tool
call, repeat. Without windowguard the emulator refuses it with OpenAI's overflow 400;
with it nothing is refused, every request keeps the system prompt and the task, and no
tool result reaches the model without its call.

Nothing leaves the machine: tests/conftest.py makes LiteLLM read its bundled model map.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import litellm
import pytest
from litellm.caching.dual_cache import DualCache
from litellm.proxy._types import UserAPIKeyAuth

import windowguard as wg
from windowguard.emulator import Emulator, EmulatorRequest, Reply
from windowguard.emulator.scenarios import ToolCall
from windowguard.integrations import litellm as wgl
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

# LiteLLM's own pydantic usage warns (schemas of its ReadOnly TypedDicts built lazily on
# first use; its stream handler reading ``model_fields`` off an instance), and
# this suite turns warnings into errors.
pytestmark = [
    pytest.mark.filterwarnings("ignore:.*using the `ReadOnly` qualifier:UserWarning"),
    pytest.mark.filterwarnings(
        "ignore:Accessing the 'model_.*' attribute on the instance is deprecated"
    ),
]

WINDOW = 8192
MODEL = "openai/emulated-model"
SYSTEM = "You are a careful reader. Read every chunk the user asks for."
TASK = "Read chunks 1 to 20 and summarise them."
CALLS = 20
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_chunk",
            "description": "Read one chunk of the document.",
            "parameters": {
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
            },
        },
    }
]


class Script:
    """The emulator's policy: read chunks (two at once every fifth call), then answer."""

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


def _chunk(n: object) -> str:
    return " ".join(f"chunk{n}-word{i}" for i in range(300))


def _start() -> list[Any]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]


def _answer(messages: list[Any], message: Any) -> bool:
    """Append the assistant's message and its tool results; True when it is done."""
    messages.append(message)
    calls = message.tool_calls or []
    for call in calls:
        n = litellm.utils.json.loads(call.function.arguments)["n"]
        messages.append({"role": "tool", "tool_call_id": call.id, "content": _chunk(n)})
    return not calls


def _assert_well_formed(requests: Sequence[EmulatorRequest]) -> None:
    for request in requests:
        messages = request.messages
        assert messages[0] == {"role": "system", "content": SYSTEM}
        assert messages[1] == {"role": "user", "content": TASK}
        open_ids: set[str] = set()
        for i, message in enumerate(messages):
            if message["role"] == "assistant":
                open_ids = {call["id"] for call in message.get("tool_calls") or ()}
                for call_id in open_ids:
                    assert any(m.get("tool_call_id") == call_id for m in messages[i + 1 :])
            elif message["role"] == "tool":
                assert message["tool_call_id"] in open_ids, "orphan tool result"


def _tool_results(messages: Sequence[Any]) -> int:
    return sum(1 for m in messages if m["role"] == "tool")


def _usage_fed_back(fits: Sequence[wg.Fit], records: Sequence[Any]) -> int:
    """How many fits took the previous request's report; each that did took exactly it."""
    fed = 0
    for i, fit in enumerate(fits[1:], start=1):
        measured = [e for e in fit.events if isinstance(e, wg.UsageMeasured)]
        if measured:
            assert [e.total_tokens for e in measured] == [records[i - 1].prompt_tokens]
            fed += 1
    return fed


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def guard() -> wgl.LiteLLMGuard:
    return wgl.LiteLLMGuard(model_info=wg.ModelInfo(context_window=WINDOW))


_CALLBACK_LISTS = (
    "callbacks",
    "input_callback",
    "success_callback",
    "failure_callback",
    "_async_input_callback",
    "_async_success_callback",
    "_async_failure_callback",
)


@pytest.fixture(autouse=True)
def _no_callbacks() -> Iterator[None]:
    # LiteLLM copies litellm.callbacks into its own lists, keeping one logger per class:
    # a test's logger would shadow the next test's, so every list is put back.
    names = [name for name in _CALLBACK_LISTS if isinstance(getattr(litellm, name, None), list)]
    saved = {name: list(getattr(litellm, name)) for name in names}
    yield
    for name, value in saved.items():
        setattr(litellm, name, value)
    # A sync LiteLLM call leaves an event loop set on the thread (for its async logging
    # callbacks); close it so it is not left for the garbage collector.
    try:
        loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:  # none set on this thread
        return
    if not loop.is_running():
        loop.close()
    asyncio.set_event_loop(None)


def _call(emu: Emulator, **extra: Any) -> dict[str, Any]:
    return {"tools": TOOLS, "api_base": emu.base_url, "api_key": "x", **extra}


def test_without_the_wrapper_the_loop_overflows(script: Script) -> None:
    messages = _start()

    def loop(emu: Emulator) -> None:
        for _ in range(CALLS + 1):
            response = litellm.completion(
                model=MODEL, messages=messages, **_call(emu, max_tokens=1000)
            )
            if _answer(messages, response.choices[0].message):
                break

    with Emulator(flavor="openai", context_window=WINDOW, scenario=script) as emu:
        with pytest.raises(litellm.ContextWindowExceededError) as caught:
            loop(emu)
        statuses = [record.status for record in emu.records]
    assert statuses[-1] == 400 and statuses.count(400) == 1
    assert wg.classify_failure(caught.value).kind is wg.FailureKind.CONTEXT_OVERFLOW


def test_completion_keeps_the_loop_inside_the_window(
    script: Script, guard: wgl.LiteLLMGuard
) -> None:
    messages = _start()
    fits: list[wg.Fit] = []
    with Emulator(flavor="openai", context_window=WINDOW, scenario=script) as emu:
        for _ in range(CALLS + 1):
            response = guard.completion(MODEL, messages, **_call(emu, max_tokens=1000))
            assert guard.last_fit is not None
            fits.append(guard.last_fit)
            if _answer(messages, response.choices[0].message):
                break
        records = emu.records
    assert response.choices[0].message.content == "All chunks read."
    assert [r.status for r in records] == [200] * (CALLS + 1)
    assert max(r.prompt_tokens or 0 for r in records) + 1000 <= WINDOW
    _assert_well_formed(script.requests)
    assert _tool_results(script.requests[-1].messages) < CALLS
    assert _tool_results(messages) == CALLS + CALLS // 5  # the caller's transcript is whole
    assert _usage_fed_back(fits, records) == CALLS


def test_max_tokens_and_max_completion_tokens_are_fitted(
    script: Script, guard: wgl.LiteLLMGuard
) -> None:
    messages = _start()
    with Emulator(flavor="openai", context_window=WINDOW, scenario=script) as emu:
        for i in range(CALLS + 1):
            key = "max_tokens" if i % 2 else "max_completion_tokens"
            response = guard.completion(MODEL, messages, **_call(emu, **{key: 50_000}))
            if _answer(messages, response.choices[0].message):
                break
        records = emu.records
    assert [r.status for r in records] == [200] * (CALLS + 1)
    for record, request in zip(records, script.requests, strict=True):
        sent = request.body.get("max_tokens", request.body.get("max_completion_tokens"))
        assert sent < 50_000
        assert (record.prompt_tokens or 0) + sent <= WINDOW


def test_streaming_passes_the_stream_through_and_feeds_its_usage_back(
    script: Script, guard: wgl.LiteLLMGuard
) -> None:
    messages = _start()
    fits: list[wg.Fit] = []
    with Emulator(flavor="openai", context_window=WINDOW, scenario=script) as emu:
        for _ in range(CALLS + 1):
            stream = guard.completion(MODEL, messages, **_call(emu, max_tokens=1000, stream=True))
            assert guard.last_fit is not None
            fits.append(guard.last_fit)
            chunks = list(stream)
            built = litellm.stream_chunk_builder(chunks, messages=messages)
            if _answer(messages, built.choices[0].message):
                break
        records = emu.records
    assert all(request.stream for request in script.requests)
    assert all(
        request.body["stream_options"] == {"include_usage": True} for request in script.requests
    )
    assert [r.status for r in records] == [200] * (CALLS + 1)
    _assert_well_formed(script.requests)
    assert _tool_results(script.requests[-1].messages) < CALLS
    assert _usage_fed_back(fits, records) == CALLS


def test_acompletion_and_async_streaming(script: Script, guard: wgl.LiteLLMGuard) -> None:
    async def loop(emu: Emulator) -> list[wg.Fit]:
        messages = _start()
        fits: list[wg.Fit] = []
        for i in range(CALLS + 1):
            if i % 2:
                stream = await guard.acompletion(
                    MODEL, messages, **_call(emu, max_tokens=1000, stream=True)
                )
                chunks = [chunk async for chunk in stream]
                message = litellm.stream_chunk_builder(chunks, messages=messages).choices[0].message
            else:
                response = await guard.acompletion(MODEL, messages, **_call(emu, max_tokens=1000))
                message = response.choices[0].message
            assert guard.last_fit is not None
            fits.append(guard.last_fit)
            if _answer(messages, message):
                break
        return fits

    with Emulator(flavor="openai", context_window=WINDOW, scenario=script) as emu:
        fits = asyncio.run(loop(emu))
        records = emu.records
    assert [r.status for r in records] == [200] * (CALLS + 1)
    _assert_well_formed(script.requests)
    assert _tool_results(script.requests[-1].messages) < CALLS
    assert _usage_fed_back(fits, records) == CALLS


def test_module_functions_take_a_windowguard_model_info(script: Script) -> None:
    messages = _start()
    info = wg.ModelInfo(context_window=WINDOW)
    with Emulator(flavor="openai", context_window=WINDOW, scenario=script) as emu:
        for _ in range(CALLS + 1):
            response = wgl.completion(
                model=MODEL, messages=messages, model_info=info, **_call(emu, max_tokens=1000)
            )
            if _answer(messages, response.choices[0].message):
                break
        records = emu.records
    assert [r.status for r in records] == [200] * (CALLS + 1)
    _assert_well_formed(script.requests)


def test_the_proxy_logger_guards_requests_and_takes_usage_from_callbacks(
    script: Script,
) -> None:
    """LiteLLM runs ``async_pre_call_hook`` only inside its proxy (which needs the proxy
    extra); this test calls it exactly as ``ProxyLogging.pre_call_hook`` does, then sends
    the request with ``litellm.acompletion``, the logger registered in
    ``litellm.callbacks`` so LiteLLM's own success callbacks feed the usage back."""
    logger = wgl.WindowGuardLogger(model_info=wg.ModelInfo(context_window=WINDOW))
    litellm.callbacks = [logger]

    async def loop(emu: Emulator) -> list[wg.Fit]:
        messages = _start()
        fits: list[wg.Fit] = []
        for _ in range(CALLS + 1):
            data = _call(emu, model=MODEL, messages=list(messages), max_tokens=1000)
            data = await logger.async_pre_call_hook(
                user_api_key_dict=UserAPIKeyAuth(),
                cache=DualCache(),
                data=data,
                call_type="acompletion",
            )
            assert logger.guard.last_fit is not None
            fits.append(logger.guard.last_fit)
            response = await litellm.acompletion(**data)
            await asyncio.sleep(0.05)  # LiteLLM runs its success callbacks as tasks
            if _answer(messages, response.choices[0].message):
                break
        return fits

    with Emulator(flavor="openai", context_window=WINDOW, scenario=script) as emu:
        fits = asyncio.run(loop(emu))
        records = emu.records
    assert [r.status for r in records] == [200] * (CALLS + 1)
    _assert_well_formed(script.requests)
    assert _tool_results(script.requests[-1].messages) < CALLS
    assert all("metadata" not in request.body for request in script.requests)
    # Callbacks run as tasks: one that lands after the next send was fitted is dropped as
    # stale, never misattributed (measured: all 20 land with the pause above).
    assert _usage_fed_back(fits, records) >= CALLS * 3 // 4


@pytest.mark.parametrize("client_asks", [False, True])
def test_the_proxy_logger_leaves_a_streams_usage_chunk_to_the_client(
    script: Script, client_asks: bool
) -> None:
    """A proxy client that did not ask for usage gets no usage-only chunk (empty
    ``choices``): the logger does not add ``include_usage``, and such a stream feeds no
    usage back (LiteLLM's assembled usage is its own estimate). One that asked gets it,
    and its usage is fed back."""
    logger = wgl.WindowGuardLogger(model_info=wg.ModelInfo(context_window=WINDOW))
    litellm.callbacks = [logger]
    asked = {"stream_options": {"include_usage": True}} if client_asks else {}

    async def loop(emu: Emulator) -> tuple[list[wg.Fit], list[Any]]:
        messages = _start()
        fits: list[wg.Fit] = []
        chunks: list[Any] = []
        for _ in range(4):
            data = _call(
                emu, model=MODEL, messages=list(messages), max_tokens=1000, stream=True, **asked
            )
            data = await logger.async_pre_call_hook(
                user_api_key_dict=UserAPIKeyAuth(),
                cache=DualCache(),
                data=data,
                call_type="acompletion",
            )
            assert logger.guard.last_fit is not None
            fits.append(logger.guard.last_fit)
            stream = await litellm.acompletion(**data)
            these = [chunk async for chunk in stream]
            chunks.extend(these)
            await asyncio.sleep(0.05)  # LiteLLM runs its success callbacks as tasks
            built = litellm.stream_chunk_builder(these, messages=messages)
            _answer(messages, built.choices[0].message)
        return fits, chunks

    with Emulator(flavor="openai", context_window=WINDOW, scenario=script) as emu:
        fits, chunks = asyncio.run(loop(emu))
        records = emu.records
    assert [r.status for r in records] == [200] * 4
    bodies = [request.body for request in script.requests]
    measured = [e for fit in fits for e in fit.events if isinstance(e, wg.UsageMeasured)]
    if client_asks:
        assert all(body["stream_options"] == {"include_usage": True} for body in bodies)
        assert _usage_fed_back(fits, records) == 3
    else:
        assert all("stream_options" not in body for body in bodies)
        assert all(chunk.choices for chunk in chunks)  # choices[0] is always there
        assert measured == []  # nothing reported, nothing fed back


def test_a_request_that_cannot_fit_is_refused_before_litellm_is_called(
    guard: wgl.LiteLLMGuard,
) -> None:
    messages = _start()
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_chunk", "arguments": '{"n": 1}'},
                }
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": "call_1", "content": "w " * 12_000})
    with Emulator(flavor="openai", context_window=WINDOW, scenario="echo") as emu:
        with pytest.raises(wg.ContextTruncatedError):
            guard.completion(MODEL, messages, **_call(emu))
        records = emu.records
    assert records == ()


def test_the_window_comes_from_the_catalog_through_a_provider_prefix() -> None:
    guard = wgl.LiteLLMGuard()
    request: dict[str, Any] = {"model": "openai/gpt-4o", "messages": _start()}
    guard.fit_request(request)
    assert guard.last_fit is not None
    assert guard.last_fit.context_window == wg.lookup_model("gpt-4o").context_window  # type: ignore[union-attr]
    assert request["max_tokens"] == guard.last_fit.max_tokens


def test_bad_input_is_named(guard: wgl.LiteLLMGuard) -> None:
    with pytest.raises(wg.ConfigurationError, match="model"):
        guard.fit_request({"messages": _start()})
    with pytest.raises(wg.ConfigurationError, match="messages"):
        guard.fit_request({"model": MODEL, "messages": "hi"})
    with pytest.raises(wg.ConfigurationError, match="manager"):
        wgl.LiteLLMGuard(manager="gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(wg.ConfigurationError, match="max_conversations"):
        wgl.LiteLLMGuard(max_conversations=0)
    with pytest.raises(wg.ConfigurationError, match="positional"):
        wgl.completion(MODEL, _start(), 30)
    with pytest.raises(wg.ConfigurationError, match="either"):
        wgl.WindowGuardLogger(guard=guard, safety=10)


def test_a_late_report_is_dropped_never_misattributed(guard: wgl.LiteLLMGuard) -> None:
    messages = _start()
    first = guard.fit_request({"model": MODEL, "messages": messages, "max_tokens": 100})
    messages.append({"role": "assistant", "content": "Reading."})
    messages.append({"role": "user", "content": "Go on."})
    second = guard.fit_request({"model": MODEL, "messages": messages, "max_tokens": 100})
    assert not guard.record(first, {"prompt_tokens": 40})  # stale: the second was fitted
    assert guard.record(second, {"prompt_tokens": 60})
    third = {"model": MODEL, "messages": [*messages, {"role": "user", "content": "More."}]}
    guard.fit_request(third)
    assert guard.last_fit is not None
    measured = [e.total_tokens for e in guard.last_fit.events if isinstance(e, wg.UsageMeasured)]
    assert measured == [60]


def test_per_model_state_stays_bounded_when_model_names_cycle() -> None:
    # A caller cycling model names: the least recently used model is forgotten (a late
    # report for its send finds nothing), and memory holds at most DEFAULT_MAX_MODELS.
    guard = wgl.LiteLLMGuard()
    messages = [{"role": "user", "content": "Fix the failing test."}]
    first = guard.fit_request({"model": "openai/model-0", "messages": list(messages)})
    assert guard.send_of(first.tag) is not None
    for index in range(1, DEFAULT_MAX_MODELS + 40):
        guard.fit_request({"model": f"openai/model-{index}", "messages": list(messages)})
    assert len(guard._stores) == DEFAULT_MAX_MODELS
    assert guard.send_of(first.tag) is None
    again = guard.fit_request({"model": "openai/model-0", "messages": list(messages)})
    assert again.conversation is not first.conversation


# -- edit stages (issue 19) --------------------------------------------------------------


def _read_file_answer(messages: list[Any], message: Any) -> bool:
    """Append LiteLLM's own assistant message and the read_file results; True when done."""
    messages.append(message)
    calls = message.tool_calls or []
    for call in calls:
        arguments = litellm.utils.json.loads(call.function.arguments)
        messages.append(
            {"role": "tool", "tool_call_id": call.id, "content": result_text(step_of(arguments))}
        )
    return not calls


def _plain(messages: Sequence[Any]) -> list[Any]:
    return [m if isinstance(m, dict) else m.model_dump() for m in messages]


READ_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]


@pytest.mark.parametrize("mode", ["guard", "acompletion", "logger"])
def test_every_hook_clamps_and_clears(mode: str) -> None:
    received = Received()
    info = wg.ModelInfo(context_window=EDIT_WINDOW)
    guard = wgl.LiteLLMGuard(model_info=info, edits=EDITS)
    logger = wgl.WindowGuardLogger(model_info=info, edits=EDITS)
    if mode == "logger":
        litellm.callbacks = [logger]

    async def send(emu: Emulator, messages: list[Any]) -> Any:
        call = {
            "tools": READ_TOOLS,
            "api_base": emu.base_url,
            "api_key": "x",
            "max_tokens": REPLY_TOKENS,
        }
        if mode == "guard":
            return guard.completion(MODEL, messages, **call)
        if mode == "acompletion":  # the module function, with this call's own edits
            return await wgl.acompletion(
                model=MODEL, messages=messages, model_info=info, edits=EDITS, **call
            )
        data = await logger.async_pre_call_hook(
            user_api_key_dict=UserAPIKeyAuth(),
            cache=DualCache(),
            data={"model": MODEL, "messages": list(messages), **call},
            call_type="acompletion",
        )
        response = await litellm.acompletion(**data)
        await asyncio.sleep(0.05)  # LiteLLM runs its success callbacks as tasks
        return response

    async def loop(emu: Emulator) -> list[Any]:
        messages = _start()
        for _ in range(STEPS + 1):
            before = _plain(messages)
            response = await send(emu, messages)
            assert _plain(messages) == before, "the caller's messages were changed"
            if _read_file_answer(messages, response.choices[0].message):
                break
        return messages

    with Emulator(flavor="openai", context_window=EDIT_WINDOW, scenario=received) as emu:
        messages = asyncio.run(loop(emu))
        statuses = [r.status for r in emu.records]
    check_clamped_and_cleared(received, statuses)
    results = [m["content"] for m in messages if isinstance(m, dict) and m["role"] == "tool"]
    assert results == [result_text(n) for n in range(STEPS)]


def test_bad_edits_are_refused_where_they_are_given() -> None:
    with pytest.raises(wg.ConfigurationError, match=r"ContextWindowGuard\(\): edits must hold"):
        wgl.LiteLLMGuard(edits=["clear"])  # type: ignore[list-item]
    with pytest.raises(wg.ConfigurationError, match=r"ContextWindowGuard\(\): edits must hold"):
        wgl.WindowGuardLogger(edits=["clear"])
    with pytest.raises(wg.ConfigurationError, match="pass edits to the ContextWindowManager"):
        wgl.LiteLLMGuard(edits=EDITS, manager=wg.ContextWindowManager("gpt-4o"))
    # a call's own edits are checked before LiteLLM is called (no server listens here)
    with pytest.raises(wg.ConfigurationError, match=r"completion\(edits=\.\.\.\): edits must"):
        wgl.completion(model=MODEL, messages=_start(), edits=[1], api_base="http://127.0.0.1:9")
    templated = wgl.LiteLLMGuard(manager=wg.ContextWindowManager("gpt-4o"))
    with pytest.raises(wg.ConfigurationError, match="carries its own edits"):
        templated.completion(
            model=MODEL, messages=_start(), edits=EDITS, api_base="http://127.0.0.1:9"
        )
