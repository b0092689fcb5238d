"""Text operations of the edit stages: :func:`clamp_text` and :func:`placeholder_text`.

Both are pure and deterministic -- the same input gives the same bytes on every send,
with no timestamp and no random id -- because an edited result is re-sent on every later
request and prompt caches need a byte-stable prefix.

:func:`clamp_text` cuts an oversized tool output to its start and its end around one
marker line that says how many tokens were cut (Codex middle-truncates a tool output the
same way, ``…N tokens truncated…``, openai/codex ``codex-rs/core/src/truncate.rs``;
pydantic-ai-harness ``ToolOutputLimits`` keeps head and tail and can spill the whole
output behind a handle the model pages through). Invariants:

* the result, marker included, counts at most ``max_tokens`` by the caller's ``count``
  (verified by counting the result itself, so a count that is not additive over
  concatenation is still respected);
* cuts fall on line boundaries where that keeps at least half of what a cut anywhere
  would, else inside a line;
* an error result keeps its first non-blank line (what says it failed), whichever end is
  kept; a Python traceback also keeps its last line (the exception);
* a text that already fits is returned unchanged (the caller's own string).
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from typing import Literal

from ..exceptions import ConfigurationError
from .parts import looks_failed

__all__ = [
    "DEFAULT_PLACEHOLDER",
    "PAGE_CHARS",
    "PLACEHOLDER_FIELDS",
    "Keep",
    "check_placeholder",
    "clamp_text",
    "placeholder_text",
]

Keep = Literal["head_tail", "head", "tail"]

PAGE_CHARS = 20_000
"""The largest page a clamp marker suggests for ``read_spilled`` (characters): the
suggestion is what holds about as many tokens as the clamped result kept, at most this."""

DEFAULT_PLACEHOLDER = "[cleared to save context: {tool}({arguments}), {tokens:,} tokens]"
"""What a cleared tool result reads, by default."""

PLACEHOLDER_FIELDS = frozenset({"tool", "arguments", "tokens", "call_id"})
"""The named fields a placeholder template may use: the tool's name, its arguments
(shortened to ~48 characters), the result's size in tokens (an int) and the call id."""

_ARGUMENTS_CHARS = 48
_WHITESPACE = re.compile(r"\s+")


def check_placeholder(template: str) -> None:
    """Validate a placeholder template: a ``str.format`` template using only
    :data:`PLACEHOLDER_FIELDS`.

    Raises:
        ConfigurationError: naming the template and what is wrong with it.
    """
    if not isinstance(template, str) or not template.strip():
        raise ConfigurationError(f"placeholder must be a non-empty template, got {template!r}")
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
        unknown = sorted(n for n in names if n not in PLACEHOLDER_FIELDS)
        if unknown:
            raise ConfigurationError(
                f"placeholder {template!r} uses unknown fields {unknown}; it may use "
                f"{sorted(PLACEHOLDER_FIELDS)}"
            )
        template.format(tool="t", arguments="{}", tokens=1, call_id="c")
    except (ValueError, IndexError, KeyError) as exc:
        raise ConfigurationError(
            f"placeholder {template!r} is not a valid template: {exc}"
        ) from exc


def placeholder_text(
    tool_name: str,
    arguments: str,
    tokens: int,
    template: str | None = None,
    *,
    call_id: str = "",
) -> str:
    """The short text a cleared tool result is replaced by.

    Deterministic: whitespace in ``arguments`` is collapsed and arguments longer than
    48 characters are cut to 47 and an ellipsis (the call itself still shows them, unless
    its inputs were cleared too). ``tokens`` must be stable for the
    same result on every send (count the original text with the same function each
    time, or keep the placeholder), since the placeholder is part of the cached prefix.

    Examples:
        >>> placeholder_text("read_file", '{"path": "a.py"}', 8712)
        '[cleared to save context: read_file({"path": "a.py"}), 8,712 tokens]'

    Raises:
        ConfigurationError: an invalid template (see :func:`check_placeholder`).
    """
    if template is None:
        template = DEFAULT_PLACEHOLDER
    else:
        check_placeholder(template)
    short = _WHITESPACE.sub(" ", arguments).strip()
    if len(short) > _ARGUMENTS_CHARS:
        short = short[: _ARGUMENTS_CHARS - 1] + "…"
    return template.format(
        tool=tool_name or "a tool", arguments=short, tokens=max(0, int(tokens)), call_id=call_id
    )


