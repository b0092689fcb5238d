"""One streaming contract for every drop-in surface (issue 21, item 3).

A stream read through windowguard is the stream the caller would read without it:

- where windowguard asks a Chat Completions stream for ``stream_options.include_usage``
  (the caller left it unset), the usage-only last chunk that brings (``choices == []``)
  and the ``"usage": null`` it adds to every other chunk never reach the caller, so
  ``"".join(c.choices[0].delta.content or "" for c in stream)`` works as it does
  without windowguard;
- an ``include_usage`` the caller set is sent as set: True, they get the usage chunk;
  False, none is asked for;
- windowguard still learns the usage whenever the stream carries it (unset or True):
  the conversation's next fit attributes it (a ``usage_measured`` event of exactly the
  emulator's prompt count); with False it learns none.

Each surface is driven through the official SDK's real HTTP stack against an emulator
the test starts: the openai SDK through ``wg.guard`` (sync and async, the
``chat.completions.stream`` helper, Responses), LiteLLM through the wrapper (sync and
async), and the openai SDK through the real proxy. The chunks the caller sees are
compared, field for field as the SDK parsed them (``to_dict()``: what the server sent),
with what a direct call to the same emulator gives; only ``created`` (a clock) differs.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

import windowguard as wg
from windowguard.core.events import Event
from windowguard.emulator import Emulator, EmulatorRequest, Reply

MODEL = "emulated-model"
WINDOW = 8192
REPLY = "The answer, after reading every file twice, is forty-two; nothing else changed."
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a careful coding agent."},
    {"role": "user", "content": "TASK-7c1: what is the answer?"},
]
FOLLOW_UP = [*MESSAGES, {"role": "assistant", "content": REPLY}, {"role": "user", "content": "ok"}]

INCLUDE_USAGE = [
    pytest.param(None, id="include_usage-unset"),
    pytest.param(True, id="include_usage-true"),
    pytest.param(False, id="include_usage-false"),
]


class Policy:
    """The emulator's answer (always the same text), keeping each request's body."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: EmulatorRequest) -> Reply:
        self.bodies.append(dict(request.body))
        return Reply(text=REPLY)


def _options(include_usage: bool | None) -> dict[str, Any]:
    return {} if include_usage is None else {"stream_options": {"include_usage": include_usage}}


def _stable(value: Any) -> Any:
    """A parsed event without its clock fields (``created``, ``created_at``)."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in ("created", "created_at")}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _idiom(chunks: Iterable[Any]) -> str | type[BaseException]:
    """The most common way to read a chat stream, or the error it raises."""
    try:
        return "".join(c.choices[0].delta.content or "" for c in chunks)
    except IndexError:
        return IndexError


def _read(stream: Iterable[Any]) -> tuple[list[Any], str | type[BaseException]]:
    """Read a live stream with the idiom, recording every chunk it yields (and reading on
    to the end when the idiom fails, as a caller handling the error would)."""
    seen: list[Any] = []

    def recorded() -> Iterator[Any]:
        for chunk in stream:
            seen.append(chunk)
            yield chunk

    chunks = recorded()
    outcome = _idiom(chunks)
    for _ in chunks:
        pass
    return seen, outcome


async def _aread(stream: Any) -> tuple[list[Any], str | type[BaseException]]:
    """:func:`_read` for an async stream."""
    seen: list[Any] = []

    async def recorded() -> AsyncIterator[Any]:
        async for chunk in stream:
            seen.append(chunk)
            yield chunk

    chunks = recorded()
    try:
        outcome: str | type[BaseException] = "".join(
            [c.choices[0].delta.content or "" async for c in chunks]
        )
    except IndexError:
        outcome = IndexError
    async for _ in chunks:
        pass
    return seen, outcome


def _sdk_view(read: tuple[list[Any], object]) -> tuple[list[Any], object]:
    """What the caller saw of an openai SDK stream: each chunk as the server sent it."""
    chunks, outcome = read
    return [_stable(chunk.to_dict()) for chunk in chunks], outcome


def _litellm_view(read: tuple[list[Any], object]) -> tuple[list[Any], object]:
    """What the caller saw of a LiteLLM stream: each chunk's fields and which are set."""
    chunks, outcome = read
    return [(_stable(c.model_dump()), sorted(c.model_fields_set)) for c in chunks], outcome


