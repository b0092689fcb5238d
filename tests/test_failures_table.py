"""docs/failures.md's tables and the classifier say the same thing.

The page lists every wording ``classify_failure`` reads as a context overflow or an
output-cap refusal, with the status the provider sends it with and the numbers read from
it, and every status and body code that decides any other kind. These tests run the
tables through the classifier:

* each quoted wording, its letters replaced by drawn numbers, is classified to the row's
  kind with the row's status, and every number the row says is read is the number put in
  (a number it does not name is not read);
* every message rule of the classifier reads at least one wording of the tables, so a
  rule added without a row fails here;
* each status and code of the "Everything else" table gives its row's kind, and the
  statuses are retried as the row says.

Where each text comes from is in ``tests/failure_fixtures.py``; Go-duration waits
(``retry-after: 1m26.4s``) are checked here against a formatter written after Go's
``time.Duration.String``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from windowguard.core.failures import FailureKind, classify_failure
from windowguard.core.failures._patterns import (
    _OUTPUT_RULES,
    _OVERFLOW_RULES,
    _OVERFLOW_WORDS,
    _Rule,
)

PAGE = Path(__file__).resolve().parent.parent / "docs" / "failures.md"

# A letter standing for a number: a lone capital among these, not part of a word or code.
_LETTER = re.compile(r"(?<![A-Za-z0-9_`'])([PWOMTNKCE])(?![A-Za-z0-9_`'])")
_QUOTED = re.compile(r'"([^"]+)"')
# "[at least]", "[and N draft tokens]": optional parts (a literal "[1, C]" starts with a digit).
_OPTIONAL = re.compile(r"\[([a-z][^\]]*)\]")
_DERIVED = re.compile(r"\b([PWOC]) = ([A-Z]) ([+\u2212-]) 1\b")

_FIELDS = {
    FailureKind.CONTEXT_OVERFLOW: {
        "P": "prompt_tokens",
        "W": "context_window",
        "O": "requested_output",
    },
    FailureKind.OUTPUT_LIMIT: {"O": "requested_output", "C": "max_output_tokens"},
}
_SECTIONS = {
    "## Context overflows": FailureKind.CONTEXT_OVERFLOW,
    "## Output caps": FailureKind.OUTPUT_LIMIT,
}


@dataclass(frozen=True, slots=True)
class Row:
    kind: FailureKind
    provider: str
    status: int | None
    wording: str
    numbers: str

    @property
    def texts(self) -> tuple[str, ...]:
        """The row's quoted wordings, each optional part both kept and left out."""
        out: list[str] = []
        for quoted in _QUOTED.findall(self.wording):
            out.append(_OPTIONAL.sub(r"\1", quoted))
            without = re.sub(r"\s*" + _OPTIONAL.pattern, "", quoted)
            if without != out[-1]:
                out.append(without)
        return tuple(out)


def _table_rows(section: str) -> list[list[str]]:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(section)
    end = text.find("\n## ", start + 1)
    lines = text[start : end if end != -1 else None].splitlines()
    rows = [line for line in lines if line.startswith("| ")]
    assert len(rows) > 2, f"no table under {section!r} in {PAGE}"
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows[2:]]


def _wording_rows() -> list[Row]:
    rows = []
    for section, kind in _SECTIONS.items():
        for provider, status, wording, numbers in _table_rows(section):
            rows.append(
                Row(kind, provider, None if status == "—" else int(status), wording, numbers)
            )
    return rows


ROWS = _wording_rows()
TEXT_ROWS = [row for row in ROWS if row.texts]


def _fill(text: str, values: dict[str, int]) -> str:
    return _LETTER.sub(lambda m: str(values[m.group(1)]), text)


def _expected(row: Row, text: str, values: dict[str, int]) -> dict[str, int | None]:
    """The fields the row says are read from this text, with their values; None for the
    fields it says are not read. A field the row names but this text does not state (an
    alternative wording without it) is not checked."""
    named = _LETTER.findall(_QUOTED.sub("", row.numbers))
    in_text = set(_LETTER.findall(text))
    derived = {m.group(1): m.groups()[1:] for m in _DERIVED.finditer(row.numbers)}
    expected: dict[str, int | None] = {}
    for letter, field in _FIELDS[row.kind].items():
        if letter not in named:
            expected[field] = None
        elif letter in derived:
            base, sign = derived[letter]
            if base in in_text:
                expected[field] = values[base] + (1 if sign == "+" else -1)
        elif letter in in_text:
            expected[field] = values[letter]
    return expected


_VALUES = st.fixed_dictionaries(
    {
        letter: st.integers(min_value=2 if letter == "E" else 1, max_value=10_000_000)
        for letter in "PWOMTNKCE"
    }
)


def test_the_tables_list_wordings_for_both_length_kinds() -> None:
    kinds = {row.kind for row in TEXT_ROWS}
    assert kinds == {FailureKind.CONTEXT_OVERFLOW, FailureKind.OUTPUT_LIMIT}
    # Rows without a quoted wording are named here, so none goes unchecked by mistake.
    untexted = {(row.provider, row.wording) for row in ROWS if not row.texts}
    assert untexted == {
        ("Anthropic", "a message with `stop_reason` `model_context_window_exceeded`")
    }


