"""OpenAIChatProvider / AsyncOpenAIChatProvider through the real openai SDK over HTTP.

Every test talks to the emulator (or, where the emulator cannot say something, a canned
local server) on 127.0.0.1; no SDK method is patched.
"""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from windowguard.accounting.catalog import ModelInfo
from windowguard.accounting.discovery import clear_discovery_cache
from windowguard.accounting.templates import count_prompt
from windowguard.core.exceptions import ConfigurationError, ProviderError
from windowguard.core.failures import FailureKind
from windowguard.emulator import Emulator, EmulatorRequest, Fault, FaultPlan, Reply
from windowguard.run.providers import AsyncOpenAIChatProvider, OpenAIChatProvider
from windowguard.run.providers.base import (
    AsyncProvider,
    ModelRequest,
    ModelResponse,
    Provider,
    StreamDelta,
    ToolResult,
    ToolSpec,
)
from windowguard.run.providers.openai import uses_max_completion_tokens

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
TASK: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a careful coding agent."},
    {"role": "user", "content": "Find the bug in the parser."},
]
FLAVORS = ("openai", "vllm", "llamacpp")


@pytest.fixture(autouse=True)
def _fresh_discovery() -> Iterator[None]:
    clear_discovery_cache()
    yield
    clear_discovery_cache()


def sync_provider(emu: Emulator, model: str = "emulated-model", **options: Any) -> Any:
    options.setdefault("discover", False)
    return OpenAIChatProvider(model, base_url=emu.base_url, api_key="k", **options)


def async_provider(emu: Emulator, model: str = "emulated-model", **options: Any) -> Any:
    options.setdefault("discover", False)
    return AsyncOpenAIChatProvider(model, base_url=emu.base_url, api_key="k", **options)


def drain(items: Iterator[StreamDelta | ModelResponse]) -> tuple[str, ModelResponse]:
    pieces: list[str] = []
    final: list[ModelResponse] = []
    for item in items:
        if isinstance(item, StreamDelta):
            assert not final, "a delta came after the final response"
            pieces.append(item.text)
        else:
            final.append(item)
    assert len(final) == 1
    return "".join(pieces), final[0]


async def adrain(provider: Any, request: ModelRequest) -> tuple[str, ModelResponse]:
    items = [item async for item in provider.stream(request)]
    return drain(iter(items))


def run_exchange(send: Any, provider: Any) -> list[ModelResponse]:
    """Tool call, tool results back, final text: the loop's exchange, by hand."""
    messages = copy.deepcopy(TASK)
    responses = []
    for _ in range(2):
        response = send(ModelRequest(messages=messages, tools=TOOLS, max_tokens=256))
        responses.append(response)
        messages.append(response.message)
        results = [
            ToolResult(call_id=call.id, name=call.name, content=f"contents of {call.name}")
            for call in response.tool_calls
        ]
        messages.extend(provider.tool_result_messages(results))
    return responses


# --------------------------------------------------------------------------- exchanges


@pytest.mark.parametrize("flavor", FLAVORS)
def test_tool_calling_exchange_reports_the_servers_exact_usage(flavor: str) -> None:
    with (
        Emulator(flavor=flavor, context_window=8192, scenario="coding-agent:1") as emu,
        sync_provider(emu) as provider,
    ):
        assert isinstance(provider, Provider)
        first, second = run_exchange(provider.complete, provider)
        records = emu.records
    assert first.tool_calls and first.stop_reason == "tool_calls"
    assert [c["id"] for c in first.message["tool_calls"]] == [c.id for c in first.tool_calls]
    assert all(json.loads(call.arguments) for call in first.tool_calls)
    assert not second.tool_calls and second.text.startswith("Done. I made 1 rounds")
    assert second.message == {"role": "assistant", "content": second.text}
    for response, record in zip((first, second), records, strict=True):
        assert response.usage is not None
        assert response.usage.input_tokens == record.prompt_tokens
        assert response.usage.output_tokens == record.completion_tokens
    assert records[1].prompt_tokens is not None and records[0].prompt_tokens is not None
    assert records[1].prompt_tokens > records[0].prompt_tokens


