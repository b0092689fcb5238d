"""The heuristic's byte-level features, and the one-pass scan that prices a text.

Every UTF-8 byte of a text gets a *class code* (lower- or upper-case letter, digit,
ASCII punctuation, space/tab, newline, lead byte of a 2-, 3- or 4-byte character,
continuation byte, control character); every character then counts toward one feature
chosen by its class and the class of the character before it (a *pair*). Two run
features count every 8 lower-case and every 8 upper-case letters in a row, a third
every run of two or more spaces or tabs.

The features are laid out after the pre-token rules every byte-level BPE family shares
(o200k, cl100k, Llama 3/4, Qwen2/3, Tekken; their split regexes are in
``accounting/local.py`` and the tokenizer files): a letter after a digit, punctuation,
a space or a newline, a digit after anything but a digit, punctuation after anything but
punctuation, a newline after anything but a newline, the second space of a run, a
multi-byte character, a control character -- each begins a new pre-token, and a
pre-token is at least one token. :data:`TOKEN_STARTS` names them with that least cost;
the fit (``bench/fit_priors.py``) keeps each weight at or above it, and keeps the
letter-after-letter weights at or above what the worst family spends per letter on
words it has never seen (:data:`LETTER_RATE_FLOOR`), so long words and languages
other than English are priced by their length.

Invariants: every feature is a count that never decreases when characters are
appended; every weight is >= 0 (enforced by :func:`cost_tables`); so a text's estimate
never decreases when characters are appended. The scan is a handful of C-speed byte
operations per text (``str.encode``, ``bytes.translate``, one big-integer multiply that
puts each code beside its predecessor, Adler-32 sums of per-character costs,
``bytes.count``), with no Python loop per character.
"""

from __future__ import annotations

import functools
import unicodedata
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from ..core.exceptions import ConfigurationError

__all__ = [
    "BIGRAM_CLASSES",
    "FEATURES",
    "LETTER_RATE_FLOOR",
    "STRICT_STARTS",
    "TOKEN_STARTS",
    "CostTables",
    "cost_tables",
    "scan",
    "text_features",
]

# Every UTF-8 byte gets a class code; 0 stands for "no character" (before the text).
_CLASSES: Final = ("lower", "upper", "digit", "punct", "space", "newline")
_LOWER, _UPPER, _DIGIT, _PUNCT, _SPACE, _NEWLINE = 1, 2, 3, 4, 5, 6
_LEAD2, _LEAD3, _LEAD4, _CONTINUATION, _CONTROL = 7, 8, 9, 10, 11


def _class_codes() -> bytes:
    table = bytearray(256)
    for byte in range(256):
        char = chr(byte)
        if byte >= 0xF0:
            code = _LEAD4
        elif byte >= 0xE0:
            code = _LEAD3
        elif byte >= 0xC0:
            code = _LEAD2
        elif byte >= 0x80:
            code = _CONTINUATION
        elif char.isupper():
            code = _UPPER
        elif char.islower():
            code = _LOWER
        elif char.isdigit():
            code = _DIGIT
        elif char in " \t":
            code = _SPACE
        elif char in "\r\n":
            code = _NEWLINE
        elif byte < 0x20 or byte == 0x7F:
            code = _CONTROL  # JSON escapes it as \u00XX: several tokens
        else:
            code = _PUNCT
        table[byte] = code
    return bytes(table)


_CLASS_CODES: Final = _class_codes()
# What precedes a character, grouped: the six ASCII classes ("newline" also stands for
# the start of the text: a text starts like a line; a control character counts as
# punctuation) and "multibyte" (after a character of two or more UTF-8 bytes).
_PRECEDING: Final = (*_CLASSES, "multibyte")
_GROUP_OF_CODE: Final = (5, 0, 1, 2, 3, 4, 5, 6, 6, 6, 6, 3)  # code -> index in _PRECEDING