@pytest.mark.parametrize(
    "row", TEXT_ROWS, ids=lambda r: f"{r.kind.value}-{r.provider}-{r.wording[:30]}"
)
@settings(deadline=None, max_examples=15)
@given(values=_VALUES)
def test_each_table_wording_is_classified_as_the_row_says(row: Row, values: dict[str, int]) -> None:
    for template in row.texts:
        text = _fill(template, values)
        failure = classify_failure(status=row.status, body=text)
        assert failure.kind is row.kind, (row.provider, text, failure)
        assert failure.retryable is False
        for field, value in _expected(row, template, values).items():
            assert getattr(failure, field) == value, (row.provider, text, field, failure)
        if row.status is not None:
            # The status gates the wording: the same text under a 401 is an auth failure.
            assert classify_failure(status=401, body=text).kind is FailureKind.AUTH


def test_codes_named_as_overflows_are_overflows() -> None:
    (row,) = [r for r in ROWS if r.provider == "any"]
    codes = re.findall(r"`([a-z_]+)`", row.wording)
    assert codes == [
        "context_length_exceeded",
        "exceed_context_size_error",
        "model_context_window_exceeded",
    ]
    for code in codes:
        body = {"error": {"message": "", "code": code}}
        assert classify_failure(status=400, body=body).kind is FailureKind.CONTEXT_OVERFLOW


@settings(deadline=None, max_examples=25)
@given(prompt=st.integers(min_value=0, max_value=10_000_000))
def test_anthropic_window_stop_reads_the_prompt_from_usage(prompt: int) -> None:
    message = {
        "type": "message",
        "stop_reason": "model_context_window_exceeded",
        "usage": {"input_tokens": prompt, "output_tokens": 0},
    }
    failure = classify_failure(message)
    assert failure.kind is FailureKind.CONTEXT_OVERFLOW
    assert failure.prompt_tokens == prompt


def _all_table_texts() -> list[str]:
    values = dict(
        zip(
            "PWOMTNKCE",
            (150_001, 131_072, 4_096, 120_000, 154_097, 777, 55, 8_192, 8_193),
            strict=True,
        )
    )
    return [_fill(t, values) for row in TEXT_ROWS for t in row.texts]


@pytest.mark.parametrize(
    "rule",
    [*_OVERFLOW_RULES, *_OUTPUT_RULES],
    ids=lambda r: r.pattern.pattern[:48],
)
def test_every_message_rule_has_a_row_in_the_tables(rule: _Rule) -> None:
    pattern = rule.pattern
    assert any(pattern.search(text) for text in _all_table_texts()), (
        f"no wording in {PAGE.name} is read by {pattern.pattern!r}: add a row for it"
    )


