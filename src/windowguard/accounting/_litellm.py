"""LiteLLM's bundled model map, found and read from disk without importing litellm.

LiteLLM ships ``model_prices_and_context_window[_backup].json`` inside its package.
:func:`_litellm_entry` locates that file through ``importlib.util.find_spec`` (which
does not run ``litellm/__init__.py``), reads it, and turns one model's entry into two
layers for :func:`windowguard.accounting.catalog.resolve_model_info`: the caps
(``max_input_tokens``/``max_output_tokens``) and a window hint.

Invariants:

- litellm is never imported and nothing is fetched: only the installed JSON is read.
- LiteLLM is a best-effort source: no litellm, a missing or broken file, or an unknown
  model gives None, never an error.
- The map is parsed once per (path, mtime).
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

_LITELLM_FILES: Final = (
    "model_prices_and_context_window_backup.json",
    "model_prices_and_context_window.json",
)


def _litellm_map_path() -> Path | None:
    """Where the installed litellm keeps its bundled map, found without importing it."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        for name in _LITELLM_FILES:
            candidate = Path(location) / name
            if candidate.is_file():
                return candidate
    return None


@functools.lru_cache(maxsize=4)
def _read_litellm_map(path: str, mtime_ns: int) -> Mapping[str, Any] | None:
    del mtime_ns  # cache key only
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # LiteLLM is a best-effort source: a broken file is no source
    return data if isinstance(data, Mapping) else None


def _positive(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value > 0 else None


def _litellm_entry(model: str) -> tuple[dict[str, object], dict[str, object], str] | None:
    """LiteLLM's limits for ``model``: (caps layer, window-hint layer, origin).

    LiteLLM's ``max_tokens`` has meant the window in old maps and the output cap in
    newer ones ("LEGACY ... set to max_output_tokens if provider specifies it"), so it
    is used only when neither ``max_input_tokens`` nor ``max_output_tokens`` is given,
    and then only as a window hint (too small a window is safe; too large a reply
    reserve is not a window).
    """
    path = _litellm_map_path()
    if path is None:
        return None
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return None
    data = _read_litellm_map(str(path), mtime)
    if data is None:
        return None
    entry = None
    for candidate in _litellm_candidates(model):
        value = data.get(candidate)
        if isinstance(value, Mapping):
            entry = value
            break
    if entry is None:
        return None
    max_in = _positive(entry.get("max_input_tokens"))
    max_out = _positive(entry.get("max_output_tokens"))
    legacy = _positive(entry.get("max_tokens"))
    caps: dict[str, object] = {}
    if max_in is not None:
        caps["max_input_tokens"] = max_in
    if max_out is not None:
        caps["max_output_tokens"] = max_out
    window = max_in if max_in is not None else (legacy if max_out is None else None)
    hint: dict[str, object] = {"context_window": window} if window is not None else {}
    return caps, hint, f"litellm {path}"


def _litellm_candidates(model: str) -> list[str]:
    names = [model, model.lower()]
    rest = model
    while "/" in rest:
        rest = rest.split("/", 1)[1]
        names += [rest, rest.lower()]
    return list(dict.fromkeys(names))