@pytest.mark.parametrize("flavor", FLAVORS)
def test_stream_yields_text_then_one_response_equal_to_the_unstreamed_one(flavor: str) -> None:
    with (
        Emulator(flavor=flavor, context_window=8192, scenario="coding-agent:1") as emu,
        sync_provider(emu) as provider,
    ):
        request = ModelRequest(messages=TASK, tools=TOOLS, max_tokens=256)
        whole = provider.complete(request)
        _, streamed = drain(provider.stream(request))
        messages = [*TASK, whole.message]
        messages += provider.tool_result_messages(
            [ToolResult(call_id=c.id, name=c.name, content="ok") for c in whole.tool_calls]
        )
        final_request = ModelRequest(messages=messages, max_tokens=256)
        text, final = drain(provider.stream(final_request))
        final_whole = provider.complete(final_request)
    assert streamed.tool_calls == whole.tool_calls
    assert streamed.message == whole.message
    assert streamed.usage == whole.usage
    assert streamed.stop_reason == whole.stop_reason == "tool_calls"
    assert text == final.text == final_whole.text != ""
    assert final.usage == final_whole.usage
    assert final.stop_reason == "stop"


def test_async_provider_matches_the_sync_one() -> None:
    with (
        Emulator(flavor="vllm", context_window=8192, scenario="coding-agent:1") as emu,
        sync_provider(emu) as provider,
    ):
        expected = run_exchange(provider.complete, provider)
        request = ModelRequest(messages=TASK, tools=TOOLS, max_tokens=256)
        _, expected_streamed = drain(provider.stream(request))

        async def run() -> tuple[list[ModelResponse], ModelResponse]:
            async with async_provider(emu) as aprovider:
                assert isinstance(aprovider, AsyncProvider)
                results: list[ModelResponse] = []
                messages = copy.deepcopy(TASK)
                for _ in range(2):
                    response = await aprovider.complete(
                        ModelRequest(messages=messages, tools=TOOLS, max_tokens=256)
                    )
                    results.append(response)
                    messages.append(response.message)
                    messages += aprovider.tool_result_messages(
                        [
                            ToolResult(call_id=c.id, name=c.name, content=f"contents of {c.name}")
                            for c in response.tool_calls
                        ]
                    )
                _, streamed = await adrain(aprovider, request)
                return results, streamed

        got, streamed = asyncio.run(run())
    assert got == expected
    assert streamed == expected_streamed


def test_caller_messages_are_not_mutated() -> None:
    messages = copy.deepcopy(TASK)
    before = copy.deepcopy(messages)
    with Emulator(flavor="openai", context_window=8192) as emu, sync_provider(emu) as provider:
        provider.complete(ModelRequest(messages=messages, tools=TOOLS, max_tokens=64))
        drain(provider.stream(ModelRequest(messages=messages, tools=TOOLS, max_tokens=64)))
    assert messages == before


# --------------------------------------------------------------------------- failures


def test_overflow_is_context_overflow_with_the_stated_numbers() -> None:
    big = [*TASK, {"role": "user", "content": "lorem ipsum dolor " * 800}]
    with Emulator(flavor="openai", context_window=2048) as emu, sync_provider(emu) as provider:
        expected = count_prompt(emu.counter, big, None, template=emu.template)
        with pytest.raises(ProviderError) as caught:
            provider.complete(ModelRequest(messages=big, max_tokens=100))
        with pytest.raises(ProviderError) as caught_stream:
            drain(provider.stream(ModelRequest(messages=big, max_tokens=100)))
    for failure in (caught.value.failure, caught_stream.value.failure):
        assert failure.kind is FailureKind.CONTEXT_OVERFLOW
        assert not failure.retryable
        assert failure.status == 400
        assert failure.context_window == 2048
        assert failure.prompt_tokens == expected > 2048
    assert caught.value.__cause__ is not None  # raised from the SDK's exception


