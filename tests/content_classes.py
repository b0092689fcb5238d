"""Generators of content the heuristic must never under-count, designed from pre-token rules.

Every class is a plain function of a :class:`random.Random`, so the fit
(``bench/fit_priors.py``, a seeded generator), the benchmark (``bench/bench_estimate.py``,
another seed) and the property tests (``strategy(name)``: hypothesis supplies the
``Random`` and shrinks its draws) see the same classes. Each class stresses one
pre-token rule of the byte-level BPE families (o200k, cl100k, Llama 3/4, Qwen, Tekken):

* word lists with ``, ; |`` separators, comma-heavy prose, ``key=value`` pairs with
  commas: punctuation after a letter and a letter after punctuation both start tokens;
* Latin-script languages other than English (Welsh, Hawaiian, pinyin, Swahili, Tagalog,
  Indonesian: short real samples, and pseudo-words from each language's syllables with
  its diacritics): words no vocabulary holds cost by their length;
* one punctuation character per line, pretty-printed JSON string arrays: a newline after
  punctuation, an indent, a quote after a space;
* compact JSON arguments (re-serialised with spaces by Llama 3, Qwen and Mistral),
  digits in every grouping, mixed scripts;
* tool schemas with quotes and backslashes in descriptions (JSON-escaped by every JSON
  template) and integer enums.

``CALL_CLASSES`` are shown as a tool call's arguments; ``TEXT_CLASSES`` as a tool result
and as a user message; ``SCHEMA_CLASSES`` are tool sets.
"""

# ruff: noqa: RUF001  (the Hawaiian okina and Unicode punctuation are the point)
from __future__ import annotations

import json
import math
import random
import string
from collections.abc import Callable
from typing import Any

from windowguard.accounting.templates import count_message, count_prompt, count_prompt_parts

__all__ = [
    "CALL_CLASSES",
    "LANGUAGE_SAMPLES",
    "SCHEMA_CLASSES",
    "TEXT_CLASSES",
    "call_message",
    "exact_call_cost",
    "strategy",
]

_ENGLISH = (
    "the", "of", "and", "to", "in", "is", "for", "on", "that", "with", "as", "by", "at",
    "from", "it", "be", "this", "are", "or", "an", "which", "not", "apple", "banana", "cherry",
    "delta", "echo", "file", "path", "user", "agent", "tool", "result", "error", "request",
    "model", "token", "window", "context", "message", "system", "function", "argument",
    "value", "default", "config", "status", "order", "customer", "flight", "payment", "refund",
    "item", "price", "data", "table", "column", "index", "query", "string",
)  # fmt: skip