def _learned(events: list[Event]) -> list[int]:
    """The prompt counts the conversation's fits attributed from provider usage."""
    return [
        e.total_tokens for e in events if isinstance(e, wg.UsageMeasured) and e.origin == "usage"
    ]


def _check(
    include_usage: bool | None,
    direct: tuple[list[Any], object],
    guarded: tuple[list[Any], object],
    policy: Policy,
    events: list[Event],
    prompt_tokens: int | None,
) -> None:
    """The contract, for one surface: the same chunks and idiom outcome as without
    windowguard, ``include_usage`` sent as the caller set it (or asked for, when unset),
    and the usage learned whenever the stream carried one."""
    direct_chunks, direct_outcome = direct
    chunks, outcome = guarded
    assert chunks == direct_chunks
    assert outcome == direct_outcome
    if include_usage is True:
        assert outcome is IndexError  # the caller asked for the usage chunk: it is there
    else:
        assert outcome == REPLY
    sent = policy.bodies[1].get("stream_options")
    if include_usage is None:
        assert sent == {"include_usage": True}  # windowguard asked, the caller never sees it
    else:
        assert sent == {"include_usage": include_usage}  # as the caller set it
    assert prompt_tokens is not None
    assert _learned(events) == ([] if include_usage is False else [prompt_tokens])


# -- wg.guard ---------------------------------------------------------------------------


@pytest.mark.parametrize("include_usage", INCLUDE_USAGE)
def test_guard_sync_chat_stream(include_usage: bool | None) -> None:
    policy, events = Policy(), []
    with (
        Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as emu,
        openai.OpenAI(base_url=emu.base_url, api_key="k", max_retries=0) as client,
    ):
        kwargs = {"model": MODEL, "messages": MESSAGES, "stream": True, **_options(include_usage)}
        direct = _sdk_view(_read(client.chat.completions.create(**kwargs)))
        guarded_client = wg.guard(client, discover=False, sinks=[events.append])
        guarded = _sdk_view(_read(guarded_client.chat.completions.create(**kwargs)))
        guarded_client.chat.completions.create(model=MODEL, messages=FOLLOW_UP)
        prompt = emu.records[1].prompt_tokens
    _check(include_usage, direct, guarded, policy, events, prompt)


@pytest.mark.parametrize("include_usage", INCLUDE_USAGE)
def test_guard_async_chat_stream(include_usage: bool | None) -> None:
    policy, events = Policy(), []

    async def run(emu: Emulator) -> tuple[Any, Any]:
        async with openai.AsyncOpenAI(base_url=emu.base_url, api_key="k", max_retries=0) as client:
            kwargs = {
                "model": MODEL,
                "messages": MESSAGES,
                "stream": True,
                **_options(include_usage),
            }
            direct = _sdk_view(await _aread(await client.chat.completions.create(**kwargs)))
            guarded_client = wg.guard(client, discover=False, sinks=[events.append])
            stream = await guarded_client.chat.completions.create(**kwargs)
            guarded = _sdk_view(await _aread(stream))
            await guarded_client.chat.completions.create(model=MODEL, messages=FOLLOW_UP)
            return direct, guarded

    with Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as emu:
        direct, guarded = asyncio.run(run(emu))
        prompt = emu.records[1].prompt_tokens
    _check(include_usage, direct, guarded, policy, events, prompt)


