"""Qwen3 writes an assistant message's reasoning in a ``<think>`` block after the last
user query and drops it before that query: our rendering must match the real template,
and the local count of a message (an upper bound under the edge rule) must never fall
below what the real template adds for it, wherever the message stands.

Checked against the real Qwen3 jinja template rendered by transformers
(tests/reference_templates.py).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import exact_tokenizers as ex
import reference_templates as ref
import windowguard as wg
from windowguard.accounting.local import TemplateAccounting
from windowguard.accounting.templates import count_prompt, render_prompt
from windowguard.core.adapters import shape_messages

TOOLS = [
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


def _call(n: int) -> dict[str, Any]:
    arguments = f'{{"path": "src/file_{n}.py"}}'
    return {
        "id": f"c{n}",
        "type": "function",
        "function": {"name": "read_file", "arguments": arguments},
    }


def _thinking(n: int, content: str = "") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content,
        "reasoning_content": f"\nStep {n}: the file may hold the bug, so read it.\n",
        "tool_calls": [_call(n)],
    }


def _result(n: int) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"c{n}", "content": f"def f_{n}():\n    return {n}"}


SYSTEM = {"role": "system", "content": "You are a careful engineer."}
LOOP = [
    SYSTEM,
    {"role": "user", "content": "Find the bug."},
    _thinking(1),
    _result(1),
    _thinking(2, "Reading one more."),
    _result(2),
    {"role": "assistant", "content": "Found it.", "reasoning_content": "It is in f_2."},
]
LAYOUTS: dict[str, list[dict[str, Any]]] = {
    # every assistant message after the only user query: all keep their reasoning
    "one query": LOOP,
    # a second query: the reasoning before it is dropped, the reasoning after it kept
    "two queries": [*LOOP, {"role": "user", "content": "Now fix it."}, _thinking(3), _result(3)],
    # a think block written into the content (no reasoning_content), before and after
    "think in content": [
        SYSTEM,
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<think>\nGreet back.\n</think>\n\nHello!"},
        {"role": "user", "content": "Read a file."},
        {
            "role": "assistant",
            "content": "<think>\nUse the tool.\n</think>\n\n",
            "tool_calls": [_call(4)],
        },
        _result(4),
    ],
    # a tool response written as a user turn is no query: the reasoning before it stays
    "tool response as user": [
        {"role": "user", "content": "Find the bug."},
        _thinking(5),
        {"role": "user", "content": "<tool_response>\nnothing here\n</tool_response>"},
        _thinking(6),
        _result(6),
    ],
    # empty reasoning after the query: no think block on a message that is not the last
    "empty reasoning": [
        {"role": "user", "content": "Go."},
        {**_thinking(7), "reasoning_content": ""},
        _result(7),
    ],
    # no user query at all: nothing is after it, not even a trailing reply
    "no query": [SYSTEM, {"role": "assistant", "content": "Hi.", "reasoning_content": "Say hi."}],
}


def _reference_prompt(messages: list[dict[str, Any]], tools: Any) -> str:
    try:
        return ref.qwen_prompt(messages, tools)
    except ref.ReferenceUnavailable as exc:
        ex.require("qwen")  # a missing tokenizer skips (fails under CI) with the reason
        if __import__("os").environ.get("CI") == "true":
            pytest.fail(f"the real Qwen3 template is unavailable in CI: {exc}")
        pytest.skip(f"the real Qwen3 template is unavailable: {exc}")


def _requests(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Every prefix of a transcript (each a request a loop may send)."""
    return [messages[:stop] for stop in range(1, len(messages) + 1)]


@pytest.mark.parametrize("tools", [None, TOOLS])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_reasoning_renders_as_the_real_template(layout: str, tools: Any) -> None:
    counter = ex.require("qwen")
    for request in _requests(LAYOUTS[layout]):
        expected = _reference_prompt(request, tools)
        assert render_prompt(request, tools, template="qwen") == expected, len(request)
        reference = ref.reference_count("qwen", request, tools)
        assert count_prompt(counter, request, tools, template="qwen") == reference


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_local_count_never_falls_below_the_real_template(layout: str) -> None:
    """The per-message count is the edge rule's upper reading of what nothing measured: a
    message's reasoning is counted in its think block wherever the message stands (the
    template drops it before the last user query; a count of one message on its own
    cannot know where that query will be)."""
    counter = ex.require("qwen")
    accounting = TemplateAccounting("qwen", counter)
    for request in _requests(LAYOUTS[layout]):
        _reference_prompt(request, TOOLS)
        expected = ref.reference_count("qwen", request, TOOLS)
        shapes = shape_messages(request, format="openai_chat")
        local = accounting.fixed_tokens(TOOLS)
        local += sum(accounting.messages_tokens([*shapes.system_shapes, *shapes.shapes]))
        if request[-1]["role"] == "assistant":
            local += accounting.final_assistant_tokens
        assert local >= expected, (len(request), local, expected)
        if layout == "one query":  # nothing dropped: within a few tokens per message
            assert local <= expected + 4 * len(request) + 8


def test_generated_loops_are_never_undercounted() -> None:
    counter = ex.require("qwen")
    accounting = TemplateAccounting("qwen", counter)
    rng = random.Random(5)
    words = ["the", "file", "bug", "\n", "read", "<think>", "test", " ", "\u00e9t\u00e9", "42"]
    for _ in range(12):
        messages: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": "Task."}]
        for n in range(rng.randint(1, 6)):
            if rng.random() < 0.25:
                messages.append({"role": "user", "content": "And then?"})
            thought = "".join(rng.choice(words) for _ in range(rng.randint(0, 30)))
            message = _thinking(n)
            message["reasoning_content"] = thought
            message["content"] = rng.choice(["", "Let me look.", "\nok"])
            messages += [message, _result(n)]
        _reference_prompt(messages, TOOLS)
        expected = ref.reference_count("qwen", messages, TOOLS)
        assert count_prompt(counter, messages, TOOLS, template="qwen") == expected
        shapes = shape_messages(messages, format="openai_chat")
        local = accounting.fixed_tokens(TOOLS)
        local += sum(accounting.messages_tokens([*shapes.system_shapes, *shapes.shapes]))
        assert local >= expected


def test_fit_upper_covers_a_long_reasoning_loop() -> None:
    """The review's repro: 40 reasoning tool turns after one query; the upper reading the
    edge rule decides on must cover the real template's count of what is sent."""
    ex.require("qwen")
    messages: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": "task"}]
    for n in range(40):
        messages += [_thinking(n), _result(n)]
    info = wg.ModelInfo(context_window=262_144, tokenizer="qwen")
    fit = wg.ContextWindowManager(model_info=info, edits=()).fit(messages, tools=TOOLS)
    if not fit.upper_tokens:
        pytest.skip("the local Qwen accounting is not installed")
    _reference_prompt(fit.messages, TOOLS)
    assert fit.upper_tokens >= ref.reference_count("qwen", fit.messages, TOOLS)
