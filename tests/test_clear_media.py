"""A clear replaces a whole tool result: its images and documents go with its text.

Before, the clear replaced a result's text and kept its media, and passed over a result
with no text at all. A computer-use agent's screenshots (a ``tool_result`` holding only an
image) were then never cleared: once they filled the window, whole turns -- the agent's
reasoning and calls -- were dropped instead. Anthropic's ``clear_tool_uses_20250919`` and
LangChain's ``ClearToolUsesEdit`` replace the whole result; so does the clear now. A
clamp still cuts text only, and a Responses output whose type the API fixes (a computer
call's screenshot) is never rewritten.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.responses import ResponseInputImage

import windowguard as wg
from windowguard.core.adapters import shaper
from windowguard.core.edits import media_droppable, replace_result_text, tool_results
from windowguard.core.exceptions import ConfigurationError
from windowguard.core.turns import segment

from .exact_tokenizers import require

PLACEHOLDER = "[cleared to save context: "
PNG = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
IMAGE = {"type": "image", "source": PNG}
DOCUMENT = {
    "type": "document",
    "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"},
}
CHAT_IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
INPUT_IMAGE = {"type": "input_image", "detail": "auto", "image_url": "data:image/png;base64,AA"}
TASK = "Open the settings page and turn on dark mode."


def screenshot_run(turns: int) -> list[dict[str, Any]]:
    """An Anthropic computer-use-style transcript: each turn clicks and gets a screenshot."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for i in range(turns):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Step {i}: I click the next menu entry."},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{i:03d}",
                        "name": "screenshot",
                        "input": {"step": i},
                    },
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{i:03d}", "content": [IMAGE]}
                ],
            }
        )
    return messages


def images_in(message: Any) -> int:
    return json.dumps(message).count('"type": "image"')


def test_screenshots_are_cleared_instead_of_turns_dropped() -> None:
    messages = screenshot_run(40)
    before = copy.deepcopy(messages)
    info = wg.ModelInfo(32_000)
    clearing = wg.ContextWindowManager(model_info=info)  # the default edits
    dropping = wg.ContextWindowManager(model_info=info, edits=())
    fit = clearing.fit(messages, max_tokens=1_024, format="anthropic")
    dropped = dropping.fit(messages, max_tokens=1_024, format="anthropic")

    assert messages == before  # the caller's transcript is untouched
    # Drop-only loses most of the agent's steps; the clear keeps every one of them.
    assert dropped.dropped_turns >= 20
    assert fit.dropped_turns == 0 and len(fit.messages) == len(messages)
    clears = [e for e in fit.edits if e.kind == "clear"]
    assert len(clears) >= 20
    media = clearing.estimator.priors.media_item_tokens
    for record in clears:
        assert record.tool_names == ("screenshot",)
        assert record.tokens_before == media  # an image at the family's allowance
        assert 0 < record.tokens_after < media
    cleared = {i for record in clears for i in record.messages}
    inputs = {i for e in fit.edits if e.kind == "clear_inputs" for i in e.messages}
    for index, message in enumerate(fit.messages):
        if index in cleared:
            result = message["content"][0]
            assert message is not messages[index] and images_in(message) == 0
            assert result["tool_use_id"] == messages[index]["content"][0]["tool_use_id"]
            assert result["content"].startswith(PLACEHOLDER + "screenshot(")
            assert result["content"].endswith(f"{media:,} tokens]")
        elif index in inputs:  # the default edits clear the calls' arguments too
            assert message["content"][0] is messages[index]["content"][0]  # the reasoning
            assert message["content"][1]["input"] == {}
        else:
            assert message is messages[index]
    # The newest turn's screenshot is what the agent looks at now: it is sent.
    assert fit.messages[-1] is messages[-1] and images_in(fit.messages[-1]) == 1
    # Every call keeps its result: the request is a valid transcript.
    seg = segment([shaper("anthropic")(m) for m in fit.messages])
    assert not seg.problems


