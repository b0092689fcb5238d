"""Test helper: transcripts with the official SDKs' typed objects, in every format."""

from __future__ import annotations

import json
import random
from typing import Any

from anthropic.types import Message, TextBlock, ThinkingBlock, ToolUseBlock, Usage
from openai.types.chat import ChatCompletionMessage
from openai.types.chat.chat_completion_message_custom_tool_call import (
    ChatCompletionMessageCustomToolCall,
    Custom,
)
from openai.types.chat.chat_completion_message_function_tool_call import (
    ChatCompletionMessageFunctionToolCall,
    Function,
)
from openai.types.responses import (
    ResponseCustomToolCall,
    ResponseCustomToolCallOutput,
    ResponseFunctionToolCall,
    ResponseFunctionToolCallOutputItem,
    ResponseInputImage,
    ResponseInputText,
    ResponseReasoningItem,
)

from windowguard.core.adapters import shape_messages
from windowguard.core.turns import segment


def seg(messages: list[Any], fmt: str) -> tuple[int, tuple[int, ...]]:
    s = segment(shape_messages(messages, format=fmt).shapes)
    return s.head_stop, s.turn_starts


def chat_transcript() -> list[Any]:
    return [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "fix it"},
        ChatCompletionMessage(
            role="assistant",
            content="reading",
            tool_calls=[
                ChatCompletionMessageFunctionToolCall(
                    id="call_0",
                    type="function",
                    function=Function(name="read_file", arguments='{"path": "a.py"}'),
                ),
                ChatCompletionMessageCustomToolCall(
                    id="call_1", type="custom", custom=Custom(name="patch", input="*** Begin")
                ),
            ],
        ),
        {"role": "tool", "tool_call_id": "call_0", "content": "print('a')"},
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": [
                {"type": "text", "text": "Error: patch failed"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "text", "text": "line 3"},
            ],
        },
    ]


def anthropic_transcript() -> list[Any]:
    reply = Message(
        id="msg_1",
        type="message",
        role="assistant",
        model="claude",
        content=[
            ThinkingBlock(type="thinking", thinking="need both files", signature="sig=="),
            TextBlock(type="text", text="Reading both."),
            ToolUseBlock(type="tool_use", id="toolu_1", name="read_file", input={"path": "a"}),
            ToolUseBlock(type="tool_use", id="toolu_2", name="read_file", input={"path": "b"}),
        ],
        stop_reason="tool_use",
        usage=Usage(input_tokens=1, output_tokens=1),
    )
    return [
        {"role": "user", "content": "compare a and b"},
        reply,
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A" * 50},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "is_error": True,
                    "content": [
                        {"type": "text", "text": "no such file"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "AA"},
                        },
                    ],
                },
                {"type": "text", "text": "and hurry"},
            ],
        },
    ]


def responses_transcript(*, reasoning: bool) -> list[Any]:
    items: list[Any] = [{"role": "user", "content": "go"}]
    if reasoning:
        items.append(
            ResponseReasoningItem(id="rs_1", type="reasoning", summary=[], encrypted_content="gAAA")
        )
    items += [
        ResponseFunctionToolCall(
            type="function_call", id="fc_1", call_id="call_a", name="read", arguments='{"p": 1}'
        ),
        ResponseFunctionToolCallOutputItem(
            id="fco_1",
            status="completed",
            type="function_call_output",
            call_id="call_a",
            output=[
                ResponseInputText(type="input_text", text="body"),
                ResponseInputImage(type="input_image", detail="auto", image_url="data:,"),
            ],
        ),
        ResponseCustomToolCall(
            type="custom_tool_call", call_id="call_b", name="sh", input="ls -la"
        ),
        ResponseCustomToolCallOutput(
            type="custom_tool_call_output", call_id="call_b", output="a\nb"
        ),
        {
            "type": "computer_call",
            "call_id": "call_c",
            "id": "cu_1",
            "action": {"type": "screenshot"},
        },
        {
            "type": "computer_call_output",
            "call_id": "call_c",
            "output": {"type": "computer_screenshot"},
        },
    ]
    return items


def read_file_turn(i: int, lines: int = 25) -> list[dict[str, Any]]:
    """One chat turn: an assistant step calling ``read_file`` and its result, ``lines``
    seeded lines of ~28 characters (about 30 tokens a line by the heuristic)."""
    rng = random.Random(i)
    body = "\n".join(f"{n:05d} value_{rng.randrange(10**6)} = compute({n})" for n in range(lines))
    call = {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/m{i}.py"})},
    }
    return [
        {"role": "assistant", "content": f"Step {i}", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": body},
    ]
