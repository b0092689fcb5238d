"""wg.guard(..., edits=[...]) through the official SDKs' real HTTP stack (issue 19).

The openai and anthropic clients, sync and async, run a tool loop against the
emulator whose results outgrow an 8k window, one of them three times the window
(tests/surface_edits.py). With edit stages the huge result is sent clamped and the run
goes on, old results are cleared before any turn is dropped, and the caller's own
transcript is never changed. A guard made without the option sends exactly what one
with ``edits=wg.DEFAULT_EDITS`` sends; with ``edits=()`` it only drops whole turns.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

import windowguard as wg
from windowguard.accounting.discovery import clear_discovery_cache
from windowguard.emulator import Emulator
from windowguard.guard import guard

from .surface_edits import (
    EDITS,
    REPLY_TOKENS,
    STEPS,
    WINDOW,
    Received,
    assistants,
    check_clamped_and_cleared,
    only_drops,
    result_text,
    step_of,
)

MODEL = "emulated-model"
SYSTEM = "You are a careful coding agent."
TASK = "Read src/m0.py onwards and find the bug."
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
CHAT_TOOLS = [
    {
        "type": "function",
        "function": {"name": "read_file", "description": "Read.", "parameters": SCHEMA},
    }
]
ANTHROPIC_TOOLS = [{"name": "read_file", "description": "Read.", "input_schema": SCHEMA}]


@pytest.fixture(autouse=True)
def _fresh_discovery() -> Iterator[None]:
    clear_discovery_cache()
    wg.clear_counter_cache()
    yield
    clear_discovery_cache()
    wg.clear_counter_cache()


def _chat_step(response: Any, transcript: list[Any], huge: bool = True) -> bool:
    message = response.choices[0].message
    calls = message.tool_calls or []
    transcript.append(
        {
            "role": "assistant",
            "content": message.content,
            **(
                {
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {
                                "name": c.function.name,
                                "arguments": c.function.arguments,
                            },
                        }
                        for c in calls
                    ]
                }
                if calls
                else {}
            ),
        }
    )
    for c in calls:
        step = step_of(json.loads(c.function.arguments))
        transcript.append(
            {"role": "tool", "tool_call_id": c.id, "content": result_text(step, huge=huge)}
        )
    return not calls


def _anthropic_step(message: Any, transcript: list[Any], huge: bool = True) -> bool:
    blocks = [b.model_dump(exclude_none=True) for b in message.content]
    transcript.append({"role": "assistant", "content": blocks})
    uses = [b for b in message.content if b.type == "tool_use"]
    if uses:
        transcript.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": b.id,
                        "content": result_text(step_of(b.input), huge=huge),
                    }
                    for b in uses
                ],
            }
        )
    return not uses


def _kwargs(vendor: str, transcript: list[Any]) -> dict[str, Any]:
    if vendor == "anthropic":
        return {
            "model": MODEL,
            "system": SYSTEM,
            "messages": transcript,
            "tools": ANTHROPIC_TOOLS,
            "max_tokens": REPLY_TOKENS,
        }
    return {"model": MODEL, "messages": transcript, "tools": CHAT_TOOLS, "max_tokens": REPLY_TOKENS}


def _start(vendor: str) -> list[Any]:
    head = [{"role": "user", "content": TASK}]
    return head if vendor == "anthropic" else [{"role": "system", "content": SYSTEM}, *head]


def _client(vendor: str, emu: Emulator, is_async: bool) -> Any:
    if vendor == "anthropic":
        cls: Any = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
        return cls(base_url=emu.root_url, api_key="k", max_retries=0)
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    return cls(base_url=emu.base_url, api_key="k", max_retries=0)


def _run(
    vendor: str, is_async: bool, *, huge: bool = True, **options: Any
) -> tuple[Received, list[int], list[Any]]:
    """The loop through ``wg.guard(client, **options)``: what the emulator received, its
    statuses, and the caller's transcript (checked unchanged by every call). ``huge``:
    one result is three times the window."""
    received = Received()
    transcript = _start(vendor)
    flavor = "anthropic" if vendor == "anthropic" else "openai"
    info = wg.ModelInfo(context_window=WINDOW)
    with Emulator(flavor=flavor, context_window=WINDOW, scenario=received) as emu:
        raw = _client(vendor, emu, is_async)
        client = guard(raw, model_info=info, discover=False, **options)
        create = client.messages.create if vendor == "anthropic" else client.chat.completions.create
        step = _anthropic_step if vendor == "anthropic" else _chat_step

        def after(response: Any, before: list[Any]) -> bool:
            assert transcript == before, "the caller's transcript was changed"
            return step(response, transcript, huge)

        if is_async:

            async def main() -> None:
                try:
                    for _ in range(STEPS + 1):
                        before = copy.deepcopy(transcript)
                        if after(await create(**_kwargs(vendor, transcript)), before):
                            return
                finally:
                    await raw.close()

            asyncio.run(main())
        else:
            with raw:
                for _ in range(STEPS + 1):
                    before = copy.deepcopy(transcript)
                    if after(create(**_kwargs(vendor, transcript)), before):
                        break
        statuses = [r.status for r in emu.records]
    return received, statuses, transcript


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_guard_clamps_and_clears_through_the_sdk(vendor: str, is_async: bool) -> None:
    events: list[wg.Event] = []
    received, statuses, transcript = _run(vendor, is_async, edits=EDITS, sinks=[events.append])
    check_clamped_and_cleared(received, statuses)
    # The caller's own transcript still holds every result whole, the huge one too.
    texts = json.dumps(transcript)
    assert json.dumps(result_text(2))[1:-1] in texts
    assert "cut here" not in texts and "cleared to save context" not in texts
    edited = [e for e in events if isinstance(e, wg.ContextEdited)]
    assert {e.edit for e in edited if e.new} == {"clamp", "clear"}
    assert not any(isinstance(e, wg.TranscriptPruned) for e in events)


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_the_default_is_default_edits_and_no_edits_only_drops(vendor: str) -> None:
    plain, plain_statuses, _ = _run(vendor, False, huge=False)
    default, default_statuses, _ = _run(vendor, False, huge=False, edits=wg.DEFAULT_EDITS)
    empty, empty_statuses, _ = _run(vendor, False, huge=False, edits=())
    assert plain.requests == default.requests  # a guard without the option: DEFAULT_EDITS
    assert plain_statuses == default_statuses == empty_statuses == [200] * (STEPS + 1)
    assert not only_drops(plain)  # old results were cleared
    assert only_drops(empty)
    # drop-only: the loop ran to its end by dropping whole turns (assistants too)
    assert min(assistants(r) - i for i, r in enumerate(empty.requests)) < 0
    # the default keeps more of the model's own turns than dropping alone
    kept = [assistants(r) for r in plain.requests]
    assert sum(kept) > sum(assistants(r) for r in empty.requests)


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_without_a_clamp_a_result_larger_than_the_window_ends_the_run(vendor: str) -> None:
    with pytest.raises(wg.ContextTruncatedError):
        _run(vendor, False, edits=[wg.ClearToolResults(keep=2)])


def test_a_template_manager_brings_its_own_edits() -> None:
    template = wg.ContextWindowManager(model_info=wg.ModelInfo(context_window=WINDOW), edits=EDITS)
    received = Received()
    with (
        Emulator(flavor="openai", context_window=WINDOW, scenario=received) as emu,
        openai.OpenAI(base_url=emu.base_url, api_key="k", max_retries=0) as raw,
    ):
        client = guard(raw, manager=template, discover=False)
        transcript = _start("openai")
        for _ in range(STEPS + 1):
            if _chat_step(
                client.chat.completions.create(**_kwargs("openai", transcript)), transcript
            ):
                break
        statuses = [r.status for r in emu.records]
    check_clamped_and_cleared(received, statuses)


@pytest.mark.parametrize(
    ("options", "wording"),
    [
        ({"edits": ["clear"]}, "guard(): edits must hold wg.ClampToolResults"),
        ({"edits": wg.ClearToolResults()}, "guard(): edits must be a list"),
        (
            {"edits": [wg.ClearToolResults(), wg.ClearToolResults(keep=1)]},
            "guard(): edits holds two",
        ),
        (
            {"edits": EDITS, "manager": wg.ContextWindowManager(model="gpt-4o")},
            "pass edits to the ContextWindowManager given as manager=, not to guard()",
        ),
    ],
)
def test_bad_edits_are_refused_when_the_guard_is_made(
    options: dict[str, Any], wording: str
) -> None:
    with (
        openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="k") as raw,
        pytest.raises(wg.ConfigurationError) as refused,
    ):
        guard(raw, **options)
    assert wording in str(refused.value)