@pytest.mark.parametrize("include_usage", INCLUDE_USAGE)
def test_guard_chat_stream_helper(include_usage: bool | None) -> None:
    """``chat.completions.stream``: its events and its final completion, too."""
    policy, events = Policy(), []

    def read(stream_manager: Any) -> tuple[list[Any], object]:
        with stream_manager as stream:
            seen = [
                (e.type, _stable(e.chunk.to_dict()) if e.type == "chunk" else None) for e in stream
            ]
            return seen, _stable(stream.get_final_completion().to_dict())

    with (
        Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as emu,
        openai.OpenAI(base_url=emu.base_url, api_key="k", max_retries=0) as client,
    ):
        kwargs = {"model": MODEL, "messages": MESSAGES, **_options(include_usage)}
        direct = read(client.chat.completions.stream(**kwargs))
        guarded_client = wg.guard(client, discover=False, sinks=[events.append])
        guarded = read(guarded_client.chat.completions.stream(**kwargs))
        guarded_client.chat.completions.create(model=MODEL, messages=FOLLOW_UP)
        prompt = emu.records[1].prompt_tokens
    assert guarded == direct
    final = guarded[1]
    assert isinstance(final, dict)
    assert (final.get("usage") is not None) is (include_usage is True)
    expected = {"include_usage": True if include_usage is None else include_usage}
    assert policy.bodies[1]["stream_options"] == expected
    assert _learned(events) == ([] if include_usage is False else [prompt])


@pytest.mark.parametrize("include_usage", INCLUDE_USAGE)
def test_guard_async_chat_stream_helper(include_usage: bool | None) -> None:
    policy, events = Policy(), []

    async def read(stream_manager: Any) -> tuple[list[Any], object]:
        async with stream_manager as stream:
            seen = [
                (e.type, _stable(e.chunk.to_dict()) if e.type == "chunk" else None)
                async for e in stream
            ]
            return seen, _stable((await stream.get_final_completion()).to_dict())

    async def run(emu: Emulator) -> tuple[Any, Any]:
        async with openai.AsyncOpenAI(base_url=emu.base_url, api_key="k", max_retries=0) as client:
            kwargs = {"model": MODEL, "messages": MESSAGES, **_options(include_usage)}
            direct = await read(client.chat.completions.stream(**kwargs))
            guarded_client = wg.guard(client, discover=False, sinks=[events.append])
            guarded = await read(guarded_client.chat.completions.stream(**kwargs))
            await guarded_client.chat.completions.create(model=MODEL, messages=FOLLOW_UP)
            return direct, guarded

    with Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as emu:
        direct, guarded = asyncio.run(run(emu))
        prompt = emu.records[1].prompt_tokens
    assert guarded == direct
    assert _learned(events) == ([] if include_usage is False else [prompt])


def test_guard_responses_stream_is_untouched() -> None:
    """Responses always reports usage in ``response.completed``: nothing is asked for,
    nothing withheld, and the usage is learned."""
    policy, events = Policy(), []

    def read(stream: Iterable[Any]) -> list[Any]:
        return [_stable(event.to_dict()) for event in stream]

    with (
        Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as emu,
        openai.OpenAI(base_url=emu.base_url, api_key="k", max_retries=0) as client,
    ):
        direct = read(client.responses.create(model=MODEL, input=MESSAGES, stream=True))
        guarded_client = wg.guard(client, discover=False, sinks=[events.append])
        guarded = read(guarded_client.responses.create(model=MODEL, input=MESSAGES, stream=True))
        guarded_client.responses.create(model=MODEL, input=FOLLOW_UP)
        prompt = emu.records[1].prompt_tokens
    assert guarded == direct
    assert "stream_options" not in policy.bodies[1]
    assert _learned(events) == [prompt]


# -- LiteLLM ----------------------------------------------------------------------------

LITELLM_MODEL = f"openai/{MODEL}"


@pytest.fixture
def litellm_wrapper() -> Iterator[Any]:
    """LiteLLM and the wrapper; the event loop a sync LiteLLM call leaves set on the
    thread (for its async logging) is closed afterwards, not left to the collector."""
    pytest.importorskip("litellm")
    from windowguard.integrations import litellm as wgl

    yield wgl
    try:
        loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        return
    if not loop.is_running():
        loop.close()
    asyncio.set_event_loop(None)