def test_the_placeholder_counts_text_and_media_and_other_blocks_stay() -> None:
    text = "\n".join(f"row {n}: " + "values " * 12 for n in range(400))
    messages: list[Any] = [{"role": "user", "content": TASK}]
    for i in range(6):
        messages += [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "report", "input": {"n": i}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{i}",
                        "content": [{"type": "text", "text": text}, IMAGE, DOCUMENT],
                    },
                    {"type": "text", "text": f"and here is my own sketch {i}"},
                    IMAGE,  # the user's own image, beside the result: never edited
                ],
            },
        ]
    before = copy.deepcopy(messages)
    counter = require("o200k")
    manager = wg.ContextWindowManager(
        model_info=wg.ModelInfo(32_000, tokenizer="o200k"),
        edits=[wg.ClearToolResults(keep=1, clear_at_least=0)],
    )
    fit = manager.fit(messages, max_tokens=1_024, format="anthropic")
    assert messages == before
    clears = [e for e in fit.edits if e.kind == "clear"]
    assert clears
    media = manager.estimator.priors.media_item_tokens
    for record in clears:
        (index,) = record.messages
        sent = fit.messages[index]
        result, note, own_image = sent["content"]
        assert result["content"] == [{"type": "text", "text": result["content"][0]["text"]}]
        tokens = int(result["content"][0]["text"].rsplit(", ", 1)[1].split()[0].replace(",", ""))
        assert tokens == record.tokens_before
        # the text counted exactly, plus the image's and the document's allowance
        assert tokens == counter.count(text) + 2 * media
        assert note is messages[index]["content"][1] and own_image is IMAGE
        assert sent["content"][2] is messages[index]["content"][2]


def test_replace_result_text_drops_media_only_when_asked() -> None:
    chat = {
        "role": "tool",
        "tool_call_id": "c",
        "content": [{"type": "text", "text": "a"}, CHAT_IMAGE],
    }
    kept = replace_result_text(chat, "openai_chat", {0: "new"})
    assert kept["content"] == [{"type": "text", "text": "new"}, CHAT_IMAGE]
    gone = replace_result_text(chat, "openai_chat", {0: "new"}, drop_media=True)
    assert gone["content"] == [{"type": "text", "text": "new"}]
    only_image = {"role": "tool", "tool_call_id": "c", "content": [CHAT_IMAGE]}
    assert (
        replace_result_text(only_image, "openai_chat", {0: "x"}, drop_media=True)["content"] == "x"
    )
    assert chat["content"][1] is CHAT_IMAGE and len(chat["content"]) == 2  # untouched

    block = {"type": "tool_result", "tool_use_id": "t", "content": [IMAGE, DOCUMENT]}
    user = {"role": "user", "content": [block, IMAGE]}
    new = replace_result_text(user, "anthropic", {0: "x"}, drop_media=True)
    assert new["content"] == [{"type": "tool_result", "tool_use_id": "t", "content": "x"}, IMAGE]
    assert new["content"][1] is IMAGE and block["content"] == [IMAGE, DOCUMENT]

    # Responses: a function output's SDK parts with no text: the output becomes the text
    sdk = {
        "type": "function_call_output",
        "call_id": "c",
        "output": [ResponseInputImage(type="input_image", detail="auto", image_url="data:,")],
    }
    with pytest.raises(ConfigurationError, match="no text part"):
        replace_result_text(sdk, "responses", {0: "x"})
    assert replace_result_text(sdk, "responses", {0: "x"}, drop_media=True)["output"] == "x"


def test_media_droppable_names_the_typed_responses_outputs() -> None:
    assert media_droppable({"role": "tool"}, "openai_chat")
    assert media_droppable({"role": "user"}, "anthropic")
    assert media_droppable({"type": "function_call_output"}, "responses")
    assert media_droppable({"type": "custom_tool_call_output"}, "responses")
    assert not media_droppable({"type": "computer_call_output"}, "responses")
    assert not media_droppable({"type": "shell_call_output"}, "responses")


# -- any format, any mix of text and media ------------------------------------------------


