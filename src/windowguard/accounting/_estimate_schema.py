"""The text a tool schema is estimated by, and what bounds the bytes templates show for it.

:func:`schema_text` turns a tool definition into lines, one per key (with its scalar
value), per list item and per closing object, each ending in a newline. The
heuristic's features are then *additive over lines*: a line starts after a newline (or
the start of the text, which counts as one) and ends with one, so the features of the
whole text are the sum of its lines' features. Adding a property, an enum value, a
required name or a tool only adds lines, and appending a character to a line (a
description) only adds features, since the fit gives every "newline after X" schema
weight the same value. So the schema estimate is monotone: adding anything to a schema
never lowers it (the old form joined an enum's values with ``", "`` only while no value
was an object, so one object halved a 300-value enum's estimate).

Strings are written JSON-escaped (``\\"``, ``\\\\``, ``\\n``), as every JSON template
shows them; OpenAI's TypeScript rendering shows fewer escapes but a ``//`` per line.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from typing import Any, Final

from ..core.exceptions import ConfigurationError

__all__ = ["schema_text", "tool_bound_bytes", "tool_text"]

# JSON keys every tool definition repeats. The text a schema is sized by keeps their
# place (a line: the JSON families spend a few tokens of syntax on every key) but not
# their spelling, which OpenAI's TypeScript rendering leaves out.
_SCHEMA_KEYWORDS: Final = frozenset(
    {
        "type",
        "function",
        "name",
        "description",
        "parameters",
        "properties",
        "required",
        "items",
        "enum",
        "input_schema",
    }
)


def schema_text(tool: Mapping[str, Any]) -> str:
    """The text a tool definition is sized by: one line per key, list item and object end.

    A key's line holds the key (empty for the keywords every schema repeats) and, for
    a scalar, a space and the value (strings JSON-escaped, without quotes); a list item
    of a scalar is a line of its own, as JSON (``"value"``); a nested object's lines
    follow its key's and end with an empty line, where indented JSON closes it.
    """
    lines: list[str] = []
    _lines(tool, lines)
    return "".join(line + "\n" for line in lines)


def _lines(value: object, out: list[str]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            label = "" if key in _SCHEMA_KEYWORDS else _escaped(str(key))
            if isinstance(item, (Mapping, list, tuple)):
                out.append(label)
                _lines(item, out)
                if isinstance(item, Mapping):
                    out.append("")  # where the object closes
            else:
                out.append(f"{label} {_scalar(item)}")
    elif isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, (Mapping, list, tuple)):
                _lines(item, out)
            else:  # enum values, required names: one JSON value per line
                out.append(_listed(item))
    else:
        out.append(_scalar(value))


def _escaped(text: str) -> str:
    # json.dumps escapes only quotes, backslashes and control characters; most schema
    # strings have none, and then the text is its own escaped form.
    if '"' not in text and "\\" not in text and text.isprintable():
        return text
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _scalar(value: object) -> str:
    if isinstance(value, str):
        return _escaped(value)
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    return _escaped(str(value))


def _listed(value: object) -> str:
    if isinstance(value, str):
        return f'"{_escaped(value)}"'
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    return f'"{_escaped(str(value))}"'


def _as_mapping(tool: object, index: int) -> Mapping[str, Any]:
    dump = getattr(tool, "model_dump", None)
    if callable(dump) and not isinstance(tool, Mapping):
        tool = dump(exclude_none=True)
    if not isinstance(tool, Mapping):
        raise ConfigurationError(
            f"tool {index}: expected a tool definition (dict or pydantic model), "
            f"got {type(tool).__name__}"
        )
    if not any(key in tool for key in ("function", "name", "type")):
        raise ConfigurationError(
            f"tool {index}: not a tool definition (no 'function', 'name' or 'type' key; "
            f"keys: {sorted(map(str, tool))})"
        )
    return tool


def tool_text(tool: object, index: int) -> str:
    """The text a tool definition is sized by (bench/fit_priors.py sizes tools with it).

    Raises:
        ConfigurationError: not a tool definition, or nested too deeply.
    """
    mapping = _as_mapping(tool, index)
    try:
        return schema_text(mapping)
    except RecursionError as exc:
        raise ConfigurationError(f"tool {index}: nested too deeply (or contains itself)") from exc


# Bytes a template adds around each tool besides its own rendering: Llama 3's "\n\n",
# Mistral's ", ", OpenAI's blank line after each function.
_PER_TOOL_BYTES: Final = 4
_TYPESCRIPT_FRAME: Final = 70  # len(templates._typescript_functions([])), checked by the tests


_BOUNDS: dict[str, int] = {}  # tool JSON -> its bound; shared by every Estimator


def tool_bound_bytes(tool: object, index: int) -> int:
    """At least the bytes any chat template shows for one tool (without the block's
    framing): the longest of its indented JSON (Llama 3's ``tojson(indent=4)``, longer
    than the compact JSON of Qwen and Mistral), with ``\\uXXXX`` escapes, and OpenAI's
    TypeScript rendering (NFC-normalised, as Qwen's tokenizer does first).

    Raises:
        ConfigurationError: not a tool definition, or nested too deeply.
    """
    from .local import openai_function
    from .templates import _typescript_functions

    _as_mapping(tool, index)
    function = openai_function(tool, index)
    try:
        key = json.dumps(function, sort_keys=True, default=str)
    except (RecursionError, ValueError) as exc:
        raise ConfigurationError(f"tool {index}: nested too deeply (or contains itself)") from exc
    known = _BOUNDS.get(key)
    if known is not None:
        return known
    try:
        as_json = json.dumps(function, indent=4, default=str)
        typescript = _typescript_functions([function])
    except (RecursionError, ValueError) as exc:
        raise ConfigurationError(f"tool {index}: nested too deeply (or contains itself)") from exc
    shown = len(typescript.encode("utf-8", "surrogatepass"))
    if not typescript.isascii():
        try:
            normal = unicodedata.normalize("NFC", typescript).encode("utf-8", "surrogatepass")
            shown = max(shown, len(normal))
        except UnicodeEncodeError:
            pass
    shown -= _TYPESCRIPT_FRAME  # the namespace's header and footer: the block's framing
    if len(_BOUNDS) >= 1024:
        _BOUNDS.clear()
    bound = _BOUNDS[key] = max(len(as_json), shown) + _PER_TOOL_BYTES
    return bound
