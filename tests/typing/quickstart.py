"""The README's Quickstart, annotated: it must pass ``mypy --strict`` (never run).

``fit.messages`` has the type of the caller's messages (``Fit[ChatCompletionMessageParam]``),
so it goes back to ``client.chat.completions.create`` as the SDK's own parameter type.
"""

from __future__ import annotations

import json

from openai import OpenAI
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionAssistantMessageParam,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
    ChatCompletionToolMessageParam,
    ChatCompletionToolParam,
)
from openai.types.completion_usage import CompletionUsage
from typing_extensions import assert_type

import windowguard as wg

client = OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="unused")
model = "emulated-model"
mgr = wg.ContextWindowManager(model_info=wg.ModelInfo(context_window=8192))

tools: list[ChatCompletionToolParam] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]


def run_tools(
    calls: list[ChatCompletionMessageFunctionToolCall],
) -> list[ChatCompletionToolMessageParam]:
    results: list[ChatCompletionToolMessageParam] = []
    for call in calls:
        try:
            with open(json.loads(call.function.arguments)["path"]) as file:
                content = file.read()
        except (OSError, ValueError, KeyError) as exc:
            content = f"error: {exc}"
        results.append({"role": "tool", "tool_call_id": call.id, "content": content})
    return results


def main() -> str | None:
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "What does pyproject.toml say about the project?"},
    ]
    usage: CompletionUsage | None = None
    while True:
        fit = mgr.fit(messages, tools=tools, max_tokens=1024, last_usage=usage)
        assert_type(fit, wg.Fit[ChatCompletionMessageParam])
        assert_type(fit.messages, list[ChatCompletionMessageParam])
        resp = client.chat.completions.create(
            model=model, messages=fit.messages, tools=tools, max_tokens=fit.max_tokens
        )
        assert_type(resp, ChatCompletion)
        usage = resp.usage
        reply = resp.choices[0].message
        calls = [c for c in reply.tool_calls or () if c.type == "function"]
        assistant: ChatCompletionAssistantMessageParam = {
            "role": "assistant",
            "content": reply.content,
        }
        if calls:
            assistant["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in calls
            ]
        messages.append(assistant)
        if not calls:
            return reply.content
        messages += run_tools(calls)


def fit_types() -> None:
    """``Sequence[M]`` in, ``Fit[M]`` out, through every way of fitting."""
    dicts = [{"role": "user", "content": "hi"}]
    assert_type(mgr.fit(dicts).messages, list[dict[str, str]])
    assert_type(mgr.fit(tuple(dicts)).messages, list[dict[str, str]])
    steps = mgr.fit_steps(dicts)
    try:
        next(steps)
    except StopIteration as done:
        finished: wg.Fit[dict[str, str]] = done.value
        assert_type(finished.messages, list[dict[str, str]])
    bare: wg.Fit = mgr.fit(dicts)  # a bare Fit is Fit[object]
    assert_type(bare.messages, list[object])
    wrong: wg.Fit[int] = mgr.fit(dicts)  # type: ignore[arg-type]
    del wrong
