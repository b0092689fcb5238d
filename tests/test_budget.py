"""Reserve and budget arithmetic."""

from __future__ import annotations

import pytest

from windowguard import ConfigurationError, compute_budget


def test_reserve_chain() -> None:
    assert compute_budget(context_window=32_768, max_tokens=2_000).reserve_source == "max_tokens"
    assert compute_budget(context_window=32_768, max_output_tokens=4_096).reserve == 4_096
    proportional = compute_budget(context_window=32_768)
    assert (proportional.reserve, proportional.reserve_source) == (4_096, "proportional")


def test_reserve_capped_at_half_window_for_pruning() -> None:
    b = compute_budget(context_window=131_072, max_tokens=131_072, safety=500)
    assert b.reserve == 65_536
    assert b.input_tokens == 131_072 - 65_536 - 500


def test_max_input_tokens_bounds_the_budget() -> None:
    b = compute_budget(context_window=400_000, max_tokens=1_000, max_input_tokens=272_000)
    assert b.input_tokens == 272_000


@pytest.mark.parametrize(
    "kwargs",
    [
        {"context_window": 0},
        {"context_window": 100, "max_tokens": 0},
        {"context_window": 100, "safety": -1},
    ],
)
def test_bad_numbers_are_named(kwargs: dict[str, int]) -> None:
    with pytest.raises(ConfigurationError):
        compute_budget(**kwargs)