FEATURES: Final = (
    # An ASCII character of each class, by the class of the character before it.
    *(f"{cls}_after_{before}" for cls in _CLASSES for before in _PRECEDING),
    # Characters of two, three and four UTF-8 bytes (their continuation bytes are free),
    # and ASCII control characters (tabs, newlines and carriage returns aside).
    "utf8_2byte",
    "utf8_3byte",
    "utf8_4byte",
    "control",
    # Every 8 lower-case letters in a row: long words and identifiers split into more
    # tokens than short ones, so short words need not pay the long ones' rate.
    "lower_runs_8",
    # Every run of two or more spaces/tabs: its second space begins a pre-token of its
    # own (``\s+(?!\S)`` leaves the last space to the word after it).
    "space_runs",
    # What JSON may add to dense text (tool results, arguments): one per quote,
    # backslash, newline, carriage return, tab, comma and colon, five per control
    # character. Prose and schema weights keep it at 0 (their text is never escaped).
    "escapable",
)
_PAIR_FEATURES: Final = len(_CLASSES) * len(_PRECEDING) + 4  # looked up per character
_LETTERS: Final = ("lower", "upper")
_STARTING: Final = ("lower", "upper", "digit", "punct", "space", "newline", "multibyte")

TOKEN_STARTS: Final[Mapping[str, float]] = {
    # A letter after a digit, punctuation, a space (the space joins it) or a newline;
    # an upper-case letter after a lower-case one (o200k, Llama 4 and Tekken split
    # CamelCase; the others' merges rarely cross the step).
    **{f"{c}_after_{b}": 1 for c in _LETTERS for b in ("digit", "punct", "space", "newline")},
    "upper_after_lower": 1,
    # A digit after anything but a digit; after a space two (digits never take the space).
    **{f"digit_after_{b}": 1 for b in ("lower", "upper", "punct", "newline", "multibyte")},
    "digit_after_space": 2,
    # Punctuation after a letter, digit, space (the space joins it), newline or a
    # multi-byte character.
    **{f"punct_after_{b}": 1 for b in (*_LETTERS, "digit", "space", "newline", "multibyte")},
    # A newline after anything but a newline (after punctuation the split joins them,
    # ``[\r\n]*``, yet the pair is often two tokens).
    **{f"newline_after_{b}": 1 for b in _STARTING if b != "newline"},
    # Every multi-byte character and control character, and the second space of a run.
    "utf8_2byte": 1,
    "utf8_3byte": 1,
    "utf8_4byte": 1,
    "control": 1,
    "space_runs": 1,
}
"""Features whose every occurrence begins a new pre-token (or, where noted, nearly always
a new token) in every byte-level BPE family, with the tokens each costs at least."""

STRICT_STARTS: Final[Mapping[str, float]] = {
    **{f"{c}_after_{b}": 1 for c in _LETTERS for b in ("space", "newline", "digit")},
    **{f"digit_after_{b}": 1 for b in ("lower", "upper", "punct", "newline", "multibyte")},
    "digit_after_space": 2,
    **{f"newline_after_{b}": 1 for b in ("lower", "upper", "digit")},
}
"""The starts of :data:`TOKEN_STARTS` that are jointly a lower bound on the exact count in
every family (a letter after a space, newline or digit; a digit after anything but a
digit, two after a space; a newline after a letter or digit). The others over-price on
purpose where two starts share a pre-token (``",banana"`` is one)."""

LETTER_RATE_FLOOR: Final = 0.4375
"""Tokens per letter after the first of a word (``lower_after_lower``,
``upper_after_upper``, ``lower_after_upper``, a letter after a multi-byte letter) at
least: a word of n letters no vocabulary holds (pseudo-words of real syllables: Welsh,
Swahili, pinyin) takes at most ``1 + 0.4375 (n - 1)`` tokens on average in the worst
family, with the 8-letter run feature above 8 (docs/decisions/0002-estimator.md,
revision 6)."""

# Class pairs (a = lower-case letter, A = upper, 0 = digit, " " = space/tab,
# "\n" = newline, "." = other ASCII) the tests build texts of: nothing but that
# transition, random characters of the two classes in runs of 1-3.
BIGRAM_CLASSES: Final = tuple(a + b for a in "aA0. \n" for b in "aA0. \n")


