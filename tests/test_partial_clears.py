"""A message holding several tool results may be cleared in part: what was cleared is
kept per result, so the next block of clears goes on with its other results, oldest
first, and never skips them for good (an Anthropic user message answers every call of
the turn before it, one ``tool_result`` block each)."""

from __future__ import annotations

import random
from typing import Any

import windowguard as wg


def _output(lines: int, seed: int) -> str:
    rng = random.Random(seed)
    return "\n".join(f"{i:05d} value_{rng.randrange(10**6)} = compute({i})" for i in range(lines))


def _turn(n: int, texts: list[str]) -> list[dict[str, Any]]:
    uses = [
        {"type": "tool_use", "id": f"tu_{n}_{k}", "name": "read_file", "input": {"path": f"f{k}"}}
        for k in range(len(texts))
    ]
    results = [
        {"type": "tool_result", "tool_use_id": f"tu_{n}_{k}", "content": text}
        for k, text in enumerate(texts)
    ]
    return [
        {"role": "assistant", "content": [{"type": "text", "text": f"step {n}"}, *uses]},
        {"role": "user", "content": results},
    ]


def _cleared(messages: list[Any]) -> list[list[bool]]:
    return [
        ["[cleared" in block["content"] for block in message["content"]]
        for message in messages
        if message["role"] == "user" and isinstance(message["content"], list)
    ]


def test_a_partly_cleared_message_has_its_other_results_cleared_oldest_first() -> None:
    manager = wg.ContextWindowManager(
        model_info=wg.ModelInfo(context_window=16_384, max_output_tokens=1024),
        counter="heuristic",
        hold_turns=0,
        edits=[wg.ClearToolResults(keep=1, clear_at_least=0, low_water=0.95)],
    )
    history: list[Any] = [{"role": "user", "content": "task"}]
    usage: object = None
    partly = False
    for n in range(14):
        history += _turn(n, [_output(12, seed=n * 10 + k) for k in range(3)])
        fit = manager.fit(history, last_usage=usage, format="anthropic")
        usage = wg.NO_USAGE
        cleared = [flag for message in _cleared(fit.messages) for flag in message]
        # Oldest first, result by result: never a kept result before a cleared one.
        assert cleared == sorted(cleared, reverse=True), _cleared(fit.messages)
        partly = partly or any(0 < sum(flags) < len(flags) for flags in _cleared(fit.messages))
    assert partly  # a block of clears did stop inside a message