LANGUAGE_SAMPLES: dict[str, str] = {
    "welsh": (
        "Genir pawb yn rhydd ac yn gydradd â'i gilydd mewn urddas a hawliau. Fe'u "
        "cynysgaeddir â rheswm a chydwybod, a dylai pawb ymddwyn y naill at y llall mewn "
        "ysbryd cyfeillgarwch. Mae'r llyfrgell genedlaethol yn Aberystwyth yn cadw "
        "llawysgrifau hynafol. Bydd y cyfarfod nesaf yn cael ei gynnal yng Nghaerdydd."
    ),
    "hawaiian": (
        "Hānau kūʻokoʻa ʻia nā kānaka apau loa, a ua kaulike ko lākou kūlana hanohano a "
        "me nā pono kīvila. Ua mau ke ea o ka ʻāina i ka pono. E hele ana mākou i ke "
        "kahakai i ka lā ʻapōpō. Aloha mai kākou e nā hoaaloha."
    ),
    "pinyin": (
        "Rénrén shēng ér zìyóu, zài zūnyán hé quánlì shàng yīlǜ píngděng. Wǒ xǐhuan chī "
        "píngguǒ hé xiāngjiāo. Jintian tianqi hen hao, women qu gongyuan sanbu ba. Zhège "
        "wèntí hěn fùzá, xūyào zǐxì yánjiū."
    ),
    "swahili": (
        "Watu wote wamezaliwa huru, hadhi na haki zao ni sawa. Watoto wanacheza mpira "
        "uwanjani kila jioni. Mwalimu aliwafundisha wanafunzi historia ya Afrika "
        "Mashariki. Tutaonana kesho asubuhi sokoni baada ya mvua kunyesha."
    ),
    "tagalog": (
        "Ang lahat ng tao'y isinilang na malaya at pantay-pantay sa karangalan at mga "
        "karapatan. Magandang umaga po sa inyong lahat. Kumain na ba kayo ng almusal bago "
        "pumasok sa paaralan? Nagluluto ang aking nanay ng adobo tuwing Linggo."
    ),
    "indonesian": (
        "Semua orang dilahirkan merdeka dan mempunyai martabat dan hak-hak yang sama. "
        "Saya sedang membaca buku di perpustakaan. Pemerintah mengumumkan kebijakan baru "
        "tentang pendidikan. Anak-anak bermain sepak bola di lapangan setelah sekolah."
    ),
}
# Each language's syllables (onsets x vowels), with its diacritics.
_SYLLABLES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    # onsets, vowels, codas
    "welsh": (
        ("", "b", "c", "ch", "d", "dd", "f", "ff", "g", "ll", "m", "n", "p", "rh", "s", "th"),
        ("a", "e", "i", "o", "u", "w", "y", "â", "ŵ", "ŷ", "ae", "wy"),
        ("", "", "n", "r", "dd", "ch", "l", "s"),
    ),
    "hawaiian": (
        ("", "h", "k", "l", "m", "n", "p", "w", "ʻ"),
        ("a", "e", "i", "o", "u", "ā", "ē", "ī", "ō", "ū", "ai", "au"),
        ("",),
    ),
    "pinyin": (
        ("", "b", "p", "m", "f", "d", "t", "n", "l", "g", "k", "h", "j", "q", "x", "zh", "ch")
        + ("sh", "r", "z", "c", "s", "y", "w"),
        ("a", "o", "e", "i", "u", "ü", "ā", "á", "ǎ", "à", "ī", "í", "ǐ", "ì", "ǒ", "ò", "ē")
        + ("é", "ě", "ū", "ú", "ǔ", "ù", "ǜ", "iao", "ian", "uang"),
        ("", "", "n", "ng"),
    ),
    "swahili": (
        ("", "w", "t", "k", "m", "n", "ch", "sh", "dh", "ng'", "mb", "nd", "z", "l", "h"),
        ("a", "e", "i", "o", "u"),
        ("",),
    ),
    "tagalog": (
        ("", "b", "k", "d", "g", "h", "l", "m", "n", "ng", "p", "r", "s", "t", "w", "y"),
        ("a", "e", "i", "o", "u"),
        ("", "", "n", "ng", "t", "y"),
    ),
    "indonesian": (
        ("", "b", "c", "d", "g", "h", "j", "k", "l", "m", "n", "ng", "ny", "p", "r", "s", "t"),
        ("a", "e", "i", "o", "u", "ai", "au"),
        ("", "", "n", "ng", "r", "k", "t", "h"),
    ),
}


def _size(rng: random.Random, small: int, large: int) -> int:
    """Mostly small, sometimes large (log-uniform)."""
    return int(math.exp(rng.uniform(math.log(small), math.log(large))))


def _pseudo_word(rng: random.Random, language: str) -> str:
    onsets, vowels, codas = _SYLLABLES[language]
    word = "".join(
        rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas)
        for _ in range(rng.choice([1, 1, 2, 2, 3, 4]))
    )
    return word.title() if rng.random() < 0.1 else word


def _sample_word(rng: random.Random, language: str) -> str:
    return rng.choice(LANGUAGE_SAMPLES[language].replace(".", "").replace(",", "").split())


def latin_language(rng: random.Random) -> str:
    """Sentences of one Latin-script language: its real words and pseudo-words built
    from its syllables and diacritics."""
    language = rng.choice(sorted(_SYLLABLES))
    if rng.random() < 0.15:
        return LANGUAGE_SAMPLES[language]
    sentences = []
    for _ in range(_size(rng, 1, 40)):
        words = [
            _pseudo_word(rng, language) if rng.random() < 0.6 else _sample_word(rng, language)
            for _ in range(rng.randint(2, 14))
        ]
        sentence = " ".join(words)
        if rng.random() < 0.3:
            sentence = sentence.replace(" ", ", ", 1)
        sentences.append(sentence[:1].upper() + sentence[1:] + rng.choice([".", "?", "!", ""]))
    return rng.choice([" ", "\n"]).join(sentences)


def _word(rng: random.Random) -> str:
    if rng.random() < 0.25:
        return _pseudo_word(rng, rng.choice(sorted(_SYLLABLES)))
    return rng.choice(_ENGLISH)


def word_list(rng: random.Random) -> str:
    """Words joined by one separator: ``apple, banana, cherry`` and its kin."""
    separator = rng.choice([", ", ",", "; ", ";", " | ", "|", "\t", ",\n", " ,"])
    words = [_word(rng) for _ in range(_size(rng, 1, 2000))]
    if rng.random() < 0.2:
        words = [w.title() for w in words]
    return separator.join(words) + rng.choice(["", "", separator.strip(), "\n"])


def comma_prose(rng: random.Random) -> str:
    """Prose where most words end in a comma or another mark."""
    rate = rng.uniform(0.3, 0.9)
    out = []
    for _ in range(_size(rng, 1, 1500)):
        word = _word(rng)
        if rng.random() < rate:
            word += rng.choice([",", ",", ";", ":", ".", "!", "?", ")", "'s"])
        out.append(word)
    return " ".join(out)


