"""The emulator's OpenAI-compatible flavours, driven by the official openai SDK over HTTP."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.exact_tokenizers import require
from windowguard.accounting.counters import TokenCounter
from windowguard.accounting.templates import count_prompt
from windowguard.core.exceptions import ConfigurationError
from windowguard.core.failures import FailureKind, classify_failure
from windowguard.emulator import Emulator, EmulatorRequest, Reply

FLAVORS = ("openai", "vllm", "llamacpp")
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file from the repository.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_shell",
            "description": "Run a shell command.",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "mode": {"type": "string", "enum": ["fast", "full"]},
                },
                "required": ["command", "mode"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the code.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    },
]
TASK: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a careful coding agent."},
    {"role": "user", "content": "The parser drops the last line of every file; fix it."},
]


@pytest.fixture(scope="module")
def o200k() -> TokenCounter:
    return require("o200k")


_OPEN: list[openai.OpenAI] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def client(emu: Emulator, **kwargs: Any) -> openai.OpenAI:
    """An SDK client (no retries) closed after the test."""
    sdk = openai.OpenAI(base_url=emu.base_url, api_key="sk-test", max_retries=0, **kwargs)
    _OPEN.append(sdk)
    return sdk


def long_text(policy_words: int) -> Any:
    def policy(request: EmulatorRequest) -> Reply:
        return Reply(text=" ".join(f"word{i}" for i in range(policy_words)))

    return policy


@pytest.mark.parametrize("flavor", FLAVORS)
def test_usage_is_the_exact_template_count(flavor: str, o200k: TokenCounter) -> None:
    with Emulator(flavor=flavor, context_window=8192, tokenizer=o200k) as emu:
        response = client(emu).chat.completions.create(
            model="m", messages=TASK, tools=TOOLS, max_tokens=500
        )
    assert response.usage is not None
    assert response.usage.prompt_tokens == count_prompt(o200k, TASK, TOOLS, template="openai")
    calls = response.choices[0].message.tool_calls or []
    assert 1 <= len(calls) <= 3
    assert response.choices[0].finish_reason == "tool_calls"
    completion = sum(
        o200k.count(call.function.name) + o200k.count(call.function.arguments)  # type: ignore[union-attr]
        for call in calls
    )
    assert response.usage.completion_tokens == completion
    assert response.usage.total_tokens == response.usage.prompt_tokens + completion


@pytest.mark.parametrize("flavor", FLAVORS)
def test_stream_assembles_the_same_reply_and_ends_with_usage(
    flavor: str, o200k: TokenCounter
) -> None:
    with Emulator(flavor=flavor, context_window=8192, tokenizer=o200k, seed=3) as emu:
        sdk = client(emu)
        whole = sdk.chat.completions.create(model="m", messages=TASK, tools=TOOLS)
        chunks = list(
            sdk.chat.completions.create(
                model="m",
                messages=TASK,
                tools=TOOLS,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    assert chunks[-1].choices == []
    assert chunks[-1].usage == whole.usage
    assert all(chunk.usage is None for chunk in chunks[:-1])
    arguments: dict[int, str] = {}
    names: dict[int, str] = {}
    for chunk in chunks[:-1]:
        for call in chunk.choices[0].delta.tool_calls or []:
            arguments[call.index] = arguments.get(call.index, "") + (
                call.function.arguments or "" if call.function else ""
            )
            if call.function and call.function.name:
                names[call.index] = call.function.name
    expected = whole.choices[0].message.tool_calls or []
    assert [names[i] for i in sorted(names)] == [c.function.name for c in expected]  # type: ignore[union-attr]
    assert [arguments[i] for i in sorted(arguments)] == [c.function.arguments for c in expected]  # type: ignore[union-attr]
    assert chunks[-2].choices[0].finish_reason == "tool_calls"


def raw_post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> bytes:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", **(headers or {})},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return bytes(response.read())


def test_raw_stream_ends_with_done_and_no_usage_without_the_option(o200k: TokenCounter) -> None:
    with Emulator(flavor="vllm", context_window=4096, tokenizer=o200k, scenario="echo") as emu:
        raw = raw_post(
            f"{emu.base_url}/chat/completions",
            {
                "model": "m",
                "messages": [{"role": "user", "content": "hello there"}],
                "stream": True,
            },
        )
    events = [line for line in raw.decode().split("\n\n") if line]
    assert events[-1] == "data: [DONE]"
    payloads = [json.loads(event.removeprefix("data: ")) for event in events[:-1]]
    assert all("usage" not in payload for payload in payloads)
    text = "".join(p["choices"][0]["delta"].get("content") or "" for p in payloads)
    assert text == "hello there"


def test_async_client_streams_and_counts(o200k: TokenCounter) -> None:
    async def run(emu: Emulator) -> tuple[str, int]:
        sdk = openai.AsyncOpenAI(base_url=emu.base_url, api_key="k", max_retries=0)
        stream = await sdk.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "echo me back"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        text, prompt_tokens = "", -1
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
            if chunk.usage:
                prompt_tokens = chunk.usage.prompt_tokens
        await sdk.close()
        return text, prompt_tokens

    with Emulator(flavor="openai", context_window=4096, tokenizer=o200k, scenario="echo") as emu:
        text, prompt_tokens = asyncio.run(run(emu))
    assert text == "echo me back"
    messages = [{"role": "user", "content": "echo me back"}]
    assert prompt_tokens == count_prompt(o200k, messages, template="openai")


def overflow_messages(o200k: TokenCounter, tokens: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "lorem " * tokens}]


@pytest.mark.parametrize(
    ("flavor", "max_tokens"),
    [("openai", 1000), ("openai", None), ("vllm", 1000), ("vllm", None), ("llamacpp", None)],
)
def test_overflow_is_the_sdks_error_and_classifies(
    flavor: str, max_tokens: int | None, o200k: TokenCounter
) -> None:
    messages = overflow_messages(o200k, 3500)
    prompt = count_prompt(o200k, messages, template="openai")
    window = prompt + 500 if max_tokens else prompt - 10
    kwargs: dict[str, Any] = {"max_tokens": max_tokens} if max_tokens else {}
    with Emulator(flavor=flavor, context_window=window, tokenizer=o200k) as emu:
        with pytest.raises(openai.BadRequestError) as caught:
            client(emu).chat.completions.create(model="m", messages=messages, **kwargs)
        assert emu.records[-1].status == 400
    failure = classify_failure(caught.value)
    assert failure.kind is FailureKind.CONTEXT_OVERFLOW
    assert failure.context_window == window
    assert not failure.retryable
    if failure.prompt_tokens_is_lower_bound:
        assert failure.prompt_tokens is not None
        assert failure.prompt_tokens <= prompt
    else:
        assert failure.prompt_tokens == prompt


def test_openai_output_cap_is_an_output_limit_error(o200k: TokenCounter) -> None:
    with (
        Emulator(
            flavor="openai", context_window=8192, max_output_tokens=1024, tokenizer=o200k
        ) as emu,
        pytest.raises(openai.BadRequestError) as caught,
    ):
        client(emu).chat.completions.create(model="m", messages=TASK, max_tokens=2048)
    failure = classify_failure(caught.value)
    assert failure.kind is FailureKind.OUTPUT_LIMIT
    assert failure.requested_output == 2048


@pytest.mark.parametrize("flavor", ["vllm", "llamacpp"])
def test_silent_lowering_cuts_the_reply_at_the_window(flavor: str, o200k: TokenCounter) -> None:
    messages = [{"role": "user", "content": "write a lot"}]
    prompt = count_prompt(o200k, messages, template="openai")
    with Emulator(
        flavor=flavor, context_window=prompt + 40, tokenizer=o200k, scenario=long_text(300)
    ) as emu:
        response = client(emu).chat.completions.create(model="m", messages=messages)
    assert response.choices[0].finish_reason == "length"
    assert response.usage is not None
    assert response.usage.completion_tokens == 40
    assert o200k.count(response.choices[0].message.content or "") == 40


def test_openai_reply_is_cut_at_max_tokens(o200k: TokenCounter) -> None:
    with Emulator(
        flavor="openai", context_window=8192, tokenizer=o200k, scenario=long_text(300)
    ) as emu:
        response = client(emu).chat.completions.create(model="m", messages=TASK, max_tokens=25)
    assert response.choices[0].finish_reason == "length"
    assert response.usage is not None
    assert response.usage.completion_tokens <= 25


@pytest.mark.parametrize("flavor", FLAVORS)
def test_wrong_key_is_401_and_classifies_as_auth(flavor: str, o200k: TokenCounter) -> None:
    with Emulator(flavor=flavor, tokenizer=o200k, api_key="right") as emu:
        sdk = openai.OpenAI(base_url=emu.base_url, api_key="wrong", max_retries=0)
        _OPEN.append(sdk)
        with pytest.raises(openai.AuthenticationError) as caught:
            sdk.chat.completions.create(model="m", messages=TASK)
        ok = openai.OpenAI(base_url=emu.base_url, api_key="right", max_retries=0)
        _OPEN.append(ok)
        assert ok.chat.completions.create(model="m", messages=TASK).choices
    assert classify_failure(caught.value).kind is FailureKind.AUTH


def test_scheduled_faults_fail_exactly_those_calls(o200k: TokenCounter) -> None:
    with Emulator(flavor="vllm", tokenizer=o200k, faults="2,3:429@7;5:500") as emu:
        sdk = client(emu)
        outcomes: list[Any] = []
        for _ in range(5):
            try:
                sdk.chat.completions.create(model="m", messages=TASK)
                outcomes.append("ok")
            except openai.APIStatusError as exc:
                outcomes.append(exc)
        statuses = [record.status for record in emu.records]
    assert statuses == [200, 429, 429, 200, 500]
    assert isinstance(outcomes[1], openai.RateLimitError)
    assert outcomes[1].response.headers["retry-after"] == "7"
    rate = classify_failure(outcomes[1])
    assert rate.kind is FailureKind.RATE_LIMIT
    assert rate.retryable
    assert rate.retry_after == pytest.approx(7.0)
    assert isinstance(outcomes[4], openai.InternalServerError)
    assert classify_failure(outcomes[4]).kind is FailureKind.SERVER


def test_sdk_retries_through_a_429(o200k: TokenCounter) -> None:
    with Emulator(flavor="openai", tokenizer=o200k, faults="1:429@0") as emu:
        sdk = openai.OpenAI(base_url=emu.base_url, api_key="k", max_retries=2)
        _OPEN.append(sdk)
        response = sdk.chat.completions.create(model="m", messages=TASK)
        assert [record.status for record in emu.records] == [429, 200]
    assert response.choices


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        (
            [
                {"role": "user", "content": "x"},
                {"role": "tool", "tool_call_id": "c1", "content": "r"},
            ],
            "must be a response to a preceeding message with 'tool_calls'",
        ),
        ([{"role": "wizard", "content": "x"}], "Invalid value: 'wizard'"),
        (
            [
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "user", "content": "y"},
            ],
            "did not have response messages: c1",
        ),
    ],
)
@pytest.mark.parametrize("flavor", FLAVORS)
def test_malformed_requests_are_clear_400s(
    flavor: str, messages: list[dict[str, Any]], needle: str, o200k: TokenCounter
) -> None:
    with (
        Emulator(flavor=flavor, tokenizer=o200k) as emu,
        pytest.raises(openai.BadRequestError) as caught,
    ):
        client(emu).chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
    assert needle in caught.value.message
    assert classify_failure(caught.value).kind is FailureKind.INVALID_REQUEST


def test_missing_messages_is_a_400(o200k: TokenCounter) -> None:
    with (
        Emulator(flavor="openai", tokenizer=o200k) as emu,
        pytest.raises(urllib.error.HTTPError) as caught,
    ):
        raw_post(f"{emu.base_url}/chat/completions", {"model": "m"})
    body = json.loads(caught.value.read())
    caught.value.close()
    assert caught.value.code == 400
    assert body["error"]["message"] == "Missing required parameter: 'messages'."
    assert body["error"]["param"] == "messages"


def test_sixteen_threads_get_their_own_exact_counts(o200k: TokenCounter) -> None:
    results: dict[int, list[tuple[int, int]]] = {}
    errors: list[BaseException] = []

    def worker(index: int, emu: Emulator) -> None:
        try:
            sdk = client(emu)
            seen = []
            for round_ in range(4):
                messages = [
                    {"role": "user", "content": f"thread {index} round {round_} " * (index + 1)}
                ]
                response = sdk.chat.completions.create(model="m", messages=messages)
                assert response.usage is not None
                seen.append(
                    (response.usage.prompt_tokens, count_prompt(o200k, messages, template="openai"))
                )
            results[index] = seen
        except BaseException as exc:
            errors.append(exc)

    with Emulator(flavor="vllm", context_window=16_384, tokenizer=o200k, scenario="echo") as emu:
        threads = [threading.Thread(target=worker, args=(i, emu)) for i in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        numbers = [record.call_number for record in emu.records]
    assert errors == []
    assert sorted(numbers) == list(range(1, 65))
    for seen in results.values():
        assert all(reported == expected for reported, expected in seen)


@pytest.mark.parametrize("flavor", ["openai", "vllm", "llamacpp"])
def test_discovery_endpoints(flavor: str, o200k: TokenCounter) -> None:
    with Emulator(flavor=flavor, context_window=12_345, tokenizer=o200k, model="served") as emu:
        models = client(emu).models.list()
        assert [model.id for model in models.data] == ["served"]
        with urllib.request.urlopen(f"{emu.base_url}/models", timeout=5) as response:
            entry = json.loads(response.read())["data"][0]
        if flavor == "vllm":
            assert entry["max_model_len"] == 12_345
        if flavor == "llamacpp":
            assert entry["meta"]["n_ctx"] == 12_345
            with urllib.request.urlopen(f"{emu.root_url}/props", timeout=5) as response:
                props = json.loads(response.read())
            assert props["default_generation_settings"]["n_ctx"] == 12_345


@pytest.mark.parametrize("flavor", ["vllm", "llamacpp"])
@pytest.mark.parametrize("url_kind", ["base_url", "root_url"])
def test_discover_model_info_reads_the_window(
    flavor: str, url_kind: str, o200k: TokenCounter
) -> None:
    discovery = pytest.importorskip("windowguard.accounting.discovery")
    with Emulator(flavor=flavor, context_window=20_000, tokenizer=o200k, model="served") as emu:
        info = discovery.discover_model_info(getattr(emu, url_kind), "served")
    assert info is not None
    assert info.context_window == 20_000


def test_close_frees_the_port_and_drops_keepalive_connections(o200k: TokenCounter) -> None:
    emu = Emulator(flavor="openai", tokenizer=o200k).start()
    port = emu.port
    sdk = client(emu)
    sdk.chat.completions.create(model="m", messages=TASK)  # leaves a keep-alive connection
    emu.close()
    emu.close()  # idempotent
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))
    with pytest.raises(openai.APIConnectionError):
        sdk.chat.completions.create(model="m", messages=TASK)
    sdk.close()


def test_only_loopback(o200k: TokenCounter) -> None:
    with pytest.raises(ConfigurationError, match=r"127\.0\.0\.1 only"):
        Emulator(host="0.0.0.0", tokenizer=o200k)
    with Emulator(tokenizer=o200k) as emu:
        request = urllib.request.Request(f"{emu.base_url}/models", headers={"Host": "evil.example"})
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=5)
    caught.value.close()
    assert caught.value.code == 403


def run_agent(emu: Emulator, rounds: int = 10) -> list[dict[str, Any]]:
    """A minimal tool loop against the emulator: tool results echo the call."""
    sdk = client(emu)
    messages: list[dict[str, Any]] = list(TASK)
    for _ in range(rounds):
        message = (
            sdk.chat.completions.create(model="m", messages=messages, tools=TOOLS)
            .choices[0]
            .message
        )
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": f"result of {call.function.name}",
                }  # type: ignore[union-attr]
            )
    return messages


def test_coding_agent_is_deterministic_per_seed(o200k: TokenCounter) -> None:
    transcripts = []
    for seed in (7, 7, 8, 9):
        with Emulator(flavor="vllm", tokenizer=o200k, seed=seed, scenario="coding-agent:4") as emu:
            transcripts.append(run_agent(emu))
    assert transcripts[0] == transcripts[1]
    assert transcripts[0] != transcripts[2] or transcripts[0] != transcripts[3]
    transcript = transcripts[0]
    assistant = [m for m in transcript if m["role"] == "assistant"]
    assert len(assistant) == 5
    assert all(1 <= len(m["tool_calls"]) <= 3 for m in assistant[:4])
    assert "tool_calls" not in assistant[4]
    assert assistant[4]["content"]
    schemas = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}
    for message in assistant[:4]:
        for call in message["tool_calls"]:
            arguments = json.loads(call["function"]["arguments"])
            schema = schemas[call["function"]["name"]]
            assert set(schema["required"]) <= set(arguments)
            if "mode" in arguments:
                assert arguments["mode"] in ("fast", "full")


def test_parallel_calls_occur(o200k: TokenCounter) -> None:
    sizes = set()
    for seed in range(12):
        with Emulator(flavor="openai", tokenizer=o200k, seed=seed) as emu:
            message = (
                client(emu)
                .chat.completions.create(model="m", messages=TASK, tools=TOOLS)
                .choices[0]
                .message
            )
        sizes.add(len(message.tool_calls or []))
    assert sizes <= {1, 2, 3}
    assert len(sizes) > 1
