"""The over-counting token estimator, its per-family priors, and calibration.

ADR-107 estimates without a tokenizer: characters divided by 3.5 for prose and by
2.5 for dense machine text (tool-call arguments, tool results, the tool-schema
block), plus per-message and per-tool-call overheads, times a calibration factor
seeded above 1.0 that only ever rises toward what the provider reports.

Fixed ratios under-count text that tokenizes densely -- CJK, Cyrillic, emoji, digits
and newlines (``"1\\n" * 30000`` is ~60k tokens, not 20k), base64, hex -- so the
estimator here is content-class aware and linear in byte-level *counts*:

    tokens(text) = min(ceiling, ceil(w · features(text) x 17/16) + 1)

Every character counts toward one feature, chosen by its class (lower- or upper-case
letter, digit, ASCII punctuation, space/tab, newline, 2-, 3- or 4-byte UTF-8
character, control character) and, for ASCII, the class of the character before it;
two more features count runs of 8 lower-case and 8 upper-case letters. Splitting a
class by what precedes it is how a linear model sees token boundaries and merges with
weights that are all >= 0: a space joins the word after it, ``", "`` and ``": "``
merge, a letter after punctuation starts a new token in CSV, CamelCase splits at a
lower->upper step, digits group. Each feature is a count that never decreases when
characters are appended, and every weight is >= 0, so no text is clamped to zero and
appending never lowers an estimate (ADR 0002, revision 5). ``ceiling`` is the UTF-8
length (a byte-level BPE emits at most one token per byte of what it is shown), plus
five bytes per control character, which a template may JSON-escape as ``\\u00XX``.

All at C speed, with no Python loop over characters: one ``str.encode``, one
``bytes.translate`` into class codes, big-integer arithmetic that puts each code's
predecessor beside it (a *pair code* per byte), then per weight vector a
``bytes.translate`` of the pair codes into per-character costs (weights are multiples
of 1/256, split into two small parts) and an exact byte sum of each (``zlib.adler32``
over slices short enough that its modulus never wraps), plus a ``bytes.count`` per run
feature. The features are computed once per text; a family's weights are a table
applied to them.

The weights ``w`` and the per-message / per-call / per-tool / per-request overheads are
fitted together per tokenizer family by one linear program (``bench/fit_priors.py``)
that minimises the mean estimate/exact over the benchmark corpus' requests subject to
estimate >= exact for every request, every corpus text (where the ceiling allows),
every adversarial text and thousands of generated texts of structured content classes
(JSON, CSV, YAML, ``key: value`` lines, paths, tables, logs, numbers, runs of one
character, emoji, CJK, mixed alphabets; tool schemas). Claude, Gemini and DeepSeek
have no offline tokenizer and are fitted to targets derived from the measured
families. A model whose family is unknown (``Estimator(None)``) is estimated, text by
text, as the maximum over the families measured exactly, and each framing overhead as
the maximum of theirs; see ``docs/decisions/0002-estimator.md`` for every number.

Invariants:
    * every weight is >= 0 and every feature never decreases under appending, so a
      text's estimate never decreases when characters are appended;
    * the raw estimate of a request is >= the exact prompt tokens of the family's
      template on every request of the benchmark corpus (checked by the tests);
    * per item too: the tool-block estimate is >= the exact tokens the block adds for
      every corpus tool set, every single tool and their unions, and each message's
      estimate is >= its own cost in the template (ADR 0002, revision 3);
    * the unknown family is >= every measured family on every text, message and request;
    * :class:`Calibration` never lowers its factor, and only :meth:`Calibration.reset`
      (a run's first send) returns it to the seed.
"""

from __future__ import annotations

import functools
import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from zlib import adler32

from .accounting.usage import (
    DEFAULT_CALIBRATION_SEED,
    NO_USAGE,
    Calibration,
    prompt_tokens_from_usage,
)
from .counters import TokenCounter
from .exceptions import ConfigurationError
from .shapes import ContentClass, Shape

__all__ = [
    "CONSERVATIVE_FAMILY",
    "DEFAULT_CALIBRATION_SEED",
    "FAMILIES",
    "MEASURED_FAMILIES",
    "NO_USAGE",
    "UNKNOWN_FAMILY",
    "Calibration",
    "Estimator",
    "FamilyPriors",
    "prompt_tokens_from_usage",
]


