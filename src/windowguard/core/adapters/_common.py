"""Helpers shared by the adapters: reading dicts and SDK objects alike."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

from ..shapes import ContentClass, Segment

__all__ = [
    "MISSING",
    "call_id_of",
    "call_segment",
    "field",
    "getter",
    "json_text",
    "segment",
    "type_name",
]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def field(obj: object, name: str, default: Any = None) -> Any:
    """Read ``name`` from a mapping or an SDK object (pydantic model, dataclass)."""
    if type(obj) is dict:  # the common case; skips the slower ABC isinstance check
        return obj.get(name, default)
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def getter(obj: object) -> Callable[..., Any]:
    """A ``get(name, default=None)`` for one message: ``dict.get`` itself for plain
    dicts (the hot path of a cold fit), :func:`field` for SDK objects."""
    if type(obj) is dict:
        return obj.get
    return functools.partial(field, obj)


def type_name(obj: object) -> str:
    """A short name of an object's type for error messages."""
    return type(obj).__name__


def json_text(value: object) -> str:
    """Compact JSON text of a value the provider will see serialised.

    SDK objects are dumped through ``model_dump`` when they have one; anything json
    cannot serialise falls back to ``str`` so estimation never crashes on it.
    """
    if isinstance(value, str):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(exclude_none=True)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_fallback)


def _fallback(value: object) -> object:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)
    return str(value)


def segment(content_class: ContentClass, text: str, *, reasoning: bool = False) -> Segment:
    """A segment; kept as a function so adapters read uniformly."""
    return Segment(content_class=content_class, text=text, reasoning=reasoning)


def call_segment(name: str, arguments: str) -> Segment:
    """A tool call's segment: its name followed by its arguments (dense text)."""
    return Segment(content_class="dense", text=f"{name}{arguments}", name_length=len(name))


def call_id_of(value: object, what: str) -> tuple[str, str | None]:
    """A call id as shapes carry it, and the problem with it if any.

    A missing or empty id is ``""``: some servers and local models emit calls and
    results without ids, and those pair by position within their turn. An id of
    another type than ``str`` is damage (and pairs as ``""`` so the call's place in
    ``opens`` still matches its segment).

    Args:
        value: the id field as found.
        what: names the field in the problem, e.g. ``"a tool call's 'id'"``.
    """
    if isinstance(value, str):
        return value, None
    if value is None:
        return "", None
    return "", f"{what} must be a string, got {type_name(value)}"
