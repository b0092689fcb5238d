"""The edit stages read a fit's tool calls and results once (issue 18, item 9: a cold fit
near the edge spent 32 ms of 285 reading them three times at 1,000 messages), and what
they make is the same as when every stage reads them again."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import windowguard as wg
from tests.edit_fixtures import read_file_turn
from windowguard.pipeline import _editing

HEAD = [{"role": "system", "content": "You are careful."}, {"role": "user", "content": "Fix it."}]


def _head(fmt: str) -> list[Any]:
    # Anthropic's system prompt is an argument of its own, not a message.
    return HEAD[1:] if fmt == "anthropic" else list(HEAD)


def _anthropic_turn(i: int, lines: int) -> list[dict[str, Any]]:
    rng = random.Random(i)
    body = "\n".join(f"{n:05d} item_{rng.randrange(10**6)} = load({n})" for n in range(lines))
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"Step {i}"},
                {"type": "tool_use", "id": f"toolu_{i}", "name": "read", "input": {"n": i}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": body}],
        },
    ]


def _responses_turn(i: int, lines: int) -> list[dict[str, Any]]:
    rng = random.Random(i)
    body = "\n".join(f"{n:05d} row_{rng.randrange(10**6)} = get({n})" for n in range(lines))
    return [
        {
            "type": "function_call",
            "call_id": f"fc_{i}",
            "name": "read",
            "arguments": json.dumps({"n": i}),
        },
        {"type": "function_call_output", "call_id": f"fc_{i}", "output": body},
    ]


TURNS = {"openai_chat": read_file_turn, "anthropic": _anthropic_turn, "responses": _responses_turn}


def _forgetting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every stage reads the transcript again, as before the reading was kept."""
    real = _editing._refs

    def again(ctx: Any, start: int, *, original: bool = False) -> Any:
        ctx.refs.clear()
        return real(ctx, start, original=original)

    monkeypatch.setattr(_editing, "_refs", again)


def _manager(window: int, edits: Any = None) -> wg.ContextWindowManager:
    return wg.ContextWindowManager(
        model_info=wg.ModelInfo(context_window=window, max_output_tokens=1_024),
        counter="heuristic",
        **({} if edits is None else {"edits": edits}),
    )


def _loop(fmt: str, sends: int, lines: int, window: int, edits: Any = None) -> list[wg.Fit]:
    mgr = _manager(window, edits)
    messages: list[Any] = _head(fmt)
    fits = []
    for i in range(sends):
        messages += TURNS[fmt](i, lines)
        fits.append(mgr.fit(messages, max_tokens=1_024, format=fmt, last_usage=wg.NO_USAGE))
    return fits


@pytest.mark.parametrize("fmt", list(TURNS))
def test_a_cold_fit_that_clears_reads_the_transcript_once(
    fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages: list[Any] = _head(fmt)
    for i in range(120):
        messages += TURNS[fmt](i, 30)
    reads: list[int] = []
    real = _editing.scan_refs

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(len(args[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(_editing, "scan_refs", counted)
    fit = _manager(16_384).fit(messages, max_tokens=1_024, format=fmt)
    assert any(e.kind == "clear" for e in fit.edits)
    assert any(e.kind == "clear_inputs" for e in fit.edits) or fmt == "anthropic"
    # the clamp's look at what arrived and the clear's block share one reading; the
    # cleared calls' inputs come from it too (replacing results changes no call)
    assert len(reads) == 1, reads


@pytest.mark.parametrize("fmt", list(TURNS))
def test_what_the_stages_make_is_the_same_as_reading_again(
    fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    edits = [
        wg.ClampToolResults(max_tokens=600),
        wg.ClearToolResults(keep=2, clear_inputs=True, low_water=0.3, trigger=0.5),
    ]
    kept = _loop(fmt, 60, 40, 12_000, edits)
    _forgetting(monkeypatch)
    again = _loop(fmt, 60, 40, 12_000, edits)
    assert sum(len(f.edits) for f in kept) > 10  # clamps and clears happened
    assert [f.messages for f in kept] == [f.messages for f in again]
    assert [f.edits for f in kept] == [f.edits for f in again]
    assert [f.dropped_turns for f in kept] == [f.dropped_turns for f in again]


@settings(max_examples=30, deadline=None)
@given(
    fmt=st.sampled_from(list(TURNS)),
    sends=st.integers(min_value=1, max_value=40),
    lines=st.integers(min_value=1, max_value=120),
    window=st.integers(min_value=6_000, max_value=40_000),
    keep=st.integers(min_value=1, max_value=4),
    clamp=st.integers(min_value=100, max_value=3_000),
)
def test_one_reading_never_changes_a_fit(
    fmt: str, sends: int, lines: int, window: int, keep: int, clamp: int
) -> None:
    edits = [
        wg.ClampToolResults(max_tokens=clamp),
        wg.ClearToolResults(keep=keep, clear_inputs=True, low_water=0.3, trigger=0.55),
    ]
    kept = _loop(fmt, sends, lines, window, edits)
    with pytest.MonkeyPatch.context() as patch:
        _forgetting(patch)
        again = _loop(fmt, sends, lines, window, edits)
    assert [f.messages for f in kept] == [f.messages for f in again]
    assert [f.edits for f in kept] == [f.edits for f in again]


@pytest.mark.parametrize("fmt", list(TURNS))
def test_a_reading_is_not_used_after_a_clamp_replaced_a_result(
    fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Three turns arrive at once, each with a result the clamp cuts; the clear then
    # clears the older two in the same fit: it must read the clamped copies (what is
    # sent), not the reading made before the clamp.
    edits = [
        wg.ClampToolResults(max_tokens=400),
        wg.ClearToolResults(keep=1, clear_inputs=True, low_water=0.1, trigger=0.15),
    ]
    mgr = _manager(12_000, edits)
    messages: list[Any] = _head(fmt)
    fits = []
    for i in range(0, 30, 3):
        for j in range(i, i + 3):
            messages += TURNS[fmt](j, 200)
        fits.append(mgr.fit(messages, max_tokens=1_024, format=fmt, last_usage=wg.NO_USAGE))
    both = [f for f in fits if {"clamp", "clear"} <= {e.kind for e in f.edits}]
    assert both, [[e.kind for e in f.edits] for f in fits]
    _forgetting(monkeypatch)
    mgr = _manager(12_000, edits)
    messages = _head(fmt)
    again = []
    for i in range(0, 30, 3):
        for j in range(i, i + 3):
            messages += TURNS[fmt](j, 200)
        again.append(mgr.fit(messages, max_tokens=1_024, format=fmt, last_usage=wg.NO_USAGE))
    assert [f.messages for f in fits] == [f.messages for f in again]
    assert [f.edits for f in fits] == [f.edits for f in again]
