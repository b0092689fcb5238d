"""Clamping with a spill store: a result cut again to fit (head + newest turn over the
budget) is cut from the caller's own output, never from the clamp before it, so its
marker counts the whole output and the store keeps the whole output; and the page the
marker suggests fits where the clamped result did."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import windowguard as wg


def _output(lines: int, seed: int) -> str:
    rng = random.Random(seed)
    return "\n".join(f"{i:05d} value_{rng.randrange(10**6)} = compute({i})" for i in range(lines))


def _manager(window: int, clamp: wg.ClampToolResults) -> wg.ContextWindowManager:
    return wg.ContextWindowManager(
        model_info=wg.ModelInfo(context_window=window, max_output_tokens=1_024),
        counter="heuristic",
        edits=[clamp],
    )


def _handle(text: str) -> str:
    found = re.search(r'handle="([^"]+)"', text)
    assert found is not None, text[-400:]
    return found.group(1)


def test_a_result_cut_again_to_fit_is_cut_from_the_whole_output(tmp_path: Path) -> None:
    store = wg.SpillStore(tmp_path / "spill")
    mgr = _manager(16_384, wg.ClampToolResults(max_tokens=0.3, spill=store))
    head = [
        {"role": "system", "content": "sys " + "word " * 4_000},  # 0.4 of the budget
        {"role": "user", "content": "task"},
    ]
    calls = [
        {"id": f"c{k}", "type": "function", "function": {"name": "run", "arguments": "{}"}}
        for k in range(3)
    ]
    outputs = [_output(3_000, seed=k) for k in range(3)]
    messages: list[Any] = [
        *head,
        {"role": "assistant", "content": None, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": f"c{k}", "content": outputs[k]} for k in range(3)),
    ]
    fit = mgr.fit(messages)
    assert fit.estimated_tokens <= fit.budget
    count = mgr.estimator.text_tokens
    for k in range(3):
        sent = fit.messages[3 + k]["content"]
        assert len(sent) < len(outputs[k]) // 10
        handle = _handle(sent)
        assert store.text(handle) == outputs[k]  # the whole output, not a clamped one
        whole = count(outputs[k], "dense")
        assert f"of {whole:,} tokens of this output cut here" in sent
        assert f"the whole output ({len(outputs[k]):,} characters)" in sent
        assert sent.startswith(outputs[k][:200])
        # the receipts of this message add up to what was cut from the caller's output
        clamps = [e for e in fit.edits if e.kind == "clamp" and e.messages == (3 + k,)]
        assert clamps and clamps[0].tokens_before == whole
        assert sum(e.tokens_freed for e in clamps) == whole - count(sent, "dense")
