"""The built-in catalog, ModelInfo validation, and per-field merging of every source."""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from windowguard.accounting.catalog import (
    FALLBACK_TOKENIZER,
    FALLBACK_WINDOW,
    MODELS_ENV_VAR,
    TOKENIZER_FAMILIES,
    ModelInfo,
    lookup_model,
    resolve_model_info,
)
from windowguard.core.exceptions import ConfigurationError, ModelInfoError


@pytest.fixture(autouse=True)
def _no_env_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MODELS_ENV_VAR, raising=False)


# (name, window, output cap, input cap, tokenizer) from provider docs / HF configs
KNOWN = [
    ("gpt-5", 400_000, 128_000, 272_000, "o200k"),
    ("openai/gpt-5-mini-2025-08-07", 400_000, 128_000, 272_000, "o200k"),
    ("gpt-4.1", 1_047_576, 32_768, None, "o200k"),
    ("gpt-4o", 128_000, 16_384, None, "o200k"),
    ("gpt-4o-2024-08-06", 128_000, 16_384, None, "o200k"),
    ("gpt-4o-2024-05-13", 128_000, 4_096, None, "o200k"),
    ("gpt-4", 8_192, 8_192, None, "cl100k"),
    ("gpt-3.5-turbo", 16_385, 4_096, None, "cl100k"),
    ("o1", 200_000, 100_000, None, "o200k"),
    ("o3-mini-2025-01-31", 200_000, 100_000, None, "o200k"),
    ("o4-mini", 200_000, 100_000, None, "o200k"),
    ("claude-3-5-sonnet-20241022", 200_000, 8_192, None, "claude"),
    ("claude-3-5-sonnet-latest", 200_000, 8_192, None, "claude"),
    ("anthropic.claude-3-5-sonnet-20241022-v2:0", 200_000, 8_192, None, "claude"),
    ("us.anthropic.claude-3-7-sonnet-20250219-v1:0", 200_000, 64_000, None, "claude"),
    ("anthropic/claude-sonnet-4.5", 200_000, 64_000, None, "claude"),
    ("openrouter/anthropic/claude-3.5-sonnet:beta", 200_000, 8_192, None, "claude"),
    ("claude-opus-4-1-20250805", 200_000, 32_000, None, "claude"),
    ("claude-3-haiku-20240307", 200_000, 4_096, None, "claude"),
    ("claude-sonnet-4-5-20250929[1m]", 1_000_000, 64_000, None, "claude"),
    ("gemini-2.5-pro", 1_048_576, 65_536, None, "gemini"),
    ("models/gemini-2.0-flash-001", 1_048_576, 8_192, None, "gemini"),
    ("gemini/gemini-1.5-pro-002", 2_097_152, 8_192, None, "gemini"),
    ("meta-llama/Llama-3.1-8B-Instruct", 131_072, None, None, "llama3"),
    ("meta-llama/Meta-Llama-3-8B-Instruct", 8_192, None, None, "llama3"),
    ("llama3.1:8b", 131_072, None, None, "llama3"),
    ("llama3.2:3b-instruct-q4_K_M", 131_072, None, None, "llama3"),
    ("meta.llama3-1-70b-instruct-v1:0", 131_072, None, None, "llama3"),
    ("meta-llama/Llama-3.3-70B-Instruct", 131_072, None, None, "llama3"),
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", 10_485_760, None, None, "llama4"),
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8", 1_048_576, None, None, "llama4"),
    # OpenHands' LiteLLM-proxy name for it, as the bundled example:coding-agent names it
    ("openai/openrouter-llama-4-maverick", 1_048_576, None, None, "llama4"),
    ("Qwen/Qwen3-8B", 40_960, None, None, "qwen"),
    ("qwen3:8b", 40_960, None, None, "qwen"),
    ("Qwen/Qwen2.5-7B-Instruct", 32_768, None, None, "qwen"),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", 262_144, None, None, "qwen"),
    ("Qwen/QwQ-32B", 40_960, None, None, "qwen"),
    ("mistral-large-latest", 131_072, None, None, "mistral"),
    ("mistralai/Mistral-7B-Instruct-v0.3", 32_768, None, None, "mistral"),
    ("open-mixtral-8x22b", 65_536, None, None, "mistral"),
    ("mistral-small-2501", 32_768, None, None, "mistral"),
    ("codestral-latest", 262_144, None, None, "mistral"),
    ("deepseek-chat", 128_000, 8_192, None, "deepseek"),
    ("deepseek-reasoner", 128_000, 65_536, None, "deepseek"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", 131_072, None, None, "qwen"),
]


@pytest.mark.parametrize(("name", "window", "out", "inp", "tok"), KNOWN)
def test_lookup_known_models(
    name: str, window: int, out: int | None, inp: int | None, tok: str
) -> None:
    info = lookup_model(name)
    assert info is not None, name
    assert (info.context_window, info.max_output_tokens, info.max_input_tokens) == (
        window,
        out,
        inp,
    )
    assert info.tokenizer == tok
    assert info.source == "catalog"


def test_the_bundled_example_names_a_known_model() -> None:
    # example:coding-agent is a new user's first transcript: its model must not fall back
    # to 8192 tokens (which would report CONTEXT_TRUNCATED on its first use).
    text = resources.files("windowguard.examples").joinpath("coding_agent.json").read_text()
    info = lookup_model(json.loads(text)["model"])
    assert info is not None and info.source == "catalog" and info.tokenizer == "llama4"


def test_lookup_is_case_insensitive() -> None:
    assert lookup_model("GPT-4O-MINI") == lookup_model("gpt-4o-mini")
    assert lookup_model("QWEN/QWEN3-8B") == lookup_model("qwen/qwen3-8b")


@pytest.mark.parametrize("name", ["unknown-model", "foo/bar", "", "   ", "amazon.nova-pro-v1:0"])
def test_unknown_is_none(name: str) -> None:
    assert lookup_model(name) is None


@pytest.mark.parametrize(
    ("name", "window", "tok"),
    [
        ("gpt-5.2", 256_000, "o200k"),  # ADR 0020: GPT-5 family 256k
        ("claude-opus-9", 200_000, "claude"),  # ADR 0020: Claude families 200k
        ("llama-5", 8_192, "llama3"),
        ("qwen9-7b", 32_768, "qwen"),
        ("deepseek-v9", 65_536, "deepseek"),
    ],
)
def test_family_defaults_serve_unknown_members(name: str, window: int, tok: str) -> None:
    info = lookup_model(name)
    assert info is not None
    assert (info.context_window, info.tokenizer, info.source) == (window, tok, "family")


def test_version_continuation_is_not_a_catalog_hit() -> None:
    # llama-3 (8k) must not claim llama-3.1 (128k); gpt-5 must not claim gpt-5.2
    assert lookup_model("llama3")
    assert lookup_model("llama3").context_window == 8_192  # type: ignore[union-attr]
    assert lookup_model("llama3.1").context_window == 131_072  # type: ignore[union-attr]
    assert lookup_model("gpt-5.2").source == "family"  # type: ignore[union-attr]


def test_lookup_rejects_non_string() -> None:
    with pytest.raises(ModelInfoError):
        lookup_model(42)  # type: ignore[arg-type]


@settings(deadline=None, max_examples=200)
@given(st.text(max_size=60))
def test_lookup_never_raises_and_is_valid(name: str) -> None:
    info = lookup_model(name)
    if info is not None:
        assert info.context_window > 0 and info.tokenizer in TOKENIZER_FAMILIES
        assert info.max_output_tokens is None or info.max_output_tokens <= info.context_window


# --------------------------------------------------------------------------- ModelInfo


def test_positional_order_kept() -> None:
    info = ModelInfo(32_768, 4_096, 30_000, "qwen", "override")
    assert (info.context_window, info.max_output_tokens, info.max_input_tokens) == (
        32_768,
        4_096,
        30_000,
    )
    assert info.tokenizer == "qwen" and info.source == "override"
    assert info.source_of("max_output_tokens") == "override"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"context_window": 0},
        {"context_window": -1},
        {"context_window": True},
        {"context_window": 10.5},
        {"context_window": 100, "max_output_tokens": 101},
        {"context_window": 100, "max_input_tokens": 0},
        {"context_window": 100, "tokenizer": "gpt2"},
        {"context_window": 100, "source": "guess"},
    ],
)
def test_bad_values_raise_model_info_error(kwargs: dict[str, object]) -> None:
    with pytest.raises(ModelInfoError):
        ModelInfo(**kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- merging


def test_unknown_model_gets_the_fallback() -> None:
    info = resolve_model_info("no-such-model", use_litellm=False)
    # The unknown tokenizer family (None), not Claude's: an unnamed model is not Claude.
    assert FALLBACK_TOKENIZER is None
    assert (info.context_window, info.tokenizer, info.source) == (
        FALLBACK_WINDOW,
        FALLBACK_TOKENIZER,
        "fallback",
    )
    assert info.source_of("tokenizer") == "fallback"
    assert resolve_model_info(None, fallback_window=4096).context_window == 4096


def test_fallback_window_validated() -> None:
    with pytest.raises(ConfigurationError):
        resolve_model_info("x", fallback_window=0)


def test_catalog_beats_fallback_and_records_sources() -> None:
    info = resolve_model_info("gpt-5", use_litellm=False)
    assert (info.context_window, info.max_input_tokens, info.max_output_tokens) == (
        400_000,
        272_000,
        128_000,
    )
    assert info.source == "catalog"
    assert info.to_dict()["sources"] == {
        "context_window": "catalog",
        "max_output_tokens": "catalog",
        "max_input_tokens": "catalog",
        "tokenizer": "catalog",
    }


def test_explicit_wins_per_field_and_gaps_fill_from_below() -> None:
    info = resolve_model_info(
        "gpt-4o", model_info=ModelInfo(context_window=64_000), use_litellm=False
    )
    assert info.context_window == 64_000 and info.source == "explicit"
    assert info.max_output_tokens == 16_384 and info.source_of("max_output_tokens") == "catalog"
    assert info.tokenizer == "o200k" and info.source_of("tokenizer") == "catalog"


def test_caps_are_clamped_to_a_smaller_winning_window() -> None:
    info = resolve_model_info(
        "gpt-4.1", model_info=ModelInfo(context_window=16_000), use_litellm=False
    )
    assert info.max_output_tokens == 16_000


def test_precedence_explicit_override_discovered_catalog() -> None:
    discovered = ModelInfo(context_window=16_384, max_output_tokens=2_048, source="discovered")
    overrides = {"gpt-4o": {"max_output_tokens": 1_000}}
    info = resolve_model_info(
        "gpt-4o",
        model_info=ModelInfo(context_window=12_000, source="explicit"),
        overrides=overrides,
        discovered=discovered,
        use_litellm=False,
    )
    assert info.source_of("context_window") == "explicit" and info.context_window == 12_000
    assert info.source_of("max_output_tokens") == "override" and info.max_output_tokens == 1_000
    assert info.source_of("tokenizer") == "catalog"
    info = resolve_model_info("gpt-4o", discovered=discovered, use_litellm=False)
    assert (info.context_window, info.max_output_tokens, info.source) == (
        16_384,
        2_048,
        "discovered",
    )


def test_family_ranks_below_catalog_and_above_fallback() -> None:
    info = resolve_model_info("claude-opus-9", use_litellm=False)
    assert (info.context_window, info.source, info.tokenizer) == (200_000, "family", "claude")


def test_overrides_dict_globs_and_models_key() -> None:
    table = {"models": {"local/*": {"context_window": 32_768, "tokenizer": "qwen"}}}
    info = resolve_model_info("local/my-finetune", overrides=table, use_litellm=False)
    assert (info.context_window, info.tokenizer, info.source) == (32_768, "qwen", "override")
    assert resolve_model_info("other", overrides=table, use_litellm=False).source == "fallback"


def test_overrides_json_and_toml_files(tmp_path: Path) -> None:
    js = tmp_path / "models.json"
    js.write_text(json.dumps({"My-Model": {"context_window": 20_000, "max_output_tokens": 2_000}}))
    toml = tmp_path / "models.toml"
    toml.write_text('[models."my-model"]\ncontext_window = 30000\nmax_input_tokens = 25000\n')
    a = resolve_model_info("my-model", overrides=js, use_litellm=False)
    b = resolve_model_info("my-model", overrides=str(toml), use_litellm=False)
    assert (a.context_window, a.max_output_tokens, a.source) == (20_000, 2_000, "override")
    assert (b.context_window, b.max_input_tokens) == (30_000, 25_000)
    assert b.origin == str(toml)


def test_overrides_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"gpt-4o": {"context_window": 50_000}}))
    monkeypatch.setenv(MODELS_ENV_VAR, str(path))
    info = resolve_model_info("gpt-4o", use_litellm=False)
    assert (info.context_window, info.source) == (50_000, "override")
    assert info.max_output_tokens == 16_384  # still from the catalog
    path.write_text(json.dumps({"gpt-4o": {"context_window": 60_000}}))  # edits are re-read
    import os

    os.utime(path, ns=(1, 1))
    assert resolve_model_info("gpt-4o", use_litellm=False).context_window == 60_000


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("bad.json", "{not json", "not valid JSON"),
        ("bad.toml", "context_window = = 3", "not valid TOML"),
        ("bad.yaml", "a: 1", "unknown format"),
        ("shape.json", "[1, 2]", "top level"),
        ("key.json", '{"m": {"window": 3}}', "unknown key"),
        ("neg.json", '{"m": {"context_window": -3}}', "positive int"),
        ("tok.json", '{"m": {"tokenizer": "gpt2"}}', "unknown tokenizer"),
        ("cap.json", '{"m": {"context_window": 10, "max_output_tokens": 20}}', "exceeds"),
        ("entry.json", '{"m": 5}', "must map"),
    ],
)
def test_bad_override_files_name_file_and_problem(
    tmp_path: Path, name: str, content: str, problem: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ModelInfoError) as err:
        resolve_model_info("m", overrides=path, use_litellm=False)
    assert str(path) in str(err.value) and problem in str(err.value)


