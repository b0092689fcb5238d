"""Limit overrides: the caller's dict, a JSON/TOML file, or the file WINDOWGUARD_MODELS names.

An override table maps a model name or glob to some of the four fields
(``context_window``, ``max_output_tokens``, ``max_input_tokens``, ``tokenizer``),
optionally under a top-level ``models`` key. :func:`_override_for` picks the entry for
one model: an exact (case-insensitive) name first, then the first matching glob in file
order; ``model=None`` takes the ``"*"`` entry.

Invariants:

- Every table is validated when read: an unknown key, a limit that is not a positive
  int, an unknown tokenizer family or a cap above the window is a
  :class:`~windowguard.core.exceptions.ModelInfoError` naming the file (or dict) and entry.
- A missing, unreadable or malformed file is a ModelInfoError naming the file, never a
  raw OSError or decode error.
- A file is parsed once per (path, mtime, size): an edited file is read again.
- This module reads files but never the network. It is private; its public names
  (``MODELS_ENV_VAR``, ``OverridesArg``) are re-exported by :mod:`windowguard.accounting.catalog`.
"""

from __future__ import annotations

import fnmatch
import functools
import importlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Union

from ..core.exceptions import ModelInfoError

TOKENIZER_FAMILIES: Final = (
    "o200k",
    "cl100k",
    "claude",
    "gemini",
    "llama3",
    "llama4",
    "qwen",
    "mistral",
    "deepseek",
)
"""Tokenizer families the estimator has priors for."""

LIMIT_FIELDS: Final = ("context_window", "max_output_tokens", "max_input_tokens")
"""The numeric limits a model entry may state."""
FIELDS: Final = (*LIMIT_FIELDS, "tokenizer")
"""Every field a model entry may state."""

MODELS_ENV_VAR: Final = "WINDOWGUARD_MODELS"
"""Names a JSON or TOML overrides file used when the caller passes no overrides."""

OverridesArg = Union[Mapping[str, Mapping[str, object]], str, "os.PathLike[str]", None]


def _override_for(
    model: str | None, overrides: OverridesArg
) -> tuple[dict[str, object], str | None]:
    """The override fields that apply to ``model`` and where they came from."""
    origin: str | None
    if overrides is None:
        env = os.environ.get(MODELS_ENV_VAR, "").strip()
        if not env:
            return {}, None
        table, origin = _load_overrides_file(Path(env), via_env=True), f"{MODELS_ENV_VAR}={env}"
    elif isinstance(overrides, (str, os.PathLike)):
        path = Path(overrides)
        table, origin = _load_overrides_file(path, via_env=False), str(path)
    elif isinstance(overrides, Mapping):
        table, origin = _check_table(overrides, "overrides dict"), "overrides dict"
    else:
        raise ModelInfoError(
            f"overrides must be a mapping or a JSON/TOML file path, got {type(overrides).__name__}"
        )
    if model is None:
        fields = table.get("*")
        return (dict(fields), origin) if fields else ({}, None)
    lowered = model.lower()
    for pattern, fields in table.items():  # exact name first
        if pattern.lower() == lowered:
            return dict(fields), origin
    for pattern, fields in table.items():  # then globs, in file order
        if any(c in pattern for c in "*?[") and fnmatch.fnmatchcase(lowered, pattern.lower()):
            return dict(fields), origin
    return {}, None


@functools.lru_cache(maxsize=32)
def _parse_overrides_file(path: str, mtime_ns: int, size: int) -> dict[str, dict[str, object]]:
    del mtime_ns, size  # part of the cache key only: an edited file is read again
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ModelInfoError(f"overrides file {path}: cannot read it ({exc.strerror})") from exc
    suffix = p.suffix.lower()
    if suffix == ".toml":
        data = _parse_toml(raw, path)
    elif suffix == ".json":
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ModelInfoError(f"overrides file {path}: not valid JSON ({exc})") from exc
    else:
        raise ModelInfoError(
            f"overrides file {path}: unknown format {suffix or '(no suffix)'!r}; "
            "use a .json or .toml file"
        )
    if not isinstance(data, Mapping):
        raise ModelInfoError(f"overrides file {path}: top level must be a table/object")
    return _check_table(data, f"overrides file {path}")


def _parse_toml(raw: bytes, path: str) -> Any:
    try:
        toml: Any = importlib.import_module("tomllib")
    except ModuleNotFoundError:  # Python 3.10
        try:
            toml = importlib.import_module("tomli")
        except ModuleNotFoundError as exc:
            raise ModelInfoError(
                f"overrides file {path}: reading TOML needs Python >= 3.11 or "
                "`pip install tomli`; or use a .json file"
            ) from exc
    try:
        return toml.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:  # TOMLDecodeError is a ValueError
        raise ModelInfoError(f"overrides file {path}: not valid TOML ({exc})") from exc


def _load_overrides_file(path: Path, *, via_env: bool) -> dict[str, dict[str, object]]:
    try:
        stat = path.stat()
    except OSError as exc:
        how = f" (named by {MODELS_ENV_VAR})" if via_env else ""
        raise ModelInfoError(
            f"overrides file {path}{how} does not exist or cannot be read"
        ) from exc
    return _parse_overrides_file(str(path), stat.st_mtime_ns, stat.st_size)


def _check_table(data: Mapping[str, Any], where: str) -> dict[str, dict[str, object]]:
    """Validate ``{name: {field: value}}`` (optionally under ``models``)."""

    models = data.get("models", data) if isinstance(data.get("models"), Mapping) else data
    table: dict[str, dict[str, object]] = {}
    for name, fields in models.items():
        if not isinstance(name, str) or not isinstance(fields, Mapping):
            raise ModelInfoError(
                f"{where}: entry {name!r} must map a model name to a table of limits"
            )
        unknown = sorted(set(fields) - set(FIELDS))
        if unknown:
            raise ModelInfoError(
                f"{where}: entry {name!r} has unknown key(s) {', '.join(map(str, unknown))}; "
                f"allowed: {', '.join(FIELDS)}"
            )
        for key in LIMIT_FIELDS:
            value = fields.get(key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value <= 0
            ):
                raise ModelInfoError(
                    f"{where}: entry {name!r}: {key} must be a positive int, got {value!r}"
                )
        tok = fields.get("tokenizer")
        if tok is not None and tok not in TOKENIZER_FAMILIES:
            raise ModelInfoError(
                f"{where}: entry {name!r}: unknown tokenizer {tok!r}; "
                f"use one of {', '.join(TOKENIZER_FAMILIES)}"
            )
        window = fields.get("context_window")
        for cap in ("max_output_tokens", "max_input_tokens"):
            value = fields.get(cap)
            if isinstance(window, int) and isinstance(value, int) and value > window:
                raise ModelInfoError(
                    f"{where}: entry {name!r}: {cap}={value} exceeds context_window={window}"
                )
        table[name] = {k: v for k, v in fields.items() if v is not None}
    return table
