"""Copies of the caller's objects with one field replaced, in the caller's own type.

An edit never mutates what the caller gave: it builds a new object of the same type with
only the edited field replaced, and copies nested containers only along the edited path
(every untouched block, part and call stays the caller's own object). A ``dict`` stays a
``dict`` (its key order kept), another mapping is copied with :func:`copy.copy`, a
pydantic model (the official SDKs' types) goes through ``model_copy(update=...)``, which
keeps its class, its extra fields and its ``model_fields_set``, and a dataclass through
:func:`dataclasses.replace`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from ..adapters._common import type_name
from ..exceptions import InvalidTranscriptError

__all__ = ["is_model", "replaced", "with_items"]


def is_model(obj: object) -> bool:
    """Whether ``obj`` is a pydantic model (an SDK object) rather than a mapping."""
    return callable(getattr(obj, "model_copy", None)) and not isinstance(obj, Mapping)


def replaced(obj: Any, **changes: Any) -> Any:
    """A new object of ``obj``'s type with the fields in ``changes`` replaced.

    Raises:
        InvalidTranscriptError: ``obj`` is of a type that cannot be copied with a field
            replaced (neither a mapping, a pydantic model nor a dataclass).
    """
    if type(obj) is dict:
        return {**obj, **changes}
    if isinstance(obj, MutableMapping):
        new = copy.copy(obj)
        for key, value in changes.items():
            new[key] = value
        return new
    if isinstance(obj, Mapping):
        return {**obj, **changes}
    model_copy = getattr(obj, "model_copy", None)
    if callable(model_copy):
        return model_copy(update=changes)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **changes)
    raise InvalidTranscriptError(
        f"cannot edit a {type_name(obj)}: only dicts, mappings, pydantic models (the "
        "official SDKs' objects) and dataclasses can be copied with their content replaced"
    )


def with_items(items: Sequence[Any], new_items: list[Any]) -> Any:
    """``new_items`` in the container type of ``items`` (a tuple stays a tuple)."""
    if isinstance(items, tuple):
        return tuple(new_items)
    return new_items