def test_missing_override_file_via_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MODELS_ENV_VAR, str(tmp_path / "absent.json"))
    with pytest.raises(ModelInfoError, match=MODELS_ENV_VAR):
        resolve_model_info("m", use_litellm=False)


# --------------------------------------------------------------------------- LiteLLM


def _fake_litellm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: dict[str, object]
) -> None:
    pkg = tmp_path / "litellm"
    pkg.mkdir()
    # Importing the package would fail the test: the map must be read from disk only.
    (pkg / "__init__.py").write_text("raise RuntimeError('windowguard must not import litellm')\n")
    (pkg / "model_prices_and_context_window_backup.json").write_text(json.dumps(table))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "litellm", raising=False)


def test_litellm_new_convention_input_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_litellm(
        tmp_path,
        monkeypatch,
        {"acme-llm": {"max_tokens": 4_096, "max_input_tokens": 64_000, "max_output_tokens": 4_096}},
    )
    info = resolve_model_info("acme-llm")
    assert (info.context_window, info.max_input_tokens, info.max_output_tokens) == (
        64_000,
        64_000,
        4_096,
    )
    assert info.source == "litellm" and "litellm" not in sys.modules


def test_litellm_legacy_max_tokens_is_only_a_window_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_litellm(tmp_path, monkeypatch, {"old-model": {"max_tokens": 4_097}})
    info = resolve_model_info("old-model")
    assert (info.context_window, info.max_output_tokens, info.source) == (4_097, None, "litellm")