def test_overflow_by_the_reply_budget_states_the_requested_output() -> None:
    fits = [*TASK, {"role": "user", "content": "lorem ipsum dolor " * 400}]
    with Emulator(flavor="openai", context_window=2048) as emu, sync_provider(emu) as provider:
        expected = count_prompt(emu.counter, fits, None, template=emu.template)
        assert expected < 2048
        with pytest.raises(ProviderError) as caught:
            provider.complete(ModelRequest(messages=fits, max_tokens=2048 - expected + 1))
    failure = caught.value.failure
    assert failure.kind is FailureKind.CONTEXT_OVERFLOW
    assert failure.prompt_tokens == expected
    assert failure.requested_output == 2048 - expected + 1


def test_vllm_overflow_states_a_lower_bound() -> None:
    big = [{"role": "user", "content": "lorem ipsum dolor " * 800}]
    with (
        Emulator(flavor="vllm", context_window=2048) as emu,
        sync_provider(emu) as provider,
        pytest.raises(ProviderError) as caught,
    ):
        provider.complete(ModelRequest(messages=big, max_tokens=100))
    failure = caught.value.failure
    assert failure.kind is FailureKind.CONTEXT_OVERFLOW
    assert failure.context_window == 2048
    assert failure.prompt_tokens is not None and failure.prompt_tokens >= 2048 - 100


def test_rate_limit_carries_retry_after_and_the_sdk_does_not_retry() -> None:
    plan = FaultPlan.at({1: Fault(status=429, retry_after_seconds=2.5)})
    with (
        Emulator(flavor="openai", context_window=8192, faults=plan) as emu,
        sync_provider(emu) as provider,
    ):
        with pytest.raises(ProviderError) as caught:
            provider.complete(ModelRequest(messages=TASK, max_tokens=64))
        assert len(emu.records) == 1  # max_retries=0: the loop owns retries
        answered = provider.complete(ModelRequest(messages=TASK, max_tokens=64))
    failure = caught.value.failure
    assert failure.kind is FailureKind.RATE_LIMIT
    assert failure.retryable
    assert failure.retry_after == pytest.approx(2.5)
    assert answered.text


def test_server_error_is_retryable_and_async_maps_it_too() -> None:
    with Emulator(flavor="vllm", context_window=8192, faults={1: 503}) as emu:

        async def run() -> ProviderError:
            async with async_provider(emu) as provider:
                with pytest.raises(ProviderError) as caught:
                    await adrain(provider, ModelRequest(messages=TASK, max_tokens=64))
                return caught.value

        error = asyncio.run(run())
    assert error.failure.kind in (FailureKind.SERVER, FailureKind.OVERLOADED)
    assert error.failure.retryable


def test_wrong_key_is_auth() -> None:
    with (
        Emulator(flavor="openai", context_window=8192, api_key="right") as emu,
        OpenAIChatProvider(
            "emulated-model", base_url=emu.base_url, api_key="wrong", discover=False
        ) as provider,
        pytest.raises(ProviderError) as caught,
    ):
        provider.complete(ModelRequest(messages=TASK))
    assert caught.value.failure.kind is FailureKind.AUTH
    assert caught.value.failure.status == 401
    assert not caught.value.failure.retryable


def test_unreachable_server_is_a_connection_failure() -> None:
    with Emulator(flavor="openai") as emu:
        base_url = emu.base_url
    with (
        OpenAIChatProvider("m", base_url=base_url, api_key="k", discover=False) as provider,
        pytest.raises(ProviderError) as caught,
    ):
        provider.complete(ModelRequest(messages=TASK))
    assert caught.value.failure.kind in (FailureKind.CONNECTION, FailureKind.TIMEOUT)
    assert caught.value.failure.retryable


# --------------------------------------------------------------------------- model info


