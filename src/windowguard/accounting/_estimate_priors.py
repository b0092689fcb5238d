"""The heuristic's per-family priors, loaded once from ``data/priors.json``.

The priors are data: weight vectors (tokens per unit of each feature of
:mod:`windowguard.accounting._estimate_features`, for prose, dense machine text and tool-schema
text) and framing overheads per tokenizer family, written by
``bench/fit_priors.py --write`` and shipped in the wheel. This module reads and checks
them at import; a malformed file raises :class:`~windowguard.core.exceptions.ConfigurationError`
naming the entry.

Invariants: every family of :data:`MEASURED_FAMILIES` has an exact offline tokenizer
and was fitted to it; the unknown family (``Estimator(None)``) has no weights of its
own: it takes, text by text, the maximum over the measured families, and each overhead
as the maximum of theirs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final

from ..core.exceptions import ConfigurationError
from ._estimate_features import FEATURES, cost_tables

__all__ = [
    "CONSERVATIVE_FAMILY",
    "FAMILIES",
    "MEASURED_FAMILIES",
    "UNKNOWN_FAMILY",
    "FamilyPriors",
    "family_priors",
    "load_priors",
    "priors_from_values",
]

PRIORS_FILE: Final = "data/priors.json"
MEASURED_FAMILIES: Final = ("o200k", "cl100k", "llama3", "llama4", "qwen", "mistral")
"""The families fitted to an exact offline tokenizer (the unknown family's members)."""
UNKNOWN_FAMILY: Final = "unknown"
"""What ``Estimator(None)`` reports as its family: the per-text maximum over
:data:`MEASURED_FAMILIES`. Not Claude's priors: Claude models are named in the
catalog, so an unnamed model is not Claude (decision 0002, revision 5)."""
CONSERVATIVE_FAMILY: Final = UNKNOWN_FAMILY
"""The family ``None`` picks (kept for compatibility; it is :data:`UNKNOWN_FAMILY`)."""
_OVERHEADS: Final = ("message", "tool_call", "tool", "tools_block", "request")
_MEDIA_TOKENS: Final = 1600


@dataclass(frozen=True, slots=True, kw_only=True)
class FamilyPriors:
    """What the estimator assumes about one tokenizer family.

    Attributes:
        name: the family (``"o200k"``, ``"claude"``, ``"unknown"`` ...).
        prose_weights: tokens per unit of each feature in ``FEATURES``, for prose.
        dense_weights: the same for dense machine text.
        schema_weights: the same for a tool schema's text (families render schemas
            their own way: TypeScript for OpenAI, indented JSON for Llama 3 ...).
        message_tokens: framing the chat template adds per message.
        tool_call_tokens: framing per tool call (the call's name and arguments are text).
        media_item_tokens: the allowance for one image, audio clip or document (an
            estimate: providers charge by pixels, pages and seconds).
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


def _weights(name: str, values: Mapping[str, Any], key: str) -> tuple[float, ...]:
    raw = values.get(key)
    if not isinstance(raw, list) or not all(
        isinstance(w, (int, float)) and not isinstance(w, bool) for w in raw
    ):
        raise ConfigurationError(f"{PRIORS_FILE}: {name}.{key} must be a list of numbers")
    weights = tuple(float(w) for w in raw)
    try:
        cost_tables(weights)  # checks the count, the sign and the 1/256 grid
    except ConfigurationError as exc:
        raise ConfigurationError(f"{PRIORS_FILE}: {name}.{key}: {exc}") from None
    return weights


def _count(name: str, values: Mapping[str, Any], key: str, default: int | None = None) -> int:
    raw = values.get(key, default)
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
        raise ConfigurationError(
            f"{PRIORS_FILE}: {name}.{key} must be a non-negative integer, got {raw!r}"
        )
    return raw


def priors_from_values(name: str, values: Mapping[str, Any], basis: str = "") -> FamilyPriors:
    """One family's priors from its entry in the data file (checked).

    Raises:
        ConfigurationError: a weight vector or overhead is missing or malformed.
    """
    return FamilyPriors(
        name=name,
        prose_weights=_weights(name, values, "prose"),
        dense_weights=_weights(name, values, "dense"),
        schema_weights=_weights(name, values, "schema"),
        message_tokens=_count(name, values, "message"),
        tool_call_tokens=_count(name, values, "tool_call"),
        media_item_tokens=_count(name, values, "media", _MEDIA_TOKENS),
        tool_tokens=_count(name, values, "tool"),
        tools_block_tokens=_count(name, values, "tools_block"),
        request_tokens=_count(name, values, "request"),
        basis=str(values.get("basis", basis or "fitted")),
    )


def load_priors(text: str) -> dict[str, FamilyPriors]:
    """Parse and check the priors data file's text.

    Raises:
        ConfigurationError: not JSON, another feature list than this version's, a
            family missing or malformed, or an alias to an unknown family.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"{PRIORS_FILE} is not valid JSON: {exc}") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("families"), Mapping):
        raise ConfigurationError(f"{PRIORS_FILE}: expected an object with 'families'")
    if data.get("features") != list(FEATURES):
        raise ConfigurationError(
            f"{PRIORS_FILE} was fitted for other features than this version's "
            f"({len(data.get('features') or ())} listed, {len(FEATURES)} expected); "
            "regenerate it with `python bench/fit_priors.py --write`"
        )
    entries: Mapping[str, Any] = data["families"]
    families: dict[str, FamilyPriors] = {}
    for name, values in entries.items():
        if not isinstance(values, Mapping):
            raise ConfigurationError(f"{PRIORS_FILE}: {name} must be an object")
        same = values.get("same_as")
        if same is not None:
            if same not in families:
                raise ConfigurationError(
                    f"{PRIORS_FILE}: {name} is the same as {same!r}, which is not listed before it"
                )
            families[name] = _renamed(families[same], name)
            continue
        families[name] = priors_from_values(name, values)
    missing = [name for name in MEASURED_FAMILIES if name not in families]
    if missing:
        raise ConfigurationError(f"{PRIORS_FILE}: no priors for {', '.join(missing)}")
    return families


def _renamed(priors: FamilyPriors, name: str) -> FamilyPriors:
    from dataclasses import replace

    return replace(priors, name=name)


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


FAMILIES: Final[dict[str, FamilyPriors]] = load_priors(
    resources.files("windowguard").joinpath(PRIORS_FILE).read_text(encoding="utf-8")
)
"""Every family's priors, by name (the data file's order)."""
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
