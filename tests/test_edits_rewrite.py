"""Rewriting a message: a new object of the caller's type, only the target replaced."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from anthropic.types import ToolUseBlock
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.edit_fixtures import anthropic_transcript, chat_transcript, responses_transcript, seg
from tests.transcripts import FORMATS, Plan, plans, render_labelled
from windowguard.core.adapters import shape_message
from windowguard.core.edits import (
    CLEARED_INPUT,
    clear_call_inputs,
    replace_result_text,
    tool_calls,
    tool_results,
)
from windowguard.core.exceptions import ConfigurationError
from windowguard.core.shapes import Format

_new_text = st.text(min_size=1, max_size=60).filter(str.strip)


def dumped(message: Any) -> Any:
    """A deep, comparable picture of a message (SDK objects through model_dump)."""
    dump = getattr(message, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_unset=False)
    return copy.deepcopy(message)


def same_shape(before: Any, after: Any, fmt: Format) -> None:
    a, b = shape_message(before, fmt), shape_message(after, fmt)
    assert (a.kind, a.opens, a.answers, a.results_only, a.reasoning, a.call_item) == (
        b.kind,
        b.opens,
        b.answers,
        b.results_only,
        b.reasoning,
        b.call_item,
    )
    assert b.problem is None or a.problem == b.problem


@settings(max_examples=80)
@given(plan=plans(max_turns=6), text=_new_text)
def test_replacing_a_result_changes_only_that_result(plan: Plan, text: str) -> None:
    for fmt in FORMATS:
        messages = render_labelled(plan, fmt).messages
        pictures = [dumped(m) for m in messages]
        segmentation = seg(messages, fmt)
        refs = tool_results(messages, fmt, *segmentation)
        for ref in refs:
            message = messages[ref.index]
            new = replace_result_text(message, fmt, {ref.part: text})
            assert new is not message and type(new) is type(message)
            same_shape(message, new, fmt)
            edited = [*messages[: ref.index], new, *messages[ref.index + 1 :]]
            after = tool_results(edited, fmt, *seg(edited, fmt))
            assert seg(edited, fmt) == segmentation
            assert [r.text for r in after] == [
                text if (r.index, r.part) == (ref.index, ref.part) else r.text for r in refs
            ]
            assert [(r.call_index, r.call_part) for r in after] == [
                (r.call_index, r.call_part) for r in refs
            ]
        assert [dumped(m) for m in messages] == pictures  # nothing of the caller's changed


@settings(max_examples=80)
@given(plan=plans(max_turns=6))
def test_clearing_inputs_changes_only_those_calls(plan: Plan) -> None:
    for fmt in FORMATS:
        messages = render_labelled(plan, fmt).messages
        pictures = [dumped(m) for m in messages]
        segmentation = seg(messages, fmt)
        calls = tool_calls(messages, fmt, *segmentation)
        for call in calls:
            message = messages[call.index]
            done = clear_call_inputs(message, fmt, [call])
            if not call.clearable:
                assert done.message is message and done.cleared == ()
                assert [p for p, _ in done.skipped] == [call.part]
                continue
            assert done.cleared == (call.part,) and done.skipped == ()
            new = done.message
            assert type(new) is type(message)
            same_shape(message, new, fmt)
            edited = [*messages[: call.index], new, *messages[call.index + 1 :]]
            after = tool_calls(edited, fmt, *seg(edited, fmt))
            assert [json.loads(c.arguments) for c in after] == [
                {} if (c.index, c.part) == (call.index, call.part) else json.loads(c.arguments)
                for c in calls
            ]
        assert [dumped(m) for m in messages] == pictures


# -- SDK objects and the caller's containers --------------------------------------------


def test_chat_sdk_message_keeps_its_class_and_untouched_calls() -> None:
    messages = chat_transcript()
    reply = messages[2]
    before = dumped(reply)
    done = clear_call_inputs(reply, "openai_chat", [0, 1])
    new = done.message
    assert type(new) is type(reply) and done.cleared == (0, 1)
    assert new.tool_calls[0].function.arguments == "{}"
    assert new.tool_calls[1].custom.input == CLEARED_INPUT
    assert type(new.tool_calls[0]) is type(reply.tool_calls[0])
    assert new.content == "reading" and new.tool_calls[0].id == "call_0"
    assert dumped(reply) == before
    new.model_dump_json()  # serialises without warnings (warnings are errors here)
    only_first = clear_call_inputs(reply, "openai_chat", [0]).message
    assert only_first.tool_calls[1] is reply.tool_calls[1]


def test_chat_result_parts_keep_media_and_merge_text() -> None:
    messages = chat_transcript()
    result = messages[4]
    before = copy.deepcopy(result)
    new = replace_result_text(result, "openai_chat", {0: "clamped"})
    assert result == before
    assert new["content"] == [
        {"type": "text", "text": "clamped"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    assert new["content"][1] is result["content"][1]
    assert new["tool_call_id"] == "call_1" and list(new) == list(result)


def test_anthropic_result_blocks_are_replaced_one_by_one() -> None:
    messages = anthropic_transcript()
    user = messages[2]
    before = copy.deepcopy(user)
    new = replace_result_text(user, "anthropic", {1: "[cleared]"})
    assert user == before
    assert new["content"][0] is user["content"][0]  # the other result: the caller's own
    assert new["content"][2] is user["content"][2]  # the user's text
    block = new["content"][1]
    assert block["tool_use_id"] == "toolu_2" and block["is_error"] is True
    assert block["content"][0] == {"type": "text", "text": "[cleared]"}
    assert block["content"][1] is user["content"][1]["content"][1]  # the image, untouched


def test_anthropic_thinking_messages_are_returned_untouched() -> None:
    messages = anthropic_transcript()
    reply = messages[1]
    before = dumped(reply)
    done = clear_call_inputs(reply, "anthropic", [2, 3])
    assert done.message is reply and done.cleared == ()
    assert [p for p, _ in done.skipped] == [2, 3]
    assert all("thinking" in why for _, why in done.skipped)
    assert dumped(reply) == before and reply.content[0].signature == "sig=="


def test_anthropic_sdk_blocks_without_thinking_are_cleared_in_their_class() -> None:
    blocks = [
        ToolUseBlock(type="tool_use", id="toolu_1", name="read", input={"path": "a"}),
        ToolUseBlock(type="tool_use", id="toolu_2", name="read", input={"path": "b"}),
    ]
    message = {"role": "assistant", "content": tuple(blocks)}
    done = clear_call_inputs(message, "anthropic", [1])
    new = done.message
    assert isinstance(new["content"], tuple)  # the caller's container type
    assert new["content"][0] is blocks[0]
    assert type(new["content"][1]) is ToolUseBlock and new["content"][1].input == {}
    assert blocks[1].input == {"path": "b"}
    new["content"][1].model_dump_json()


def test_anthropic_typed_inputs_are_skipped() -> None:
    from anthropic.types import BrowserNavigateToolUseBlock

    block = BrowserNavigateToolUseBlock.model_validate(
        {
            "type": "tool_use",
            "id": "toolu_9",
            "name": "navigate",
            "toolset_name": "browser",
            "caller": {"type": "direct"},
            "input": {"url": "https://example.com"},
        }
    )
    message = {"role": "assistant", "content": [block]}
    done = clear_call_inputs(message, "anthropic", [0])
    assert done.message is message and "typed" in done.skipped[0][1]
    (call,) = tool_calls(
        [{"role": "user", "content": "go"}, message],
        "anthropic",
        1,
        (1,),
    )
    assert not call.clearable


def test_responses_sdk_items_keep_their_class() -> None:
    items = responses_transcript(reasoning=False)
    before = [dumped(i) for i in items]
    out = replace_result_text(items[2], "responses", {0: "short"})
    assert type(out) is type(items[2]) and out.call_id == "call_a" and out.id == "fco_1"
    assert type(out.output[0]) is type(items[2].output[0]) and out.output[0].text == "short"
    assert out.output[1] is items[2].output[1]
    out.model_dump_json()
    call = clear_call_inputs(items[1], "responses", [0]).message
    assert type(call) is type(items[1]) and call.arguments == "{}" and call.id == "fc_1"
    custom = clear_call_inputs(items[3], "responses", [0]).message
    assert custom.input == CLEARED_INPUT
    builtin = clear_call_inputs(items[5], "responses", [0])
    assert builtin.message is items[5] and "typed" in builtin.skipped[0][1]
    text_out = replace_result_text(items[4], "responses", {0: "x"})
    assert text_out.output == "x"
    assert [dumped(i) for i in items] == before


def test_a_reasoning_item_is_never_touched_and_its_calls_are_not_clearable() -> None:
    items = responses_transcript(reasoning=True)
    calls = tool_calls(items, "responses", *seg(items, "responses"))
    assert not any(c.clearable for c in calls)
    results = tool_results(items, "responses", *seg(items, "responses"))
    new = replace_result_text(items[results[0].index], "responses", {0: "cut"})
    edited = [*items[:3], new, *items[4:]]
    assert edited[1] is items[1]  # the reasoning item, byte for byte the caller's
    done = clear_call_inputs(items[calls[0].index], "responses", [calls[0]])
    assert done.message is items[calls[0].index] and done.cleared == ()
    assert done.skipped == ((0, calls[0].reason),) and "reasoning" in str(calls[0].reason)


def test_a_result_with_only_media_gets_a_text_part_first() -> None:
    result = {
        "role": "tool",
        "tool_call_id": "c",
        "content": [{"type": "image_url", "image_url": {"url": "data:,"}}],
    }
    new = replace_result_text(result, "openai_chat", {0: "[cleared]"})
    assert new["content"][0] == {"type": "text", "text": "[cleared]"}
    assert new["content"][1] is result["content"][0]


def test_an_empty_replacement_is_the_same_object() -> None:
    message = {"role": "tool", "tool_call_id": "c", "content": "x"}
    assert replace_result_text(message, "openai_chat", {}) is message
    assert clear_call_inputs({"role": "assistant"}, "openai_chat", []).message == {
        "role": "assistant"
    }


@pytest.mark.parametrize(
    ("message", "fmt", "part"),
    [
        ({"role": "user", "content": "hi"}, "openai_chat", 0),
        ({"role": "tool", "tool_call_id": "c", "content": "x"}, "openai_chat", 1),
        ({"role": "user", "content": [{"type": "text", "text": "x"}]}, "anthropic", 0),
        ({"role": "user", "content": [{"type": "text", "text": "x"}]}, "anthropic", 5),
        ({"type": "message", "role": "user", "content": "x"}, "responses", 0),
    ],
)
def test_a_part_that_is_no_result_is_refused(message: Any, fmt: Format, part: int) -> None:
    with pytest.raises(ConfigurationError, match="is not a"):
        replace_result_text(message, fmt, {part: "x"})


def test_bad_new_text_and_bad_calls_are_refused() -> None:
    message = {"role": "tool", "tool_call_id": "c", "content": "x"}
    with pytest.raises(ConfigurationError, match="non-empty string"):
        replace_result_text(message, "openai_chat", {0: ""})
    with pytest.raises(ConfigurationError, match="is not a"):
        clear_call_inputs({"role": "assistant", "tool_calls": []}, "openai_chat", [0])
    with pytest.raises(ConfigurationError, match="is not a"):
        clear_call_inputs({"role": "assistant", "content": "x"}, "anthropic", [0])
    with pytest.raises(ConfigurationError, match="is not a"):
        clear_call_inputs({"type": "function_call_output", "call_id": "c"}, "responses", [0])
    with pytest.raises(ConfigurationError, match="placeholder"):
        clear_call_inputs({"role": "assistant"}, "openai_chat", [0], placeholder="")


def test_an_object_that_cannot_be_copied_is_named() -> None:
    class Opaque:
        role = "tool"
        tool_call_id = "c"
        content = "x"

    with pytest.raises(Exception, match="cannot edit a Opaque"):
        replace_result_text(Opaque(), "openai_chat", {0: "y"})


@pytest.mark.parametrize(
    "reasoning",
    [
        {"type": "redacted_thinking", "data": "EuYBCkQYAiJA"},
        {"type": "thinking", "thinking": "", "signature": "c2ln"},
    ],
)
def test_any_thinking_block_keeps_its_message_untouched(reasoning: dict[str, Any]) -> None:
    message = {
        "role": "assistant",
        "content": [reasoning, {"type": "tool_use", "id": "t", "name": "x", "input": {"a": 1}}],
    }
    done = clear_call_inputs(message, "anthropic", [1])
    assert done.message is message and done.cleared == () and done.skipped[0][0] == 1


def test_an_anthropic_message_object_keeps_its_class() -> None:
    from anthropic.types import Message, TextBlock, Usage

    reply = Message(
        id="msg_2",
        type="message",
        role="assistant",
        model="claude",
        content=[
            TextBlock(type="text", text="reading"),
            ToolUseBlock(type="tool_use", id="toolu_3", name="read_file", input={"path": "c"}),
        ],
        stop_reason="tool_use",
        usage=Usage(input_tokens=1, output_tokens=1),
    )
    before = dumped(reply)
    new = clear_call_inputs(reply, "anthropic", [1]).message
    assert type(new) is Message and new.id == "msg_2" and new.content[0] is reply.content[0]
    assert new.content[1].input == {} and dumped(reply) == before
    new.model_dump_json()