def test_litellm_output_only_entry_is_not_a_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_litellm(
        tmp_path, monkeypatch, {"out-only": {"max_tokens": 8_192, "max_output_tokens": 8_192}}
    )
    info = resolve_model_info("out-only")
    assert info.context_window == FALLBACK_WINDOW and info.source == "fallback"
    assert info.max_output_tokens == 8_192 and info.source_of("max_output_tokens") == "litellm"


def test_litellm_caps_beat_catalog_but_window_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_litellm(
        tmp_path,
        monkeypatch,
        {
            "gpt-5": {
                "max_tokens": 128_000,
                "max_input_tokens": 272_000,
                "max_output_tokens": 100_000,
            }
        },
    )
    info = resolve_model_info("openai/gpt-5")
    assert info.context_window == 400_000 and info.source == "catalog"
    assert info.max_output_tokens == 100_000 and info.source_of("max_output_tokens") == "litellm"
    assert resolve_model_info("gpt-5", use_litellm=False).max_output_tokens == 128_000


def test_litellm_window_beats_family_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_litellm(tmp_path, monkeypatch, {"claude-opus-9": {"max_input_tokens": 500_000}})
    info = resolve_model_info("claude-opus-9")
    assert (info.context_window, info.source, info.tokenizer) == (500_000, "litellm", "claude")


def test_broken_litellm_file_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "litellm"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "model_prices_and_context_window_backup.json").write_text("{broken")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert resolve_model_info("gpt-4o").source == "catalog"
