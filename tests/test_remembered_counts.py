"""A cold fit near the edge counts each long text once: the family's tokenizer remembers
its counts (RememberingCounter), and the clamp counts only a result whose UTF-8 bytes
could be over its limit (a byte-level BPE never emits more tokens than bytes)."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import windowguard as wg
from windowguard.accounting import local
from windowguard.accounting.local import (
    REMEMBERED_MIN_CHARS,
    RememberingCounter,
    TemplateAccounting,
)
from windowguard.pipeline import _editing


class _Tally:
    """A deterministic counter (one token per 3 characters, rounded up) that tallies the
    texts it is asked about."""

    def __init__(self) -> None:
        self.asked: Counter[str] = Counter()
        self.batches = 0

    def count(self, text: str) -> int:
        self.asked[text] += 1
        return -(-len(text) // 3)

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        self.batches += 1
        return [self.count(text) for text in texts]


def test_a_long_text_is_counted_once_a_short_one_every_time() -> None:
    inner = _Tally()
    counter = RememberingCounter(inner)
    long, short = "x" * REMEMBERED_MIN_CHARS, "y" * (REMEMBERED_MIN_CHARS - 1)
    for _ in range(3):
        assert counter.count(long) == -(-len(long) // 3)
        assert counter.count(short) == -(-len(short) // 3)
    assert inner.asked[long] == 1 and inner.asked[short] == 3


def test_a_batch_counts_only_what_is_not_remembered() -> None:
    inner = _Tally()
    counter = RememberingCounter(inner)
    texts = [f"{i} " + "z" * (REMEMBERED_MIN_CHARS + i) for i in range(5)]
    assert counter.count_batch(texts[:3]) == [-(-len(t) // 3) for t in texts[:3]]
    assert counter.count_batch(texts) == [-(-len(t) // 3) for t in texts]
    assert all(inner.asked[t] == 1 for t in texts)


def test_the_memory_starts_over_past_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "REMEMBERED_MAX_CHARS", 3 * REMEMBERED_MIN_CHARS)
    inner = _Tally()
    counter = RememberingCounter(inner)
    texts = [chr(97 + i) * REMEMBERED_MIN_CHARS for i in range(5)]
    for text in texts:
        counter.count(text)
    assert sum(len(t) for t in counter._known) <= 3 * REMEMBERED_MIN_CHARS
    assert [counter.count(t) for t in texts] == [-(-len(t) // 3) for t in texts]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=600), min_size=1, max_size=12))
def test_remembered_counts_equal_fresh_counts(texts: list[str]) -> None:
    counter = RememberingCounter(_Tally())
    twice = texts + texts[::-1]
    assert counter.count_batch(twice) == [-(-len(t) // 3) for t in twice]
    assert [counter.count(t) for t in texts] == [-(-len(t) // 3) for t in texts]


@pytest.mark.parametrize(
    ("text", "limit", "within"),
    [
        ("a" * 100, 100, True),
        ("a" * 101, 100, False),
        ("\u00e9" * 50, 100, True),  # 2 bytes each: exactly 100
        ("\u00e9" * 51, 100, False),
        ("\U0001f680" * 25, 100, True),  # 4 bytes each
        ("\U0001f680" * 26, 100, False),
        ("\ud800" * 33, 100, True),  # a lone surrogate: 3 bytes (surrogatepass)
        ("\ud800" * 34, 100, False),
    ],
)
def test_within_in_bytes_is_the_utf8_length(text: str, limit: int, within: bool) -> None:
    assert _editing._within_in_bytes(text, limit) is within


def _transcript(sizes: Sequence[int]) -> list[dict[str, Any]]:
    rng = random.Random(7)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
    ]
    for i, lines in enumerate(sizes):
        body = "\n".join(
            f"{n:04d} r\u00e9sultat_{rng.randrange(10**6)}, \u6771\u4eac {n}" for n in range(lines)
        )
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "read", "arguments": json.dumps({"n": i})},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": body},
        ]
    return messages


def test_the_byte_bound_changes_no_clamp_only_what_is_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def manager() -> wg.ContextWindowManager:
        return wg.ContextWindowManager(
            model_info=wg.ModelInfo(16_384, tokenizer="o200k"),
            edits=[wg.ClampToolResults(max_tokens=800)],
        )

    family = manager()
    if family.local is None:
        pytest.skip("no local o200k tokenizer installed")
    # The same tokenizer given as the caller's own: no byte bound (a caller's counter may
    # be anything), so the clamp counts every result; the clamps must be the same ones.
    caller = manager()
    caller.local = TemplateAccounting("o200k", family.local.counter)
    assert isinstance(family._text_count(), _editing.BytesBounded)
    assert not isinstance(caller._text_count(), _editing.BytesBounded)

    asked: list[str] = []
    remembering = _editing._remembering

    def spying(count: Any) -> Any:
        counted = remembering(count)

        def spy(text: str) -> int:
            asked.append(text)
            return counted(text)

        return spy

    monkeypatch.setattr(_editing, "_remembering", spying)
    messages = _transcript([3, 10, 40, 90, 5, 120, 60])
    results = [m["content"] for m in messages if m["role"] == "tool"]
    ours = family.fit(messages, max_tokens=1_024)
    ours_asked, asked[:] = list(asked), []
    theirs = caller.fit(messages, max_tokens=1_024)

    assert [(e.kind, e.messages, e.tokens_before) for e in ours.edits] == [
        (e.kind, e.messages, e.tokens_before) for e in theirs.edits
    ]
    assert ours.messages == theirs.messages
    assert {e.messages[0] for e in ours.edits if e.kind == "clamp"}  # some were clamped
    assert set(results) <= set(asked)  # the caller's counter: every result
    small = {t for t in results if len(t.encode()) <= 800}
    assert small and not small & set(ours_asked)  # the family's: none within 800 bytes