# LiteLLM's own pydantic use warns (as in tests/test_integration_litellm.py), and this
# suite turns warnings into errors.
_READ_ONLY = pytest.mark.filterwarnings("ignore:.*using the `ReadOnly` qualifier:UserWarning")
_MODEL_FIELDS = pytest.mark.filterwarnings(
    "ignore:Accessing the 'model_.*' attribute on the instance is deprecated"
)


def _litellm_call(emu: Emulator, include_usage: bool | None) -> dict[str, Any]:
    return {
        "model": LITELLM_MODEL,
        "messages": MESSAGES,
        "stream": True,
        "api_base": emu.base_url,
        "api_key": "x",
        **_options(include_usage),
    }


@_READ_ONLY
@_MODEL_FIELDS
@pytest.mark.parametrize("include_usage", INCLUDE_USAGE)
def test_litellm_completion_stream(include_usage: bool | None, litellm_wrapper: Any) -> None:
    import litellm

    policy, events = Policy(), []
    guard = litellm_wrapper.LiteLLMGuard(
        model_info=wg.ModelInfo(context_window=WINDOW), sinks=[events.append]
    )
    with Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as emu:
        call = _litellm_call(emu, include_usage)
        direct = _litellm_view(_read(litellm.completion(**call)))
        guarded = _litellm_view(_read(guard.completion(**call)))
        guard.completion(**{**call, "messages": FOLLOW_UP, "stream": False})
        prompt = emu.records[1].prompt_tokens
    _check(include_usage, direct, guarded, policy, events, prompt)


@_READ_ONLY
@_MODEL_FIELDS
@pytest.mark.parametrize("include_usage", INCLUDE_USAGE)
def test_litellm_acompletion_stream(include_usage: bool | None, litellm_wrapper: Any) -> None:
    import litellm

    policy, events = Policy(), []
    guard = litellm_wrapper.LiteLLMGuard(
        model_info=wg.ModelInfo(context_window=WINDOW), sinks=[events.append]
    )

    async def run(emu: Emulator) -> tuple[Any, Any]:
        call = _litellm_call(emu, include_usage)
        direct = _litellm_view(await _aread(await litellm.acompletion(**call)))
        guarded = _litellm_view(await _aread(await guard.acompletion(**call)))
        await guard.acompletion(**{**call, "messages": FOLLOW_UP, "stream": False})
        return direct, guarded

    with Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as emu:
        direct, guarded = asyncio.run(run(emu))
        prompt = emu.records[1].prompt_tokens
    _check(include_usage, direct, guarded, policy, events, prompt)


# -- LangChain --------------------------------------------------------------------------

STREAM_USAGE = [
    pytest.param(None, id="stream_usage-unset"),
    pytest.param(True, id="stream_usage-true"),
    pytest.param(False, id="stream_usage-false"),
]


def _langchain_view(chunks: Iterable[Any]) -> list[Any]:
    """What a ``stream_mode="messages"`` reader sees of each chunk (ids are random)."""
    return [
        (
            type(c).__name__,
            c.content,
            c.usage_metadata,
            getattr(c, "tool_call_chunks", None),
            c.response_metadata,
        )
        for c in chunks
    ]


