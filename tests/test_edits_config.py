"""The edit stages' configuration values, receipts and summaries."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import windowguard as wg
from tests.edit_fixtures import anthropic_transcript, chat_transcript, responses_transcript
from windowguard.core.adapters import shape_messages
from windowguard.core.edits import (
    DEFAULT_INSTRUCTIONS,
    SUMMARY_PREFIX,
    EditRecord,
    arun_summarizer,
    check_edits,
    render_turns,
    run_summarizer,
    summary_message,
    summary_prompt,
)
from windowguard.core.events import ContextEdited
from windowguard.core.exceptions import ConfigurationError
from windowguard.core.turns import segment


class Store:
    def put(self, text: str, *, tool_name: str | None = None) -> str:
        return "h"

    def read(self, handle: str, offset: int = 0, limit: int | None = None) -> str:
        return ""


def test_clamp_defaults_and_conversions() -> None:
    clamp = wg.ClampToolResults(max_tokens=8_000, exclude_tools=["memory", "plan"])
    assert clamp.keep == "head_tail" and clamp.exclude_tools == ("memory", "plan")
    assert clamp.spill is None
    assert wg.ClampToolResults(max_tokens=100, exclude_tools={"b", "a"}).exclude_tools == ("a", "b")
    assert wg.ClampToolResults(max_tokens=500, spill=Store()).spill is not None
    with pytest.raises(AttributeError):
        clamp.max_tokens = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"max_tokens": 99}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"max_tokens": 1_000.0}, "max_tokens"),
        ({"max_tokens": 1_000, "keep": "middle"}, "keep"),
        ({"max_tokens": 1_000, "exclude_tools": "bash"}, "exclude_tools=['bash']"),
        ({"max_tokens": 1_000, "exclude_tools": [""]}, "exclude_tools"),
        ({"max_tokens": 1_000, "spill": "/tmp/spill"}, "spill"),
    ],
)
def test_clamp_refuses_options_that_cannot_work(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named.replace("[", r"\[").replace("]", r"\]")):
        wg.ClampToolResults(**kwargs)


def test_clear_defaults() -> None:
    clear = wg.ClearToolResults()
    assert (clear.keep, clear.exclude_tools, clear.clear_inputs) == (3, (), False)
    assert clear.clear_at_least == 1_000 and clear.placeholder is None
    custom = wg.ClearToolResults(keep=1, placeholder="[{tool} cleared]", exclude_tools=("x",))
    assert custom.placeholder == "[{tool} cleared]"


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"keep": 0}, "keep"),
        ({"keep": "3"}, "keep"),
        ({"clear_inputs": 1}, "clear_inputs"),
        ({"clear_at_least": -1}, "clear_at_least"),
        ({"placeholder": "{when}"}, "placeholder"),
        ({"placeholder": ""}, "placeholder"),
        ({"exclude_tools": None}, "exclude_tools"),
    ],
)
def test_clear_refuses_options_that_cannot_work(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        wg.ClearToolResults(**kwargs)


def test_summarize_takes_sync_and_async_summarizers() -> None:
    def sync(turns: list[Any], previous: str | None) -> str:
        return "s"

    async def asynchronous(turns: list[Any], previous: str | None) -> str:
        return "a"

    class Callable:
        async def __call__(self, turns: list[Any], previous: str | None) -> str:
            return "c"

    assert not wg.Summarize(sync).is_async
    assert wg.Summarize(asynchronous).is_async
    assert wg.Summarize(Callable()).is_async
    config = wg.Summarize(sync, keep_turns=2, trigger=0.8)
    assert config.instructions == DEFAULT_INSTRUCTIONS and config.trigger == 0.8


@pytest.mark.parametrize(
    ("args", "kwargs", "named"),
    [
        (("not callable",), {}, "summarizer"),
        ((print,), {"keep_turns": 0}, "keep_turns"),
        ((print,), {"trigger": 0}, "trigger"),
        ((print,), {"trigger": 1.5}, "trigger"),
        ((print,), {"trigger": True}, "trigger"),
        ((print,), {"trigger": "90%"}, "trigger"),
        ((print,), {"instructions": " "}, "instructions"),
    ],
)
def test_summarize_refuses_options_that_cannot_work(
    args: tuple[Any, ...], kwargs: dict[str, Any], named: str
) -> None:
    with pytest.raises(ConfigurationError, match=named):
        wg.Summarize(*args, **kwargs)


def test_check_edits() -> None:
    clamp, clear = wg.ClampToolResults(max_tokens=500), wg.ClearToolResults()
    # None is the default (decision 0006, chosen by the retention benchmark); an empty
    # list is drop only
    assert (
        check_edits(None)
        == wg.DEFAULT_EDITS
        == (
            wg.ClampToolResults(max_tokens=0.25),
            wg.ClearToolResults(keep=1, clear_inputs=True, low_water=0.3, trigger=0.55),
        )
    )
    assert check_edits([]) == () and check_edits(()) == ()
    assert check_edits([clear, clamp]) == (clear, clamp)
    with pytest.raises(ConfigurationError, match="two ClearToolResults"):
        check_edits([clear, wg.ClearToolResults(keep=2)])
    with pytest.raises(ConfigurationError, match="edits must hold"):
        check_edits([clamp, "clear"])
    with pytest.raises(ConfigurationError, match="list of edit stages"):
        check_edits("clamp")  # type: ignore[arg-type]


# -- receipts --------------------------------------------------------------------------


def test_an_edit_record_is_its_event() -> None:
    record = EditRecord(
        kind="clear",
        messages=(7, 3, 3),
        tool_names=("read_file", "grep", "read_file"),
        tokens_before=9_000,
        tokens_after=40,
    )
    assert record.messages == (3, 7) and record.tool_names == ("read_file", "grep")
    assert record.tokens_freed == 8_960
    event = record.event(new=False)
    assert isinstance(event, ContextEdited) and event.kind == "context_edited"
    assert event.to_dict() == {
        "event": "context_edited",
        "edit": "clear",
        "messages": [3, 7],
        "tool_names": ["read_file", "grep"],
        "tokens_before": 9_000,
        "tokens_after": 40,
        "tokens_freed": 8_960,
        "new": False,
    }
    assert record.to_dict()["tokens_freed"] == 8_960
    grown = EditRecord(kind="summarize", messages=(2,), tokens_before=10, tokens_after=30)
    assert grown.tokens_freed == 0
    with pytest.raises(ConfigurationError, match="kind"):
        EditRecord(kind="shrink", messages=(), tokens_before=0, tokens_after=0)  # type: ignore[arg-type]


# -- summaries -------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["openai_chat", "anthropic", "responses"])
def test_the_summary_is_a_user_message_each_format_reads_as_one(fmt: Any) -> None:
    message = summary_message(fmt, "They read a.py and b.py.")
    shape = shape_messages([message], format=fmt).shapes[0]
    assert shape.kind == "user" and shape.problem is None and not shape.results_only
    text = (
        message["content"] if isinstance(message["content"], str) else message["content"][0]["text"]
    )
    assert text == SUMMARY_PREFIX + "They read a.py and b.py."


def test_the_summary_takes_its_form_from_the_callers_messages() -> None:
    parts = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}
    assert summary_message("responses", "s", like=parts)["content"][0]["type"] == "input_text"
    bare = summary_message("responses", "s", like={"role": "user", "content": "x"})
    assert "type" not in bare and isinstance(bare["content"], str)
    blocks = summary_message(
        "anthropic", "s", like={"role": "user", "content": [{"type": "text", "text": "t"}]}
    )
    assert blocks["content"] == [{"type": "text", "text": SUMMARY_PREFIX + "s"}]
    with pytest.raises(ConfigurationError, match="non-empty"):
        summary_message("openai_chat", "  ")


def test_a_summary_after_the_head_keeps_head_and_turns_in_every_format() -> None:
    for fmt, messages in (
        ("openai_chat", chat_transcript()),
        ("anthropic", anthropic_transcript()),
        ("responses", responses_transcript(reasoning=True)),
    ):
        before = segment(shape_messages(messages, format=fmt).shapes)
        stop = before.head_stop
        summary = summary_message(fmt, "earlier work", like=messages[stop - 1])  # type: ignore[arg-type]
        spliced = [*messages[:stop], summary, *messages[stop:]]
        after = segment(shape_messages(spliced, format=fmt).shapes)
        assert after.head_stop == stop + 1  # the summary joins the head, after the task
        assert len(after.turn_starts) == len(before.turn_starts) and not after.problems


def test_render_turns_is_plain_deterministic_text() -> None:
    chat = render_turns(chat_transcript(), "openai_chat")
    assert '[assistant calls read_file (call_0)]\n{"path": "a.py"}' in chat
    assert "[read_file (call_0) result]\nprint('a')" in chat
    assert "[patch (call_1) result]\nError: patch failed\n[image]\nline 3" in chat
    assert chat == render_turns(chat_transcript(), "openai_chat")
    anthropic = render_turns(anthropic_transcript(), "anthropic")
    assert "[assistant thinking]\nneed both files" in anthropic
    assert "sig==" not in anthropic  # the signature is opaque: never shown
    assert "[read_file (toolu_2) result, an error]\nno such file\n[image]" in anthropic
    responses = render_turns(responses_transcript(reasoning=True), "responses")
    assert "[assistant reasoning, encrypted]" in responses and "gAAA" not in responses
    assert "[assistant calls sh (call_b)]\nls -la" in responses


def test_summary_prompt_puts_instructions_previous_summary_and_turns() -> None:
    prompt = summary_prompt("[user]\nhi", "they said hi", "Keep names.")
    assert prompt.startswith("Keep names.")
    assert "<previous_summary>\nthey said hi\n</previous_summary>" in prompt
    assert prompt.endswith("<turns>\n[user]\nhi\n</turns>")
    assert "<previous_summary>" not in summary_prompt("[user]\nhi", None)


def test_summarizers_run_sync_and_async_and_their_text_is_checked() -> None:
    seen: list[Any] = []

    def sync(turns: list[Any], previous: str | None) -> str:
        seen.append((len(turns), previous))
        return "  the summary \n"

    async def asynchronous(turns: list[Any], previous: str | None) -> str:
        return f"updated {previous}"

    turns = chat_transcript()[2:]
    assert run_summarizer(wg.Summarize(sync), turns, None) == "the summary"
    assert seen == [(3, None)]
    assert asyncio.run(arun_summarizer(wg.Summarize(asynchronous), turns, "v1")) == "updated v1"
    assert asyncio.run(arun_summarizer(wg.Summarize(sync), turns, "v1")) == "the summary"
    with pytest.raises(ConfigurationError, match="async"):
        run_summarizer(wg.Summarize(asynchronous), turns, None)
    with pytest.raises(ConfigurationError, match="non-empty text"):
        run_summarizer(wg.Summarize(lambda t, p: ""), turns, None)
    with pytest.raises(ConfigurationError, match="non-empty text"):
        run_summarizer(wg.Summarize(lambda t, p: 42), turns, None)  # type: ignore[arg-type,return-value]