def test_model_info_is_discovered_from_vllm_max_model_len() -> None:
    with (
        Emulator(flavor="vllm", context_window=12_345, model="my-org/my-model") as emu,
        OpenAIChatProvider("my-org/my-model", base_url=emu.base_url) as provider,
    ):
        info = provider.model_info()
        assert provider.model_info() is info  # resolved once
        explicit = ModelInfo(context_window=4000)
        with OpenAIChatProvider(
            "my-org/my-model", base_url=emu.base_url, model_info=explicit
        ) as pinned:
            pinned_info = pinned.model_info()
    assert info.context_window == 12_345
    assert info.source == "discovered"
    assert info.origin is not None and "/v1/models" in info.origin
    assert pinned_info.context_window == 4000 and pinned_info.source == "explicit"


def test_async_model_info_discovers_without_blocking() -> None:
    with Emulator(flavor="llamacpp", context_window=3000, model="local") as emu:

        async def run() -> ModelInfo:
            async with AsyncOpenAIChatProvider("local", base_url=emu.base_url) as provider:
                return await provider.amodel_info()

        info = asyncio.run(run())
    assert info.context_window == 3000 and info.source == "discovered"


def test_no_discovery_for_the_default_endpoint_or_when_disabled() -> None:
    with (
        Emulator(flavor="vllm", context_window=12_345, model="gpt-4o") as emu,
        sync_provider(emu, "gpt-4o", discover=False) as provider,
    ):
        info = provider.model_info()
    assert info.source == "catalog"
    assert info.context_window == 128_000
    official = OpenAIChatProvider("gpt-4o", api_key="k")
    assert official._info._discover is False  # api.openai.com answers no window
    official.close()


# --------------------------------------------------------------------------- request shape


class Recorder:
    """An emulator policy that keeps every request body it is sent."""

    def __init__(self) -> None:
        self.bodies: list[Mapping[str, Any]] = []

    def __call__(self, request: EmulatorRequest) -> Reply:
        self.bodies.append(request.body)
        return Reply(text="ok")


@pytest.mark.parametrize(
    ("model", "param"),
    [
        ("o3-mini", "max_completion_tokens"),
        ("o1", "max_completion_tokens"),
        ("gpt-5-mini", "max_completion_tokens"),
        ("openai/o4-mini", "max_completion_tokens"),
        ("gpt-4o", "max_tokens"),
        ("Qwen/Qwen3-8B", "max_tokens"),
        ("omni-moderation", "max_tokens"),
    ],
)
def test_reasoning_models_get_max_completion_tokens(model: str, param: str) -> None:
    recorder = Recorder()
    with (
        Emulator(flavor="openai", context_window=8192, scenario=recorder) as emu,
        sync_provider(emu, model) as provider,
    ):
        provider.complete(ModelRequest(messages=TASK, tools=TOOLS, max_tokens=321))
        drain(provider.stream(ModelRequest(messages=TASK, max_tokens=123)))
    whole, streamed = recorder.bodies
    other = {"max_tokens", "max_completion_tokens"} - {param}
    assert whole[param] == 321 and not other & set(whole)
    assert streamed[param] == 123 and not other & set(streamed)
    assert streamed["stream"] is True
    assert streamed["stream_options"] == {"include_usage": True}
    assert [tool["function"]["name"] for tool in whole["tools"]] == ["read_file", "grep"]
    assert whole["tools"][0] == {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": dict(TOOLS[0].parameters),
        },
    }
    assert "tools" not in streamed
    assert uses_max_completion_tokens(model) is (param == "max_completion_tokens")


def test_params_and_extra_body_are_sent_and_max_tokens_none_is_omitted() -> None:
    recorder = Recorder()
    with (
        Emulator(flavor="vllm", context_window=8192, scenario=recorder) as emu,
        sync_provider(
            emu, params={"temperature": 0.25}, extra_body={"top_k": 7}, max_tokens_param=None
        ) as provider,
    ):
        provider.complete(ModelRequest(messages=TASK))
    (body,) = recorder.bodies
    assert body["temperature"] == 0.25 and body["top_k"] == 7
    assert "max_tokens" not in body and "max_completion_tokens" not in body