def _pair_feature(pair: int) -> int | None:
    """The feature a character counts toward, from its pair code (previous << 4 | own)."""
    before, own = pair >> 4, pair & 15
    if before > _CONTROL:
        return None  # cannot occur
    if _LOWER <= own <= _NEWLINE:
        return (own - 1) * len(_PRECEDING) + _GROUP_OF_CODE[before]
    if _LEAD2 <= own <= _LEAD4:
        return len(_CLASSES) * len(_PRECEDING) + own - _LEAD2
    if own == _CONTROL:
        return len(_CLASSES) * len(_PRECEDING) + 3
    return None  # continuation bytes, and codes that cannot occur


_PAIR_FEATURE: Final = tuple(_pair_feature(pair) for pair in range(256))
# Feature letters for counting (text_features): one byte per pair code.
_FEATURE_LETTERS: Final = bytes(
    32 if feature is None else 64 + feature for feature in _PAIR_FEATURE
)
# Space runs: a space after a non-space is "A", a space after a space "B", anything
# else "C"; every run of two or more spaces holds "AB" exactly once.
_RUN_MARKS: Final = bytes(
    (66 if pair >> 4 == _SPACE else 65) if pair & 15 == _SPACE else 67 for pair in range(256)
)
_SPACE_RUN: Final = b"AB"
_LOWER_RUN: Final = bytes([_LOWER]) * 8
# What escaping (and re-serialising) may add per byte: a quote, backslash, newline,
# carriage return or tab one (\", \\, \n, \r, \t); another control character five
# (\u00XX); a comma or colon one (", ", ": ").
_ESCAPE_EXTRA: Final = bytes(
    1 if chr(b) in '"\\\n\r\t,:' else 5 if b < 0x20 or b == 0x7F else 0 for b in range(256)
)


def _pair_codes(data: bytes) -> tuple[bytes, bytes]:
    """Class codes of ``data`` and, per byte, ``previous code << 4 | own code``.

    The pairs come from big-integer arithmetic on the codes, at C speed: adding the
    codes shifted by 12 bits puts each byte's predecessor in its high nibble.
    """
    codes = data.translate(_CLASS_CODES)
    number = int.from_bytes(codes, "little")
    # number * 4097 is (number << 12) + number, in one pass; codes are below 16, so the
    # shifted code lands in the empty high nibble of the next byte and nothing carries.
    return codes, (number * 4097).to_bytes(len(codes) + 1, "little")


def text_features(text: str) -> tuple[int, ...]:
    """The estimator's features of ``text``, followed by its UTF-8 length.

    Returns:
        One count per name in :data:`FEATURES`, then ``utf8_bytes``. Every count is
        >= 0, and none decreases when characters are appended to ``text``.
    """
    data = text.encode("utf-8", "surrogatepass")
    if not data:
        return (0,) * (len(FEATURES) + 1)
    codes, pairs = _pair_codes(data)
    count = pairs.translate(_FEATURE_LETTERS).count
    return (
        *(count(64 + feature) for feature in range(_PAIR_FEATURES)),
        codes.count(_LOWER_RUN),
        pairs.translate(_RUN_MARKS).count(_SPACE_RUN),
        sum(data.translate(_ESCAPE_EXTRA)),
        len(data),
    )


# A weight vector as cost tables: per pair code, its feature's weight in 1/256 tokens,
# split into a high and a low part (fitted weights are multiples of 1/256, so the sums
# are exact integers: the estimate equals the dot product with text_features()).
SCALE: Final = 256
# The fit sees samples of each content class; texts it never saw combine units the fit
# left tight: every text's estimate is ceil(w . features x 17/16) + 1 (decision 0002,
# revision 5), still capped by its byte length.
MARGIN_NUM: Final = 17
MARGIN_DEN: Final = 16
_MARGIN_ADD: Final = 1
_ADLER_EXACT: Final = 65519  # the largest sum whose 1 + sum stays below Adler's 65521
ESCAPE_BYTES: Final = 5  # a control character is shown as \u00XX: five bytes more