def key_value_commas(rng: random.Random) -> str:
    """``key=value`` pairs separated by commas (query strings, log fields, tags)."""
    style = rng.choice(["{k}={v}", "{k}: {v}", "{k}:{v}", '{k}="{v}"', "{k} = {v}"])
    separator = rng.choice([", ", ",", "; ", "&", " "])
    lines = []
    for _ in range(_size(rng, 1, 60)):
        pairs = []
        for _ in range(rng.randint(1, 12)):
            key = "_".join(_word(rng) for _ in range(rng.randint(1, 2)))
            value = rng.choice([_word(rng), str(rng.randrange(10 ** rng.randint(1, 6))),
                                f"{rng.uniform(0, 100):.2f}", "true", "null", _word(rng) + "-1"])  # fmt: skip
            pairs.append(style.format(k=key, v=value))
        lines.append(separator.join(pairs))
    return "\n".join(lines)


_PUNCT = string.punctuation + "•…—–→«»¿¡§¶·"


def punct_per_line(rng: random.Random) -> str:
    """One punctuation character per line (ASCII and Unicode), some lines indented."""
    indent = rng.choice(["", "", " ", "  ", "\t", "    ", None])  # None: each line its own
    lines = []
    for _ in range(_size(rng, 1, 3000)):
        line = rng.choice(_PUNCT) * rng.choice([1, 1, 1, 2, 3])
        pad = " " * rng.randint(0, 8) if indent is None else indent
        lines.append(pad + line + rng.choice(["", "", "", " "]))
    return rng.choice(["\n", "\r\n", "\n\n"]).join(lines)


def json_string_array(rng: random.Random) -> str:
    """A pretty-printed JSON array of strings (file lists, names, tags)."""
    strings = [
        rng.choice([_word(rng), f"{_word(rng)}_{_word(rng)}", f"src/{_word(rng)}.py",
                    " ".join(_word(rng) for _ in range(rng.randint(2, 6))),
                    "".join(rng.choice("éñüßø中文😀") for _ in range(rng.randint(1, 4)))])
        for _ in range(_size(rng, 1, 600))
    ]  # fmt: skip
    return json.dumps(strings, indent=rng.choice([1, 2, 4]), ensure_ascii=rng.random() < 0.3)


def _json_value(rng: random.Random, depth: int) -> Any:
    kind = rng.randrange(8 if depth < 3 else 6)
    if kind == 0:
        return rng.randrange(-1000, 10 ** rng.randint(1, 9))
    if kind == 1:
        return round(rng.uniform(-1e4, 1e4), rng.randint(0, 6))
    if kind == 2:
        return " ".join(_word(rng) for _ in range(rng.randint(1, 8)))
    if kind == 3:
        return rng.choice([True, False, None])
    if kind == 4:
        return rng.choice(["", "2024-05-17T12:30:00Z", "/tmp/x.log", "a1b2c3", "N/A"])
    if kind == 5:
        return [rng.randrange(100) for _ in range(rng.randint(0, 12))]
    if kind == 6:
        return [_json_value(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    return {_word(rng): _json_value(rng, depth + 1) for _ in range(rng.randint(0, 6))}


def compact_json(rng: random.Random) -> str:
    """Compact JSON, as models write tool-call arguments (``{"a":1,"b":[1,2]}``)."""
    value = {_word(rng): _json_value(rng, 0) for _ in range(_size(rng, 1, 40))}
    return json.dumps(value, separators=(",", ":"), ensure_ascii=rng.random() < 0.3)


def digit_text(rng: random.Random) -> str:
    """Digits in every grouping: long numbers, thousands separators, dates, phone
    numbers, versions, hashes, negative and decimal numbers."""
    makers: list[Callable[[], str]] = [
        lambda: str(rng.getrandbits(rng.randint(4, 200))),
        lambda: f"{rng.randrange(10**9):,}",
        lambda: f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 9)}f}",
        lambda: f"{rng.randint(1900, 2100)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        lambda: f"+{rng.randint(1, 99)} {rng.randrange(1000):03d} {rng.randrange(10**7):07d}",
        lambda: ".".join(str(rng.randrange(100)) for _ in range(rng.randint(2, 4))),
        lambda: f"{rng.getrandbits(64):016x}",
        lambda: "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 40))),
    ]
    separator = rng.choice([" ", "\n", ", ", ",", "\t", "; ", " | "])
    return separator.join(rng.choice(makers)() for _ in range(_size(rng, 1, 1500)))


