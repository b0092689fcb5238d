"""A run starts only when the caller says so (issue 21, item 5; decision 0007).

``last_usage=None`` is what ``resp.usage`` is on a server that reports no usage: it
means "no report", exactly as :data:`wg.NO_USAGE`, and never resets the run's
calibration, ledger or low-water cut. A run starts with a fresh manager,
``mgr.reset()`` or ``fit(..., new_run=True)``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import windowguard as wg

WINDOW = 6_000
SMALL_WINDOW = 3_000


def _manager(window: int = WINDOW) -> wg.ContextWindowManager:
    # The heuristic only: what is measured and what is estimated is then deterministic.
    return wg.ContextWindowManager(
        model_info=wg.ModelInfo(context_window=window, tokenizer="o200k"), counter="heuristic"
    )


def _transcript(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "Read the notes and report what they say."},
    ]
    for n in range(turns):
        messages.append({"role": "assistant", "content": f"Reading note {n}. " * (3 + n % 4)})
        messages.append({"role": "user", "content": f"Note {n}: " + "lorem ipsum " * (40 + 7 * n)})
    return messages


def _seen(fit: wg.Fit) -> tuple[object, ...]:
    """Everything a caller can observe of a fit (its messages by identity)."""
    return (
        [id(m) for m in fit.messages],
        fit.estimated_tokens,
        fit.measured_tokens,
        fit.exact,
        fit.sources,
        fit.dropped_turns,
        fit.max_tokens,
        fit.budget,
        [e.to_dict() for e in fit.events],
    )


def _measured_run(mgr: wg.ContextWindowManager, transcript: list[dict[str, Any]]) -> wg.Fit:
    """Two sends with an exact report between them (30% above the estimate)."""
    first = mgr.fit(transcript[:4], max_tokens=500)
    return mgr.fit(transcript[:6], max_tokens=500, last_usage=int(first.estimated_tokens * 1.3))


def test_a_send_without_usage_keeps_the_run() -> None:
    transcript = _transcript(4)
    kept, restarted = _manager(), _manager()
    for mgr in (kept, restarted):
        measured = _measured_run(mgr, transcript)
        assert measured.measured_tokens > 0
        assert mgr.calibration.factor > mgr.calibration.seed
    factor = kept.calibration.factor

    no_report = kept.fit(transcript, max_tokens=500, last_usage=None)
    assert no_report.measured_tokens == measured.measured_tokens  # the ledger stayed
    assert kept.calibration.factor == factor  # and the calibration

    new_run = restarted.fit(transcript, max_tokens=500, new_run=True)
    assert new_run.measured_tokens == 0  # a new run: nothing measured yet
    assert restarted.calibration.factor == restarted.calibration.seed
    assert new_run.estimated_tokens < no_report.estimated_tokens  # the seed, not x1.3
    assert _seen(new_run) == _seen(_manager().fit(transcript, max_tokens=500))


def test_reset_starts_a_run_like_new_run() -> None:
    transcript = _transcript(4)
    by_reset, by_flag = _manager(), _manager()
    _measured_run(by_reset, transcript)
    _measured_run(by_flag, transcript)
    by_reset.reset()
    assert _seen(by_reset.fit(transcript, max_tokens=500)) == _seen(
        by_flag.fit(transcript, max_tokens=500, new_run=True)
    )


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_new_run_must_be_a_bool(value: object) -> None:
    with pytest.raises(wg.ConfigurationError, match="new_run must be True or False"):
        _manager().fit(_transcript(1), new_run=value)  # type: ignore[arg-type]


def test_a_report_given_to_a_new_run_is_refused() -> None:
    mgr = _manager()
    with pytest.raises(wg.ConfigurationError, match="no previous send to report on"):
        mgr.fit(_transcript(1), new_run=True, last_usage={"prompt_tokens": 120})
    # No report is fine: None and NO_USAGE both say so.
    mgr.fit(_transcript(1), new_run=True, last_usage=None)
    mgr.fit(_transcript(1), new_run=True, last_usage=wg.NO_USAGE)


# A send's report: None or NO_USAGE (no report), or the exact count, as a share of the
# previous fit's estimate.
_REPORT = st.one_of(st.none(), st.just(wg.NO_USAGE), st.floats(min_value=0.8, max_value=1.6))


@given(reports=st.lists(_REPORT, min_size=1, max_size=7))
def test_none_and_no_usage_are_the_same_and_new_run_is_a_fresh_manager(
    reports: list[object],
) -> None:
    transcript = _transcript(len(reports) + 1)
    # A window the later sends outgrow: the low-water cut is part of what must match.
    with_none, with_sentinel = _manager(SMALL_WINDOW), _manager(SMALL_WINDOW)
    previous: tuple[wg.Fit, wg.Fit] | None = None
    for n, report in enumerate(reports, start=1):
        sent = transcript[: 2 + 2 * n]
        if isinstance(report, float) and previous is not None:
            usages: tuple[object, object] = (
                int(previous[0].estimated_tokens * report),
                int(previous[1].estimated_tokens * report),
            )
        elif isinstance(report, float):
            usages = (None, wg.NO_USAGE)  # the first send has nothing to report
        else:
            usages = (None, wg.NO_USAGE) if report is None else (wg.NO_USAGE, None)
        previous = (
            with_none.fit(sent, max_tokens=500, last_usage=usages[0]),
            with_sentinel.fit(sent, max_tokens=500, last_usage=usages[1]),
        )
        assert _seen(previous[0]) == _seen(previous[1])
    assert previous is not None
    # Whatever came before, a new run is what a fresh manager fits.
    again = with_none.fit(transcript, max_tokens=500, new_run=True)
    assert _seen(again) == _seen(_manager(SMALL_WINDOW).fit(transcript, max_tokens=500))
