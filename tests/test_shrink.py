"""The max_tokens shrink guard (seed 003) and its agreement with the manager."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import windowguard as wg
from windowguard.core.shrink import fit_max_tokens


def _messages(chars: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": "x" * chars}]


def test_seed_arithmetic_exactly() -> None:
    messages = _messages(3000)
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    r = wg.shrink_max_tokens(messages, tools=tools, context_window=8192, requested=8192)
    estimated = math.ceil((len(json.dumps(messages)) + len(json.dumps(tools))) / 3)
    assert r.estimated_input_tokens == estimated
    assert r.max_tokens == 8192 - estimated - 500
    assert r.shrunk and not r.emergency
    assert isinstance(r.event, wg.MaxTokensShrunk)


def test_tool_schemas_always_count() -> None:
    tools = [{"type": "function", "function": {"name": "t", "description": "d" * 5700}}]
    with_tools = wg.shrink_max_tokens(
        _messages(10), tools=tools, context_window=131_072, requested=131_072
    )
    without = wg.shrink_max_tokens(_messages(10), context_window=131_072, requested=131_072)
    assert without.max_tokens - with_tools.max_tokens >= 1900


def test_no_defensive_cap_large_budget_kept_while_it_fits() -> None:
    r = wg.shrink_max_tokens(_messages(1000), context_window=128_000, requested=96_000)
    assert r.max_tokens == 96_000
    assert not r.shrunk and r.event is None


def test_emergency_clamps_to_floor_and_says_so() -> None:
    r = wg.shrink_max_tokens(_messages(30_000), context_window=8192, requested=4096)
    assert r.emergency and r.max_tokens == 200
    assert isinstance(r.event, wg.ContextEmergencyShrink)
    assert r.event.to_dict()["event"] == "context_emergency_shrink"


def test_a_small_reply_that_fits_is_no_emergency() -> None:
    # Found against llama-cpp-python's server with max_tokens=8: 49 tokens left beside a
    # 3,547-token prompt, less than the 200-token floor, but the 8 asked for fit. It was
    # logged as a context emergency "clamped to 8" and counted as a shrink on every send.
    r = fit_max_tokens(estimated_input_tokens=3_547, context_window=4_096, requested=8)
    assert (r.max_tokens, r.shrunk, r.emergency, r.event) == (8, False, False, None)
    r = fit_max_tokens(
        estimated_input_tokens=3_547, context_window=4_096, requested=None, max_output_tokens=40
    )
    assert (r.max_tokens, r.emergency, r.event) == (40, False, None)
    r = fit_max_tokens(estimated_input_tokens=3_547, context_window=4_096, requested=50)
    assert (r.max_tokens, r.emergency) == (50, True)  # 50 > 49: into the safety buffer
    assert isinstance(r.event, wg.ContextEmergencyShrink)


def test_model_output_cap_is_respected() -> None:
    r = wg.shrink_max_tokens(
        _messages(10), context_window=200_000, requested=100_000, max_output_tokens=8192
    )
    assert r.max_tokens == 8192 and r.shrunk
    assert r.event is not None and r.event.reason == "output_cap"  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_requested_is_a_typed_error(bad: object) -> None:
    with pytest.raises(wg.ConfigurationError, match="requested max_tokens"):
        wg.shrink_max_tokens(_messages(1), context_window=8192, requested=bad)  # type: ignore[arg-type]


@settings(deadline=None, max_examples=300)
@given(
    window=st.integers(1_000, 2_000_000),
    estimate=st.integers(0, 2_000_000),
    requested=st.one_of(st.none(), st.integers(1, 2_000_000)),
    safety=st.integers(0, 1_000),
    cap=st.one_of(st.none(), st.integers(1, 2_000_000)),
)
def test_never_exceeds_the_window_when_the_input_fits(
    window: int, estimate: int, requested: int | None, safety: int, cap: int | None
) -> None:
    r = fit_max_tokens(
        estimated_input_tokens=estimate,
        context_window=window,
        requested=requested,
        safety_buffer=safety,
        max_output_tokens=cap,
    )
    # an emergency is exactly a reply that eats into the safety buffer
    assert r.emergency == (estimate + r.max_tokens + safety > window)
    if requested is not None:
        assert r.max_tokens <= requested or r.emergency
    if cap is not None:
        assert r.max_tokens <= max(cap, 200) or r.emergency
    assert r.shrunk == (requested is not None and r.max_tokens < requested)


@settings(deadline=None, max_examples=100)
@given(
    chars=st.lists(st.integers(0, 4000), min_size=1, max_size=30),
    window=st.integers(2_000, 64_000),
    requested=st.one_of(st.none(), st.integers(1, 200_000)),
)
def test_manager_fit_and_shrink_guard_agree(
    chars: list[int], window: int, requested: int | None
) -> None:
    messages: list[dict[str, object]] = [{"role": "user", "content": "task"}]
    for i, n in enumerate(chars):
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": "c", "content": f"{i}" + "r" * n})
    mgr = wg.ContextWindowManager(model_info=wg.ModelInfo(window, tokenizer="o200k"))
    try:
        fit = mgr.fit(messages, max_tokens=requested)
    except wg.ContextTruncatedError:
        return
    assert fit.estimated_tokens + fit.max_tokens <= window - 500
