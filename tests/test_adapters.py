"""Adapters: each wire format (dicts and SDK objects) -> shapes, and format detection."""

from __future__ import annotations

import pytest
from anthropic.types import TextBlock, ThinkingBlock, ToolUseBlock
from openai.types.chat import ChatCompletionMessage
from openai.types.chat.chat_completion_message_function_tool_call import (
    ChatCompletionMessageFunctionToolCall,
    Function,
)
from openai.types.responses import ResponseFunctionToolCall, ResponseReasoningItem

from windowguard.core.adapters import detect_format, shape_message, shape_messages
from windowguard.core.exceptions import UnknownFormatError
from windowguard.core.turns import segment


def _texts(shape: object) -> list[tuple[str, str]]:
    return [(s.content_class, s.text) for s in shape.segments]  # type: ignore[attr-defined]


def test_openai_sdk_message_appended_from_a_response_opens_its_calls() -> None:
    message = ChatCompletionMessage(
        role="assistant",
        content="looking",
        tool_calls=[
            ChatCompletionMessageFunctionToolCall(
                id="call_1", type="function", function=Function(name="read", arguments='{"p":1}')
            )
        ],
    )
    shape = shape_message(message, "openai_chat")
    assert shape.kind == "assistant"
    assert shape.opens == ("call_1",)
    assert _texts(shape) == [("prose", "looking"), ("dense", 'read{"p":1}')]


def test_openai_tool_message_answers_and_is_dense() -> None:
    shape = shape_message({"role": "tool", "tool_call_id": "c", "content": "out"}, "openai_chat")
    assert (shape.kind, shape.answers, _texts(shape)) == ("tool", ("c",), [("dense", "out")])


def test_openai_image_parts_are_a_fixed_cost_not_base64_length() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 100_000}},
        ],
    }
    shape = shape_message(message, "openai_chat")
    assert shape.media_items == 1
    assert shape.chars == len("what is this")


@pytest.mark.parametrize(
    ("message", "needle"),
    [
        ({"role": "robot", "content": "x"}, "unknown role 'robot'"),
        ({"content": "x"}, "no 'role'"),
        ({"role": "user", "content": 42}, "got int"),
        ({"role": "tool", "tool_call_id": 7, "content": "x"}, "'tool_call_id' must be a string"),
        (
            {"role": "assistant", "tool_calls": [{"id": 7, "function": {"name": "f"}}]},
            "'id' must be a string",
        ),
        ({"role": "assistant", "content": None, "tool_calls": "nope"}, "must be a list"),
    ],
)
def test_openai_damaged_messages_name_the_problem(message: dict[str, object], needle: str) -> None:
    problem = shape_message(message, "openai_chat").problem
    assert problem is not None and needle in problem


def test_openai_calls_and_results_without_ids_carry_the_empty_id_and_their_text() -> None:
    call = {"type": "function", "function": {"name": "read", "arguments": "{}"}}
    shape = shape_message({"role": "assistant", "tool_calls": [call, call]}, "openai_chat")
    assert (shape.opens, shape.problem) == (("", ""), None)
    assert _texts(shape) == [("dense", "read{}"), ("dense", "read{}")]
    result = shape_message({"role": "tool", "content": "out"}, "openai_chat")
    assert (result.answers, result.problem) == (("",), None)


def test_anthropic_sdk_blocks_and_tool_results() -> None:
    messages = [
        {"role": "user", "content": "fix the bug"},
        {
            "role": "assistant",
            "content": [
                ThinkingBlock(type="thinking", thinking="hmm", signature="opaque"),
                TextBlock(type="text", text="reading"),
                ToolUseBlock(type="tool_use", id="t1", name="read", input={"path": "a.py"}),
                ToolUseBlock(type="tool_use", id="t2", name="read", input={"path": "b.py"}),
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "A"},
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "content": [{"type": "text", "text": "B"}],
                },
                {"type": "text", "text": "also check c.py"},
            ],
        },
    ]
    shaped = shape_messages(messages, system=[{"type": "text", "text": "be brief"}])
    assert shaped.format == "anthropic"
    assert _texts(shaped.system_shapes[0]) == [("prose", "be brief")]
    assistant, results = shaped.shapes[1], shaped.shapes[2]
    assert assistant.opens == ("t1", "t2")
    assert ("prose", "hmm") in _texts(assistant)
    assert all("opaque" not in text for _, text in _texts(assistant))
    assert results.kind == "user" and results.answers == ("t1", "t2")
    assert _texts(results) == [("dense", "A"), ("dense", "B"), ("prose", "also check c.py")]
    assert not segment(shaped.shapes).problems


def test_anthropic_user_message_of_tool_results_only_is_marked() -> None:
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "A"}
    text = {"type": "text", "text": "and now?"}
    assert shape_message({"role": "user", "content": [result]}, "anthropic").results_only
    assert not shape_message({"role": "user", "content": [result, text]}, "anthropic").results_only
    assert not shape_message({"role": "user", "content": "TASK"}, "anthropic").results_only