@dataclass(frozen=True, slots=True)
class CostTables:
    """A weight vector as byte tables over pair codes.

    A character's cost in 1/256 tokens is ``whole << granule`` and also
    ``(high << shift | low) << granule``: ``granule`` divides out the grid the weights sit
    on (the fit writes multiples of 1/32, ``granule`` 3). A short text is summed through
    ``whole`` alone (one ``translate``, one Adler-32 call, exact up to ``whole_chunk``
    bytes); a longer one through the two small parts, which Adler-32 sums exactly in
    slices of ``chunk`` bytes (its first half is 1 + the sum modulo 65521), so a long
    tool result takes a few C calls, not one per 256 bytes.
    """

    whole: bytes
    whole_chunk: int  # 0: some cost does not fit in a byte
    high: bytes | None  # None: every cost is below 1 << shift
    low: bytes
    shift: int
    granule: int
    chunk: int
    lower_run: int
    space_run: int
    escape: int


@functools.lru_cache(maxsize=64)
def cost_tables(weights: tuple[float, ...]) -> CostTables:
    """The cost tables of one weight vector (in :data:`FEATURES` order).

    Raises:
        ConfigurationError: a weight is negative, too large, or not a multiple of 1/256.
    """
    if len(weights) != len(FEATURES):
        raise ConfigurationError(
            f"estimator weights need {len(FEATURES)} values (one per feature), got {len(weights)}"
        )
    units = []
    for weight in weights:
        unit = round(weight * SCALE)
        if unit < 0 or unit >= SCALE * SCALE or unit != weight * SCALE:
            raise ConfigurationError(
                f"estimator weights must be multiples of 1/{SCALE} in [0, {SCALE}), got {weight!r}"
            )
        units.append(unit)
    costs = [0 if f is None else units[f] for f in _PAIR_FEATURE]
    granule = next(g for g in range(8, -1, -1) if all(cost % (1 << g) == 0 for cost in costs))
    costs = [cost >> granule for cost in costs]
    top = max(costs)
    # The split whose larger part is smallest: the longest run Adler-32 sums exactly.
    shift = min(
        (s for s in range(1, 9) if top >> s < 256),
        key=lambda s: max(top >> s, (1 << s) - 1),
    )
    high = bytes(cost >> shift for cost in costs)
    low = bytes(cost & ((1 << shift) - 1) for cost in costs)
    return CostTables(
        whole=bytes(min(cost, 255) for cost in costs),
        whole_chunk=_ADLER_EXACT // max(1, top) if top < 256 else 0,
        high=high if any(high) else None,
        low=low,
        shift=shift,
        granule=granule,
        chunk=_ADLER_EXACT // max(1, *high, *low),
        lower_run=units[_PAIR_FEATURES],
        space_run=units[_PAIR_FEATURES + 1],
        escape=units[_PAIR_FEATURES + 2],
    )


def bounded_sum(data: bytes, chunk: int) -> int:
    """The exact sum of the bytes of ``data``, none above ``_ADLER_EXACT // chunk``.

    Adler-32's first half is (1 + the sum) modulo 65521: the sum itself for up to
    ``chunk`` such bytes. Longer data is summed in slices of ``chunk`` bytes (views).
    """
    if len(data) <= chunk:
        return (zlib.adler32(data) & 0xFFFF) - 1
    view = memoryview(data)
    return sum(
        (zlib.adler32(view[start : start + chunk]) & 0xFFFF) - 1
        for start in range(0, len(data), chunk)
    )


# What the bound adds to a text's UTF-8 length (see _estimate_bound.py):
_DIGIT_LETTERS: Final = bytes([_DIGIT << 4 | _LOWER, _DIGIT << 4 | _UPPER])
# The first byte of a JSON text Python's json.loads accepts (objects, arrays, strings,
# numbers, true/false/null, NaN, Infinity): any other text is shown as a JSON string.
_JSON_START: Final = frozenset(bytes([b]) for b in b'{["-0123456789tfnNI')
_LONG_DIGITS: Final = bytes([_DIGIT]) * 17
# A JSON number with an exponent re-serialised by json.dumps(json.loads(...)) grows by at
# most 21 bytes ("1e15" -> "1000000000000000.0", at most 24 bytes); one of 17 or more
# digits without one by at most 6 ("1.2345678901234568e+17").
_EXPONENT_GROWTH: Final = 21
_ESCAPE_CHUNK: Final = _ADLER_EXACT // 5
_LONG_NUMBER_GROWTH: Final = 6
NONE: Final = 0
ESCAPED: Final = 1  # a template may show the text as a JSON string (tool results)
ARGUMENTS: Final = 2  # ... or re-serialise it as JSON, perhaps with ensure_ascii=True


