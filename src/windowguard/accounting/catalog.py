"""Model limits: ModelInfo, the built-in catalog, and where each number comes from.

A :class:`ModelInfo` holds the three limits that bound one request: the context
window (prompt plus reply), the largest reply (``max_output_tokens``) and, where it is
below the window, the largest prompt (``max_input_tokens``; gpt-5 takes 272k input in a
400k window). It also names the tokenizer family whose priors the estimator uses, and
records where every number came from, so telemetry can say *why* a budget is what it is.

Invariants:

- Every limit is a positive int; ``max_output_tokens`` and ``max_input_tokens`` never
  exceed ``context_window``. A value that breaks this is a :class:`ModelInfoError`.
- :func:`lookup_model` is pure: it reads only the catalog shipped in the package
  (``catalog.json``) and never the network. A model it does not know gives None; a
  model it knows only by family (``claude-opus-9``) gives the family's conservative
  defaults with ``source="family"``.
- :func:`resolve_model_info` always answers. It merges the sources *per field* in this
  order: the caller's explicit ModelInfo, the caller's overrides (a dict or a JSON/TOML
  file, else the file ``WINDOWGUARD_MODELS`` names), a discovery result, LiteLLM's
  bundled map (read from disk, never imported, never fetched), the built-in table, the
  family defaults, then the fallback: a conservative 8192-token window and the unknown
  tokenizer family (``tokenizer=None``: the estimator takes, per text, the maximum over
  the families it has measured), with ``source="fallback"``. It reads
  files (overrides, LiteLLM's JSON) but never the network; discovery from servers lives
  in :mod:`windowguard.accounting.discovery`, override files in
  :mod:`windowguard.accounting._overrides` and LiteLLM's map in
  :mod:`windowguard.accounting._litellm`.

Name matching is token-wise and case-insensitive: a name is cut to its last ``/``
segment (``openrouter/anthropic/claude-3.5-sonnet``, ``meta-llama/Llama-3.1-8B``), AWS
Bedrock region and vendor prefixes and Ollama tags are folded in, and the result is
split into tokens (``llama``, ``3``, ``1``, ``8b``). A catalog key matches when its
tokens are a prefix of the name's, unless the name continues the key's version number
(``gpt-5`` does not match ``gpt-5.2``, which then gets the gpt-5 *family* defaults).
The longest matching key wins, so dated snapshots with their own limits
(``gpt-4o-2024-05-13``) can sit beside the alias.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final

from ..core.exceptions import ConfigurationError, ModelInfoError
from ._litellm import _litellm_entry
from ._overrides import FIELDS as _FIELDS
from ._overrides import LIMIT_FIELDS as LIMIT_FIELDS
from ._overrides import MODELS_ENV_VAR as MODELS_ENV_VAR
from ._overrides import TOKENIZER_FAMILIES as TOKENIZER_FAMILIES
from ._overrides import OverridesArg as OverridesArg
from ._overrides import _override_for

__all__ = [
    "FALLBACK_TOKENIZER",
    "FALLBACK_WINDOW",
    "MODELS_ENV_VAR",
    "SOURCES",
    "TOKENIZER_FAMILIES",
    "ModelInfo",
    "lookup_model",
    "resolve_model_info",
]

FALLBACK_WINDOW: Final = 8192
"""The conservative window for a model nobody knows (128k, the pressure gauge's, is not)."""

FALLBACK_TOKENIZER: Final[str | None] = None
"""The tokenizer family of a model nobody knows: None, the *unknown* family, which the
estimator sizes as the per-text maximum over the families it has measured exactly
(o200k, cl100k, llama3, llama4, qwen, mistral). Not ``"claude"``: Claude models are
identified by name in the catalog, so a model we cannot name is not a Claude model, and
Claude's derived priors (1.46x o200k) would over-count it several times over
(``docs/decisions/0002-estimator.md``, revision 5)."""


SOURCES: Final = (
    "explicit",
    "override",
    "discovered",
    "litellm",
    "catalog",
    "family",
    "fallback",
)
"""Where a number can come from, highest precedence first."""


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """A model's token limits and where they came from.

    The first five fields are positional (``ModelInfo(32_768, 4_096)`` works); the rest
    are keyword-friendly extras. Values are validated on construction.

    Attributes:
        context_window: total tokens the model accepts, prompt plus output.
        max_output_tokens: the largest reply the model may produce, if capped.
        max_input_tokens: the largest prompt, when it is below the window
            (gpt-5: 272k input in a 400k window).
        tokenizer: the tokenizer family the estimator's priors come from
            (one of :data:`TOKENIZER_FAMILIES`), or None when unknown.
        source: where the window came from (one of :data:`SOURCES`).
        field_sources: ``(field, source)`` pairs for fields whose source differs from
            ``source`` (or all of them, after a merge); read them with
            :meth:`source_of`.
        origin: free text naming the concrete origin (a server URL, a file), if any.

    Raises:
        ModelInfoError: a limit that is not a positive int, a cap above the window, an
            unknown tokenizer family or source.
    """

    context_window: int
    max_output_tokens: int | None = None
    max_input_tokens: int | None = None
    tokenizer: str | None = None
    source: str = "explicit"
    field_sources: tuple[tuple[str, str], ...] = ()
    origin: str | None = None

    def __post_init__(self) -> None:
        _check_limit("context_window", self.context_window, required=True)
        for name in ("max_output_tokens", "max_input_tokens"):
            value = getattr(self, name)
            _check_limit(name, value, required=False)
            if value is not None and value > self.context_window:
                raise ModelInfoError(
                    f"{name}={value} exceeds context_window={self.context_window}; "
                    f"a cap cannot be larger than the window it lives in"
                )
        if self.tokenizer is not None and self.tokenizer not in TOKENIZER_FAMILIES:
            raise ModelInfoError(
                f"unknown tokenizer family {self.tokenizer!r}; "
                f"use one of {', '.join(TOKENIZER_FAMILIES)} or None"
            )
        _check_source(self.source)
        for pair in self.field_sources:
            if len(pair) != 2 or pair[0] not in _FIELDS:
                raise ModelInfoError(f"bad field_sources entry {pair!r}")
            _check_source(pair[1])

    def source_of(self, field: str) -> str:
        """Return where ``field``'s value came from.

        Args:
            field: ``"context_window"``, ``"max_output_tokens"``,
                ``"max_input_tokens"`` or ``"tokenizer"``.

        Returns:
            The per-field source when recorded, else :attr:`source`.

        Raises:
            ModelInfoError: ``field`` is not one of the four.
        """
        if field not in _FIELDS:
            raise ModelInfoError(f"unknown ModelInfo field {field!r}; use one of {_FIELDS}")
        for name, source in self.field_sources:
            if name == field:
                return source
        return self.source

    def to_dict(self) -> dict[str, object]:
        """Return the limits and their sources as plain data for telemetry."""
        return {
            "context_window": self.context_window,
            "max_output_tokens": self.max_output_tokens,
            "max_input_tokens": self.max_input_tokens,
            "tokenizer": self.tokenizer,
            "source": self.source,
            "sources": {name: self.source_of(name) for name in _FIELDS},
            "origin": self.origin,
        }


def _check_limit(name: str, value: object, *, required: bool) -> None:
    if value is None and not required:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ModelInfoError(f"{name} must be a positive int, got {value!r}")


def _check_source(source: object) -> None:
    if source not in SOURCES:
        raise ModelInfoError(f"unknown source {source!r}; use one of {', '.join(SOURCES)}")


# --------------------------------------------------------------------------- names

# Bedrock ids: optional cross-region prefix, then the vendor: us.anthropic.claude-...
_BEDROCK = re.compile(
    r"^(?:(?:us|eu|apac|ap|global|us-gov|jp|au|ca)\.)?"
    r"(?:anthropic|meta|mistral|amazon|cohere|ai21|deepseek|qwen|openai|writer|google)\."
)
# Fireworks spells versions v3p1.
_FIREWORKS_VERSION = re.compile(r"\bv(\d+)p(\d+)")
# Sizes (8b, 0.5b, 8x7b, 1m, 32k) are one token; versions split into numbers.
_TOKEN = re.compile(
    r"\d+x\d+b(?![a-z0-9])|\d+(?:\.\d+)?[bm](?![a-z0-9])|\d+k(?![a-z0-9])|[a-z]+|\d+"
)
_MISTRAL_WORDS = frozenset({"mistral", "mixtral", "codestral"})


def _tokens(name: str) -> tuple[str, ...]:
    """Split a model name into the tokens the catalog matches on."""
    text = name.strip().lower().rsplit("/", 1)[-1]
    text = _BEDROCK.sub("", text)
    text = _FIREWORKS_VERSION.sub(r"\1.\2", text)
    if ":" in text:  # Ollama tag (llama3.1:8b) or OpenRouter variant (:free); latest says nothing
        base, _, tag = text.partition(":")
        text = base if tag == "latest" else f"{base}-{tag}"
    tokens = tuple(_TOKEN.findall(text))
    if len(tokens) > 1 and tokens[0] == "meta" and tokens[1] == "llama":
        tokens = tokens[1:]  # Meta-Llama-3.1-8B-Instruct
    if len(tokens) > 1 and tokens[0] == "open" and tokens[1] in _MISTRAL_WORDS:
        tokens = tokens[1:]  # open-mixtral-8x22b
    return tokens


def _without_dates(tokens: tuple[str, ...]) -> tuple[str, ...]:
    """Drop snapshot dates (20241022, 2024-08-06) so a suffix after them can match."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.isdigit() and len(tok) == 8 and tok.startswith("20"):
            i += 1
            continue
        if (
            tok.isdigit()
            and len(tok) == 4
            and tok.startswith("20")
            and i + 2 < len(tokens)
            and all(t.isdigit() and len(t) == 2 for t in tokens[i + 1 : i + 3])
        ):
            i += 3
            continue
        out.append(tok)
        i += 1
    return tuple(out)


def _key_matches(key: tuple[str, ...], tokens: tuple[str, ...]) -> bool:
    if len(key) > len(tokens) or tokens[: len(key)] != key:
        return False
    if len(tokens) == len(key):
        return True
    following = tokens[len(key)]
    # gpt-5 must not claim gpt-5.2, llama-3 must not claim llama-3.1.
    return not (key[-1].isdigit() and following.isdigit() and len(following) <= 2)


# --------------------------------------------------------------------------- table


@dataclass(frozen=True, slots=True, kw_only=True)
class _Entry:
    keys: tuple[tuple[str, ...], ...]
    limits: tuple[tuple[str, int | str], ...]


@functools.cache
def _table() -> tuple[tuple[_Entry, ...], tuple[_Entry, ...]]:
    """Load ``catalog.json`` once: (models, families)."""
    raw = (resources.files("windowguard") / "data" / "catalog.json").read_text("utf-8")
    data = json.loads(raw)
    models = tuple(_entry(item, item["keys"], "catalog.json models") for item in data["models"])
    families = tuple(
        _entry(item, [item["prefix"]], "catalog.json families") for item in data["families"]
    )
    return models, families


def _entry(item: Mapping[str, Any], keys: Sequence[str], where: str) -> _Entry:
    limits = {name: item[name] for name in _FIELDS if item.get(name) is not None}
    try:
        ModelInfo(**limits)  # validates the shipped numbers
    except (ModelInfoError, TypeError) as exc:
        raise ModelInfoError(f"{where}: entry {keys!r} is invalid: {exc}") from exc
    return _Entry(keys=tuple(_tokens(k) for k in keys), limits=tuple(limits.items()))


def _best(
    entries: Sequence[_Entry], tokens: tuple[str, ...], *, strict: bool
) -> tuple[_Entry | None, int]:
    """The entry whose key is the longest match for ``tokens``, and that key's length."""
    best: _Entry | None = None
    best_len = 0
    for entry in entries:
        for key in entry.keys:
            ok = _key_matches(key, tokens) if strict else tokens[: len(key)] == key
            if ok and len(key) > best_len:
                best, best_len = entry, len(key)
    return best, best_len


def _catalog_match(name: str) -> tuple[_Entry, str] | None:
    """Find ``name`` in the table: (entry, "catalog") or (family, "family") or None."""
    tokens = _tokens(name)
    if not tokens:
        return None
    models, families = _table()
    # A key may match the name as spelt or with its snapshot date removed
    # (claude-sonnet-4-5-20250929[1m] is the 1m variant); the longer key wins.
    as_spelt, len_spelt = _best(models, tokens, strict=True)
    undated, len_undated = _best(models, _without_dates(tokens), strict=True)
    entry = undated if len_undated > len_spelt else as_spelt
    if entry is not None:
        return entry, "catalog"
    family, _ = _best(families, tokens, strict=False)
    return (family, "family") if family is not None else None


def lookup_model(name: str) -> ModelInfo | None:
    """Return the built-in limits of ``name``, or None when the model is unknown.

    Matching is case-insensitive and accepts provider prefixes (``openai/gpt-4o``,
    ``openrouter/anthropic/claude-3.5-sonnet``), HF ids as vLLM serves them
    (``meta-llama/Llama-3.1-8B-Instruct``), dated snapshots and ``-latest``, Bedrock ids
    (``us.anthropic.claude-3-5-sonnet-20241022-v2:0``) and Ollama tags (``qwen3:8b``).

    Args:
        name: the model name as the caller or server spells it.

    Returns:
        A ModelInfo with ``source="catalog"`` for a known model, ``source="family"`` for
        an unknown member of a known family (its conservative defaults), else None.

    Raises:
        ModelInfoError: ``name`` is not a string.

    Examples:
        >>> lookup_model("gpt-5").max_input_tokens
        272000
    """
    if not isinstance(name, str):
        raise ModelInfoError(f"model name must be a str, got {type(name).__name__}")
    found = _catalog_match(name)
    if found is None:
        return None
    entry, source = found
    return ModelInfo(**dict(entry.limits), source=source)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- merging

_Layer = tuple[str, Mapping[str, object], "str | None"]


def _merge(layers: Sequence[_Layer], fallback_window: int) -> ModelInfo:
    """Take each field from the first layer that has it; clamp caps to the window."""
    chosen: dict[str, tuple[object, str]] = {}
    origin: str | None = None
    for source, fields, layer_origin in layers:
        for name in _FIELDS:
            value = fields.get(name)
            if value is not None and name not in chosen:
                chosen[name] = (value, source)
                if name == "context_window":
                    origin = layer_origin
    if "context_window" not in chosen:
        chosen["context_window"] = (fallback_window, "fallback")
    if "tokenizer" not in chosen:
        chosen["tokenizer"] = (FALLBACK_TOKENIZER, "fallback")
    window = chosen["context_window"][0]
    assert isinstance(window, int)
    for cap in ("max_output_tokens", "max_input_tokens"):
        if cap in chosen:
            value, source = chosen[cap]
            assert isinstance(value, int)
            chosen[cap] = (min(value, window), source)
    return ModelInfo(
        context_window=window,
        max_output_tokens=_opt_int(chosen.get("max_output_tokens")),
        max_input_tokens=_opt_int(chosen.get("max_input_tokens")),
        tokenizer=_opt_str(chosen["tokenizer"]),
        source=chosen["context_window"][1],
        field_sources=tuple((name, chosen[name][1]) for name in _FIELDS if name in chosen),
        origin=origin,
    )


def _opt_str(pair: tuple[object, str]) -> str | None:
    return None if pair[0] is None else str(pair[0])


def _opt_int(pair: tuple[object, str] | None) -> int | None:
    if pair is None:
        return None
    value = pair[0]
    assert isinstance(value, int)
    return value


def _info_layers(info: ModelInfo) -> list[_Layer]:
    """One layer per source recorded in ``info`` so per-field sources survive a merge."""
    by_source: dict[str, dict[str, object]] = {}
    for name in _FIELDS:
        value = getattr(info, name)
        if value is not None:
            by_source.setdefault(info.source_of(name), {})[name] = value
    return [(source, fields, info.origin) for source, fields in by_source.items()]


def resolve_model_info(
    model: str | None = None,
    *,
    model_info: ModelInfo | None = None,
    overrides: OverridesArg = None,
    discovered: ModelInfo | None = None,
    use_litellm: bool = True,
    fallback_window: int = FALLBACK_WINDOW,
) -> ModelInfo:
    """Merge every source of a model's limits, per field, and say where each came from.

    Precedence, highest first: ``model_info``; ``overrides`` (or, when it is None, the
    file named by ``WINDOWGUARD_MODELS``); ``discovered``; LiteLLM's bundled
    ``max_input_tokens``/``max_output_tokens``; the built-in table; LiteLLM's window
    (LiteLLM has no total-window field, so its input limit only stands in for a window
    the table does not know); the family defaults; the fallback.

    Args:
        model: the model name, used to pick overrides, LiteLLM and catalog entries.
        model_info: the caller's explicit limits; its fields win.
        overrides: ``{model_name_or_glob: {field: value}}`` (optionally under a
            ``"models"`` key), or the path of a JSON or TOML file holding that.
        discovered: what :func:`windowguard.accounting.discovery.discover_model_info` learned.
        use_litellm: read LiteLLM's bundled model map when ``litellm`` is installed.
        fallback_window: window of a model nobody knows (conservatively 8192).

    Returns:
        A complete ModelInfo: ``source`` says where the window came from and
        :meth:`ModelInfo.source_of` where every other field did.

    Raises:
        ModelInfoError: an overrides file that is missing, unreadable or malformed,
            or an override value that is not a valid limit.
        ConfigurationError: ``fallback_window`` is not a positive int.
    """
    if isinstance(fallback_window, bool) or not isinstance(fallback_window, int):
        raise ConfigurationError(f"fallback_window must be a positive int, got {fallback_window!r}")
    if fallback_window <= 0:
        raise ConfigurationError(f"fallback_window must be a positive int, got {fallback_window!r}")
    if model is not None and not isinstance(model, str):
        raise ModelInfoError(f"model name must be a str, got {type(model).__name__}")

    layers: list[_Layer] = []
    if model_info is not None:
        layers.extend(_info_layers(model_info))
    override_fields, override_origin = _override_for(model, overrides)
    if override_fields:
        layers.append(("override", override_fields, override_origin))
    if discovered is not None:
        layers.extend(_info_layers(discovered))

    litellm_caps: dict[str, object] = {}
    litellm_window: dict[str, object] = {}
    litellm_origin: str | None = None
    if use_litellm and model:
        found = _litellm_entry(model)
        if found is not None:
            litellm_caps, litellm_window, litellm_origin = found
    layers.append(("litellm", litellm_caps, litellm_origin))

    match = _catalog_match(model) if model else None
    if match is not None and match[1] == "catalog":
        layers.append(("catalog", dict(match[0].limits), "windowguard catalog.json"))
    layers.append(("litellm", litellm_window, litellm_origin))
    if match is not None and match[1] == "family":
        layers.append(("family", dict(match[0].limits), "windowguard catalog.json families"))
    return _merge(layers, fallback_window)
