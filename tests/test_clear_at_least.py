"""ClearToolResults(clear_at_least=...): a block of clears that needs less than
clear_at_least goes on until it frees that much (when there is that much to clear),
rather than stopping at what the send needs and then being cancelled for freeing too
little, which dropped whole turns where clearing would have kept them."""

from __future__ import annotations

import pytest

import windowguard as wg
from tests.edit_fixtures import read_file_turn as _turn

HEAD = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]


@pytest.mark.parametrize("pruning", ["minimal", "low_water"])
def test_clears_that_need_less_than_clear_at_least_still_clear_it(pruning: str) -> None:
    mgr = wg.ContextWindowManager(
        model_info=wg.ModelInfo(context_window=16_384, max_output_tokens=1_024),
        counter="heuristic",
        pruning=pruning,  # type: ignore[arg-type]
        edits=[wg.ClearToolResults(keep=1)],  # clear_at_least=1_000; a result is ~690
    )
    messages = list(HEAD)
    usage: object = None
    cleared = 0
    for i in range(40):
        messages += _turn(i)
        fit = mgr.fit(messages, last_usage=usage)
        usage = wg.NO_USAGE
        clears = [e for e in fit.edits if e.kind == "clear"]
        if clears:
            assert sum(e.tokens_freed for e in clears) >= 1_000
            cleared += len(clears)
        # every send has old results left to clear: no turn is ever dropped
        assert fit.dropped_turns == 0, (i, fit.edits)
    assert cleared >= 10
