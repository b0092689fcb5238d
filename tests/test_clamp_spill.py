"""Clamping with a spill store: a result cut again to fit (head + newest turn over the
budget) is cut from the caller's own output, never from the clamp before it, so its
marker counts the whole output and the store keeps the whole output; and the page the
marker suggests fits where the clamped result did."""

from __future__ import annotations

import hashlib
import json
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


def _dense_turn(store: wg.SpillStore) -> tuple[list[Any], str]:
    dense = "\n".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(3_000))
    call = {"id": "c0", "type": "function", "function": {"name": "run_tests", "arguments": "{}"}}
    messages: list[Any] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c0", "content": dense},
    ]
    return messages, dense


def _read(messages: list[Any], store: wg.SpillStore, handle: str, limit: int) -> list[Any]:
    arguments = json.dumps({"handle": handle, "offset": 0, "limit": limit})
    call = {
        "id": "rs1",
        "type": "function",
        "function": {"name": "read_spilled", "arguments": arguments},
    }
    page = store.read(handle, 0, limit)
    return [
        *messages,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "rs1", "content": page},
    ]


def test_the_page_the_marker_suggests_fits_where_the_clamped_result_did(tmp_path: Path) -> None:
    store = wg.SpillStore(tmp_path / "spill")
    clamp = wg.ClampToolResults(max_tokens=0.25, spill=store)
    mgr = _manager(8_192, clamp)
    messages, _ = _dense_turn(store)
    fit = mgr.fit(messages)
    marker = fit.messages[-1]["content"]
    found = re.search(r"offset=0, limit=(\d+)\)", marker)
    assert found is not None, marker
    limit = int(found.group(1))
    assert 0 < limit < 20_000  # hex: far fewer characters than a 20,000-character page
    # read as the marker says: the page is sent whole, within the clamp's limit
    messages = _read(messages, store, _handle(marker), limit)
    fit = mgr.fit(messages, last_usage=wg.NO_USAGE)
    assert fit.messages[-1] is messages[-1]
    assert not [e for e in fit.edits if e.messages == (len(messages) - 1,)]
    page_tokens = mgr.estimator.text_tokens(messages[-1]["content"], "dense")
    assert page_tokens <= clamp.limit(fit.budget)


def test_a_page_larger_than_the_room_is_cut_rather_than_ending_the_run(tmp_path: Path) -> None:
    store = wg.SpillStore(tmp_path / "spill")
    mgr = _manager(8_192, wg.ClampToolResults(max_tokens=0.25, spill=store))
    messages, dense = _dense_turn(store)
    fit = mgr.fit(messages)
    handle = _handle(fit.messages[-1]["content"])
    messages = _read(messages, store, handle, 20_000)  # more than the whole budget
    fit = mgr.fit(messages, last_usage=wg.NO_USAGE)  # raised ContextTruncatedError
    assert fit.estimated_tokens <= fit.budget
    page = fit.messages[-1]["content"]
    assert page.startswith(f"[read_spilled {handle}: characters 0-20,000 of {len(dense):,}")
    assert "tokens of this output cut here" in page
    assert "read_spilled(handle=" not in page  # a page is never spilled again
    assert [e.kind for e in fit.edits if e.messages == (len(messages) - 1,)] == ["clamp"]
    assert len(list(store.directory.iterdir())) == 1
