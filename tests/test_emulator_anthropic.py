"""The emulator's Anthropic flavour, driven by the official anthropic SDK over HTTP."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from tests.exact_tokenizers import require
from windowguard.accounting.counters import TokenCounter
from windowguard.accounting.templates import count_prompt
from windowguard.core.failures import FailureKind, classify_failure
from windowguard.emulator import Emulator, EmulatorRequest, Reply

TOOLS: list[dict[str, Any]] = [
    {
        "name": "read_file",
        "description": "Read a file.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
    {
        "name": "grep",
        "description": "Search files.",
        "input_schema": {
            "type": "object",
            "properties": {"pattern": {"type": "string"}, "max_hits": {"type": "integer"}},
            "required": ["pattern"],
        },
    },
]
SYSTEM = "You are a careful coding agent."
MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "Find the bug in the parser."},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "p.py"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "def parse(): ..."}
        ],
    },
]
# The same request in OpenAI chat form: what the emulator renders through the template.
AS_CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "Find the bug in the parser."},
    {
        "role": "assistant",
        "content": "Reading it.",
        "tool_calls": [
            {
                "id": "toolu_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": "p.py"})},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "toolu_1", "content": "def parse(): ..."},
]
CHAT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": tool["name"],
            "description": tool["description"],
            "parameters": tool["input_schema"],
        },
    }
    for tool in TOOLS
]

_OPEN: list[anthropic.Anthropic] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


@pytest.fixture(scope="module")
def o200k() -> TokenCounter:
    return require("o200k")


def client(emu: Emulator, *, api_key: str = "k", max_retries: int = 0) -> anthropic.Anthropic:
    sdk = anthropic.Anthropic(base_url=emu.root_url, api_key=api_key, max_retries=max_retries)
    _OPEN.append(sdk)
    return sdk


def expected_input(o200k: TokenCounter) -> int:
    return count_prompt(o200k, AS_CHAT, CHAT_TOOLS, template="openai")


def test_usage_is_the_exact_count_of_the_converted_request(o200k: TokenCounter) -> None:
    with Emulator(flavor="anthropic", context_window=8192, tokenizer=o200k) as emu:
        message = client(emu).messages.create(
            model="claude-x", max_tokens=512, system=SYSTEM, messages=MESSAGES, tools=TOOLS
        )
    assert message.usage.input_tokens == expected_input(o200k)
    assert message.stop_reason == "tool_use"
    uses = [block for block in message.content if block.type == "tool_use"]
    assert 1 <= len(uses) <= 2
    assert all(block.id.startswith("toolu_") for block in uses)
    output = sum(o200k.count(b.name) + o200k.count(json.dumps(b.input)) for b in uses)
    assert message.usage.output_tokens == output


def test_count_tokens_endpoint_agrees(o200k: TokenCounter) -> None:
    with Emulator(flavor="anthropic", context_window=8192, tokenizer=o200k) as emu:
        counted = client(emu).messages.count_tokens(
            model="claude-x", system=SYSTEM, messages=MESSAGES, tools=TOOLS
        )
    assert counted.input_tokens == expected_input(o200k)


def test_stream_events_in_order_and_final_message_matches(o200k: TokenCounter) -> None:
    with Emulator(flavor="anthropic", context_window=8192, tokenizer=o200k, seed=5) as emu:
        sdk = client(emu)
        whole = sdk.messages.create(
            model="claude-x", max_tokens=512, system=SYSTEM, messages=MESSAGES, tools=TOOLS
        )
        with sdk.messages.stream(
            model="claude-x", max_tokens=512, system=SYSTEM, messages=MESSAGES, tools=TOOLS
        ) as stream:
            kinds = [event.type for event in stream]
            final = stream.get_final_message()
    assert final.content == whole.content
    assert final.usage.input_tokens == whole.usage.input_tokens
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert final.stop_reason == "tool_use"
    raw = [
        k
        for k in kinds
        if k
        in {
            "message_start",
            "content_block_start",
            "content_block_stop",
            "message_delta",
            "message_stop",
        }
    ]
    assert raw[0] == "message_start"
    assert raw[-2:] == ["message_delta", "message_stop"]
    assert raw.count("content_block_start") == raw.count("content_block_stop") == len(whole.content)


def test_raw_stream_wire_format(o200k: TokenCounter) -> None:
    with Emulator(flavor="anthropic", context_window=8192, tokenizer=o200k, scenario="echo") as emu:
        body = {
            "model": "claude-x",
            "max_tokens": 100,
            "stream": True,
            "messages": [{"role": "user", "content": "say it back"}],
        }
        request = urllib.request.Request(
            f"{emu.root_url}/v1/messages",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read().decode()
    events = [block.split("\n") for block in raw.strip().split("\n\n")]
    names = [lines[0].removeprefix("event: ") for lines in events]
    assert names == [
        "message_start",
        "ping",
        "content_block_start",
        *["content_block_delta"] * (len(names) - 6),
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    delta = json.loads(events[-2][1].removeprefix("data: "))
    assert delta["usage"]["output_tokens"] == o200k.count("say it back")
    assert delta["delta"]["stop_reason"] == "end_turn"


def test_async_client(o200k: TokenCounter) -> None:
    async def run(emu: Emulator) -> tuple[str, int]:
        sdk = anthropic.AsyncAnthropic(base_url=emu.root_url, api_key="k", max_retries=0)
        async with sdk.messages.stream(
            model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "ping pong"}]
        ) as stream:
            text = "".join([piece async for piece in stream.text_stream])
            final = await stream.get_final_message()
        await sdk.close()
        return text, final.usage.input_tokens

    with Emulator(flavor="anthropic", tokenizer=o200k, scenario="echo") as emu:
        text, input_tokens = asyncio.run(run(emu))
    assert text == "ping pong"
    chat = [{"role": "user", "content": "ping pong"}]
    assert input_tokens == count_prompt(o200k, chat, template="openai")


def test_prompt_too_long(o200k: TokenCounter) -> None:
    prompt = expected_input(o200k)
    with (
        Emulator(flavor="anthropic", context_window=prompt - 1, tokenizer=o200k) as emu,
        pytest.raises(anthropic.BadRequestError) as caught,
    ):
        client(emu).messages.create(
            model="claude-x", max_tokens=10, system=SYSTEM, messages=MESSAGES, tools=TOOLS
        )
    assert "prompt is too long" in caught.value.message
    failure = classify_failure(caught.value)
    assert failure.kind is FailureKind.CONTEXT_OVERFLOW
    assert failure.prompt_tokens == prompt
    assert failure.context_window == prompt - 1


def test_input_plus_max_tokens_over_the_window(o200k: TokenCounter) -> None:
    prompt = expected_input(o200k)
    with Emulator(flavor="anthropic", context_window=prompt + 100, tokenizer=o200k) as emu:
        sdk = client(emu)
        with pytest.raises(anthropic.BadRequestError) as caught:
            sdk.messages.create(
                model="claude-x", max_tokens=101, system=SYSTEM, messages=MESSAGES, tools=TOOLS
            )
        fits = sdk.messages.create(
            model="claude-x", max_tokens=100, system=SYSTEM, messages=MESSAGES, tools=TOOLS
        )
    assert fits.usage.input_tokens == prompt
    failure = classify_failure(caught.value)
    assert failure.kind is FailureKind.CONTEXT_OVERFLOW
    assert failure.prompt_tokens == prompt
    assert failure.requested_output == 101
    assert failure.context_window == prompt + 100


def test_max_tokens_above_the_output_cap(o200k: TokenCounter) -> None:
    with (
        Emulator(
            flavor="anthropic", context_window=200_000, max_output_tokens=8192, tokenizer=o200k
        ) as emu,
        pytest.raises(anthropic.BadRequestError) as caught,
    ):
        client(emu).messages.create(
            model="claude-x", max_tokens=8193, messages=[{"role": "user", "content": "hi"}]
        )
    failure = classify_failure(caught.value)
    assert failure.kind is FailureKind.OUTPUT_LIMIT
    assert failure.requested_output == 8193


def test_window_exceeded_beta_stops_instead_of_refusing(o200k: TokenCounter) -> None:
    def chatty(request: EmulatorRequest) -> Reply:
        return Reply(text="many words " * 200)

    messages = [{"role": "user", "content": "talk"}]
    prompt = count_prompt(o200k, messages, template="openai")
    with Emulator(
        flavor="anthropic", context_window=prompt + 30, tokenizer=o200k, scenario=chatty
    ) as emu:
        message = client(emu).messages.create(
            model="claude-x",
            max_tokens=1000,
            messages=messages,  # type: ignore[arg-type]
            extra_headers={"anthropic-beta": "model-context-window-exceeded-2025-08-26"},
        )
    assert message.stop_reason == "model_context_window_exceeded"
    assert message.usage.output_tokens == 30
    assert classify_failure(message).kind is FailureKind.CONTEXT_OVERFLOW


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"}],
                }
            ],
            "unexpected `tool_use_id` found in `tool_result` blocks: toolu_9",
        ),
        ([{"role": "system", "content": "x"}], 'Unexpected role "system"'),
        (
            [{"role": "robot", "content": "x"}],
            "messages.0.role: Input should be 'user' or 'assistant'",
        ),
        (
            [*MESSAGES[:2], {"role": "user", "content": "no result"}],
            "`tool_use` ids were found without `tool_result`",
        ),
    ],
)
def test_malformed_requests(
    messages: list[dict[str, Any]], needle: str, o200k: TokenCounter
) -> None:
    with (
        Emulator(flavor="anthropic", tokenizer=o200k) as emu,
        pytest.raises(anthropic.BadRequestError) as caught,
    ):
        client(emu).messages.create(model="claude-x", max_tokens=10, messages=messages)  # type: ignore[arg-type]
    assert needle in caught.value.message
    assert classify_failure(caught.value).kind is FailureKind.INVALID_REQUEST


def test_faults_and_auth(o200k: TokenCounter) -> None:
    with Emulator(
        flavor="anthropic", tokenizer=o200k, api_key="secret", faults="1:529;2:429@3"
    ) as emu:
        with pytest.raises(anthropic.AuthenticationError) as auth:
            client(emu, api_key="nope").messages.create(
                model="c", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
            )
        sdk = client(emu, api_key="secret")
        with pytest.raises(anthropic.APIStatusError) as overloaded:
            sdk.messages.create(
                model="c", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
            )
        with pytest.raises(anthropic.RateLimitError) as limited:
            sdk.messages.create(
                model="c", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
            )
        assert sdk.messages.create(
            model="c", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
    assert classify_failure(auth.value).kind is FailureKind.AUTH
    assert overloaded.value.status_code == 529
    assert classify_failure(overloaded.value).kind is FailureKind.OVERLOADED
    rate = classify_failure(limited.value)
    assert rate.kind is FailureKind.RATE_LIMIT
    assert rate.retry_after == pytest.approx(3.0)


def test_models_endpoint(o200k: TokenCounter) -> None:
    with Emulator(flavor="anthropic", tokenizer=o200k, model="claude-emulated") as emu:
        models = client(emu).models.list()
    assert [model.id for model in models.data] == ["claude-emulated"]


def test_coding_agent_loop_is_deterministic(o200k: TokenCounter) -> None:
    def run(seed: int) -> list[dict[str, Any]]:
        with Emulator(
            flavor="anthropic", tokenizer=o200k, seed=seed, scenario="coding-agent:3"
        ) as emu:
            sdk = client(emu)
            messages: list[dict[str, Any]] = [{"role": "user", "content": "fix it"}]
            for _ in range(6):
                reply = sdk.messages.create(
                    model="c", max_tokens=400, messages=messages, tools=TOOLS
                )  # type: ignore[arg-type]
                content = [block.model_dump(exclude_none=True) for block in reply.content]
                messages.append({"role": "assistant", "content": content})
                uses = [block for block in reply.content if block.type == "tool_use"]
                if not uses:
                    break
                messages.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": use.id, "content": "ok"}
                            for use in uses
                        ],
                    }
                )
            return messages

    first, again = run(11), run(11)
    assert first == again
    assert len([m for m in first if m["role"] == "assistant"]) == 4
    assert first[-1]["content"][0]["type"] == "text"