@pytest.mark.parametrize("stream_usage", STREAM_USAGE)
@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
def test_langchain_middleware_stream(stream_usage: bool | None, run_async: bool) -> None:
    """The middleware asks a ``ChatOpenAI`` whose ``stream_usage`` is unset for stream
    usage; the agent's ``stream_mode="messages"`` reader sees the chunks it sees without
    windowguard, and the usage is learned (a ``context_pressure`` event)."""
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_openai import ChatOpenAI

    from windowguard.integrations.langchain import ContextWindowMiddleware

    policy, events = Policy(), []
    task = {"messages": [MESSAGES[1]]}
    system = MESSAGES[0]["content"]

    async def astream(agent: Any) -> list[Any]:
        return [c async for c, _ in agent.astream(task, stream_mode="messages")]

    def stream(agent: Any) -> list[Any]:
        if run_async:
            return _langchain_view(asyncio.run(astream(agent)))
        return _langchain_view(c for c, _ in agent.stream(task, stream_mode="messages"))

    with Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as emu:
        options = {} if stream_usage is None else {"stream_usage": stream_usage}
        llm = ChatOpenAI(model=MODEL, base_url=emu.base_url, api_key="k", max_retries=0, **options)
        direct = stream(create_agent(llm, [], system_prompt=system))
        middleware = ContextWindowMiddleware(
            model_info=wg.ModelInfo(context_window=WINDOW), sinks=events.append
        )
        guarded = stream(create_agent(llm, [], system_prompt=system, middleware=[middleware]))
        prompt = emu.records[1].prompt_tokens
    assert guarded == direct
    assert "".join(str(chunk[1]) for chunk in guarded) == REPLY
    asked = policy.bodies[1].get("stream_options")
    assert asked == (None if stream_usage is False else {"include_usage": True})
    pressures = [e.tokens for e in events if e.kind == "context_pressure"]
    assert pressures == ([] if stream_usage is False else [prompt])


@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")
@pytest.mark.parametrize("hook_usage", [False, True], ids=["hook-default", "hook-asks"])
@pytest.mark.parametrize("stream_usage", STREAM_USAGE)
def test_langgraph_hook_stream(stream_usage: bool | None, hook_usage: bool) -> None:
    """The LangGraph hook cannot wrap the model call, so it cannot withhold a usage chunk:
    by default ``hook.model`` asks for nothing and the stream is the one read without
    windowguard; ``stream_usage=True`` on the hook asks (and the reader sees LangChain's
    usage chunk, as documented). A model's own ``stream_usage`` is always honoured."""
    pytest.importorskip("langgraph")
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    from windowguard.integrations.langchain import pre_model_hook

    policy, events = Policy(), []
    task = {"messages": [MESSAGES[1]]}
    system = MESSAGES[0]["content"]

    def stream(agent: Any) -> list[Any]:
        return _langchain_view(c for c, _ in agent.stream(task, stream_mode="messages"))

    with Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as emu:
        options = {} if stream_usage is None else {"stream_usage": stream_usage}
        llm = ChatOpenAI(model=MODEL, base_url=emu.base_url, api_key="k", max_retries=0, **options)
        direct = stream(create_react_agent(llm, [], prompt=system))
        hook = pre_model_hook(
            llm,
            system=system,
            model_info=wg.ModelInfo(context_window=WINDOW),
            sinks=events.append,
            stream_usage=hook_usage,
        )
        guarded = stream(create_react_agent(hook.model, [], prompt=system, pre_model_hook=hook))
    asked = policy.bodies[1].get("stream_options")
    windowguard_asked = hook_usage and stream_usage is None
    assert asked == ({"include_usage": True} if stream_usage or windowguard_asked else None)
    assert "".join(str(chunk[1]) for chunk in guarded) == REPLY
    if windowguard_asked:  # one more chunk: LangChain's usage-only AIMessageChunk
        extra = [chunk for chunk in guarded if chunk[2] is not None]
        assert len(extra) == 1 and extra[0][1] == ""
        assert [chunk for chunk in guarded if chunk[2] is None] == direct
    else:
        assert guarded == direct


# -- the proxy --------------------------------------------------------------------------


def _proxy(emu: Emulator, events: list[Event]) -> Any:
    proxy = pytest.importorskip("windowguard.proxy")
    config = proxy.ProxyConfig(upstream=emu.root_url, port=0, window=WINDOW)
    return proxy.ProxyServer(config, sinks=[events.append])


