"""AnthropicProvider / AsyncAnthropicProvider through the real anthropic SDK over HTTP.

The emulator's Anthropic flavour answers most tests; what it never sends (cache reads
and writes, thinking blocks with signatures) comes from a canned local server. No SDK
method is patched. Cache-breakpoint placement is also checked as a pure function.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from windowguard.accounting.discovery import clear_discovery_cache
from windowguard.core.exceptions import ConfigurationError, ProviderError
from windowguard.core.failures import FailureKind
from windowguard.emulator import Emulator, EmulatorRequest, Fault, FaultPlan, Reply
from windowguard.run.providers import AnthropicProvider, AsyncAnthropicProvider
from windowguard.run.providers._cache_control import MAX_BREAKPOINTS, place_breakpoints
from windowguard.run.providers.anthropic import thinking_budget_for
from windowguard.run.providers.base import (
    AsyncProvider,
    ModelRequest,
    ModelResponse,
    Provider,
    StreamDelta,
    ToolResult,
    ToolSpec,
)

TOOLS = (
    ToolSpec(
        name="read_file",
        description="Read a file.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    ),
    ToolSpec(
        name="grep",
        description="Search files.",
        parameters={
            "type": "object",
            "properties": {"pattern": {"type": "string"}},
            "required": ["pattern"],
        },
    ),
)
SYSTEM = "You are a careful coding agent."
TASK: list[dict[str, Any]] = [{"role": "user", "content": "Find the bug in the parser."}]
EPHEMERAL = {"type": "ephemeral"}


@pytest.fixture(autouse=True)
def _fresh_discovery() -> Iterator[None]:
    clear_discovery_cache()
    yield
    clear_discovery_cache()


class Recorder:
    """An emulator policy that keeps every request body and answers like the agent."""

    def __init__(self, iterations: int = 1) -> None:
        self.bodies: list[Mapping[str, Any]] = []
        self.iterations = iterations

    def __call__(self, request: EmulatorRequest) -> Reply:
        from windowguard.emulator import CodingAgent

        self.bodies.append(copy.deepcopy(dict(request.body)))
        return CodingAgent(iterations=self.iterations)(request)


def provider_for(emu: Emulator, **options: Any) -> Any:
    options.setdefault("discover", False)
    return AnthropicProvider("claude-x", base_url=emu.root_url, api_key="k", **options)


def drain(items: Iterator[StreamDelta | ModelResponse]) -> tuple[str, ModelResponse]:
    pieces: list[str] = []
    final: list[ModelResponse] = []
    for item in items:
        if isinstance(item, StreamDelta):
            assert not final
            pieces.append(item.text)
        else:
            final.append(item)
    assert len(final) == 1
    return "".join(pieces), final[0]


def exchange(provider: Any, stream: bool = False) -> tuple[list[ModelResponse], list[Any]]:
    messages: list[Any] = copy.deepcopy(TASK)
    responses = []
    for _ in range(2):
        request = ModelRequest(messages=messages, tools=TOOLS, max_tokens=512, system=SYSTEM)
        response = drain(provider.stream(request))[1] if stream else provider.complete(request)
        responses.append(response)
        messages.append(response.message)
        messages += provider.tool_result_messages(
            [ToolResult(call_id=c.id, name=c.name, content="ok") for c in response.tool_calls]
        )
    return responses, messages


def marks(value: Any) -> int:
    if isinstance(value, Mapping):
        return (1 if "cache_control" in value else 0) + sum(marks(v) for v in value.values())
    if isinstance(value, list):
        return sum(marks(v) for v in value)
    return 0


# --------------------------------------------------------------------------- exchanges


@pytest.mark.parametrize("stream", [False, True])
def test_tool_calling_exchange_with_exact_usage_and_cache_breakpoints(stream: bool) -> None:
    recorder = Recorder()
    with (
        Emulator(flavor="anthropic", context_window=8192, scenario=recorder) as emu,
        provider_for(emu) as provider,
    ):
        assert isinstance(provider, Provider)
        (first, second), transcript = exchange(provider, stream=stream)
        records = emu.records
    assert first.stop_reason == "tool_use" and first.tool_calls
    blocks = first.message["content"]
    assert [b["id"] for b in blocks if b["type"] == "tool_use"] == [c.id for c in first.tool_calls]
    assert all(json.loads(c.arguments) for c in first.tool_calls)
    assert second.stop_reason == "end_turn" and second.text.startswith("Done. I made 1 rounds")
    for response, record in zip((first, second), records, strict=True):
        assert response.usage is not None
        assert response.usage.input_tokens == record.prompt_tokens
        assert response.usage.output_tokens == record.completion_tokens
    # the caller's transcript carries no marks: they were placed on copies
    assert marks(transcript) == 0
    assert transcript[0] == TASK[0]
    one, two = recorder.bodies
    assert one["system"] == [{"type": "text", "text": SYSTEM, "cache_control": EPHEMERAL}]
    assert one["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    assert marks(one) == 2  # system + the only (head) message
    # second send: system, the head (task) and the newest message
    assert two["messages"][0]["content"][-1]["cache_control"] == EPHEMERAL
    assert two["messages"][-1]["content"][-1]["type"] == "tool_result"
    assert two["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    assert marks(two) == 3
    assert two["tools"][0] == {
        "name": "read_file",
        "description": "Read a file.",
        "input_schema": dict(TOOLS[0].parameters),
    }
    assert two["max_tokens"] == 512


def test_streamed_and_whole_answers_agree() -> None:
    with (
        Emulator(flavor="anthropic", context_window=8192, scenario="coding-agent:1") as emu,
        provider_for(emu) as provider,
    ):
        whole, _ = exchange(provider)
        streamed, _ = exchange(provider, stream=True)
        text, final = drain(provider.stream(ModelRequest(messages=TASK, max_tokens=300)))
    assert streamed == whole
    assert text == final.text != ""


def test_async_provider_matches_the_sync_one() -> None:
    with Emulator(flavor="anthropic", context_window=8192, scenario="coding-agent:1") as emu:
        with provider_for(emu) as provider:
            expected, _ = exchange(provider)
            _, expected_stream = drain(provider.stream(ModelRequest(messages=TASK, tools=TOOLS)))

        async def run() -> tuple[list[ModelResponse], ModelResponse]:
            async with AsyncAnthropicProvider(
                "claude-x", base_url=emu.root_url, api_key="k", discover=False
            ) as aprovider:
                assert isinstance(aprovider, AsyncProvider)
                messages: list[Any] = copy.deepcopy(TASK)
                got = []
                for _ in range(2):
                    request = ModelRequest(
                        messages=messages, tools=TOOLS, max_tokens=512, system=SYSTEM
                    )
                    response = await aprovider.complete(request)
                    got.append(response)
                    messages.append(response.message)
                    messages += aprovider.tool_result_messages(
                        [
                            ToolResult(call_id=c.id, name=c.name, content="ok")
                            for c in response.tool_calls
                        ]
                    )
                items = [
                    item
                    async for item in aprovider.stream(ModelRequest(messages=TASK, tools=TOOLS))
                ]
                return got, drain(iter(items))[1]

        got, streamed = asyncio.run(run())
    assert got == expected
    assert streamed == expected_stream


def test_prompt_caching_can_be_turned_off() -> None:
    recorder = Recorder()
    with (
        Emulator(flavor="anthropic", context_window=8192, scenario=recorder) as emu,
        provider_for(emu, prompt_caching=False) as provider,
    ):
        exchange(provider)
    assert all(marks(body) == 0 for body in recorder.bodies)
    assert recorder.bodies[0]["system"] == SYSTEM


# --------------------------------------------------------------------------- max_tokens, thinking


def test_max_tokens_defaults_to_the_models_output_cap_and_thinking_stays_below_it() -> None:
    recorder = Recorder(iterations=0)
    with (
        Emulator(
            flavor="anthropic",
            context_window=16_384,
            max_output_tokens=3000,
            model="claude-x",
            scenario=recorder,
        ) as emu,
        AnthropicProvider(
            "claude-x", base_url=emu.root_url, api_key="k", thinking_budget=8000
        ) as provider,
    ):
        assert provider.model_info().max_output_tokens == 3000  # discovered
        provider.complete(ModelRequest(messages=TASK))  # max_tokens: the model's cap
        provider.complete(ModelRequest(messages=TASK, max_tokens=2000))  # shrunk
        drain(provider.stream(ModelRequest(messages=TASK, max_tokens=1025)))
        provider.complete(ModelRequest(messages=TASK, max_tokens=1024))  # too small
    capped, shrunk, smallest, too_small = recorder.bodies
    assert capped["max_tokens"] == 3000
    assert capped["thinking"] == {"type": "enabled", "budget_tokens": 2999}
    assert shrunk["thinking"]["budget_tokens"] == 1999 < shrunk["max_tokens"]
    assert smallest["thinking"]["budget_tokens"] == 1024 < smallest["max_tokens"] == 1025
    assert "thinking" not in too_small and too_small["max_tokens"] == 1024


@settings(deadline=None)
@given(st.integers(1024, 200_000), st.integers(1, 200_000))
def test_thinking_budget_is_always_valid_for_the_request(budget: int, max_tokens: int) -> None:
    fitted = thinking_budget_for(budget, max_tokens)
    if max_tokens > 1024:
        assert fitted is not None
        assert 1024 <= fitted < max_tokens
        assert fitted <= budget
    else:
        assert fitted is None


def test_configuration_errors() -> None:
    url = "http://127.0.0.1:9"
    with pytest.raises(ConfigurationError, match="thinking_budget"):
        AnthropicProvider("claude-x", base_url=url, thinking_budget=512)
    with pytest.raises(ConfigurationError, match="thinking_budget="):
        AnthropicProvider("claude-x", base_url=url, params={"thinking": {"type": "enabled"}})
    with pytest.raises(ConfigurationError, match="system"):
        AnthropicProvider("claude-x", base_url=url, params={"system": "x"})


# --------------------------------------------------------------------------- failures


def test_overflow_is_context_overflow_with_the_stated_numbers() -> None:
    big = [{"role": "user", "content": "lorem ipsum dolor " * 800}]
    with (
        Emulator(flavor="anthropic", context_window=2048) as emu,
        provider_for(emu) as provider,
    ):
        with pytest.raises(ProviderError) as caught:
            provider.complete(ModelRequest(messages=big, max_tokens=100))
        with pytest.raises(ProviderError) as caught_stream:
            drain(provider.stream(ModelRequest(messages=big, max_tokens=100)))
        counted = provider.client.messages.count_tokens(model="claude-x", messages=big)
    for failure in (caught.value.failure, caught_stream.value.failure):
        assert failure.kind is FailureKind.CONTEXT_OVERFLOW
        assert failure.status == 400 and not failure.retryable
        assert failure.context_window == 2048
        assert failure.prompt_tokens == counted.input_tokens > 2048
    assert isinstance(caught.value.__cause__, Exception)


def test_rate_limit_retry_after_and_no_sdk_retries() -> None:
    plan = FaultPlan.at({1: Fault(status=429, retry_after_seconds=3.0), 2: 529})
    with (
        Emulator(flavor="anthropic", context_window=8192, faults=plan) as emu,
        provider_for(emu) as provider,
    ):
        with pytest.raises(ProviderError) as limited:
            provider.complete(ModelRequest(messages=TASK))
        with pytest.raises(ProviderError) as overloaded:
            drain(provider.stream(ModelRequest(messages=TASK)))
        assert len(emu.records) == 2
    assert limited.value.failure.kind is FailureKind.RATE_LIMIT
    assert limited.value.failure.retry_after == pytest.approx(3.0)
    assert overloaded.value.failure.kind is FailureKind.OVERLOADED
    assert overloaded.value.failure.retryable


def test_wrong_key_is_auth_in_the_async_provider_too() -> None:
    with Emulator(flavor="anthropic", context_window=8192, api_key="right") as emu:

        async def run() -> ProviderError:
            async with AsyncAnthropicProvider(
                "claude-x", base_url=emu.root_url, api_key="wrong", discover=False
            ) as provider:
                with pytest.raises(ProviderError) as caught:
                    await provider.complete(ModelRequest(messages=TASK, max_tokens=10))
                return caught.value

        error = asyncio.run(run())
    assert error.failure.kind is FailureKind.AUTH
    assert error.failure.status == 401


def test_model_info_is_discovered_from_the_models_api() -> None:
    with Emulator(
        flavor="anthropic", context_window=50_000, max_output_tokens=8000, model="claude-x"
    ) as emu:
        with AnthropicProvider("claude-x", base_url=emu.root_url, api_key="k") as provider:
            info = provider.model_info()

        async def run() -> Any:
            async with AsyncAnthropicProvider(
                "claude-x", base_url=emu.root_url, api_key="k"
            ) as aprovider:
                return await aprovider.amodel_info()

        ainfo = asyncio.run(run())
    assert info.context_window == 50_000 and info.max_output_tokens == 8000
    assert info.source == "discovered"
    assert ainfo == info


def test_tool_result_and_user_messages() -> None:
    with AnthropicProvider("claude-x", base_url="http://127.0.0.1:9", discover=False) as p:
        results = [
            ToolResult(call_id="a", name="x", content="1"),
            ToolResult(call_id="b", name="y", content="boom", is_error=True),
        ]
        assert p.tool_result_messages(results) == [
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": "1", "is_error": False},
                    {
                        "type": "tool_result",
                        "tool_use_id": "b",
                        "content": "boom",
                        "is_error": True,
                    },
                ],
            }
        ]
        assert p.tool_result_messages([]) == []
        assert p.user_message("go") == {"role": "user", "content": "go"}
        assert p.format == "anthropic"


# --------------------------------------------------------------------------- canned server


class Canned:
    """A local server answering every POST with one canned body; keeps request bodies."""

    def __init__(self, body: bytes, content_type: str) -> None:
        answer, kind = body, content_type
        self.bodies: list[Any] = []
        bodies = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                bodies.append(json.loads(raw))
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Canned:
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __exit__(self, *exc_info: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


THINKING = {
    "type": "thinking",
    "thinking": "The parser drops a token.",
    "signature": "c2lnbmF0dXJl",
}
REDACTED = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}
TOOL_USE = {"type": "tool_use", "id": "toolu_9", "name": "read_file", "input": {"path": "p.py"}}


def test_thinking_blocks_signatures_and_cache_usage_are_kept_verbatim() -> None:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [THINKING, REDACTED, {"type": "text", "text": "Reading."}, TOOL_USE],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 20,
            "cache_creation_input_tokens": 1500,
            "cache_read_input_tokens": 3000,
            "output_tokens": 70,
        },
    }
    with (
        Canned(json.dumps(message).encode(), "application/json") as server,
        AnthropicProvider("claude-x", base_url=server.url, discover=False) as provider,
    ):
        response = provider.complete(ModelRequest(messages=TASK, tools=TOOLS, max_tokens=100))
    assert response.message == {"role": "assistant", "content": message["content"]}
    assert response.text == "Reading."
    assert response.tool_calls[0].id == "toolu_9"
    assert json.loads(response.tool_calls[0].arguments) == {"path": "p.py"}
    assert response.usage is not None
    assert response.usage.input_tokens == 20 + 1500 + 3000
    assert response.usage.cache_write_tokens == 1500
    assert response.usage.cache_read_tokens == 3000
    assert response.usage.output_tokens == 70


def sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def test_streamed_thinking_tool_arguments_and_cache_usage_are_assembled() -> None:
    start = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 12,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 4000,
            "output_tokens": 1,
        },
    }
    events = [
        {"type": "message_start", "message": start},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "The parser "},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "drops a token."},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "c2lnbmF0dXJl"},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "text_delta", "text": "Read"},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "text_delta", "text": "ing."},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_9",
                "name": "read_file",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"pa'},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": 'th": "p.py"}'},
        },
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 70},
        },
        {"type": "message_stop"},
    ]
    with (
        Canned(b"".join(sse(e) for e in events), "text/event-stream") as server,
        AnthropicProvider("claude-x", base_url=server.url, discover=False) as provider,
    ):
        deltas = list(provider.stream(ModelRequest(messages=TASK, tools=TOOLS, max_tokens=100)))
    assert [d.text for d in deltas if isinstance(d, StreamDelta)] == ["Read", "ing."]
    _, response = drain(iter(deltas))
    assert response.message == {
        "role": "assistant",
        "content": [THINKING, {"type": "text", "text": "Reading."}, TOOL_USE],
    }
    assert response.tool_calls[0].arguments == '{"path": "p.py"}'
    assert response.stop_reason == "tool_use"
    assert response.usage is not None
    assert response.usage.input_tokens == 4012
    assert response.usage.cache_read_tokens == 4000
    assert response.usage.output_tokens == 70


def test_a_stream_closed_before_its_stop_reason_is_an_incomplete_answer() -> None:
    start = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 1},
    }
    text_cut = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "fi"}},
    ]
    tool_cut = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": TOOL_USE | {"input": {}}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"pa'},
        },
    ]
    for events, says in ((text_cut, "2 characters of text"), (tool_cut, "1 tool call(s)")):
        seen: list[Any] = []
        with (
            Canned(b"".join(sse(e) for e in events), "text/event-stream") as server,
            AnthropicProvider("claude-x", base_url=server.url, discover=False) as provider,
            pytest.raises(ProviderError) as caught,
        ):
            seen.extend(provider.stream(ModelRequest(messages=TASK, tools=TOOLS, max_tokens=9)))
        failure = caught.value.failure
        assert failure.kind is FailureKind.MALFORMED_RESPONSE and failure.retryable
        assert "without a stop_reason" in failure.message and says in failure.message
        assert not any(isinstance(item, ModelResponse) for item in seen)


def test_a_message_with_null_content_or_no_stop_reason_is_malformed() -> None:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": None,
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    cases = (
        (message, "content is None"),
        (message | {"content": [], "stop_reason": None}, "no stop_reason"),
        (message | {"content": [None]}, "not a typed object"),
    )
    for body, says in cases:

        async def run(url: str) -> None:
            async with AsyncAnthropicProvider("claude-x", base_url=url, discover=False) as p:
                await p.complete(ModelRequest(messages=TASK, max_tokens=9))

        with (
            Canned(json.dumps(body).encode(), "application/json") as server,
            pytest.raises(ProviderError) as caught,
        ):
            asyncio.run(run(server.url))
        assert caught.value.failure.kind is FailureKind.MALFORMED_RESPONSE
        assert says in caught.value.failure.message


# --------------------------------------------------------------------------- placement


def test_existing_marks_count_toward_the_limit_and_are_left_alone() -> None:
    marked_by_caller = {"type": "ephemeral", "ttl": "1h"}
    messages: list[Any] = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "a", "cache_control": marked_by_caller}],
        },
        {"role": "assistant", "content": "b"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "c", "cache_control": marked_by_caller}],
        },
        {"role": "assistant", "content": "d"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "e", "cache_control": marked_by_caller}],
        },
    ]
    before = copy.deepcopy(messages)
    system, out = place_breakpoints("sys", messages)
    assert messages == before
    assert out[-1] is messages[-1]  # already marked: passed through, ttl kept
    assert marks(out) + marks(system) <= MAX_BREAKPOINTS
    assert system == [{"type": "text", "text": "sys", "cache_control": EPHEMERAL}]


def test_thinking_and_empty_blocks_are_never_marked() -> None:
    messages: list[Any] = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": [{"type": "text", "text": "x"}, dict(THINKING)]},
    ]
    _, out = place_breakpoints(None, messages)
    assert out[-1]["content"][0]["cache_control"] == EPHEMERAL
    assert "cache_control" not in out[-1]["content"][1]
    _, out = place_breakpoints("", [{"role": "user", "content": ""}])
    assert marks(out) == 0


_text = st.text(min_size=0, max_size=5)
_block = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, _text),
    st.just(dict(THINKING)),
    st.builds(lambda t: {"type": "tool_result", "tool_use_id": "x", "content": t}, _text),
)
_content = st.one_of(_text, st.lists(_block, max_size=3))
_message = st.builds(
    lambda role, content: {"role": role, "content": content},
    st.sampled_from(["user", "assistant"]),
    _content,
)


@settings(deadline=None)
@given(
    st.one_of(st.none(), _text, st.lists(st.builds(lambda t: {"type": "text", "text": t}, _text))),
    st.lists(_message, max_size=8),
)
def test_placement_invariants(system: Any, messages: list[Any]) -> None:
    before_system, before = copy.deepcopy(system), copy.deepcopy(messages)
    new_system, out = place_breakpoints(system, messages)
    assert messages == before and system == before_system  # never mutated
    assert marks(out) + marks(new_system) <= MAX_BREAKPOINTS
    assert place_breakpoints(system, messages) == (new_system, out)  # deterministic
    assert len(out) == len(messages)
    for original, sent in zip(messages, out, strict=True):
        assert sent is original or marks(sent) == 1
        assert sent["role"] == original["role"]
        assert _plain(sent["content"]) == _plain(original["content"])
    assert _plain(new_system) == _plain(system)
    if out and isinstance(out[-1]["content"], str) and out[-1]["content"]:
        raise AssertionError("a non-empty last message was left unmarked")


def _plain(content: Any) -> Any:
    """Content with marks removed and a lone string as its text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else content
    if isinstance(content, list):
        return [{k: v for k, v in block.items() if k != "cache_control"} for block in content]
    return content