def test_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="max_tokens"):
        OpenAIChatProvider("m", base_url="http://127.0.0.1:9/v1", params={"max_tokens": 3})
    with pytest.raises(ConfigurationError, match="max_tokens_param"):
        OpenAIChatProvider("m", base_url="http://127.0.0.1:9/v1", max_tokens_param="tokens")
    with pytest.raises(ConfigurationError, match="model"):
        OpenAIChatProvider("", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigurationError, match="max_retries"):
        OpenAIChatProvider("m", base_url="http://127.0.0.1:9/v1", max_retries=-1)


def test_tool_result_and_user_messages() -> None:
    with OpenAIChatProvider("m", base_url="http://127.0.0.1:9/v1", discover=False) as provider:
        results = [
            ToolResult(call_id="a", name="x", content="1"),
            ToolResult(call_id="b", name="y", content="boom", is_error=True),
        ]
        assert provider.tool_result_messages(results) == [
            {"role": "tool", "tool_call_id": "a", "content": "1"},
            {"role": "tool", "tool_call_id": "b", "content": "boom"},
        ]
        assert provider.user_message("go on") == {"role": "user", "content": "go on"}
        assert provider.format == "openai_chat" and provider.model == "m"


# --------------------------------------------------------------------------- canned server


class Canned:
    """A local server answering every POST with one canned JSON body or SSE stream."""

    def __init__(self, body: bytes, content_type: str) -> None:
        answer, kind = body, content_type

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __exit__(self, *exc_info: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


def test_cached_tokens_and_reasoning_content_are_kept() -> None:
    completion = {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "deepseek-reasoner",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": "42",
                    "reasoning_content": "think think",
                },
            }
        ],
        "usage": {
            "prompt_tokens": 900,
            "completion_tokens": 5,
            "total_tokens": 905,
            "prompt_tokens_details": {"cached_tokens": 768},
        },
    }
    with (
        Canned(json.dumps(completion).encode(), "application/json") as base_url,
        OpenAIChatProvider("deepseek-reasoner", base_url=base_url, discover=False) as p,
    ):
        response = p.complete(ModelRequest(messages=TASK))
    assert response.message == {
        "role": "assistant",
        "content": "42",
        "reasoning_content": "think think",
    }
    assert response.usage is not None
    assert response.usage.input_tokens == 900
    assert response.usage.cache_read_tokens == 768
    assert response.usage.output_tokens == 5