_SCRIPTS = (
    "abcdefghijklmnopqrstuvwxyz",
    "абвгдежзийклмнопрстуфхцчшщыьэюя",
    "αβγδεζηθικλμνξοπρστυφχψω",
    "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
    "אבגדהוזחטיכלמנסעפצקרשת",
    "कखगघचछजझटठडढणतथदधनपफबभमयरलवशसह",
    "กขคงจฉชซญดตถทธนบปผพฟมยรลวสหอ",
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年",
    "アイウエオカキクケコサシスセソタチツテトナニヌネノ",
    "😀🚀🔥✅💡🧪👍🎉",
)


def mixed_scripts(rng: random.Random) -> str:
    """Words of several scripts side by side, with spaces and punctuation."""
    scripts = rng.sample(_SCRIPTS, rng.randint(2, 5))
    words = []
    for _ in range(_size(rng, 1, 800)):
        letters = rng.choice(scripts)
        words.append("".join(rng.choice(letters) for _ in range(rng.randint(1, 9))))
    return rng.choice([" ", " ", ", ", "\n", ""]).join(words)


TEXT_CLASSES: dict[str, Callable[[random.Random], str]] = {
    "word lists": word_list,
    "comma-heavy prose": comma_prose,
    "key=value with commas": key_value_commas,
    "latin languages": latin_language,
    "punctuation per line": punct_per_line,
    "json string arrays": json_string_array,
    "compact json": compact_json,
    "digits": digit_text,
    "mixed scripts": mixed_scripts,
}
CALL_CLASSES: dict[str, Callable[[random.Random], str]] = {
    "compact json arguments": compact_json,
}


def _tool(rng: random.Random, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": "_".join(_word(rng) for _ in range(rng.randint(1, 3))),
            "description": description,
            "parameters": {"type": "object", "properties": properties,
                           "required": sorted(properties)[: rng.randint(0, 2)]},
        },
    }  # fmt: skip


def quoted_tools(rng: random.Random) -> list[dict[str, Any]]:
    """Tools whose descriptions quote strings and write paths and regexes with
    backslashes (each JSON-escaped by every JSON template)."""
    pieces = ['"', '\\"', "\\", "\\\\", "C:\\Users\\x", '"quoted"', "\\d+\\.\\w*", "'", "`"]

    def description() -> str:
        return "".join(
            rng.choice(pieces) if rng.random() < 0.5 else f" {_word(rng)} "
            for _ in range(_size(rng, 1, 400))
        )

    return [
        _tool(rng, description(), {_word(rng): {"type": "string", "description": description()}
                                   for _ in range(rng.randint(1, 4))})
        for _ in range(rng.randint(1, 5))
    ]  # fmt: skip


def integer_enum_tools(rng: random.Random) -> list[dict[str, Any]]:
    """Tools whose parameters are integer enums (codes, ids, levels)."""

    def prop() -> dict[str, Any]:
        top = rng.choice([10, 100, 1000, 10**6])
        values = sorted({rng.randrange(top) for _ in range(_size(rng, 2, 300))})
        return {"type": "integer", "enum": values}

    return [
        _tool(rng, " ".join(_word(rng) for _ in range(rng.randint(1, 12))),
              {_word(rng): prop() for _ in range(rng.randint(1, 6))})
        for _ in range(rng.randint(1, 4))
    ]  # fmt: skip


SCHEMA_CLASSES: dict[str, Callable[[random.Random], list[dict[str, Any]]]] = {
    "schema: quotes and backslashes": quoted_tools,
    "schema: integer enums": integer_enum_tools,
}


def call_message(arguments: str) -> dict[str, Any]:
    """An assistant message that calls one tool with ``arguments``."""
    call = {"id": "call_1", "type": "function",
            "function": {"name": "run_query", "arguments": arguments}}  # fmt: skip
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def exact_call_cost(counter: Any, template: str, arguments: str) -> int:
    """Exact tokens a tool call with ``arguments`` costs in ``template``: the most of what
    the template charges the message on its own and what appending it to a small
    conversation adds (OpenAI's accounting is additive)."""
    message = call_message(arguments)
    if template == "openai":
        return count_prompt_parts(counter, [message], None, template=template).message_tokens[0]
    prefix = [{"role": "system", "content": "You are a helpful assistant."},
              {"role": "user", "content": "Please help with this task."}]  # fmt: skip
    tail = [{"role": "tool", "tool_call_id": "call_1", "content": "ok"}]
    added = count_prompt(counter, [*prefix, message, *tail], template=template) - count_prompt(
        counter, [*prefix, *tail], template=template
    )
    return max(added, count_message(counter, message, template=template))


def strategy(make: Callable[[random.Random], Any]) -> Any:
    """A hypothesis strategy drawing from one generator (hypothesis supplies the
    ``Random`` and shrinks its draws)."""
    from hypothesis import strategies as st

    return st.randoms(use_true_random=False).map(make)