# --------------------------------------------------------------------------- features

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
    # An ASCII character of each class, by the class of the character before it: how a
    # linear model with non-negative weights sees token boundaries and merges (a space
    # joins the word after it, ", " and '": "' merge, CamelCase splits at a lower->upper
    # step, digits group, a letter after punctuation starts a new token in CSV ...).
    *(f"{cls}_after_{before}" for cls in _CLASSES for before in _PRECEDING),
    # Characters of two, three and four UTF-8 bytes (their continuation bytes are free),
    # and ASCII control characters (tabs, newlines and carriage returns aside).
    "utf8_2byte",
    "utf8_3byte",
    "utf8_4byte",
    "control",
    # Every 8 lower-case and every 8 upper-case letters in a row (long runs of letters,
    # random identifiers and one letter repeated, split into more tokens than words do).
    "lower_runs_8",
    "upper_runs_8",
)
# Features whose every occurrence begins a new pre-token under the split of every family
# measured exactly (tiktoken-style patterns: o200k, cl100k, Llama 3/4, Qwen, Tekken), with
# the tokens each costs at least: a letter after a space, a newline or a digit, a digit
# after anything but a digit, a newline after a letter or a digit, one each; a digit
# after a space, two (the space is a pre-token of its own: digits never take it). The fit
# keeps their weights at or above these in every class, so no text is estimated below
# its count of token starts (tests/test_estimate_properties.py checks that count against
# the exact tokenizers).
TOKEN_STARTS: Final[Mapping[str, int]] = {
    **{f"{c}_after_{b}": 1 for c in ("lower", "upper") for b in ("space", "newline", "digit")},
    **{f"digit_after_{b}": 1 for b in ("lower", "upper", "newline", "punct", "multibyte")},
    "digit_after_space": 2,
    **{f"newline_after_{b}": 1 for b in ("lower", "upper", "digit")},
}
# Class pairs (a = lower-case letter, A = upper, 0 = digit, " " = space/tab,
# "\n" = newline, "." = other ASCII) the tests build texts of: nothing but that
# transition, random characters of the two classes in runs of 1-3.
BIGRAM_CLASSES: Final = tuple(a + b for a in "aA0. \n" for b in "aA0. \n")
_PAIR_FEATURES: Final = len(_CLASSES) * len(_PRECEDING) + 4  # looked up per character
_ESCAPE_BYTES: Final = 5  # a control character is shown as \u00XX: five bytes more
_LOWER_RUN: Final = bytes([_LOWER]) * 8
_UPPER_RUN: Final = bytes([_UPPER]) * 8


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
        >= 0, and none decreases when characters are appended to ``text``: each
        character counts toward one feature chosen by it and the character before it,
        and a run count only grows as its run does.
    """
    data = text.encode("utf-8", "surrogatepass")
    if not data:
        return (0,) * (len(FEATURES) + 1)
    codes, pairs = _pair_codes(data)
    count = pairs.translate(_FEATURE_LETTERS).count
    return (
        *(count(64 + feature) for feature in range(_PAIR_FEATURES)),
        codes.count(_LOWER_RUN),
        codes.count(_UPPER_RUN),
        len(data),
    )


# A weight vector as cost tables: per pair code, its feature's weight in 1/256 tokens,
# split into a high and a low part (fitted weights are multiples of 1/256, so the sums
# are exact integers: the estimate equals the dot product with text_features()).
_SCALE: Final = 256
# The fit sees samples of each content class; texts it never saw (hypothesis finds them)
# combine units the fit left tight with one a little under. Measured before the margin:
# the worst such text was 1.4 % or one token under. Every text's estimate is therefore
# ceil(w . features x 17/16) + 1 (ADR 0002, revision 5), still capped by its byte length.
_MARGIN_NUM: Final = 17
_MARGIN_DEN: Final = 16
_MARGIN_ADD: Final = 1
_ADLER_EXACT: Final = 65519  # the largest sum whose 1 + sum stays below Adler's 65521


@dataclass(frozen=True, slots=True)
class _CostTables:
    """A weight vector as two byte tables over pair codes: a character's cost in 1/256
    tokens is ``high << shift | low``. ``shift`` keeps both parts small, so Adler-32
    sums ``chunk`` bytes of either exactly in one C call (its first half is 1 + the sum
    modulo 65521)."""

    high: bytes | None  # None: every cost is below 1 << shift
    low: bytes
    shift: int
    chunk: int
    lower_run: int
    upper_run: int


@functools.lru_cache(maxsize=64)
def _cost_tables(weights: tuple[float, ...]) -> _CostTables:
    units = []
    for weight in weights:
        unit = round(weight * _SCALE)
        if unit < 0 or unit >= _SCALE * _SCALE or unit != weight * _SCALE:
            raise ConfigurationError(
                f"estimator weights must be multiples of 1/{_SCALE} in [0, {_SCALE}), "
                f"got {weight!r}"
            )
        units.append(unit)
    costs = [0 if f is None else units[f] for f in _PAIR_FEATURE]
    # The split whose larger part is smallest: the longest run Adler-32 sums exactly.
    # (Both parts must fit in a byte; 8, the plain high and low byte, always does.)
    shift = min(
        (s for s in range(1, 9) if max(costs) >> s < 256),
        key=lambda s: max(max(costs) >> s, (1 << s) - 1),
    )
    high = bytes(cost >> shift for cost in costs)
    low = bytes(cost & ((1 << shift) - 1) for cost in costs)
    return _CostTables(
        high=high if any(high) else None,
        low=low,
        shift=shift,
        chunk=_ADLER_EXACT // max(1, *high, *low),
        lower_run=units[_PAIR_FEATURES],
        upper_run=units[_PAIR_FEATURES + 1],
    )


def _bounded_sum(data: bytes, chunk: int) -> int:
    """The exact sum of the bytes of ``data``, none above ``_ADLER_EXACT // chunk``.

    Adler-32's first half is (1 + the sum) modulo 65521: the sum itself for up to
    ``chunk`` such bytes. Longer data is summed in slices of ``chunk`` bytes (views, no
    copies).
    """
    if len(data) <= chunk:
        return (zlib.adler32(data) & 0xFFFF) - 1
    view = memoryview(data)
    return sum(
        (zlib.adler32(view[start : start + chunk]) & 0xFFFF) - 1
        for start in range(0, len(data), chunk)
    )


# --------------------------------------------------------------------------- priors


@dataclass(frozen=True, slots=True, kw_only=True)
class FamilyPriors:
    """What the estimator assumes about one tokenizer family.

    Attributes:
        name: the family (``"o200k"``, ``"claude"``, ``"unknown"`` ...).
        prose_weights: tokens per unit of each feature in :data:`FEATURES`, for prose.
        dense_weights: the same for dense machine text.
        schema_weights: the same for a tool schema's text (families render schemas
            their own way: TypeScript for OpenAI, indented JSON for Llama 3 ...).
        message_tokens: framing the chat template adds per message.
        tool_call_tokens: framing per tool call (the call's name and arguments are text).
        media_item_tokens: fixed cost of one image, audio clip or document.
        tool_tokens: framing per tool schema.
        tools_block_tokens: framing of the whole tool block (present only with tools).
        request_tokens: fixed framing per request (BOS, default system header,
            reply priming).
        basis: where the numbers come from.
        members: for the unknown family only, the measured families whose per-text
            maximum it takes (its own weight vectors are then empty, and each overhead
            is the maximum of theirs).
    """

    name: str
    prose_weights: tuple[float, ...]
    dense_weights: tuple[float, ...]
    schema_weights: tuple[float, ...]
    message_tokens: int
    tool_call_tokens: int
    media_item_tokens: int
    tool_tokens: int
    tools_block_tokens: int
    request_tokens: int
    basis: str
    members: tuple[FamilyPriors, ...] = ()


def _priors(name: str, fitted: Mapping[str, Any], basis: str) -> FamilyPriors:
    return FamilyPriors(
        name=name,
        prose_weights=tuple(fitted["prose"]),
        dense_weights=tuple(fitted["dense"]),
        schema_weights=tuple(fitted.get("schema", fitted["dense"])),
        message_tokens=int(fitted["message"]),
        tool_call_tokens=int(fitted["tool_call"]),
        media_item_tokens=int(fitted.get("media", 1600)),
        tool_tokens=int(fitted["tool"]),
        tools_block_tokens=int(fitted["tools_block"]),
        request_tokens=int(fitted["request"]),
        basis=basis,
    )


# Fitted by bench/fit_priors.py on ../shared/corpus, the adversarial texts and generated
# texts of every content class (weights in FEATURES order: the class counts, then the
# transitions and runs). Regenerate with `python bench/fit_priors.py --write`.
# BEGIN FITTED PRIORS
# fmt: off
_FITTED: dict[str, dict[str, Any]] = {
    "o200k": {
        "basis": "fitted: exact o200k tokenizer, openai template",
        "prose": [
            0.0, 0.0, 3.6875, 2.06640625, 1.0, 4.203125, 0.0,
            2.37890625, 0.0703125, 1.7734375, 2.3125, 1.0, 5.0, 0.0,
            1.0, 1.0, 0.36328125, 1.0, 2.0703125, 1.0, 1.0,
            0.0, 0.0, 1.171875, 0.66796875, 1.21484375, 0.72265625, 0.0,
            0.0, 0.6171875, 0.0, 0.0, 0.95703125, 0.0, 0.0,
            1.0, 1.0, 1.0, 0.0, 14.46484375, 0.6015625, 0.0,
            2.16015625, 3.2421875, 4.3203125, 1.08203125, 4.31640625, 4.01953125,
        ],
        "dense": [
            0.0, 0.0, 1.0, 1.9921875, 1.0, 1.26171875, 0.0,
            2.33984375, 0.109375, 1.70703125, 0.1484375, 1.0, 1.0, 0.0,
            1.66796875, 1.0, 0.359375, 1.70703125, 2.2109375, 1.0, 1.0,
            0.0, 1.8359375, 0.45703125, 0.7421875, 0.9609375, 0.70703125, 0.0,
            0.87109375, 0.91015625, 0.02734375, 0.578125, 0.0703125, 0.0, 0.0,
            1.2421875, 1.0, 2.51171875, 0.0, 1.3671875, 0.54296875, 0.0,
            2.16015625, 3.2421875, 4.3203125, 1.08203125, 4.31640625, 3.71875,
        ],
        "schema": [
            0.0, 0.0, 1.0, 0.0, 1.0, 1.21875, 0.0,
            5.22265625, 0.0, 1.0390625, 0.0, 1.0, 2.375, 0.0,
            6.62109375, 1.0, 0.3359375, 1.8984375, 2.0, 1.0, 1.0,
            0.0, 0.0, 0.0, 2.9453125, 0.0, 0.0, 0.0,
            0.0, 0.0, 0.0, 1.625, 1.06640625, 0.0, 0.0,
            1.0, 1.0, 1.0, 0.0, 5.90234375, 0.06640625, 0.0,
            0.34375, 0.765625, 2.0, 0.0, 4.1171875, 8.26171875,
        ],
        "message": 7,
        "tool_call": 7,
        "tool": 0,
        "tools_block": 37,
        "request": 3,
    },
    "cl100k": {
        "basis": "fitted: exact cl100k tokenizer, openai template",
        "prose": [
            0.0, 0.0, 3.6328125, 2.07421875, 1.0, 4.5625, 0.0,
            2.62890625, 0.0, 1.95703125, 2.328125, 1.0, 5.67578125, 0.23046875,
            1.0, 1.0, 0.36328125, 1.0, 2.0, 1.08203125, 1.0,
            0.0, 0.25390625, 1.2421875, 0.66015625, 1.0546875, 1.08203125, 0.0,
            0.0, 0.93359375, 0.0, 0.0, 0.9921875, 0.0, 0.0,
            1.0, 1.0, 1.0, 0.0, 12.57421875, 1.08203125, 0.0,
            2.16015625, 3.2421875, 4.3203125, 1.08203125, 4.31640625, 4.7421875,
        ],
        "dense": [
            0.0, 0.0, 1.0, 1.99609375, 1.0, 1.25390625, 0.0,
            2.50390625, 0.125, 1.7421875, 0.41796875, 1.0, 1.0, 0.0,
            1.625, 1.0, 0.36328125, 1.51171875, 2.0, 1.0, 1.0,
            0.0, 1.5546875, 0.6484375, 0.75, 0.91015625, 0.25390625, 0.0,
            0.921875, 0.92578125, 0.234375, 0.59375, 0.0703125, 0.0, 0.0,
            1.2890625, 1.0, 2.6640625, 0.0, 1.3671875, 1.08203125, 0.0,
            2.16015625, 3.2421875, 4.3203125, 1.08203125, 4.32421875, 3.77734375,
        ],
        "schema": [
            0.0, 0.0, 1.0, 0.0, 1.0, 1.2734375, 0.0,
            6.203125, 0.0, 1.07421875, 0.0, 1.0, 3.21875, 0.0,
            6.95703125, 1.0, 0.3359375, 1.796875, 2.0, 1.0, 1.0,
            0.0, 0.0, 0.0, 2.97265625, 0.0, 0.0, 0.0,
            0.0, 0.0, 0.0, 1.58984375, 1.08984375, 0.0, 0.0,
            1.0, 1.0, 1.0, 0.0, 8.60546875, 0.03515625, 0.0,
            0.8125, 1.22265625, 3.08203125, 0.0, 4.32421875, 7.9140625,
        ],
        "message": 7,
        "tool_call": 7,
        "tool": 0,
        "tools_block": 39,
        "request": 3,
    },
    "llama3": {
        "basis": "fitted: exact llama3 tokenizer, llama3 template",
        "prose": [
            0.0, 0.0, 3.40625, 2.0703125, 1.0, 4.5625, 0.0,
            2.40625, 0.20703125, 1.58984375, 2.1796875, 1.0, 4.49609375, 0.0,
            1.0, 1.0, 0.36328125, 1.0, 2.08203125, 1.08203125, 1.0,
            0.0, 0.0, 1.16015625, 0.66015625, 0.83984375, 1.27734375, 0.0,
            0.171875, 0.4921875, 0.0, 0.0, 0.80859375, 0.0, 0.0,
            1.0, 1.0, 1.0, 0.0, 11.56640625, 0.03515625, 0.0,
            2.16015625, 3.2421875, 4.3203125, 1.08203125, 4.31640625, 3.08203125,
        ],
        "dense": [
            0.0, 0.0, 2.046875, 1.73046875, 1.46484375, 3.046875, 0.0,
            2.4765625, 0.14453125, 1.69921875, 1.2265625, 1.0, 1.5859375, 0.0,
            1.0, 1.0, 0.359375, 1.27734375, 2.1015625, 3.3125, 1.0,
            0.0, 0.4453125, 0.8828125, 1.08203125, 0.0, 4.21484375, 0.0,
            0.296875, 0.0, 0.0, 0.2578125, 1.08203125, 0.0, 0.0,
            1.0, 1.0, 9.296875, 0.0, 1.84375, 1.08203125, 0.0,
            2.16015625, 3.2421875, 4.3203125, 3.2421875, 4.3203125, 3.58203125,
        ],
        "schema": [
            0.01953125, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0,
            7.83203125, 0.125, 1.0, 0.0, 1.0, 2.453125, 0.0,
            1.0, 1.0, 0.3359375, 1.0, 2.0, 1.0, 1.0,
            0.0, 0.0, 0.0, 2.83203125, 2.7890625, 0.0, 0.0,
            0.0, 0.0, 0.0, 0.0, 0.97265625, 1.8515625, 0.0,
            1.0, 1.0, 13.59765625, 0.0, 31.0546875, 3.33984375, 0.0,
            0.47265625, 1.0, 3.0, 0.0, 4.1796875, 3.75,
        ],
        "message": 8,
        "tool_call": 8,
        "tool": 0,
        "tools_block": 185,
        "request": 30,
    },
    "llama4": {
        "basis": "fitted: exact llama4 tokenizer, llama3 template",
        "prose": [
            0.0, 0.0, 3.33984375, 2.0, 1.1640625, 4.0703125, 0.0,
            2.3671875, 0.0625, 1.76171875, 2.140625, 1.0, 4.34765625, 0.078125,
            1.0, 1.0, 0.375, 1.0, 2.08203125, 1.08203125, 1.0,
            0.0, 0.0, 1.16015625, 0.63671875, 0.83984375, 1.28515625, 0.0,
            0.0, 0.66796875, 0.0, 0.0, 0.79296875, 0.0, 0.0,
            1.0, 1.0, 1.0, 0.0, 13.73046875, 0.06640625, 0.0,
            2.16015625, 3.2421875, 4.3203125, 1.08203125, 4.3203125, 3.9921875,
        ],
        "dense": [
            0.0, 0.0, 2.03515625, 1.6328125, 1.42578125, 3.13671875, 0.0,
            2.37890625, 0.05859375, 1.76953125, 1.42578125, 1.0, 1.8984375, 0.0390625,
            1.0, 1.0, 0.375, 1.23046875, 2.0546875, 2.875, 1.0,
            0.0, 0.2265625, 0.9296875, 1.08203125, 0.0, 4.15234375, 0.0,
            0.33203125, 0.3984375, 0.0, 0.2578125, 1.08203125, 0.0, 0.0,
            1.0, 1.0, 8.89453125, 0.06640625, 1.84375, 1.08203125, 0.0,
            2.16015625, 3.2421875, 4.3203125, 3.2421875, 4.31640625, 4.0390625,
        ],
        "schema": [
            0.01953125, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0,
            7.4609375, 0.0859375, 1.0, 0.0, 1.0, 2.84765625, 0.0,
            1.0, 1.0, 0.3359375, 1.0, 2.0, 1.0, 1.0,
            0.0, 0.0, 0.0, 2.74609375, 2.76171875, 0.0, 0.0,
            0.0, 0.0, 0.0, 0.0, 0.94921875, 2.62109375, 0.0,
            1.0, 1.0, 12.77734375, 0.0, 33.23046875, 2.8125, 0.0,
            0.453125, 1.0, 2.0, 0.0, 3.90625, 3.7890625,
        ],
        "message": 8,
        "tool_call": 8,
        "tool": 0,
        "tools_block": 184,
        "request": 30,
    },
    "qwen": {
        "basis": "fitted: exact qwen tokenizer, qwen template",
        "prose": [
            0.0, 0.0, 2.8515625, 2.07421875, 1.0, 4.21484375, 0.0,
            2.62890625, 0.0, 2.0546875, 2.37109375, 1.0, 5.37890625, 0.21484375,
            1.0, 1.0, 1.15625, 1.0, 2.12890625, 1.0, 1.0,
            0.0, 0.55078125, 1.3203125, 0.66015625, 1.20703125, 0.73828125, 0.0,
            0.0, 0.7734375, 0.2421875, 0.0, 0.9921875, 0.0, 0.0,
            1.0, 1.0, 1.0, 0.0, 13.22265625, 1.08203125, 0.0,
            2.16015625, 3.2421875, 4.3203125, 1.08203125, 4.31640625, 4.74609375,
        ],
        "dense": [
            0.0, 0.0, 1.0, 2.0078125, 1.0, 2.59765625, 0.0,
            2.21875, 0.39453125, 1.390625, 0.875, 1.0, 1.03125, 0.0,
            1.78515625, 1.0, 1.08203125, 2.01953125, 2.5234375, 1.40625, 1.0,
            0.0, 0.84375, 0.14453125, 0.73828125, 0.94140625, 0.6171875, 0.0,
            0.91796875, 0.65234375, 0.0, 0.57421875, 0.0703125, 0.0, 0.0,
            1.0, 1.0, 1.4609375, 0.0, 1.3671875, 1.08203125, 0.0,
            2.16015625, 3.2421875, 4.3203125, 1.08203125, 4.3203125, 1.609375,
        ],
        "schema": [
            0.0, 0.0, 1.33203125, 0.0, 1.0546875, 1.0, 0.0,
            5.76953125, 0.15234375, 1.25390625, 0.0, 1.0, 2.375, 0.0,
            1.0, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0,
            0.0, 0.0, 0.0, 2.8515625, 1.375, 0.0, 0.0,
            0.0, 0.0, 0.0, 0.0, 0.9453125, 1.7109375, 0.0,
            1.0, 1.0, 13.4609375, 0.0, 25.828125, 0.72265625, 0.0,
            0.58984375, 1.11328125, 1.18359375, 0.0, 4.32421875, 3.546875,
        ],
        "message": 8,
        "tool_call": 12,
        "tool": 0,
        "tools_block": 190,
        "request": 3,
    },
    "mistral": {
        "basis": "fitted: exact mistral tokenizer, mistral template",
        "prose": [
            0.0, 0.0, 2.6484375, 2.20703125, 1.0, 3.375, 1.359375,
            2.46484375, 0.28125, 1.6328125, 3.2734375, 1.0, 4.796875, 0.37109375,
            1.0, 1.0, 1.14453125, 1.23046875, 2.0546875, 1.01953125, 1.0,
            0.0, 0.58203125, 1.02734375, 0.69140625, 1.21484375, 0.37109375, 0.0,
            0.0, 0.2578125, 0.2265625, 0.16015625, 1.109375, 0.0, 0.0,
            1.0, 1.0, 1.0, 0.0, 15.65234375, 1.08203125, 1.08203125,
            2.16015625, 3.2421875, 4.3203125, 1.08203125, 4.4765625, 6.3984375,
        ],
        "dense": [
            0.0, 0.23828125, 2.3203125, 1.87109375, 1.0, 12.8203125, 1.23828125,
            2.26953125, 0.2421875, 1.55859375, 0.953125, 1.0, 4.43359375, 1.265625,
            1.04296875, 1.0, 1.08984375, 1.59375, 2.51171875, 5.65234375, 1.0,
            0.0, 0.8125, 0.5703125, 1.08203125, 0.125, 4.69140625, 0.0,
            0.51953125, 0.0, 0.0, 0.1640625, 1.08203125, 1.08203125, 0.0,
            1.0, 1.0, 3.29296875, 0.0, 0.76171875, 1.08203125, 0.8984375,
            2.16015625, 3.2421875, 4.3203125, 5.40234375, 4.453125, 6.703125,
        ],
        "schema": [
            0.0, 0.0, 1.37109375, 0.0, 1.0, 1.0, 0.0,
            5.9921875, 0.16796875, 1.37109375, 0.0, 1.0, 3.55859375, 0.0,
            1.0, 1.0, 1.0, 1.35546875, 2.0, 1.0, 1.0,
            0.0, 0.0, 0.0, 2.984375, 0.4765625, 0.0, 0.0,
            0.0, 0.0, 0.0, 0.765625, 1.11328125, 1.8046875, 0.0,
            1.0, 1.0, 12.203125, 0.0, 21.40234375, 1.0546875, 0.0,
            0.33984375, 1.0, 4.14453125, 0.0, 4.484375, 3.94921875,
        ],
        "message": 14,
        "tool_call": 10,
        "tool": 0,
        "tools_block": 94,
        "request": 1,
    },
    "claude": {
        "basis": "derived: max(1.46 x o200k, measured families); tool-use prompt 346 (ADR 0002)",
        "prose": [
            0.0, 0.0, 4.5078125, 3.01953125, 1.0, 7.44140625, 0.0,
            3.57421875, 0.0, 2.828125, 3.87890625, 1.0, 21.0859375, 0.0,
            1.0, 1.0, 1.08203125, 1.8828125, 3.4609375, 1.0, 1.0,
            0.0, 0.90234375, 1.2734375, 0.97265625, 2.0625, 0.85546875, 0.0,
            0.0, 0.52734375, 0.0, 0.0, 1.8671875, 0.0, 0.0,
            1.0, 1.0, 1.0625, 0.0, 17.66015625, 1.08203125, 0.0,
            3.15625, 4.73046875, 6.30859375, 1.578125, 6.29296875, 8.6015625,
        ],
        "dense": [
            0.0, 0.0, 1.46484375, 2.7109375, 1.0, 4.41015625, 0.0,
            3.140625, 0.43359375, 2.07421875, 1.6015625, 1.0, 2.8984375, 0.0,
            1.0, 1.0, 1.08203125, 1.65234375, 2.203125, 3.76953125, 1.0,
            0.00390625, 0.703125, 1.5, 1.27734375, 0.0, 2.07421875, 0.0,
            0.76953125, 0.5078125, 0.0, 1.02734375, 1.08203125, 0.30078125, 0.0,
            1.0, 1.0, 1.83203125, 0.0, 1.54296875, 1.08203125, 0.0,
            3.15234375, 4.73046875, 6.30859375, 5.40234375, 6.2890625, 5.1875,
        ],
        "schema": [
            0.0078125, 0.0, 1.3671875, 0.0, 1.0, 2.08203125, 0.0,
            7.71484375, 0.83984375, 1.0, 0.0, 1.0, 1.83203125, 0.0,
            1.0, 31.23046875, 1.0, 3.24609375, 2.0, 1.0, 1.0,
            0.0, 0.0, 0.0, 5.88671875, 0.0, 0.0, 0.0,
            0.0, 0.0, 0.0, 0.0, 1.87109375, 0.23046875, 0.0,
            1.0, 1.0, 9.86328125, 0.0, 58.49609375, 0.25, 0.0,
            0.84375, 1.22265625, 4.08203125, 0.0, 5.9765625, 0.0,
        ],
        "message": 14,
        "tool_call": 12,
        "tool": 0,
        "tools_block": 346,
        "request": 30,
    },
    "gemini": {
        "basis": "derived: maximum of the measured families (ADR 0002)",
        "prose": [
            0.0, 0.0, 2.87890625, 2.20703125, 1.0, 1.0, 1.2578125,
            2.75, 0.0, 2.03125, 2.5703125, 1.0, 5.1796875, 0.58203125,
            1.0, 1.0, 1.15234375, 1.734375, 2.73046875, 1.0, 1.0,
            0.0, 0.62109375, 0.64453125, 0.69140625, 1.30859375, 0.375, 0.0,
            0.0, 0.796875, 0.0, 0.0, 1.11328125, 0.0, 0.0,
            1.453125, 1.0, 1.23828125, 0.0, 11.78125, 1.08203125, 0.0,
            2.16015625, 3.2421875, 4.3203125, 1.08203125, 4.484375, 8.62109375,
        ],
        "dense": [
            0.0, 0.0, 2.38671875, 1.76953125, 1.13671875, 4.8125, 1.33203125,
            2.6953125, 0.05859375, 1.87890625, 1.3046875, 1.0, 4.1015625, 0.68359375,
            1.0, 1.0, 1.109375, 1.4453125, 2.23046875, 5.0078125, 1.0,
            0.10546875, 0.65234375, 0.71484375, 1.08203125, 0.0, 4.609375, 0.88671875,
            0.42578125, 0.51171875, 0.0, 0.296875, 1.08203125, 0.0, 0.0,
            1.0, 1.0, 9.05859375, 0.0, 1.84375, 1.08203125, 0.3984375,
            2.16015625, 3.2421875, 4.3203125, 5.40234375, 4.48046875, 8.19140625,
        ],
        "schema": [
            0.0, 0.0, 1.37109375, 0.0, 1.0, 1.0, 0.0,
            7.875, 0.27734375, 1.26171875, 0.0, 1.0, 3.015625, 0.0,
            1.0, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0,
            0.0, 0.0, 0.0, 2.98046875, 2.72265625, 0.0, 0.0,
            0.0625, 0.0, 0.0, 0.0, 1.05078125, 0.82421875, 0.0,
            1.0, 1.0, 9.02734375, 0.0, 35.65625, 3.77734375, 0.0,
            0.84375, 1.22265625, 4.08203125, 0.0, 4.484375, 3.08203125,
        ],
        "message": 14,
        "tool_call": 12,
        "tool": 0,
        "tools_block": 197,
        "request": 30,
    },
}
_FITTED["deepseek"] = _FITTED["gemini"]
# fmt: on
# END FITTED PRIORS

MEASURED_FAMILIES: Final = ("o200k", "cl100k", "llama3", "llama4", "qwen", "mistral")
"""The families fitted to an exact offline tokenizer (the unknown family's members)."""
UNKNOWN_FAMILY: Final = "unknown"
"""What ``Estimator(None)`` reports as its family: the per-text maximum over
:data:`MEASURED_FAMILIES`. Not Claude's priors: Claude models are named in the
catalog, so an unnamed model is not Claude (ADR 0002, revision 5)."""
CONSERVATIVE_FAMILY: Final = UNKNOWN_FAMILY
"""The family ``None`` picks (kept for compatibility; it is :data:`UNKNOWN_FAMILY`)."""

FAMILIES: Final[dict[str, FamilyPriors]] = {
    name: _priors(name, values, str(values.get("basis", "fitted")))
    for name, values in _FITTED.items()
}


def _unknown_priors(members: Sequence[FamilyPriors]) -> FamilyPriors:
    return FamilyPriors(
        name=UNKNOWN_FAMILY,
        prose_weights=(),
        dense_weights=(),
        schema_weights=(),
        message_tokens=max(m.message_tokens for m in members),
        tool_call_tokens=max(m.tool_call_tokens for m in members),
        media_item_tokens=max(m.media_item_tokens for m in members),
        tool_tokens=max(m.tool_tokens for m in members),
        tools_block_tokens=max(m.tools_block_tokens for m in members),
        request_tokens=max(m.request_tokens for m in members),
        basis="per text and per overhead, the maximum over " + ", ".join(m.name for m in members),
        members=tuple(members),
    )


_UNKNOWN: Final = _unknown_priors([FAMILIES[name] for name in MEASURED_FAMILIES])


def family_priors(tokenizer: str | None) -> FamilyPriors:
    """The priors of a tokenizer family; None (or ``"unknown"``) gives the unknown family.

    Raises:
        ConfigurationError: the family is unknown.
    """
    if tokenizer is None or tokenizer == UNKNOWN_FAMILY:
        return _UNKNOWN
    priors = FAMILIES.get(tokenizer)
    if priors is None:
        raise ConfigurationError(
            f"unknown tokenizer family {tokenizer!r}; known: {', '.join(sorted(FAMILIES))} "
            "(None when the model's family is not known)"
        )
    return priors


# --------------------------------------------------------------------------- estimator


class Estimator:
    """Raw (uncalibrated) prompt-token estimates for one tokenizer family.

    Args:
        tokenizer: the tokenizer family whose priors to use (``"o200k"``, ``"cl100k"``,
            ``"claude"``, ``"gemini"``, ``"llama3"``, ``"llama4"``, ``"qwen"``,
            ``"mistral"``, ``"deepseek"``); None when it is not known: each text is then
            estimated as the maximum over the families measured exactly
            (:data:`MEASURED_FAMILIES`), each overhead as the maximum of theirs.
        counter: an exact :class:`~windowguard.counters.TokenCounter`; when given, segment
            text is counted with it instead of the heuristic (framing is still added).

    Raises:
        ConfigurationError: unknown family, or a counter without ``count``.

    Example:
        >>> Estimator("o200k").count([{"role": "user", "content": "hi"}]) > 0
        True
    """

    __slots__ = ("_counter", "_dense", "_ids", "_priors", "_prose", "_schema")

    def __init__(
        self, tokenizer: str | None = None, *, counter: TokenCounter | None = None
    ) -> None:
        priors = self._priors = family_priors(tokenizer)
        if counter is not None and not callable(getattr(counter, "count", None)):
            raise ConfigurationError(
                f"counter must have a count(text) -> int method, got {type(counter).__name__}"
            )
        self._counter = counter
        # One weight vector per class, or (unknown family) one per member family.
        members = priors.members or (priors,)
        self._prose = tuple(_cost_tables(m.prose_weights) for m in members)
        self._dense = tuple(_cost_tables(m.dense_weights) for m in members)
        self._schema = tuple(_cost_tables(m.schema_weights) for m in members)
        # Each call id is sized twice (the call opens it, its result answers it).
        self._ids: dict[str, int] = {}

    @property
    def priors(self) -> FamilyPriors:
        """The family priors in use."""
        return self._priors

    @property
    def tokenizer(self) -> str:
        """The tokenizer family in use (``"unknown"`` for ``Estimator(None)``)."""
        return self._priors.name

    @property
    def request_tokens(self) -> int:
        """Fixed framing of every request (BOS, default headers, reply priming)."""
        return self._priors.request_tokens

    def text_tokens(self, text: str, content_class: ContentClass = "prose") -> int:
        """Tokens of one piece of text, without any framing.

        Args:
            text: the text.
            content_class: ``"prose"`` or ``"dense"`` (tool-call arguments, tool results,
                schemas).

        Raises:
            ConfigurationError: ``text`` is not a string or the class is unknown.
        """
        if not isinstance(text, str):
            raise ConfigurationError(f"text must be a str, got {type(text).__name__}")
        if self._counter is not None:
            return int(self._counter.count(text))
        if content_class == "prose":
            weights = self._prose
        elif content_class == "dense":
            weights = self._dense
        else:
            raise ConfigurationError(
                f"unknown content class {content_class!r}; expected 'prose' or 'dense'"
            )
        return _tokens(weights, text)

    def _id_tokens(self, call_id: str) -> int:
        known = self._ids.get(call_id)
        if known is None:
            if len(self._ids) >= 4096:
                self._ids.clear()
            known = self._ids[call_id] = _tokens(self._dense, call_id)
        return known

    def message_tokens(self, shape: Shape) -> int:
        """Raw estimate of one message: its text, call ids, framing, tool calls and media."""
        priors = self._priors
        opens = shape.opens
        total = priors.message_tokens + priors.tool_call_tokens * len(opens)
        if shape.media_items:
            total += priors.media_item_tokens * shape.media_items
        counter = self._counter
        if counter is not None:
            # Some templates show call ids (Mistral's "id"/"call_id"): counted as text.
            for call_id in (*opens, *shape.answers):
                total += int(counter.count(call_id))
            for segment in shape.segments:
                total += int(counter.count(segment.text))
            return total
        for call_id in (*opens, *shape.answers):  # sized as dense text, once per id
            total += self._id_tokens(call_id)
        dense, prose = self._dense, self._prose
        for segment in shape.segments:
            total += _tokens(dense if segment.content_class == "dense" else prose, segment.text)
        return total

    def tools_tokens(self, tools: Sequence[object] | None) -> int:
        """Raw estimate of the tool-schema block, framing included (0 without tools).

        Each tool is sized by :func:`schema_text`, the words and values of its JSON with
        the JSON syntax and the keywords every schema repeats left out, which follows
        what every family's template shows (TypeScript for OpenAI, JSON elsewhere).

        Args:
            tools: wire-format tool definitions: OpenAI chat
                ``{"type": "function", "function": {...}}``, Responses
                ``{"type": "function", "name": ...}`` or built-in ``{"type": ...}``,
                Anthropic ``{"name", "input_schema"}``; pydantic objects are dumped.

        Raises:
            ConfigurationError: ``tools`` is not a sequence, or an entry is not a tool.
        """
        if tools is None:
            return 0
        if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
            raise ConfigurationError(
                f"tools must be a list of tool definitions, got {type(tools).__name__}"
            )
        if not tools:
            return 0
        priors = self._priors
        total = priors.tools_block_tokens
        for index, tool in enumerate(tools):
            text = _tool_text(tool, index)
            if self._counter is not None:
                total += priors.tool_tokens + int(self._counter.count(text))
            else:
                total += priors.tool_tokens + _tokens(self._schema, text, ceiling=False)
        if self._counter is not None:
            return total
        # The margin once more on the whole block: a schema's JSON syntax (braces, quotes,
        # nesting) is priced through its keys' lines, and small nested schemas are where
        # that is tightest (one token under on three tools, before).
        return -(-total * _MARGIN_NUM // _MARGIN_DEN)

    def count(
        self,
        messages: Sequence[object],
        tools: Sequence[object] | None = None,
        *,
        system: object = None,
        format: str | None = None,
    ) -> int:
        """Raw estimate of a whole request: messages, tools and request framing.

        Args:
            messages: the transcript in any supported wire format.
            tools: the request's tool definitions.
            system: Anthropic's separate system argument.
            format: the wire format, detected when None.

        Returns:
            The uncalibrated estimate (multiply by a :class:`Calibration` factor).

        Raises:
            UnknownFormatError: the format cannot be detected or is unsupported.
            ConfigurationError: bad tools.
        """
        from .adapters import shape_messages

        shaped = shape_messages(messages, format=format, system=system)
        total = self.request_tokens + self.tools_tokens(tools)
        for shape in shaped.system_shapes:
            total += self.message_tokens(shape)
        for shape in shaped.shapes:
            total += self.message_tokens(shape)
        return total

    def __repr__(self) -> str:
        counter = "" if self._counter is None else f", counter={self._counter!r}"
        return f"Estimator({self.tokenizer!r}{counter})"


def _tokens(tables: tuple[_CostTables, ...], text: str, *, ceiling: bool = True) -> int:
    """One family's estimate of ``text``, or the maximum over several (the unknown
    family): the text is scanned once into class and pair codes, and each family's
    weights are then applied to them (a table lookup and a byte sum, at C speed).

    ``ceiling=False`` for a tool's :func:`schema_text`, which is not what the model is
    shown (that is longer: JSON or TypeScript), so its length bounds nothing."""
    if not text:
        return 0
    data = text.encode("utf-8", "surrogatepass")
    size = len(data)
    # _pair_codes and _bounded_sum, inlined: this runs once per text of a cold fit.
    codes = data.translate(_CLASS_CODES)
    pairs = (int.from_bytes(codes, "little") * 4097).to_bytes(size + 1, "little")
    lower_runs = upper_runs = -1  # counted once, when a weight needs them
    best = 0
    for cost in tables:
        chunk = cost.chunk
        part = pairs.translate(cost.low)
        units = (adler32(part) & 0xFFFF) - 1 if size < chunk else _bounded_sum(part, chunk)
        if cost.high is not None:
            part = pairs.translate(cost.high)
            units += (
                (adler32(part) & 0xFFFF) - 1 if size < chunk else _bounded_sum(part, chunk)
            ) << cost.shift
        if cost.lower_run:
            if lower_runs < 0:
                lower_runs = codes.count(_LOWER_RUN)
            units += cost.lower_run * lower_runs
        if cost.upper_run:
            if upper_runs < 0:
                upper_runs = codes.count(_UPPER_RUN)
            units += cost.upper_run * upper_runs
        if units > best:
            best = units
    # The generalisation margin (x 17/16, + 1), then ceil to whole tokens; a byte-level
    # BPE emits at most one token per byte of what the template shows: the text, where a
    # control character may be JSON-escaped into six bytes (\u00XX).
    tokens = -(-best * _MARGIN_NUM // (_MARGIN_DEN * _SCALE)) + _MARGIN_ADD
    if tokens <= size or not ceiling:
        return tokens
    return min(tokens, size + _ESCAPE_BYTES * codes.count(_CONTROL))


def _heuristic_tokens(weights: tuple[float, ...], text: str) -> int:
    """One weight vector's estimate of ``text``: ``ceil(w · features)``, at most
    ``utf8_bytes + 5 x control`` (tests/test_estimate.py checks it against
    text_features())."""
    return _tokens((_cost_tables(weights),), text)


# JSON keys every tool definition repeats. The text a schema is sized by keeps their
# place (a newline: the JSON families spend a few tokens of syntax on every key) but
# not their spelling, which OpenAI's TypeScript rendering leaves out.
_SCHEMA_KEYWORDS: Final = frozenset(
    {
        "type",
        "function",
        "name",
        "description",
        "parameters",
        "properties",
        "required",
        "items",
        "enum",
        "input_schema",
    }
)


def schema_text(tool: Mapping[str, Any]) -> str:
    """The text a tool definition is sized by: its keys and values without JSON syntax.

    Every key starts a line (the schema keywords above as an empty line), every object
    ends with one (where indented JSON closes it), a scalar
    value follows its key after a space (strings verbatim), a list of scalars (enum
    values, required names) follows as quoted JSON strings joined by ``", "``, as every
    template shows them. Every family renders strictly more than this text's words
    (JSON syntax, or OpenAI's TypeScript), and the schema weights price the lines and
    separators for that; the fit and the tests check it per family.
    """
    out: list[str] = []
    _schema_parts(tool, out)
    return "".join(out)


def _schema_parts(value: object, out: list[str]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            out.append("\n" if key in _SCHEMA_KEYWORDS else f"\n{key}")
            _schema_parts(item, out)
        out.append("\n")  # where the object closes (a line of its own in indented JSON)
    elif isinstance(value, (list, tuple)):
        if any(isinstance(item, (Mapping, list, tuple)) for item in value):
            for item in value:
                _schema_parts(item, out)
        else:  # enum values, required names: JSON strings in every template
            out.append(" " + ", ".join(_listed_text(item) for item in value))
    else:
        out.append(" " + _scalar_text(value))


def _scalar_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    return str(value)


def _listed_text(value: object) -> str:
    if value is None or isinstance(value, (str, bool, int, float)):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(str(value), ensure_ascii=False)


def _tool_text(tool: object, index: int) -> str:
    """The text a tool definition is sized by (bench/fit_priors.py sizes tools with it)."""
    dump = getattr(tool, "model_dump", None)
    if callable(dump) and not isinstance(tool, Mapping):
        tool = dump(exclude_none=True)
    if not isinstance(tool, Mapping):
        raise ConfigurationError(
            f"tool {index}: expected a tool definition (dict or pydantic model), "
            f"got {type(tool).__name__}"
        )
    if not any(key in tool for key in ("function", "name", "type")):
        raise ConfigurationError(
            f"tool {index}: not a tool definition (no 'function', 'name' or 'type' key; "
            f"keys: {sorted(map(str, tool))})"
        )
    try:
        return schema_text(tool)
    except RecursionError as exc:
        raise ConfigurationError(f"tool {index}: nested too deeply (or contains itself)") from exc
