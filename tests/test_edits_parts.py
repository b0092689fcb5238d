"""Finding tool results and calls in every format: paired as turns.py pairs them."""

from __future__ import annotations

import itertools
import json
from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings

from tests.edit_fixtures import anthropic_transcript, chat_transcript, responses_transcript, seg
from tests.transcripts import FORMATS, Plan, plans, render_labelled
from windowguard.core.adapters import shape_messages
from windowguard.core.edits import HEAD_TURN, looks_failed, tool_calls, tool_results
from windowguard.core.exceptions import InvalidTranscriptError
from windowguard.core.turns import segment


def reference_pairs(messages: list[Any], fmt: str) -> list[int | None]:
    """The message index of the call each answer of the transcript pairs with, computed
    from the adapters' shapes with turns.py's rule (by id within a unit, by position)."""
    shapes = shape_messages(messages, format=fmt).shapes
    s = segment(shapes)
    bounds = [0, *s.turn_starts, len(messages)] if s.turn_starts else [0, len(messages)]
    out: list[int | None] = []
    for a, b in itertools.pairwise(bounds):
        pending: dict[str, deque[int]] = {}
        for i in range(a, b):
            for call_id in shapes[i].opens:
                pending.setdefault(call_id, deque()).append(i)
            for call_id in shapes[i].answers:
                waiting = pending.get(call_id)
                out.append(waiting.popleft() if waiting else None)
    return out


@settings(max_examples=120)
@given(plan=plans())
def test_results_pair_with_their_calls_exactly_as_turns_pair_them(plan: Plan) -> None:
    for fmt in FORMATS:
        rendered = render_labelled(plan, fmt)
        messages = rendered.messages
        head_stop, turn_starts = seg(messages, fmt)
        results = tool_results(messages, fmt, head_stop, turn_starts)
        assert [r.call_index for r in results] == reference_pairs(messages, fmt)
        bounds = [*turn_starts, len(messages)]
        for r in results:
            expected_turn = HEAD_TURN
            for t in range(len(turn_starts)):
                if bounds[t] <= r.index < bounds[t + 1]:
                    expected_turn = t
            assert r.turn == expected_turn


@settings(max_examples=120)
@given(plan=plans())
def test_each_result_is_found_with_its_text_tool_and_arguments(plan: Plan) -> None:
    for fmt in FORMATS:
        rendered = render_labelled(plan, fmt)
        messages = rendered.messages
        results = tool_results(messages, fmt, *seg(messages, fmt))
        expected = [
            (json.loads(call), result)
            for turn in plan.turns
            for call, result in zip(turn.calls, turn.results, strict=True)
        ]
        assert len(results) == len(expected)
        for ref, (arguments, text) in zip(results, expected, strict=True):
            assert ref.text == text
            assert ref.tool_name == "read"
            assert json.loads(ref.arguments) == arguments
            assert ref.call_index is not None and ref.call_part is not None
            assert rendered.labels[ref.index].turn == rendered.labels[ref.call_index].turn
        calls = tool_calls(messages, fmt, *seg(messages, fmt))
        assert [json.loads(c.arguments) for c in calls] == [a for a, _ in expected]
        assert {(r.call_index, r.call_part) for r in results} == {(c.index, c.part) for c in calls}


def test_a_segmentation_that_does_not_fit_the_transcript_is_refused() -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    for head_stop, turn_starts in [(3, ()), (1, ()), (1, (0,)), (0, (1,)), (1, (1, 1))]:
        with pytest.raises(InvalidTranscriptError, match="do not segment"):
            tool_results(messages, "openai_chat", head_stop, turn_starts)


# -- OpenAI Chat ------------------------------------------------------------------------


def test_chat_sdk_calls_and_results_are_found() -> None:
    messages = chat_transcript()
    results = tool_results(messages, "openai_chat", *seg(messages, "openai_chat"))
    assert [
        (r.index, r.part, r.call_id, r.tool_name, r.call_index, r.call_part) for r in results
    ] == [
        (3, 0, "call_0", "read_file", 2, 0),
        (4, 0, "call_1", "patch", 2, 1),
    ]
    assert results[0].arguments == '{"path": "a.py"}' and not results[0].is_error
    assert results[1].text == "Error: patch failed\nline 3" and results[1].media_items == 1
    assert results[1].is_error and results[1].arguments == "*** Begin"
    calls = tool_calls(messages, "openai_chat", *seg(messages, "openai_chat"))
    assert [(c.part, c.tool_name, c.clearable) for c in calls] == [
        (0, "read_file", True),
        (1, "patch", True),
    ]