def test_streamed_reasoning_and_split_tool_arguments_are_assembled() -> None:
    def chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> bytes:
        value = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            "usage": usage,
        }
        return b"data: " + json.dumps(value).encode() + b"\n\n"

    call = {"index": 0, "id": "call_1", "type": "function"}
    events = [
        chunk({"role": "assistant", "reasoning_content": "let me "}),
        chunk({"reasoning_content": "look"}),
        chunk({"content": "Reading."}),
        chunk({"tool_calls": [call | {"function": {"name": "read_file", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"pa'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'th": "a"}'}}]}),
        chunk({}, finish="tool_calls"),
        b"data: "
        + json.dumps(
            {
                "id": "c1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "m",
                "choices": [],
                "usage": {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59},
            }
        ).encode()
        + b"\n\n",
        b"data: [DONE]\n\n",
    ]
    with (
        Canned(b"".join(events), "text/event-stream") as base_url,
        OpenAIChatProvider("m", base_url=base_url, discover=False) as provider,
    ):
        text, response = drain(provider.stream(ModelRequest(messages=TASK, tools=TOOLS)))
    assert text == "Reading."
    assert response.message == {
        "role": "assistant",
        "content": "Reading.",
        "reasoning_content": "let me look",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a"}'},
            }
        ],
    }
    assert response.usage is not None and response.usage.input_tokens == 50
    assert response.stop_reason == "tool_calls"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    value = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(value).encode() + b"\n\n"


def test_a_stream_closed_before_its_finish_reason_is_an_incomplete_answer() -> None:
    # 1 of 3 text chunks, then a normal close: no finish_reason, no [DONE]. The text
    # already streamed stays streamed; no response is made of it.
    cut = _chunk({"role": "assistant", "content": "final "})
    with (
        Canned(cut, "text/event-stream") as base_url,
        OpenAIChatProvider("m", base_url=base_url, discover=False) as provider,
    ):
        seen: list[Any] = []
        with pytest.raises(ProviderError) as caught:
            seen.extend(provider.stream(ModelRequest(messages=TASK)))
    assert seen == [StreamDelta(text="final ")]
    failure = caught.value.failure
    assert failure.kind is FailureKind.MALFORMED_RESPONSE and failure.retryable
    assert failure.status == 200 and "without a finish_reason" in failure.message


def test_a_stream_cut_inside_tool_arguments_yields_no_tool_call() -> None:
    call = {"index": 0, "id": "call_1", "type": "function"}
    cut = _chunk({"tool_calls": [call | {"function": {"name": "read_file", "arguments": '{"pa'}}]})

    async def run(base_url: str) -> list[Any]:
        seen: list[Any] = []
        async with AsyncOpenAIChatProvider("m", base_url=base_url, discover=False) as provider:
            async for item in provider.stream(ModelRequest(messages=TASK, tools=TOOLS)):
                seen.append(item)
        return seen

    with Canned(cut, "text/event-stream") as base_url, pytest.raises(ProviderError) as caught:
        asyncio.run(run(base_url))
    assert caught.value.failure.kind is FailureKind.MALFORMED_RESPONSE
    assert "1 tool call(s)" in caught.value.failure.message


def test_a_completion_without_finish_reason_or_with_a_broken_shape_is_malformed() -> None:
    whole = {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "finish_reason": None, "message": {"role": "assistant", "content": "4"}}
        ],
    }
    for body, says in (
        (json.dumps(whole).encode(), "no finish_reason"),
        (b"{}", "no choices"),
        (b'{"choices": [{"message": null, "finish_reason": "stop"}]}', "holds no message"),
        (b'{"id": "c1", "choi', "JSONDecodeError"),
    ):
        with (
            Canned(body, "application/json") as base_url,
            OpenAIChatProvider("m", base_url=base_url, discover=False) as provider,
            pytest.raises(ProviderError) as caught,
        ):
            provider.complete(ModelRequest(messages=TASK))
        assert caught.value.failure.kind is FailureKind.MALFORMED_RESPONSE, body
        assert says in caught.value.failure.message
        assert isinstance(caught.value.__cause__, (ValueError, type(None)))


def test_a_bad_argument_is_not_taken_for_a_malformed_answer() -> None:
    # The body is read apart from the send: a mistake in the request raises as it is,
    # at once, instead of being retried as a broken answer.
    with (
        Canned(b"{}", "application/json") as base_url,
        OpenAIChatProvider(
            "m", base_url=base_url, discover=False, params={"no_such_argument": 1}
        ) as provider,
        pytest.raises(TypeError, match="no_such_argument"),
    ):
        provider.complete(ModelRequest(messages=TASK))


# --------------------------------------------------------------------------- imports


def test_importing_windowguard_imports_no_sdk() -> None:
    code = (
        "import sys, windowguard, windowguard.run.providers, windowguard.run.providers.base\n"
        "assert 'openai' not in sys.modules and 'anthropic' not in sys.modules, "
        "sorted(m for m in sys.modules if m in ('openai', 'anthropic'))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_sdk_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['openai'] = None\n"
        "try:\n"
        "    from windowguard.run.providers import OpenAIChatProvider\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    )
    assert 'pip install "windowguard[openai]"' in result.stdout
