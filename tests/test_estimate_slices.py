"""A long text is estimated in slices (issue 20, item 1): each C call then holds the GIL
for about a millisecond, so a 30 MB tool result fitted on the proxy's worker thread does
not stall its event loop. Slicing must never lower an estimate or a bound: the sliced
answer is at least the unsliced one, and above it only by what each boundary may add.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from windowguard.accounting import _estimate_features as features
from windowguard.accounting.estimate import Estimator

ESTIMATOR = Estimator()
TABLES = {"dense": ESTIMATOR._dense, "prose": ESTIMATOR._prose}
SHOWN = (features.NONE, features.ESCAPED, features.ARGUMENTS)

# Texts with every class the estimator prices: letters in runs, digit groups, spaces in
# runs, punctuation, quotes and backslashes, control characters, non-ASCII (NFC and not),
# and lone surrogates (which JavaScript agents send).
_PIECES = st.sampled_from(
    [
        "abcdefghij",
        "Hello",
        " ",
        "    ",
        "12345678901234567890",
        "1e15",
        ", ",
        ";",
        '"',
        "\\",
        "\n",
        "\t",
        "\x01",
        "é",
        "e\u0301",
        "\u0958",
        "日本語",
        "🙂",
        "\ud83d",
        "{",
        "[",
        "-",
    ]
)
TEXTS = st.lists(_PIECES, min_size=1, max_size=60).map("".join)


def _unsliced(tables: object, text: str, ceiling: bool, shown: int) -> tuple[int, int]:
    saved = features.SLICE_CHARS
    features.SLICE_CHARS = 10**12
    try:
        return features.scan(tables, text, ceiling, shown)  # type: ignore[arg-type]
    finally:
        features.SLICE_CHARS = saved


def _sliced(
    tables: object, text: str, ceiling: bool, shown: int, slice_chars: int
) -> tuple[int, int]:
    saved = features.SLICE_CHARS
    features.SLICE_CHARS = slice_chars
    try:
        return features.scan(tables, text, ceiling, shown)  # type: ignore[arg-type]
    finally:
        features.SLICE_CHARS = saved


@settings(max_examples=400, deadline=None)
@given(
    text=TEXTS,
    family=st.sampled_from(sorted(TABLES)),
    ceiling=st.booleans(),
    shown=st.sampled_from(SHOWN),
    slice_chars=st.integers(1, 40),
)
def test_a_sliced_scan_never_lowers_the_estimate_or_the_bound(
    text: str, family: str, ceiling: bool, shown: int, slice_chars: int
) -> None:
    tables = TABLES[family]
    whole = _unsliced(tables, text, ceiling, shown)
    sliced = _sliced(tables, text, ceiling, shown, slice_chars)
    if len(text) <= slice_chars:
        assert sliced == whole  # short texts take the unsliced path
        return
    assert sliced[0] >= whole[0]
    assert sliced[1] >= whole[1]


@pytest.mark.parametrize("family", sorted(TABLES))
@pytest.mark.parametrize("shown", SHOWN)
def test_a_long_text_sliced_costs_at_most_a_token_per_thousand_more(
    family: str, shown: int
) -> None:
    # The shape bench_proxy_fairness sends: one long line of prose and numbers, 4 MB.
    line = 'lorem ipsum dolor sit amet, consectetur 12345 adipiscing; "x": [1, 2]\n'
    text = line * (4 * 1024 * 1024 // len(line))
    tables = TABLES[family]
    whole = _unsliced(tables, text, True, shown)
    sliced = features.scan(tables, text, True, shown)
    assert len(text) > features.SLICE_CHARS  # the default slices it
    assert whole[0] <= sliced[0] <= whole[0] * 1.001
    assert whole[1] <= sliced[1] <= whole[1] * 1.001


def test_text_tokens_of_a_long_text_is_sliced_through_the_estimator() -> None:
    text = "word, " * (features.SLICE_CHARS // 3)
    expected = _sliced(ESTIMATOR._dense, text, True, features.ESCAPED, features.SLICE_CHARS)
    assert ESTIMATOR.text_tokens(text, "dense") == expected[0]
    assert expected[0] >= _unsliced(ESTIMATOR._dense, text, True, features.ESCAPED)[0]