def test_the_legacy_function_call_pairs_by_name() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "function_call": {"name": "ls", "arguments": "{}"}},
        {"role": "function", "name": "ls", "content": "a b c"},
    ]
    (ref,) = tool_results(messages, "openai_chat", *seg(messages, "openai_chat"))
    assert (ref.call_index, ref.call_part, ref.tool_name, ref.text) == (1, -1, "ls", "a b c")


def test_an_orphaned_result_is_found_unpaired() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "ok"},
        {"role": "tool", "tool_call_id": "nowhere", "name": "grep", "content": "x"},
    ]
    (ref,) = tool_results(messages, "openai_chat", *seg(messages, "openai_chat"))
    assert ref.call_index is None and ref.tool_name == "grep" and ref.arguments == ""


# -- Anthropic ---------------------------------------------------------------------------


def test_anthropic_results_are_blocks_of_one_user_message() -> None:
    messages = anthropic_transcript()
    results = tool_results(messages, "anthropic", *seg(messages, "anthropic"))
    assert [(r.index, r.part, r.call_part, r.is_error) for r in results] == [
        (2, 0, 2, False),
        (2, 1, 3, True),  # is_error, although the text does not say so
    ]
    assert results[1].text == "no such file" and results[1].media_items == 1
    assert json.loads(results[1].arguments) == {"path": "b"}


def test_anthropic_calls_next_to_signed_thinking_are_not_clearable() -> None:
    messages = anthropic_transcript()
    calls = tool_calls(messages, "anthropic", *seg(messages, "anthropic"))
    assert [c.part for c in calls] == [2, 3]
    assert all(not c.clearable and "thinking" in (c.reason or "") for c in calls)
    plain = [messages[0], {"role": "assistant", "content": messages[1].content[2:]}, messages[2]]
    assert all(c.clearable for c in tool_calls(plain, "anthropic", *seg(plain, "anthropic")))


# -- Responses --------------------------------------------------------------------------


def test_responses_items_are_found_with_sdk_objects() -> None:
    items = responses_transcript(reasoning=False)
    results = tool_results(items, "responses", *seg(items, "responses"))
    assert [(r.index, r.tool_name, r.text, r.media_items) for r in results] == [
        (2, "read", "body", 1),
        (4, "sh", "a\nb", 0),
        (6, "computer", "", 1),
    ]
    calls = tool_calls(items, "responses", *seg(items, "responses"))
    assert [(c.tool_name, c.clearable) for c in calls] == [
        ("read", True),
        ("sh", True),
        ("computer", False),
    ]
    assert "typed action" in (calls[2].reason or "")


def test_responses_calls_of_a_turn_with_reasoning_keep_their_inputs() -> None:
    items = responses_transcript(reasoning=True)
    calls = tool_calls(items, "responses", *seg(items, "responses"))
    assert calls and all(not c.clearable for c in calls)
    assert "reasoning item" in (calls[0].reason or "")
    # their outputs are separate items: still found, and editable
    assert len(tool_results(items, "responses", *seg(items, "responses"))) == 3


def test_mcp_approvals_pair_but_are_no_tool_parts() -> None:
    items = [
        {"role": "user", "content": "go"},
        {
            "type": "mcp_approval_request",
            "id": "mcpr_1",
            "name": "x",
            "arguments": "{}",
            "server_label": "s",
        },
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True},
    ]
    assert tool_results(items, "responses", *seg(items, "responses")) == []
    assert tool_calls(items, "responses", *seg(items, "responses")) == []


@pytest.mark.parametrize(
    ("text", "failed"),
    [
        ("Error: no such file", True),
        ("error[E0425]: cannot find value", True),
        ("  \nFileNotFoundError: [Errno 2] x", True),
        ("Traceback (most recent call last):\n  File", True),
        ("fatal: not a git repository", True),
        ('{"error": "rate limited"}', True),
        ("npm ERR! code ENOENT", True),
        ("Command failed with exit code 1", True),
        ("Failed to compile", True),
        ("all 12 tests passed", False),
        ("The error handling in app.py looks fine", False),
        ("", False),
        ("def error_handler():", False),
    ],
)
def test_looks_failed(text: str, failed: bool) -> None:
    assert looks_failed(text) is failed