def clamp_text(
    text: str,
    max_tokens: int,
    count: Callable[[str], int],
    keep: Keep = "head_tail",
    spilled: str | None = None,
    *,
    error: bool | None = None,
    page_chars: int = PAGE_CHARS,
) -> str:
    """Cut ``text`` to at most ``max_tokens`` (by ``count``), keeping its start and/or end.

    Args:
        text: the tool output.
        max_tokens: the most tokens the result may count, marker included.
        count: tokens of a text (the manager passes an upper-bound estimate or an exact
            count); must be deterministic.
        keep: ``"head_tail"`` (half each), ``"head"`` or ``"tail"``.
        spilled: the spill handle of the whole output, named in the marker with how to
            page through it (``read_spilled(handle=..., offset=..., limit=...)``; the
            limit suggested is the characters of this text that count about 90 % of
            ``max_tokens``, so a page fits where the clamped result did, and at most
            ``page_chars``).
        error: whether the result says it failed (its failure lines are always kept);
            None: decided by :func:`~windowguard.core.edits.parts.looks_failed`.
        page_chars: the largest page the store returns (characters).

    Returns:
        ``text`` itself when it fits, else the cut text with one marker line.

    Raises:
        ConfigurationError: ``keep`` is unknown, or ``max_tokens`` cannot hold even the
            marker.
    """
    if keep not in ("head_tail", "head", "tail"):
        raise ConfigurationError(f"keep must be 'head_tail', 'head' or 'tail', got {keep!r}")
    total = count(text)
    if total <= max_tokens:
        return text
    if error is None:
        error = looks_failed(text)
    head_floor, tail_floor = _failure_lines(text) if error else (0, len(text))
    # A page as large as the clamped result (less a tenth, for the page's header line):
    # a page of PAGE_CHARS could itself be more than the request has room for.
    page = min(page_chars, max(1, (max_tokens - max_tokens // 10) * len(text) // max(total, 1)))

    def marker(cut: int, short: bool = False) -> str:
        if short:
            return f"[… {cut:,} tokens cut …]"
        line = f"[… {cut:,} of {total:,} tokens of this output cut here"
        if spilled is not None:
            line += (
                f"; the whole output ({len(text):,} characters) is kept: read_spilled("
                f'handle="{spilled}", offset=0, limit={page}) pages through it'
            )
        return line + " …]"

    for short in (False, True):
        room = max_tokens - count(marker(total, short)) - count("\n\n")
        if room < 0:
            continue
        slack = 0
        for _ in range(24):
            budget = room - slack
            if budget < 0:
                break
            head_end, tail_start = _cuts(text, budget, count, keep, head_floor, tail_floor)
            head, tail = text[:head_end], text[tail_start:]
            cut = max(0, total - (count(head) if head else 0) - (count(tail) if tail else 0))
            result = _compose(head, marker(cut, short), tail)
            used = count(result)
            if used <= max_tokens:
                return result
            slack += max(1, used - max_tokens)
    only = marker(total, short=True)
    if count(only) <= max_tokens:
        return only
    raise ConfigurationError(
        f"max_tokens={max_tokens} cannot hold even the clamp marker {only!r}; give "
        "ClampToolResults a larger max_tokens"
    )


def _compose(head: str, marker: str, tail: str) -> str:
    out = head
    if head and not head.endswith("\n"):
        out += "\n"
    out += marker
    if tail:
        out += "\n" + tail
    return out


def _failure_lines(text: str) -> tuple[int, int]:
    """(end of the head that must be kept, start of the tail that must be kept)."""
    start = len(text) - len(text.lstrip())
    newline = text.find("\n", start)
    head_floor = len(text) if newline < 0 else newline + 1
    tail_floor = len(text)
    if text[start:].lower().startswith("traceback (most recent call last)"):
        stripped = text.rstrip()
        tail_floor = stripped.rfind("\n") + 1
    return head_floor, tail_floor


def _cuts(
    text: str,
    budget: int,
    count: Callable[[str], int],
    keep: Keep,
    head_floor: int,
    tail_floor: int,
) -> tuple[int, int]:
    """Where the kept head ends and the kept tail starts, within ``budget`` tokens.

    ``text[:head_floor]`` and ``text[tail_floor:]`` are an error's failure lines: kept
    whichever end ``keep`` names, cut inside the line only when the line alone does not
    fit.
    """
    n = len(text)
    if keep == "head":
        tail_start = n
        if tail_floor < n:
            tail_start = tail_floor + _suffix_start(text[tail_floor:], budget, count)
        used = count(text[tail_start:]) if tail_start < n else 0
        return _prefix_end(text[:tail_start], budget - used, count), tail_start
    if keep == "tail":
        head_end = _prefix_end(text[:head_floor], budget, count) if head_floor else 0
        used = count(text[:head_end]) if head_end else 0
        return head_end, head_end + _suffix_start(text[head_end:], budget - used, count)
    head_budget = budget // 2
    if head_floor:
        head_budget = max(head_budget, min(budget, count(text[:head_floor])))
    head_end = _prefix_end(text, head_budget, count)
    used = count(text[:head_end]) if head_end else 0
    return head_end, head_end + _suffix_start(text[head_end:], budget - used, count)


def _longest(tokens_at: Callable[[int], int], n: int, budget: int) -> int:
    """The largest ``k`` in ``0..n`` with ``tokens_at(k) <= budget`` (``tokens_at`` about
    monotone, ``tokens_at(0) == 0``), to within ``max(8, k/256)`` characters.

    Each step aims at the budget through the characters-per-token ratio it has just
    measured (secant search), falling back to bisecting the bracket: 3-6 counts of pieces
    about the answer's size, never of all ``n`` characters but at the end.
    """
    lo, hi = 0, n + 1  # tokens_at(lo) fits; tokens_at(hi) does not (n + 1: not known)
    k = max(1, min(n, budget * 4))
    for _ in range(64):
        used = tokens_at(k)
        if used <= budget:
            lo = k
            if lo == n:
                return n
        else:
            hi = k
        if hi - lo <= max(8, lo // 256):
            break
        aim = int(k * budget / max(used, 1))
        if used <= budget:
            aim = max(aim, lo + 1)
        if not lo < aim < hi:
            aim = (lo + min(hi, n + 1)) // 2 if hi <= n else min(n, max(lo * 2, lo + 1))
        k = min(aim, n)
    return lo


def _prefix_end(text: str, budget: int, count: Callable[[str], int]) -> int:
    """The end of the longest prefix counting at most ``budget``, at a line end when that
    keeps at least half of it."""
    if budget <= 0 or not text:
        return 0
    chars = _longest(lambda k: count(text[:k]), len(text), budget)
    if chars == len(text):
        return chars
    line_end = text.rfind("\n", 0, chars) + 1
    return line_end if line_end * 2 >= chars else chars


def _suffix_start(text: str, budget: int, count: Callable[[str], int]) -> int:
    """The start of the longest suffix counting at most ``budget``, at a line start when
    that keeps at least half of it."""
    n = len(text)
    if budget <= 0 or not text:
        return n
    chars = _longest(lambda k: count(text[n - k :]), n, budget)
    if chars == n:
        return 0
    start = n - chars
    if text[start - 1] == "\n":
        return start
    newline = text.find("\n", start)
    line_start = newline + 1 if 0 <= newline < n - 1 else n
    return line_start if (n - line_start) * 2 >= chars else start
