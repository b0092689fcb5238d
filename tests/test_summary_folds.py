"""When the summary stage folds turns, and how many: only when a send would really lose
turns (or the request reaches the stage's trigger), and then in one block down to the
low-water mark with room for the next few turns, so one fold lasts several sends and
the prompt's prefix is rewritten once per block, not on every send."""

from __future__ import annotations

import json
import random
from typing import Any

import windowguard as wg

HEAD = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]


def _output(lines: int, seed: int) -> str:
    rng = random.Random(seed)
    return "\n".join(f"{i:05d} value_{rng.randrange(10**6)} = compute({i})" for i in range(lines))


def _turn(i: int, lines: int = 25) -> list[dict[str, Any]]:
    call = {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/m{i}.py"})},
    }
    return [
        {"role": "assistant", "content": f"Step {i}", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": _output(lines, i)},
    ]


def _manager(edits: Any, window: int = 16_384) -> wg.ContextWindowManager:
    return wg.ContextWindowManager(
        model_info=wg.ModelInfo(context_window=window, max_output_tokens=1_024),
        counter="heuristic",
        edits=edits,
    )


class Summarizer:
    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, turns: list[Any], previous: str | None) -> str:
        self.calls.append(len(turns))
        return "summary: things happened"


def test_without_a_trigger_the_summarizer_runs_only_when_turns_would_be_lost() -> None:
    summarizer = Summarizer()
    folding = _manager([wg.Summarize(summarizer, keep_turns=2)])
    dropping = _manager(())
    messages = list(HEAD)
    usage: object = None
    for i in range(60):
        messages += _turn(i)
        asked = len(summarizer.calls)
        fit = folding.fit(messages, last_usage=usage)
        plain = dropping.fit(messages, last_usage=usage)
        usage = wg.NO_USAGE
        folds = [e for e in fit.edits if e.kind == "summarize"]
        if folds:
            # folded only where dropping would have lost turns anyway
            assert plain.dropped_turns > 0, i
            # and a whole block: the request goes down to the low-water mark
            assert len(folds[0].messages) >= 6, folds
            assert fit.estimated_tokens <= 0.7 * fit.budget
        else:
            assert len(summarizer.calls) == asked
        assert fit.estimated_tokens <= fit.budget
    # one fold lasts several sends (dropping the same turns one by one asked every send)
    assert 2 <= len(summarizer.calls) <= 10, summarizer.calls


def test_a_trigger_folds_in_blocks_below_it() -> None:
    summarizer = Summarizer()
    mgr = _manager([wg.Summarize(summarizer, keep_turns=2, trigger=0.5)])
    messages = list(HEAD)
    usage: object = None
    first = None
    for i in range(60):
        messages += _turn(i)
        fit = mgr.fit(messages, last_usage=usage)
        usage = wg.NO_USAGE
        if first is None and summarizer.calls:
            first = i
        assert fit.estimated_tokens <= 0.5 * fit.budget + 1_000
    # the trigger makes it fold before any turn would be lost (the budget holds ~17 turns)
    assert first is not None and first < 12
    assert len(summarizer.calls) <= 15, summarizer.calls
    assert min(summarizer.calls) >= 4  # two whole turns at least each time