def _chat_turn(i: int, text: str, images: int) -> list[dict[str, Any]]:
    call = {
        "id": f"c{i}",
        "type": "function",
        "function": {"name": "look", "arguments": json.dumps({"i": i})},
    }
    parts: list[Any] = [{"type": "text", "text": text}] if text else []
    parts += [CHAT_IMAGE] * images
    content: Any = parts if images else text
    return [
        {"role": "assistant", "content": f"step {i}", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": content},
    ]


def _anthropic_turn(i: int, text: str, images: int) -> list[dict[str, Any]]:
    parts: list[Any] = [{"type": "text", "text": text}] if text else []
    parts += [IMAGE] * images
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"step {i}"},
                {"type": "tool_use", "id": f"t{i}", "name": "look", "input": {"i": i}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": f"t{i}",
                    "content": parts if images else text,
                }
            ],
        },
    ]


def _responses_turn(i: int, text: str, images: int) -> list[dict[str, Any]]:
    if images and not text and i % 2:  # a computer call: its output must stay a screenshot
        return [
            {
                "type": "computer_call",
                "call_id": f"r{i}",
                "id": f"cu_{i}",
                "action": {"type": "screenshot"},
                "status": "completed",
                "pending_safety_checks": [],
            },
            {
                "type": "computer_call_output",
                "call_id": f"r{i}",
                "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA"},
            },
        ]
    parts: list[Any] = [{"type": "input_text", "text": text}] if text else []
    parts += [INPUT_IMAGE] * images
    return [
        {
            "type": "function_call",
            "call_id": f"r{i}",
            "name": "look",
            "arguments": json.dumps({"i": i}),
        },
        {"type": "function_call_output", "call_id": f"r{i}", "output": parts if images else text},
    ]


TURNS = {"openai_chat": _chat_turn, "anthropic": _anthropic_turn, "responses": _responses_turn}


@settings(max_examples=40, deadline=None)
@given(
    fmt=st.sampled_from(sorted(TURNS)),
    plan=st.lists(st.tuples(st.integers(0, 3_000), st.integers(0, 2)), min_size=3, max_size=24),
    keep=st.integers(1, 3),
    window=st.sampled_from([8_192, 16_384, 32_768]),
)
def test_a_clear_leaves_no_media_in_what_it_replaced(
    fmt: str, plan: list[tuple[int, int]], keep: int, window: int
) -> None:
    messages: list[Any] = [{"role": "user", "content": TASK}]
    for i, (chars, images) in enumerate(plan):
        text = ("word " * (chars // 5 + 1))[:chars] if chars or not images else ""
        messages += TURNS[fmt](i, text, images)
    before = copy.deepcopy(messages)
    manager = wg.ContextWindowManager(
        model_info=wg.ModelInfo(window, tokenizer="o200k"),
        edits=[wg.ClearToolResults(keep=keep, clear_at_least=0)],
    )
    try:
        fit = manager.fit(messages, max_tokens=512, format=fmt)
    except wg.ContextTruncatedError:
        return  # the newest turn alone does not fit this window
    assert messages == before
    sent = fit.messages
    seg = segment([shaper(fmt)(m) for m in sent])
    assert not seg.problems  # no call lost its result, no result its call
    own = {id(m) for m in messages}
    edited = {i for i, m in enumerate(sent) if id(m) not in own}
    placeholders = set()
    for ref in tool_results(sent, fmt, seg.head_stop, seg.turn_starts):
        if ref.index in edited:  # a cleared result: nothing of it is left but the text
            assert ref.text.startswith(PLACEHOLDER) and ref.media_items == 0
            assert media_droppable(sent[ref.index], fmt)
            placeholders.add(ref.index)
    assert edited == placeholders  # only results were edited
    assert bool(edited) == any(e.kind == "clear" for e in fit.edits)
    # A computer call's screenshot is never rewritten.
    for message in sent:
        if isinstance(message, dict) and message.get("type") == "computer_call_output":
            assert id(message) in own
