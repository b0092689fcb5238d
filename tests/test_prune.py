"""Turn-atomic pruning's searches: the fewest drops that fit, with and without a hint."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from windowguard.core.prune import choose_drop, turns_to_drop


@st.composite
def costs(draw: st.DrawFn) -> list[int]:
    """A non-increasing cost per number of dropped turns (what dropping oldest turns
    does to a request's count)."""
    steps = draw(st.lists(st.integers(0, 500), min_size=1, max_size=60))
    base = draw(st.integers(0, 2_000))
    total = base + sum(steps)
    out = [total]
    for step in steps:
        total -= step
        out.append(total)
    return out


@given(costs(), st.integers(0, 30_000), st.one_of(st.none(), st.integers(-3, 70)))
def test_a_hint_never_changes_the_answer(cost: list[int], budget: int, hint: int | None) -> None:
    turns = len(cost)
    calls: list[int] = []

    def counted(dropped: int) -> int:
        calls.append(dropped)
        return cost[dropped]

    plain = turns_to_drop(cost=cost.__getitem__, turns=turns, budget=budget)
    hinted = turns_to_drop(cost=counted, turns=turns, budget=budget, hint=hint)
    assert hinted == plain
    if plain is not None:
        assert cost[plain] <= budget and (plain == 0 or cost[plain - 1] > budget)
    if hint is not None and plain is not None and plain == hint and plain > 0:
        assert len(calls) <= 3  # a cut that did not move costs a few counts


@given(
    costs(), st.integers(0, 30_000), st.integers(0, 59), st.sampled_from(["minimal", "low_water"])
)
def test_an_anchor_that_still_fits_is_kept_and_never_drops_too_few(
    cost: list[int], budget: int, anchor_turn: int, policy: str
) -> None:
    turns = len(cost)
    starts = list(range(10, 10 + 3 * turns, 3))
    anchor = starts[min(anchor_turn, turns - 1)]
    chosen = choose_drop(
        cost=cost.__getitem__,
        turn_starts=starts,
        budget=budget,
        policy=policy,  # type: ignore[arg-type]
        anchor=anchor,
    )
    minimal = turns_to_drop(cost=cost.__getitem__, turns=turns, budget=budget)
    if minimal is None:
        assert chosen is None
        return
    assert chosen is not None and chosen >= minimal and cost[chosen] <= budget
    if policy == "low_water" and minimal and cost[starts.index(anchor)] <= budget:
        assert chosen == starts.index(anchor)


@given(
    costs(),
    st.integers(1_000, 30_000),
    st.integers(1, 6),
    st.integers(1, 2_000),
)
def test_a_low_water_cut_never_throws_away_more_than_the_mark_and_its_room(
    cost: list[int], budget: int, hold_turns: int, turn_tokens: int
) -> None:
    turns = len(cost)
    starts = list(range(10, 10 + 3 * turns, 3))
    chosen = choose_drop(
        cost=cost.__getitem__,
        turn_starts=starts,
        budget=budget,
        policy="low_water",
        low_water=0.7,
        turn_tokens=turn_tokens,
        hold_turns=hold_turns,
    )
    minimal = turns_to_drop(cost=cost.__getitem__, turns=turns, budget=budget)
    assert (chosen is None) == (minimal is None)
    if chosen is None or minimal is None or chosen == minimal:
        return
    mark = int(budget * 0.7)
    hold = hold_turns * turn_tokens
    assert cost[chosen] <= budget - hold  # a low-water cut frees room for hold_turns turns
    assert cost[chosen] >= mark - hold  # ... and never keeps less than the mark minus it
