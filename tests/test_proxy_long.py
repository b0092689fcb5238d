"""300-turn conversations through ``windowguard proxy``, with unmodified clients.

Each client keeps its whole transcript and re-sends it on every call, appending the
assistant's reply (a text and a tool call) and a tool result, as hand-written loops and
agents that cannot be changed do; every other call streams. The transcript outgrows the
16k window about four times over. The proxy sits between the client and an emulator
that counts every prompt exactly and refuses overflows with the real provider's 400.

Asserted for each client: no upstream overflow (every call the emulator saw was
answered 200, one per turn), the task (the first user message) in every request the
emulator saw, turns really left out, and streams intact (the text assembled from the
chunks is the reply the emulator's policy gave, and the tool call arrives whole).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

import windowguard as wg
from windowguard.accounting.discovery import clear_discovery_cache
from windowguard.emulator import Emulator, EmulatorRequest, Reply, ToolCall
from windowguard.proxy import ProxyConfig, ProxyServer

MODEL = "emulated-model"
WINDOW = 16_384
MAX_TOKENS = 256
TURNS = 300
TASK = "TASK-51c: find why the parser drops the last token, and fix it."
SYSTEM = "You are a careful coding agent."
FUNCTION = {
    "name": "read_file",
    "description": "Read a file of the project.",
    "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
}
CHAT_TOOLS = [{"type": "function", "function": FUNCTION}]
RESPONSES_TOOLS = [{"type": "function", **FUNCTION}]
ANTHROPIC_TOOLS = [
    {
        "name": FUNCTION["name"],
        "description": FUNCTION["description"],
        "input_schema": FUNCTION["parameters"],
    }
]


@pytest.fixture(autouse=True)
def _fresh_discovery() -> Iterator[None]:
    clear_discovery_cache()
    wg.clear_counter_cache()
    yield
    clear_discovery_cache()
    wg.clear_counter_cache()


def tool_output(n: int) -> str:
    """A tool result of about 150 tokens, different on every turn."""
    return "\n".join(f"src/m{n}.py:{j}: value_{j} = compute({j * n})" for j in range(12))


class Policy:
    """The emulator's model: a short text and one tool call per turn, remembered."""

    def __init__(self) -> None:
        self.task_present: list[bool] = []
        self.replies: list[Reply] = []

    def __call__(self, request: EmulatorRequest) -> Reply:
        self.task_present.append(
            any(TASK in json.dumps(m.get("content"), default=str) for m in request.messages)
        )
        n = request.call_number
        reply = Reply(
            text=f"Step {n}: reading the next module to follow the token.",
            tool_calls=(ToolCall(name="read_file", arguments={"path": f"src/m{n}.py"}),),
        )
        self.replies.append(reply)
        return reply


def check(emu: Emulator, policy: Policy, proxy: ProxyServer, turns: int) -> None:
    records = emu.records
    assert [r.status for r in records] == [200] * turns, "an upstream refusal reached the client"
    assert all(policy.task_present) and len(policy.task_present) == turns
    assert max(r.prompt_tokens or 0 for r in records) + MAX_TOKENS <= WINDOW
    assert proxy.metrics.value("pruned_requests_total", _label(proxy)) > 0
    assert proxy.metrics.value("refusals_total", _label(proxy)) == 0


def _label(proxy: ProxyServer) -> str:
    counters = proxy.metrics._counters["requests_total"]
    return next(label for label in counters if label != "passthrough")


def serve(emu: Emulator, **options: Any) -> ProxyServer:
    return ProxyServer(ProxyConfig(upstream=emu.root_url, port=0, **options))


# -- openai chat.completions ----------------------------------------------------------


def chat_turn(client: openai.OpenAI, transcript: list[Any], stream: bool) -> dict[str, Any]:
    """One call; returns the assistant message as a dict (assembled from a stream)."""
    if not stream:
        response = client.chat.completions.create(
            model=MODEL, messages=transcript, tools=CHAT_TOOLS, max_tokens=MAX_TOKENS
        )
        return response.choices[0].message.model_dump(exclude_none=True)
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    chunks = client.chat.completions.create(
        model=MODEL, messages=transcript, tools=CHAT_TOOLS, max_tokens=MAX_TOKENS, stream=True
    )
    for chunk in chunks:
        assert chunk.choices, "the usage-only chunk the client did not ask for came through"
        delta = chunk.choices[0].delta
        if delta.content:
            text.append(delta.content)
        for call in delta.tool_calls or []:
            entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
            entry["id"] += call.id or ""
            if call.function is not None:
                entry["name"] += call.function.name or ""
                entry["arguments"] += call.function.arguments or ""
    return {
        "role": "assistant",
        "content": "".join(text),
        "tool_calls": [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for _, c in sorted(calls.items())
        ],
    }


def run_chat(client: openai.OpenAI, policy: Policy, turns: int) -> None:
    transcript: list[Any] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    for n in range(turns):
        message = chat_turn(client, transcript, stream=n % 2 == 1)
        expected = policy.replies[-1]
        assert message["content"] == expected.text
        (call,) = message["tool_calls"]
        assert json.loads(call["function"]["arguments"]) == expected.tool_calls[0].arguments
        transcript.append(message)
        transcript.append({"role": "tool", "tool_call_id": call["id"], "content": tool_output(n)})


