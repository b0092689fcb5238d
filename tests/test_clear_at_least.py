"""ClearToolResults(clear_at_least=...): a block of clears that needs less than
clear_at_least goes on until it frees that much (when there is that much to clear),
rather than stopping at what the send needs and then being cancelled for freeing too
little, which dropped whole turns where clearing would have kept them."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

import windowguard as wg

HEAD = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]


def _turn(i: int) -> list[dict[str, Any]]:
    rng = random.Random(i)
    body = "\n".join(f"{n:05d} value_{rng.randrange(10**6)} = compute({n})" for n in range(25))
    call = {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/m{i}.py"})},
    }
    return [
        {"role": "assistant", "content": f"Step {i}", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": body},
    ]


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
