"""ClearToolResults(trigger=...): clear a block of old results once the request passes the
trigger, though it still fits (as Anthropic's ``clear_tool_uses_20250919`` ``trigger``),
down to the low-water mark and in blocks; without a trigger, only when turns would be
lost."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import windowguard as wg
from tests.edit_fixtures import read_file_turn as _turn
from windowguard.core.exceptions import ConfigurationError

HEAD = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
WINDOW = 16_384
MAX_TOKENS = 1_024


def _manager(clear: wg.ClearToolResults) -> wg.ContextWindowManager:
    return wg.ContextWindowManager(
        model_info=wg.ModelInfo(context_window=WINDOW, max_output_tokens=MAX_TOKENS),
        counter="heuristic",
        edits=[clear],
    )


def _run(mgr: wg.ContextWindowManager, sends: int, lines: int = 25) -> list[wg.Fit]:
    messages = list(HEAD)
    fits = []
    usage: object = None
    for i in range(sends):
        messages += _turn(i, lines)
        fit = mgr.fit(messages, max_tokens=MAX_TOKENS, last_usage=usage)
        usage = wg.NO_USAGE
        fits.append(fit)
    return fits


def test_without_a_trigger_nothing_is_cleared_while_the_request_fits() -> None:
    fits = _run(_manager(wg.ClearToolResults(keep=1, low_water=0.3)), 12)
    assert fits[-1].estimated_tokens > 0.5 * fits[-1].budget  # well past where 0.5 would clear
    assert all(not fit.edits for fit in fits)


@pytest.mark.parametrize("trigger", [0.5, 7_000])
def test_a_trigger_clears_a_block_down_to_the_low_water_mark_once_passed(
    trigger: float,
) -> None:
    # 36 sends: before the cleared turns alone (~100 tokens each) reach the mark
    fits = _run(_manager(wg.ClearToolResults(keep=1, low_water=0.3, trigger=trigger)), 36)
    budget = fits[0].budget
    limit = trigger if isinstance(trigger, int) else int(trigger * budget)
    clearing = [i for i, fit in enumerate(fits) if any(e.kind == "clear" for e in fit.edits)]
    assert clearing, "the trigger never cleared"
    for i, fit in enumerate(fits):
        assert fit.dropped_turns == 0  # clearing alone holds these sends
        if i in clearing:
            if i in clearing[:3]:
                # a block down to the mark (later, the cleared turns' placeholders alone
                # come near it: ~150 tokens each by the heuristic)
                assert fit.estimated_tokens <= int(0.3 * budget) + 1_000
            # the send before was within one turn (~750 tokens) of the trigger
            assert i > 0 and fits[i - 1].estimated_tokens > limit - 1_000
        elif i < clearing[2]:
            assert fit.estimated_tokens <= limit  # never kept past the trigger uncleared
    # in blocks: a clear lasts several sends, each extending the previous request
    assert len(clearing) <= len(fits) // 3


def test_once_placeholders_fill_the_trigger_it_stops_rewriting_every_send() -> None:
    # After ~40 cleared turns their placeholders alone pass the mark: a triggered clear
    # that cannot bring the request halfway down to the mark does not happen (it would
    # clear each result as it ages, rewriting the prompt on every send); the request
    # grows to the budget, and the drop (down to the manager's low-water) resets it.
    fits = _run(_manager(wg.ClearToolResults(keep=1, low_water=0.3, trigger=0.5)), 150)
    clearing = [i for i, fit in enumerate(fits) if fit.edits]
    assert len(clearing) <= len(fits) // 3
    assert any(fit.dropped_turns for fit in fits)  # the drop took over at the budget
    assert all(fit.estimated_tokens <= fit.budget for fit in fits)


def test_a_trigger_below_the_low_water_mark_clears_nothing_more_than_the_mark() -> None:
    # the mark is the fraction of the budget a block brings the request down to: a
    # trigger under it has nothing to clear before the request reaches the mark
    low = _run(_manager(wg.ClearToolResults(keep=1, low_water=0.6, trigger=0.2)), 40)
    for fit in low:
        if fit.edits:
            assert fit.estimated_tokens >= int(0.6 * fit.budget) - 1_500


@settings(max_examples=25, deadline=None)
@given(
    trigger=st.floats(min_value=0.35, max_value=1.0),
    lines=st.integers(min_value=5, max_value=60),
)
def test_a_cleared_result_stays_cleared_and_no_call_is_orphaned(trigger: float, lines: int) -> None:
    mgr = _manager(wg.ClearToolResults(keep=1, low_water=0.3, trigger=trigger))
    fits = _run(mgr, 30, lines)
    cleared: set[str] = set()
    for fit in fits:
        sent = {
            m["tool_call_id"]: m["content"]
            for m in fit.messages
            if isinstance(m, dict) and m.get("role") == "tool"
        }
        calls = {
            c["id"]
            for m in fit.messages
            if isinstance(m, dict) and m.get("role") == "assistant"
            for c in m.get("tool_calls") or ()
        }
        assert set(sent) == calls  # every call answered, every result called
        for call_id in cleared & set(sent):
            assert "cleared" in sent[call_id].lower() or len(sent[call_id]) < 400
        cleared |= {k for k, v in sent.items() if len(v) < 400 and "value_" not in v}
        assert fit.estimated_tokens <= fit.budget


@pytest.mark.parametrize("bad", [0, -5, 1.5, 0.0, True, "half"])
def test_a_bad_trigger_is_refused_naming_it(bad: object) -> None:
    with pytest.raises(ConfigurationError, match=r"ClearToolResults\(trigger=\.\.\.\)"):
        wg.ClearToolResults(trigger=bad)  # type: ignore[arg-type]


def test_a_clear_that_cannot_reach_is_not_tried_again_until_it_could(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Once the placeholders fill the room below the trigger, a triggered clear gives up;
    # looking at every result again on each send (what it could free has not grown)
    # cost 13-33 ms a send at 1,000 turns. It is tried again when the request has grown
    # by what was missing, or when the cut moved.
    from windowguard.pipeline import _edit_stage
    from windowguard.pipeline import manager as manager_module

    calls: list[int] = []
    real = _edit_stage.clear_block

    def counting(*args: Any, **kwargs: Any) -> Any:
        made = real(*args, **kwargs)
        calls.append(len(made))
        return made

    monkeypatch.setattr(_edit_stage, "clear_block", counting)
    fits = _run(_manager(wg.ClearToolResults(keep=1, low_water=0.3, trigger=0.5)), 150)
    futile = [n for n in calls if n == 0]
    assert len(calls) - len(futile) >= 5  # blocks that cleared
    assert len(futile) <= len(fits) // 4, (len(futile), len(fits))
    # the same clears, sends and receipts as when every send looks again
    monkeypatch.setattr(_edit_stage, "clear_block", real)
    again = _manager(wg.ClearToolResults(keep=1, low_water=0.3, trigger=0.5))
    monkeypatch.setattr(manager_module.ContextWindowManager, "_edit", _forgetting(manager_module))
    fresh = _run(again, 150)
    assert [f.messages for f in fits] == [f.messages for f in fresh]
    assert [f.edits for f in fits] == [f.edits for f in fresh]


def _forgetting(manager_module: Any) -> Any:
    """The manager's ``_edit`` with no memory of a clear that gave up."""
    edit = manager_module.ContextWindowManager._edit

    def forgetful(self: Any, ctx: Any, dropped: Any) -> Any:
        self._edit_state.futile_clear = None
        return edit(self, ctx, dropped)

    return forgetful