@pytest.mark.parametrize("include_usage", INCLUDE_USAGE)
def test_proxy_chat_stream(include_usage: bool | None) -> None:
    policy, events = Policy(), []
    with (
        Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as emu,
        _proxy(emu, events) as proxy,
        openai.OpenAI(base_url=emu.base_url, api_key="k", max_retries=0) as client,
        openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as through,
    ):
        kwargs = {"model": MODEL, "messages": MESSAGES, "stream": True, **_options(include_usage)}
        direct = _sdk_view(_read(client.chat.completions.create(**kwargs)))
        guarded = _sdk_view(_read(through.chat.completions.create(**kwargs)))
        through.chat.completions.create(model=MODEL, messages=FOLLOW_UP)
        prompt = emu.records[1].prompt_tokens
    _check(include_usage, direct, guarded, policy, events, prompt)


def test_proxy_responses_stream_is_untouched() -> None:
    policy, events = Policy(), []
    with (
        Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as emu,
        _proxy(emu, events) as proxy,
        openai.OpenAI(base_url=emu.base_url, api_key="k", max_retries=0) as client,
        openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as through,
    ):
        kwargs = {"model": MODEL, "input": MESSAGES, "stream": True}
        direct = [_stable(e.to_dict()) for e in client.responses.create(**kwargs)]
        guarded = [_stable(e.to_dict()) for e in through.responses.create(**kwargs)]
        through.responses.create(model=MODEL, input=FOLLOW_UP)
        prompt = emu.records[1].prompt_tokens
    assert guarded == direct
    assert "stream_options" not in policy.bodies[1]
    assert _learned(events) == [prompt]


# -- the proxy's reader, however the bytes are split -----------------------------------


@pytest.fixture(scope="module")
def raw_streams() -> tuple[bytes, bytes]:
    """One chat stream's bytes as the emulator sends them with ``include_usage`` and
    without it (the same request otherwise)."""
    httpx2 = pytest.importorskip("httpx2")
    with Emulator(flavor="openai", context_window=WINDOW, scenario=Policy()) as emu:
        url = emu.base_url + "/chat/completions"
        body = {"model": MODEL, "messages": MESSAGES, "stream": True}
        plain = httpx2.post(url, json=body).content
        asked = httpx2.post(url, json={**body, "stream_options": {"include_usage": True}}).content
    return plain, asked


def _events(stream: bytes) -> list[Any]:
    """The decoded ``data`` of each event (``[DONE]`` as a string), without clocks."""
    out: list[Any] = []
    for line in stream.splitlines():
        if line.startswith(b"data:"):
            payload = line[5:].strip().decode()
            out.append(payload if payload == "[DONE]" else _stable(json.loads(payload)))
    return out


@given(cuts=st.lists(st.integers(min_value=0, max_value=4_000), max_size=12))
def test_the_proxy_reader_hides_what_include_usage_added_however_split(
    raw_streams: tuple[bytes, bytes], cuts: list[int]
) -> None:
    from windowguard.proxy._wire import SseUsage

    plain, asked = raw_streams
    usages: list[object] = []
    reader = SseUsage(usages.append, strip_usage_chunk=True)
    bounds = sorted({min(c, len(asked)) for c in cuts} | {0, len(asked)})
    out = b"".join(reader.feed(asked[a:b]) for a, b in itertools.pairwise(bounds)) + reader.close()
    assert _events(out) == _events(plain)
    assert len(usages) == 1 and usages[0] == _events(asked)[-2]["usage"]


def test_the_proxy_reader_passes_a_stream_the_client_asked_usage_for() -> None:
    # Without strip_usage_chunk (the client set include_usage) nothing is changed.
    from windowguard.proxy._wire import SseUsage

    usage = {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}
    chunk = {"object": "chat.completion.chunk", "choices": [], "usage": usage}
    stream = (
        b'data: {"object":"chat.completion.chunk","choices":[{"index":0}],"usage":null}\n\n'
        + b"data: "
        + json.dumps(chunk).encode()
        + b"\n\ndata: [DONE]\n\n"
    )
    usages: list[object] = []
    reader = SseUsage(usages.append, strip_usage_chunk=False)
    assert reader.feed(stream) + reader.close() == stream
    assert usages == [usage]