def test_anthropic_blocks_without_ids_carry_the_empty_id_and_their_text() -> None:
    use = shape_message(
        {"role": "assistant", "content": [{"type": "tool_use", "name": "ls", "input": {}}]},
        "anthropic",
    )
    assert (use.opens, use.problem, _texts(use)) == (("",), None, [("dense", "ls{}")])
    result = shape_message(
        {"role": "user", "content": [{"type": "tool_result", "content": "a b"}]}, "anthropic"
    )
    assert (result.answers, result.problem, _texts(result)) == (("",), None, [("dense", "a b")])


def test_anthropic_system_role_in_messages_is_damage_with_a_hint() -> None:
    problem = shape_message({"role": "system", "content": "x"}, "anthropic").problem
    assert problem is not None and "system=" in problem


def test_responses_sdk_items_pair_by_call_id_and_unknown_items_travel() -> None:
    items = [
        {"role": "user", "content": "go"},
        ResponseReasoningItem(id="rs_1", type="reasoning", summary=[], encrypted_content="ENC"),
        ResponseFunctionToolCall(type="function_call", call_id="c1", name="ls", arguments="{}"),
        {"type": "future_item", "payload": 1},
        {"type": "function_call_output", "call_id": "c1", "output": "a b"},
    ]
    shaped = shape_messages(items)
    assert shaped.format == "responses"
    kinds = [s.kind for s in shaped.shapes]
    assert kinds == ["user", "assistant", "assistant", "other", "tool"]
    assert ("dense", "ENC") in _texts(shaped.shapes[1])
    seg = segment(shaped.shapes)
    assert seg.turn_starts == (1,) and not seg.problems


def test_responses_reasoning_and_call_items_are_marked() -> None:
    items = [
        ResponseReasoningItem(id="rs_1", type="reasoning", summary=[]),
        ResponseFunctionToolCall(type="function_call", call_id="c1", name="ls", arguments="{}"),
        {"type": "web_search_call", "id": "ws", "status": "completed", "action": {}},
        {"type": "function_call_output", "call_id": "c1", "output": "a b"},
        {"type": "message", "role": "assistant", "content": "done"},
    ]
    shapes = shape_messages(items).shapes
    assert [(s.reasoning, s.call_item) for s in shapes] == [
        (True, False),
        (False, True),
        (False, True),
        (False, False),
        (False, False),
    ]


def test_responses_items_without_call_ids_carry_the_empty_id() -> None:
    call = shape_message({"type": "function_call", "name": "ls", "arguments": "{}"}, "responses")
    assert (call.opens, call.problem) == (("",), None)
    # an output item's own id names the output, never the call it answers
    output = shape_message(
        {"type": "function_call_output", "id": "fco_1", "output": "x"}, "responses"
    )
    assert (output.answers, output.problem) == (("",), None)


def test_responses_builtin_calls_pair_and_self_contained_calls_do_not_open() -> None:
    items = [
        {"role": "user", "content": "go"},
        {"type": "web_search_call", "id": "ws", "status": "completed", "action": {}},
        {"type": "computer_call", "call_id": "cc", "action": {"type": "click"}},
        {
            "type": "computer_call_output",
            "call_id": "cc",
            "output": {"type": "computer_screenshot"},
        },
    ]
    shaped = shape_messages(items)
    assert shaped.shapes[1].opens == ()
    assert shaped.shapes[3].media_items == 1
    assert not segment(shaped.shapes).problems


@pytest.mark.parametrize(
    ("messages", "system", "expected"),
    [
        ([{"role": "user", "content": "hi"}], None, "openai_chat"),
        ([{"role": "user", "content": "hi"}], "sys", "anthropic"),
        ([{"role": "tool", "tool_call_id": "a", "content": ""}], None, "openai_chat"),
        (
            [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]}],
            None,
            "anthropic",
        ),
        ([{"type": "function_call_output", "call_id": "a", "output": ""}], None, "responses"),
        ([{"role": "user", "content": [{"type": "input_text", "text": "x"}]}], None, "responses"),
    ],
)
def test_detect_format(messages: list[object], system: object, expected: str) -> None:
    assert detect_format(messages, system=system) == expected


@pytest.mark.parametrize("bad", [{"role": "user"}, "hello", 3, None])
def test_not_a_list_of_messages_is_a_typed_error(bad: object) -> None:
    with pytest.raises(UnknownFormatError, match="must be a list of messages"):
        shape_messages(bad)  # type: ignore[arg-type]


def test_unknown_explicit_format_is_named() -> None:
    with pytest.raises(UnknownFormatError, match="unknown format 'gemini'"):
        shape_messages([], format="gemini")


def test_system_argument_with_another_format_is_rejected() -> None:
    with pytest.raises(UnknownFormatError, match="only used by the Anthropic format"):
        shape_messages([{"role": "user", "content": "x"}], format="openai_chat", system="s")