def test_openai_chat_300_turns_stream_and_not_never_overflow() -> None:
    policy = Policy()
    with (
        Emulator(flavor="vllm", context_window=WINDOW, scenario=policy) as emu,
        serve(emu) as proxy,
    ):
        assert proxy.upstream.model_info is not None
        assert proxy.upstream.model_info.context_window == WINDOW  # discovered
        client = openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0)
        with client:
            run_chat(client, policy, TURNS)
        check(emu, policy, proxy, TURNS)


# -- openai responses -----------------------------------------------------------------


def run_responses(client: openai.OpenAI, policy: Policy, turns: int) -> None:
    items: list[Any] = [{"role": "user", "content": TASK}]
    for n in range(turns):
        kwargs: dict[str, Any] = {
            "model": MODEL,
            "instructions": SYSTEM,
            "input": items,
            "tools": RESPONSES_TOOLS,
            "max_output_tokens": MAX_TOKENS,
        }
        if n % 2 == 0:
            response = client.responses.create(**kwargs)
        else:
            deltas: list[str] = []
            response = None
            for event in client.responses.create(**kwargs, stream=True):
                if event.type == "response.output_text.delta":
                    deltas.append(event.delta)
                elif event.type == "response.completed":
                    response = event.response
            assert response is not None
            assert "".join(deltas) == response.output_text
        expected = policy.replies[-1]
        assert response.output_text == expected.text
        calls = [item for item in response.output if item.type == "function_call"]
        assert [json.loads(c.arguments) for c in calls] == [expected.tool_calls[0].arguments]
        # The items a hand-written client keeps: a message and its call, in input form.
        items.append({"role": "assistant", "content": response.output_text})
        items.append(
            {
                "type": "function_call",
                "call_id": calls[0].call_id,
                "name": calls[0].name,
                "arguments": calls[0].arguments,
            }
        )
        items.append(
            {"type": "function_call_output", "call_id": calls[0].call_id, "output": tool_output(n)}
        )


def test_openai_responses_300_turns_stream_and_not_never_overflow() -> None:
    policy = Policy()
    # The "openai" flavour reports no window: the proxy is told it (--window).
    with (
        Emulator(flavor="openai", context_window=WINDOW, scenario=policy) as emu,
        serve(emu, window=WINDOW) as proxy,
    ):
        client = openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0)
        with client:
            run_responses(client, policy, TURNS)
        check(emu, policy, proxy, TURNS)


# -- anthropic messages ---------------------------------------------------------------


def run_messages(client: anthropic.Anthropic, policy: Policy, turns: int) -> None:
    messages: list[Any] = [{"role": "user", "content": TASK}]
    for n in range(turns):
        kwargs: dict[str, Any] = {
            "model": MODEL,
            "system": SYSTEM,
            "messages": messages,
            "tools": ANTHROPIC_TOOLS,
            "max_tokens": MAX_TOKENS,
        }
        if n % 2 == 0:
            message = client.messages.create(**kwargs)
        else:
            with client.messages.stream(**kwargs) as stream:
                text = "".join(stream.text_stream)
                message = stream.get_final_message()
            assert text == "".join(b.text for b in message.content if b.type == "text")
        expected = policy.replies[-1]
        assert "".join(b.text for b in message.content if b.type == "text") == expected.text
        uses = [b for b in message.content if b.type == "tool_use"]
        assert [u.input for u in uses] == [expected.tool_calls[0].arguments]
        messages.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in message.content],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": uses[0].id, "content": tool_output(n)}
                ],
            }
        )


def test_anthropic_messages_300_turns_stream_and_not_never_overflow() -> None:
    policy = Policy()
    with (
        Emulator(flavor="anthropic", context_window=WINDOW, scenario=policy) as emu,
        serve(emu) as proxy,
    ):
        client = anthropic.Anthropic(base_url=proxy.root_url, api_key="k", max_retries=0)
        with client:
            run_messages(client, policy, TURNS)
        check(emu, policy, proxy, TURNS)


# -- a framework: LangChain's ChatOpenAI -----------------------------------------------


def test_langchain_chat_openai_300_turns_streaming_never_overflow() -> None:
    from langchain_core.messages import (
        AIMessage,
        AIMessageChunk,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )
    from langchain_openai import ChatOpenAI

    policy = Policy()
    with (
        Emulator(flavor="vllm", context_window=WINDOW, scenario=policy) as emu,
        serve(emu) as proxy,
    ):
        model = ChatOpenAI(
            model=MODEL,
            base_url=proxy.base_url,
            api_key="k",  # type: ignore[arg-type]
            max_tokens=MAX_TOKENS,  # type: ignore[call-arg]
            max_retries=0,
            streaming=True,
        ).bind_tools(CHAT_TOOLS)
        transcript: list[BaseMessage] = [SystemMessage(SYSTEM), HumanMessage(TASK)]
        for n in range(TURNS):
            chunks: list[AIMessageChunk] = list(model.stream(transcript))  # type: ignore[arg-type]
            full = chunks[0]
            for chunk in chunks[1:]:
                full = full + chunk  # type: ignore[assignment]
            expected = policy.replies[-1]
            assert full.content == expected.text
            (call,) = full.tool_calls
            assert call["args"] == expected.tool_calls[0].arguments
            transcript.append(AIMessage(content=full.content, tool_calls=full.tool_calls))
            transcript.append(ToolMessage(tool_output(n), tool_call_id=call["id"] or ""))
        check(emu, policy, proxy, TURNS)