def _finish(
    text: str,
    size: int,
    best: int,
    escapes: int,
    grown: tuple[int, int] | None,
    controls: Callable[[], int],
    ceiling: bool,
    shown: int,
) -> tuple[int, int]:
    """:func:`scan`'s answer from its counts: ``grown`` is (digit -> letter pairs, runs
    of 17 digits) when the text may be re-printed JSON, else None."""
    # The bound: bytes as a byte-level BPE sees them (Qwen normalises to NFC first, which
    # can lengthen a text: U+0958 -> U+0915 U+093C), plus what escaping may add.
    bound = size
    if not text.isascii():
        try:
            if not unicodedata.is_normalized("NFC", text):
                bound = max(size, len(unicodedata.normalize("NFC", text).encode("utf-8")))
        except UnicodeEncodeError:  # a lone surrogate: every tokenizer replaces it
            pass
    if shown:
        bound += 2 + escapes  # the quotes of a JSON string, and what escaping adds
        if grown is not None:
            # It may be JSON, which json.dumps(json.loads(text)) re-prints: an exponent
            # (a digit -> letter pair) or 17+ digits grow.
            letters, long_digits = grown
            bound += _EXPONENT_GROWTH * letters + _LONG_NUMBER_GROWTH * long_digits
        if shown == ARGUMENTS:
            # ensure_ascii=True: a 2-byte character becomes 6 bytes, 3 -> 6, 4 -> 12: at
            # most 4 more per byte beyond the first of each character.
            bound += 4 * (size - len(text))
    # The generalisation margin (x 17/16, + 1), then ceil to whole tokens; a byte-level
    # BPE emits at most one token per byte of what the template shows: the text, where a
    # control character may be JSON-escaped into six bytes (\u00XX), or for dense text
    # the bound (a two-byte tool result is shown as "\"ok\"": three tokens).
    tokens = -(-best * MARGIN_NUM // (MARGIN_DEN * SCALE)) + _MARGIN_ADD
    if ceiling and tokens > size:
        if shown:
            tokens = min(tokens, bound)
        else:
            tokens = min(tokens, size + ESCAPE_BYTES * controls())
    return tokens, bound


def scan(
    tables: Sequence[CostTables], text: str, ceiling: bool = True, shown: int = NONE
) -> tuple[int, int]:
    """One family's estimate of ``text`` (the maximum over several, for the unknown
    family) and an upper bound on the UTF-8 bytes any chat template shows for it.

    The text is scanned once into class and pair codes; each family's weights are then
    applied to them (a table lookup and a byte sum, at C speed).

    Args:
        tables: the weight vectors' cost tables.
        text: the text.
        ceiling: cap the estimate at the bytes the template may show (False for a
            tool's schema text, which is not what the model is shown).
        shown: how a template may show the text: verbatim (:data:`NONE`), as a JSON
            string or re-parsed JSON (:data:`ESCAPED`: quotes, backslashes, newlines,
            tabs and control characters escaped, two quotes, ``", "`` and ``": "``
            spaced, numbers re-printed), or that with non-ASCII as ``\\uXXXX``
            (:data:`ARGUMENTS`, ``json.dumps``' default in llama-models).

    Returns:
        ``(estimate, bound_bytes)``; both 0 for an empty text.
    """
    if not text:
        return 0, 0
    if len(text) > SLICE_CHARS:
        return _scan_sliced(tables, text, ceiling, shown)
    data = text.encode("utf-8", "surrogatepass")
    size = len(data)
    # _pair_codes and bounded_sum, inlined: this runs once per text of a cold fit.
    codes = data.translate(_CLASS_CODES)
    pairs = (int.from_bytes(codes, "little") * 4097).to_bytes(size + 1, "little")
    adler = zlib.adler32
    escapes = 0
    if shown or tables[0].escape:  # dense text (every member prices it), or the bound
        extra = data.translate(_ESCAPE_EXTRA)
        escapes = (
            (adler(extra) & 0xFFFF) - 1
            if size < _ESCAPE_CHUNK
            else bounded_sum(extra, _ESCAPE_CHUNK)
        )
    # The run counts, once (every fitted family prices both).
    lower_runs = codes.count(_LOWER_RUN)
    space_runs = pairs.translate(_RUN_MARKS).count(_SPACE_RUN)
    best = 0
    for cost in tables:
        if size < cost.whole_chunk:  # the common case: one table, one exact sum
            units = (adler(pairs.translate(cost.whole)) & 0xFFFF) - 1
        else:  # a long text: two small parts, summed in long slices
            units = bounded_sum(pairs.translate(cost.low), cost.chunk)
            if cost.high is not None:
                units += bounded_sum(pairs.translate(cost.high), cost.chunk) << cost.shift
        units = (
            (units << cost.granule)
            + cost.lower_run * lower_runs
            + cost.space_run * space_runs
            + cost.escape * escapes
        )
        if units > best:
            best = units
    first = data[:1]
    if shown and first in b" \t\n\r":
        first = data.lstrip()[:1]
    grown: tuple[int, int] | None = None
    if shown == ARGUMENTS or (shown and first in _JSON_START):
        grown = (size + 1 - len(pairs.translate(None, _DIGIT_LETTERS)), codes.count(_LONG_DIGITS))
    return _finish(text, size, best, escapes, grown, lambda: codes.count(_CONTROL), ceiling, shown)


# A text longer than this many characters is scanned in slices of it: each C call
# (encode, translate, the pair multiply) then holds the GIL for about a millisecond, so a
# 30 MB tool result estimated on a worker thread does not stall the proxy's event loop.
SLICE_CHARS: Final = 256 * 1024


def _scan_sliced(
    tables: Sequence[CostTables], text: str, ceiling: bool, shown: int
) -> tuple[int, int]:
    """:func:`scan` of a long text, slice by slice; never below the unsliced answer.

    Each slice's pairs start from the previous slice's last byte, so every pair the
    whole text has is priced; what slicing adds is non-negative (each slice's closing
    pair, and one run of each kind per boundary, which a boundary may split in two
    shorter runs that no longer count), and the bound's counts only grow the same way.
    """
    units = [0] * len(tables)
    size = escapes = lower_runs = space_runs = letters = long_digits = controls = 0
    previous = b""
    first = b""
    dense = shown or tables[0].escape
    for start in range(0, len(text), SLICE_CHARS):
        data = text[start : start + SLICE_CHARS].encode("utf-8", "surrogatepass")
        size += len(data)
        if not first:
            first = data.lstrip()[:1] if shown else data[:1]
        codes = data.translate(_CLASS_CODES)
        joined = previous + codes
        pairs = (int.from_bytes(joined, "little") * 4097).to_bytes(len(joined) + 1, "little")
        previous = codes[-1:]
        if dense:
            escapes += sum(data.translate(_ESCAPE_EXTRA))
        lower_runs += codes.count(_LOWER_RUN) + 1
        space_runs += pairs.translate(_RUN_MARKS).count(_SPACE_RUN) + 1
        letters += len(pairs) - len(pairs.translate(None, _DIGIT_LETTERS))
        long_digits += codes.count(_LONG_DIGITS) + 1
        controls += codes.count(_CONTROL)
        for at, cost in enumerate(tables):
            part = bounded_sum(pairs.translate(cost.low), cost.chunk)
            if cost.high is not None:
                part += bounded_sum(pairs.translate(cost.high), cost.chunk) << cost.shift
            units[at] += part
    best = max(
        (part << cost.granule)
        + cost.lower_run * lower_runs
        + cost.space_run * space_runs
        + cost.escape * escapes
        for part, cost in zip(units, tables, strict=True)
    )
    grown: tuple[int, int] | None = None
    if shown == ARGUMENTS or (shown and first in _JSON_START):
        grown = (letters, long_digits)
    return _finish(text, size, best, escapes, grown, lambda: controls, ceiling, shown)
