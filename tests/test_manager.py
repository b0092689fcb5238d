"""ContextWindowManager: turn-atomic fitting, budget, calibration and damage handling."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import windowguard as wg
from windowguard.accounting.estimate import NO_USAGE, Estimator
from windowguard.core.adapters import shape_messages
from windowguard.core.turns import segment

from .transcripts import FORMATS, Plan, plans, render

SETTINGS = settings(deadline=None, max_examples=200)


def _manager(window: int, **kw: Any) -> wg.ContextWindowManager:
    """A manager on the heuristic alone: these tests are about pruning's mechanics, the
    same whatever counts (tests/test_accounting.py covers the exact sources)."""
    info = wg.ModelInfo(window, max_output_tokens=None, tokenizer="o200k")
    kw.setdefault("counter", "heuristic")
    return wg.ContextWindowManager(model_info=info, safety=kw.pop("safety", 50), **kw)


def _fit(
    mgr: wg.ContextWindowManager, messages: list[Any], system: Any, fmt: str, **kw: Any
) -> Any:
    return mgr.fit(messages, system=system, format=fmt, max_tokens=kw.pop("max_tokens", 100), **kw)


def _is_subsequence(small: list[Any], big: list[Any]) -> bool:
    it = iter(big)
    return all(any(x is y for y in it) for x in small)


@SETTINGS
@given(plan=plans(), fmt=st.sampled_from(FORMATS), window=st.integers(300, 6000))
def test_fit_keeps_head_and_newest_never_orphans_and_fits_or_raises(
    plan: Plan, fmt: str, window: int
) -> None:
    messages, system = render(plan, fmt)
    mgr = _manager(window)
    seg = segment(shape_messages(messages, format=fmt, system=system).shapes)
    try:
        fit = _fit(mgr, messages, system, fmt)
    except wg.ContextTruncatedError as exc:
        assert exc.estimated_tokens > exc.budget
        return
    assert not fit.deferred
    assert fit.estimated_tokens <= fit.budget
    # low-water: drops at least what minimal pruning drops; below the mark when it can
    minimal = _fit(_manager(window, pruning="minimal"), messages, system, fmt)
    assert fit.dropped_turns >= minimal.dropped_turns
    if fit.dropped_turns:
        assert (
            fit.estimated_tokens <= fit.budget * 0.7 or fit.dropped_turns == minimal.dropped_turns
        )
    # an order-preserving subsequence of the caller's own objects
    assert _is_subsequence(fit.messages, messages)
    # head kept, newest turn kept
    head = messages[: seg.head_stop]
    assert all(a is b for a, b in zip(fit.messages[: len(head)], head))
    if seg.turn_starts:
        newest = messages[seg.turn_starts[-1] :]
        assert all(a is b for a, b in zip(fit.messages[-len(newest) :], newest))
    # no orphan, and what was dropped is whole turns
    out = segment(shape_messages(fit.messages, format=fmt, system=system).shapes)
    assert not out.problems
    assert len(out.turns) == len(seg.turns) - fit.dropped_turns
    # prompt + max_tokens never exceed the window
    assert fit.estimated_tokens + fit.max_tokens <= fit.context_window


@SETTINGS
@given(plan=plans(), fmt=st.sampled_from(FORMATS), window=st.integers(300, 6000))
def test_minimal_policy_drops_no_more_turns_than_needed(plan: Plan, fmt: str, window: int) -> None:
    messages, system = render(plan, fmt)
    try:
        fit = _fit(_manager(window, pruning="minimal"), messages, system, fmt)
    except wg.ContextTruncatedError:
        return
    if fit.dropped_turns:
        seg = segment(shape_messages(messages, format=fmt, system=system).shapes)
        one_less = messages[: seg.head_stop] + messages[seg.turn_starts[fit.dropped_turns - 1] :]
        bigger = _fit(_manager(10**9), one_less, system, fmt)
        assert bigger.estimated_tokens > fit.budget


@SETTINGS
@given(plan=plans(), fmt=st.sampled_from(FORMATS), window=st.integers(300, 6000))
def test_fit_is_idempotent_and_deterministic(plan: Plan, fmt: str, window: int) -> None:
    messages, system = render(plan, fmt)
    try:
        first = _fit(_manager(window), messages, system, fmt)
    except wg.ContextTruncatedError:
        return
    again = _fit(_manager(window), messages, system, fmt)
    assert [id(m) for m in again.messages] == [id(m) for m in first.messages]
    refit = _fit(_manager(window), first.messages, system, fmt)
    assert refit.dropped_turns == 0
    assert [id(m) for m in refit.messages] == [id(m) for m in first.messages]


@SETTINGS
@given(plan=plans(), fmt=st.sampled_from(FORMATS), window=st.integers(300, 6000), data=st.data())
def test_incremental_fits_equal_cold_fits(plan: Plan, fmt: str, window: int, data: Any) -> None:
    """A run that appends and re-fits gets what a cold manager computes for each prefix."""
    messages, system = render(plan, fmt)
    warm = _manager(window, pruning="minimal")
    usage: Any = None
    for stop in sorted(set(data.draw(st.lists(st.integers(1, len(messages)), max_size=5)))) + [
        len(messages)
    ]:
        prefix = messages[:stop]
        try:
            got = _fit(warm, prefix, system, fmt, last_usage=usage)
        except wg.ContextTruncatedError:
            with pytest.raises(wg.ContextTruncatedError):
                _fit(_manager(window), prefix, system, fmt)
            usage = NO_USAGE
            continue
        cold = _fit(_manager(window, pruning="minimal"), prefix, system, fmt)
        assert [id(m) for m in got.messages] == [id(m) for m in cold.messages]
        assert got.estimated_tokens == cold.estimated_tokens
        usage = NO_USAGE


@SETTINGS
@given(plan=plans(max_turns=25), fmt=st.sampled_from(FORMATS), window=st.integers(600, 6000))
def test_low_water_keeps_prefixes_stable_between_prunes(plan: Plan, fmt: str, window: int) -> None:
    """Under low-water pruning a send either extends the previous send unchanged, or
    prunes; every send is valid; and it never keeps less than minimal pruning would
    have kept below the low-water mark."""
    messages, system = render(plan, fmt)
    mgr = _manager(window)
    previous: list[Any] | None = None
    usage: Any = None
    for stop in range(1, len(messages) + 1):
        prefix = messages[:stop]
        if segment(shape_messages(prefix, format=fmt, system=system).shapes).problems:
            continue  # mid-turn: calls not answered yet; an agent sends after the results
        try:
            fit = _fit(mgr, prefix, system, fmt, last_usage=usage)
        except wg.ContextTruncatedError:
            previous, usage = None, NO_USAGE
            continue
        usage = NO_USAGE
        assert fit.estimated_tokens <= fit.budget
        out = segment(shape_messages(fit.messages, format=fmt, system=system).shapes)
        assert not out.problems
        pruned_now = any(e.kind == "transcript_pruned" for e in fit.events)
        if previous is not None and fit.dropped_turns and not _new_cut(previous, fit.messages):
            # same cut as before: the previous request is a prefix of this one
            assert all(a is b for a, b in zip(fit.messages, previous))
        if pruned_now and _new_cut(previous or [], fit.messages):
            assert fit.estimated_tokens <= max(
                fit.budget * 0.7, _minimal_estimate(prefix, system, fmt, window)
            )
        previous = fit.messages


def _new_cut(previous: list[Any], current: list[Any]) -> bool:
    return not all(a is b for a, b in zip(current, previous))


def _minimal_estimate(messages: list[Any], system: Any, fmt: str, window: int) -> int:
    return _fit(_manager(window, pruning="minimal"), messages, system, fmt).estimated_tokens  # type: ignore[no-any-return]


@SETTINGS
@given(plan=plans(), fmt=st.sampled_from(FORMATS))
def test_estimate_is_monotone_under_append(plan: Plan, fmt: str) -> None:
    messages, system = render(plan, fmt)
    est = Estimator("o200k")
    counts = [est.count(messages[:i], system=system, format=fmt) for i in range(len(messages) + 1)]
    assert counts == sorted(counts)


def _chat(turns: int, result: str = "x" * 400) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test in utils.py"},
    ]
    for i in range(turns):
        out.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_0",
                        "type": "function",
                        "function": {"name": "read", "arguments": f'{{"i":{i}}}'},
                    },
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "grep", "arguments": "{}"},
                    },
                ],
            }
        )
        out.append({"role": "tool", "tool_call_id": "call_0", "content": result})
        out.append({"role": "tool", "tool_call_id": "call_1", "content": result})
    return out


@pytest.mark.parametrize("edits", [(), None], ids=["drop only", "default edits"])
def test_prunes_oldest_whole_turns_and_logs_it(
    caplog: pytest.LogCaptureFixture, edits: tuple[Any, ...] | None
) -> None:
    messages = _chat(30)
    mgr = _manager(4000, edits=edits)
    with caplog.at_level(logging.INFO, logger="windowguard"):
        fit = mgr.fit(messages, max_tokens=500)
    assert 0 < fit.dropped_turns < 30
    assert fit.dropped_messages == 3 * fit.dropped_turns
    assert fit.messages[:2] == messages[:2]
    first = messages[2 + 3 * fit.dropped_turns]
    newest = messages[-3:]
    assert all(a is b for a, b in zip(fit.messages[-3:], newest))  # the newest turn, whole
    if edits == ():
        assert fit.messages[2] is first
        assert [e.kind for e in fit.edits] == ["drop"]
    else:
        # the default clears the old results (and their calls' arguments) first: even
        # cleared, 30 turns do not fit, so whole turns are dropped too; a kept old turn
        # is a new copy with only its arguments and results replaced
        assert {e.kind for e in fit.edits} == {"clear", "clear_inputs", "drop"}
        calls = [
            {**c, "function": {**c["function"], "arguments": "{}"}} for c in first["tool_calls"]
        ]
        assert fit.messages[2] is not first and fit.messages[2] == {**first, "tool_calls": calls}
        assert fit.messages[3]["content"].startswith("[cleared to save context: read(")
        assert first["tool_calls"][0]["function"]["arguments"] != "{}"  # the caller's, unchanged
    (event,) = [e for e in fit.events if e.kind == "transcript_pruned"]
    assert event.to_dict()["dropped_turns"] == fit.dropped_turns
    assert any("pruned" in r.getMessage() for r in caplog.records)


def test_head_plus_newest_too_big_raises_with_numbers() -> None:
    messages = _chat(3, result="y" * 20_000)
    with pytest.raises(wg.ContextTruncatedError) as info:
        _manager(4000, edits=()).fit(messages, max_tokens=500)
    assert info.value.estimated_tokens > info.value.budget
    assert info.value.context_window == 4000
    assert "nothing was sent" in str(info.value)
    # the default edits clamp the results instead, the newest turn's too: it is sent
    fit = _manager(4000).fit(messages, max_tokens=500)
    assert fit.estimated_tokens <= fit.budget
    clamped = {i for e in fit.edits if e.kind == "clamp" for i in e.messages}
    assert clamped >= {9, 10}  # the newest turn's results
    assert fit.messages[:2] == messages[:2] and fit.messages[-3] is messages[-3]
    assert fit.messages[-1] is not messages[-1]
    assert fit.messages[-1]["tool_call_id"] == "call_1"
    assert (
        fit.messages[-1]["content"].startswith("yyy") and "cut here" in fit.messages[-1]["content"]
    )


def test_budget_uses_reserve_chain_and_max_input_tokens() -> None:
    info = wg.ModelInfo(400_000, max_output_tokens=128_000, max_input_tokens=272_000)
    mgr = wg.ContextWindowManager(model_info=info, safety=500)
    msgs = [{"role": "user", "content": "hi"}]
    assert mgr.fit(msgs).budget == 400_000 - 128_000 - 500
    assert mgr.fit(msgs, max_tokens=1_000).budget == 272_000
    assert mgr.fit(msgs, max_tokens=200_000).budget == 400_000 - 128_000 - 500
    small = wg.ContextWindowManager(model_info=wg.ModelInfo(32_768, max_output_tokens=4_096))
    assert small.fit(msgs).budget == 32_768 - 4_096 - 500
    assert small.fit(msgs, max_tokens=1_000).budget == 32_768 - 1_000 - 500


def test_unknown_model_falls_back_to_8192_and_says_so() -> None:
    mgr = wg.ContextWindowManager(model="some-private-model-x")
    fit = mgr.fit([{"role": "user", "content": "hi"}])
    assert fit.context_window == 8192
    (estimate,) = [e for e in fit.events if e.kind == "context_estimate"]
    assert estimate.to_dict()["source"] == "fallback"


def test_huge_max_tokens_does_not_prune_to_nothing_and_is_shrunk_to_fit() -> None:
    info = wg.ModelInfo(131_072, tokenizer="o200k")
    mgr = wg.ContextWindowManager(model_info=info)
    messages = _chat(20)
    fit = mgr.fit(messages, max_tokens=131_072)
    assert fit.dropped_turns == 0
    assert fit.max_tokens < 131_072
    assert fit.estimated_tokens + fit.max_tokens + 500 == 131_072
    assert any(e.kind == "max_tokens_shrunk" for e in fit.events)


def test_large_output_budget_is_kept_while_it_fits() -> None:
    mgr = wg.ContextWindowManager(model_info=wg.ModelInfo(128_000, tokenizer="o200k"))
    assert mgr.fit(_chat(2), max_tokens=96_000).max_tokens == 96_000


def test_calibration_resets_when_a_run_starts_and_only_rises() -> None:
    mgr = _manager(100_000)
    messages = _chat(5)
    first = mgr.fit(messages)
    seed = mgr.calibration.factor
    assert seed > 1.0
    raw = first.estimated_tokens / seed
    mgr.fit(messages, last_usage=int(raw * 1.5))
    assert mgr.calibration.factor == pytest.approx(1.5, rel=0.01)
    mgr.fit(messages, last_usage=int(raw * 1.2))
    assert mgr.calibration.factor == pytest.approx(1.5, rel=0.01)
    mgr.fit(messages, last_usage=NO_USAGE)
    assert mgr.calibration.factor == pytest.approx(1.5, rel=0.01)
    mgr.fit(messages, last_usage=None)  # no usage reported: no reset (decision 0007)
    assert mgr.calibration.factor == pytest.approx(1.5, rel=0.01)
    mgr.fit(messages, new_run=True)
    assert mgr.calibration.factor == seed


def test_usage_objects_calibrate() -> None:
    mgr = _manager(100_000)
    messages = _chat(5)
    first = mgr.fit(messages)
    huge = {"prompt_tokens": first.estimated_tokens * 3, "completion_tokens": 5}
    second = mgr.fit(messages, last_usage=huge)
    assert second.estimated_tokens >= first.estimated_tokens * 2


@pytest.mark.parametrize(
    ("damage", "index"),
    [
        (lambda m: m.insert(2, {"role": "tool", "tool_call_id": "zzz", "content": "x"}), 2),
        (lambda m: m.pop(3), 2),
        (lambda m: m.append({"role": "robot", "content": "x"}), 11),
        (lambda m: m.append({"role": "user", "content": {"bad": 1}}), 11),
    ],
)
def test_damaged_input_is_sent_with_its_damage_whole_or_raises_when_strict(
    damage: Any, index: int
) -> None:
    messages = _chat(3)
    damage(messages)
    fit = _manager(100_000).fit(messages, max_tokens=100)
    assert fit.deferred and fit.problems
    assert fit.messages == messages and all(a is b for a, b in zip(fit.messages, messages))
    assert any(e.kind == "transcript_deferred" for e in fit.events)
    with pytest.raises(wg.InvalidTranscriptError) as info:
        _manager(600, strict=True).fit(messages, max_tokens=100)
    assert info.value.index == index


def test_whole_turns_around_the_damage_are_pruned_and_a_certain_overflow_refused() -> None:
    messages = _chat(200)
    stray = {"role": "tool", "tool_call_id": "nobody", "content": "a stray result"}
    messages.insert(101, stray)  # inside turn 50: a result answering no call of its turn
    fit = _manager(16_384).fit(messages, max_tokens=1_000)
    assert fit.deferred and "nobody" in " ".join(str(p) for p in fit.problems)
    assert fit.estimated_tokens <= fit.budget  # not the whole transcript any more
    assert fit.dropped_turns > 0
    assert any(m is stray for m in fit.messages)  # the damaged stretch is kept whole
    kept = {id(m) for m in fit.messages}
    assert all(id(m) in kept for m in messages[:2])  # the head
    assert all(id(m) in kept for m in messages[-2:])  # the newest turn
    stretch = messages[98:102]  # the damaged turn: its calls, their results and the stray
    assert all(id(m) in kept for m in stretch)
    out = segment(shape_messages(fit.messages, format="openai_chat").shapes)
    assert [p.problem for p in out.problems] == [p.problem for p in fit.problems]
    # a window that cannot hold head + the damaged stretch + the newest turn: refused
    huge = {"role": "tool", "tool_call_id": "nobody", "content": "x " * 3_000}
    messages[101] = huge
    with pytest.raises(wg.ContextTruncatedError, match="damaged") as info:
        _manager(2_000).fit(messages, max_tokens=100)
    assert "nobody" in info.value.damage


def test_tools_count_and_plain_completion_does_not() -> None:
    mgr = _manager(100_000)
    tools = [
        {
            "type": "function",
            "function": {"name": "read", "description": "d" * 2000, "parameters": {}},
        }
    ]
    with_tools = mgr.fit(_chat(2), tools=tools).estimated_tokens
    without = mgr.fit(_chat(2), last_usage=NO_USAGE).estimated_tokens
    schema_tokens = mgr.estimator.tools_tokens(tools)
    assert schema_tokens > 0
    assert with_tools - without == pytest.approx(schema_tokens * mgr.calibration.factor, abs=2)


def test_copy_has_fresh_run_state() -> None:
    mgr = _manager(100_000)
    first = mgr.fit(_chat(2))
    mgr.fit(_chat(2), last_usage=int(first.estimated_tokens * 1.4))
    clone = mgr.copy()
    assert clone.calibration.factor < mgr.calibration.factor
    assert clone.model_info == mgr.model_info


def test_low_water_prune_then_appends_reuse_the_same_cut() -> None:
    # the cut's mechanics, drop only (the default edits clear these turns instead)
    messages = _chat(60)
    mgr = _manager(4000, hold_turns=0, edits=())
    first = mgr.fit(messages[:50], max_tokens=500)
    assert first.dropped_turns > 0
    assert first.estimated_tokens <= first.budget * 0.7
    second = mgr.fit(messages[:53], max_tokens=500, last_usage=NO_USAGE)
    assert second.dropped_turns == first.dropped_turns
    assert all(a is b for a, b in zip(second.messages, first.messages))
    assert (
        not any(e.kind == "transcript_pruned" for e in second.events)
        or second.dropped_turns == first.dropped_turns
    )
    minimal = _manager(4000, pruning="minimal", edits=())
    m1 = minimal.fit(messages[:50], max_tokens=500)
    # turns large against the window: a low-water prune would free room for fewer than
    # hold_turns of them, so it drops just enough, as minimal does
    held = _manager(2_500, hold_turns=4, edits=()).fit(messages[:50], max_tokens=100)
    just = _manager(2_500, pruning="minimal", edits=()).fit(messages[:50], max_tokens=100)
    assert held.dropped_turns == just.dropped_turns
    assert _manager(2_500, hold_turns=0, edits=()).fit(
        messages[:50], max_tokens=100
    ).dropped_turns > (just.dropped_turns)
    m2 = minimal.fit(messages[:53], max_tokens=500, last_usage=NO_USAGE)
    assert m2.messages[2] is not m1.messages[2]  # minimal pruning moves the cut every send


@pytest.mark.parametrize("bad", [{"pruning": "fifo"}, {"low_water": 0.0}, {"low_water": 2}])
def test_bad_pruning_configuration_is_named(bad: dict[str, Any]) -> None:
    with pytest.raises(wg.ConfigurationError):
        _manager(8000, **bad)


@pytest.mark.parametrize("bad", [{"max_tokens": 0}, {"max_tokens": -5}, {"safety": -1}])
def test_bad_arguments_are_typed_errors(bad: dict[str, int]) -> None:
    with pytest.raises(wg.ConfigurationError):
        _manager(8000).fit([{"role": "user", "content": "x"}], **bad)  # type: ignore[arg-type]


@SETTINGS
@given(
    plan=plans(max_turns=14),
    window=st.integers(400, 6000),
    data=st.data(),
)
def test_damaged_transcripts_keep_the_damage_head_and_newest_and_fit_or_raise(
    plan: Plan, window: int, data: Any
) -> None:
    messages, _ = render(plan, "openai_chat")
    where = data.draw(st.integers(1, len(messages)))
    stray = {"role": "tool", "tool_call_id": "nobody", "content": data.draw(st.text(max_size=200))}
    messages.insert(where, stray)
    seg = segment(shape_messages(messages, format="openai_chat").shapes)
    mgr = _manager(window)
    try:
        fit = mgr.fit(messages, max_tokens=100)
    except wg.ContextTruncatedError as exc:
        assert exc.damage and "nobody" in exc.damage
        return
    assert fit.deferred
    assert _is_subsequence(fit.messages, messages)
    assert any(m is stray for m in fit.messages)
    assert all(a is b for a, b in zip(fit.messages, messages[: seg.head_stop]))
    newest = messages[seg.turn_starts[-1] :] if seg.turn_starts else []
    assert all(a is b for a, b in zip(fit.messages[-len(newest) :], newest))
    assert fit.estimated_tokens + fit.max_tokens <= fit.context_window


def test_each_fit_hands_out_a_new_list_of_the_callers_messages() -> None:
    # A send that keeps everything returns the copy made while comparing the transcript
    # with the previous send's: it must still be a list of its own, every time.
    mgr = _manager(200_000)
    messages = _chat(4)
    first = mgr.fit(messages, max_tokens=1_000).messages
    messages.append({"role": "user", "content": "and now?"})
    size = len(messages)
    second = mgr.fit(messages, max_tokens=1_000, last_usage=NO_USAGE).messages
    third = mgr.fit(messages, max_tokens=1_000, last_usage=NO_USAGE).messages
    assert second == messages and all(a is b for a, b in zip(second, messages, strict=True))
    assert second is not messages and third is not second and third is not messages
    second.clear()
    first.append("not a message")
    assert len(messages) == size
    assert mgr.fit(messages, max_tokens=1_000, last_usage=NO_USAGE).messages == messages


def test_a_message_replaced_in_place_is_sized_again_and_sent() -> None:
    mgr = _manager(200_000)
    messages = _chat(4)
    before = mgr.fit(messages, max_tokens=1_000).estimated_tokens
    messages[3] = {
        "role": "tool",
        "tool_call_id": messages[3]["tool_call_id"],
        "content": "y" * 4_000,
    }
    fit = mgr.fit(messages, max_tokens=1_000, last_usage=NO_USAGE)
    assert fit.messages[3] is messages[3] and fit.estimated_tokens > before + 500


def test_the_budget_follows_max_tokens_and_safety_from_send_to_send() -> None:
    mgr = _manager(32_000, safety=500)
    messages = _chat(2)
    assert mgr.fit(messages, max_tokens=1_000).budget == 32_000 - 1_000 - 500
    assert mgr.fit(messages, max_tokens=2_000, last_usage=NO_USAGE).budget == 32_000 - 2_500
    assert mgr.fit(messages, max_tokens=2_000, last_usage=NO_USAGE, safety=100).budget == 29_900
    with pytest.raises(wg.ConfigurationError, match="max_tokens"):
        mgr.fit(messages, max_tokens=True, last_usage=NO_USAGE)  # equal to 1, never a hit
    with pytest.raises(wg.ConfigurationError, match="safety"):
        mgr.fit(messages, max_tokens=2_000, last_usage=NO_USAGE, safety=100.0)  # type: ignore[arg-type]


def test_sources_name_a_counter_set_after_the_first_fit() -> None:
    mgr = _manager(32_000, counter="heuristic")
    messages = _chat(2)
    assert mgr.fit(messages, max_tokens=1_000).sources == ("heuristic:o200k",)

    class Counter:
        name = "stub"

        def count(self, query: wg.CountQuery) -> int:
            raise wg.RemoteCountError("unused")

    mgr.remote = Counter()  # type: ignore[assignment]
    fit = mgr.fit(messages, max_tokens=1_000, last_usage=NO_USAGE)
    assert fit.sources == ("remote:stub", "heuristic:o200k")
    assert mgr.counter_name == "remote:stub, heuristic:o200k"