def _top_level_alternatives(pattern: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for index, char in enumerate(pattern):
        escaped = index > 0 and pattern[index - 1] == "\\"
        if char == "(" and not escaped:
            depth += 1
        elif char == ")" and not escaped:
            depth -= 1
        if char == "|" and depth == 0 and not escaped:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


@pytest.mark.parametrize("alternative", _top_level_alternatives(_OVERFLOW_WORDS.pattern))
def test_every_overflow_statement_without_numbers_has_a_row(alternative: str) -> None:
    pattern = re.compile(alternative, re.IGNORECASE)
    overflow_texts = [
        text
        for row in ROWS
        if row.kind is FailureKind.CONTEXT_OVERFLOW
        for text in [*row.texts, *re.findall(r"`([a-z_]+)`", row.wording)]
    ]
    assert any(pattern.search(_fill(t, dict.fromkeys("PWOMTNKCE", 9))) for t in overflow_texts)


# --- the "Everything else" table --------------------------------------------------------

_KIND_ROWS = _table_rows("## Everything else")


def _kind_of(cell: str) -> FailureKind:
    return FailureKind[re.match(r"`([A-Z_]+)`", cell).group(1)]  # type: ignore[union-attr]


def _statuses(cell: str) -> list[int]:
    found = re.findall(r"(?<!with )status ((?:\d{3}(?:, )?)+)", cell)
    return [int(s) for group in found for s in re.findall(r"\d{3}", group)]


def _codes(cell: str) -> list[str]:
    segments = re.findall(r"\bcodes? ((?:`[a-z_]+`(?:, (?:or )?| or |; )?)+)", cell)
    return [code for segment in segments for code in re.findall(r"`([a-z_]+)`", segment)]


def test_the_kinds_table_and_the_length_tables_cover_every_kind() -> None:
    kinds = {_kind_of(kind) for kind, _, _ in _KIND_ROWS}
    assert kinds | set(_FIELDS) == set(FailureKind)


@pytest.mark.parametrize(
    ("kind_cell", "recognised", "retried"),
    _KIND_ROWS,
    ids=[row[0] for row in _KIND_ROWS],
)
def test_each_status_and_code_of_the_kinds_table(
    kind_cell: str, recognised: str, retried: str
) -> None:
    kind = _kind_of(kind_cell)
    for status in _statuses(recognised):
        failure = classify_failure(status=status, body="")
        assert failure.kind is kind, (status, failure)
        assert failure.retryable is retried.startswith("yes"), (status, failure)
    for code in _codes(recognised):
        failure = classify_failure(body={"error": {"message": "", "code": code}})
        assert failure.kind is kind, (code, failure)


def test_the_statuses_the_issue_named_are_in_the_kinds_table() -> None:
    # Groq's 498 is retried, llama.cpp's 501 is not (issue 20, item 12).
    rows = {
        status: (kind, retried) for kind, cell, retried in _KIND_ROWS for status in _statuses(cell)
    }
    assert rows[498][0] == "`OVERLOADED`" and rows[498][1].startswith("yes")
    assert rows[501][0].startswith("`SERVER`") and rows[501][1] == "no"


# --- Go-duration waits ------------------------------------------------------------------


def _go_duration(nanoseconds: int) -> str:
    """``time.Duration(nanoseconds).String()``, written after Go's src/time/time.go."""
    if nanoseconds == 0:
        return "0s"
    if nanoseconds < 1_000:
        return f"{nanoseconds}ns"
    if nanoseconds < 1_000_000_000:
        unit, scale = ("µs", 1_000) if nanoseconds < 1_000_000 else ("ms", 1_000_000)
        return _fraction(nanoseconds, scale) + unit
    hours, rest = divmod(nanoseconds, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = _fraction(rest, 1_000_000_000) + "s"
    if hours or minutes:
        text = f"{minutes}m" + text
    if hours:
        text = f"{hours}h" + text
    return text


def _fraction(value: int, scale: int) -> str:
    whole, part = divmod(value, scale)
    digits = str(part).rjust(len(str(scale)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}" if digits else str(whole)


@pytest.mark.parametrize(
    ("nanoseconds", "text"),
    [
        (86_400_000_000, "1m26.4s"),
        (120_000_000_000, "2m0s"),
        (3_723_000_000_000, "1h2m3s"),
        (500_000_000, "500ms"),
        (1_500_000, "1.5ms"),
        (250_000, "250µs"),
        (7, "7ns"),
        (0, "0s"),
    ],
)
def test_the_go_formatter_matches_go(nanoseconds: int, text: str) -> None:
    # Values as Go prints them (time.Duration.String docs and examples).
    assert _go_duration(nanoseconds) == text


@settings(deadline=None, max_examples=300)
@given(nanoseconds=st.integers(min_value=0, max_value=400 * 3_600 * 10**9))
def test_a_go_duration_retry_after_is_read_as_its_seconds(nanoseconds: int) -> None:
    headers = {"retry-after": _go_duration(nanoseconds)}
    failure = classify_failure(status=429, body="", headers=headers)
    assert failure.retry_after == pytest.approx(nanoseconds / 1e9, rel=1e-12, abs=1e-12)


@settings(deadline=None, max_examples=200)
@given(
    parts=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=10_000) | st.decimals(0, 1000, places=3).map(str),
            st.sampled_from(["h", "m", "s", "ms", "us", "µs", "ns"]),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_any_sequence_of_go_units_sums(parts: list[tuple[object, str]]) -> None:
    # Go's ParseDuration reads any sequence of number+unit ("2m", "1h2m3s", "0.5s").
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    text = "".join(f"{number}{unit}" for number, unit in parts)
    expected = sum(float(str(number)) * scale[unit] for number, unit in parts)
    failure = classify_failure(status=503, body="", headers={"retry-after": text})
    assert failure.retry_after == pytest.approx(expected, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("1m26.4s", 86.4),
        ("2m", 120.0),
        ("1h2m3s", 3723.0),
        ("500ms", 0.5),
        ("0.5s", 0.5),
        ("12", 12.0),
    ],
)
def test_the_waits_the_issue_named(value: str, seconds: float) -> None:
    # Groq sends "retry-after: 1m26.4s" style values on 429s (issue 20, item 12); whole
    # seconds keep working.
    assert classify_failure(status=429, body="", headers={"retry-after": value}).retry_after == (
        pytest.approx(seconds)
    )


@settings(deadline=None, max_examples=300)
@given(nanoseconds=st.integers(min_value=1_000_000, max_value=400 * 3_600 * 10**9))
def test_a_go_duration_in_the_message_is_read_as_its_seconds(nanoseconds: int) -> None:
    # Groq's 429 text: "... Please try again in 9m38.016s. Need more tokens? ..."
    message = f"Rate limit reached. Please try again in {_go_duration(nanoseconds)}. Visit ..."
    body = {"error": {"message": message, "type": "tokens", "code": "rate_limit_exceeded"}}
    failure = classify_failure(status=429, body=body)
    assert failure.retry_after == pytest.approx(nanoseconds / 1e9, rel=1e-12, abs=1e-12)
