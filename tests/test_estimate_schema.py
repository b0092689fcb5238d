"""Tool-schema estimates are monotone (issue 18): adding anything never lowers them.

Adding a tool, a property, an enum value (a string, an integer or an object), a required
name, or characters appended to a description -- anywhere in the lists and dicts -- never
lowers ``tools_tokens`` nor the bound of ``tools_costs``, in any family. The old schema
text joined an enum's values with ``", "`` only while no value was an object, so one
object halved a 300-string enum's estimate.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

import content_classes as cc
from test_estimate_properties import (
    SCHEMA_CLASSES,
    enum_values,
    identifiers,
    properties,
    tool_schemas,
)
from windowguard.accounting.estimate import FAMILIES, Estimator

# --------------------------------------------------------------------------- monotone schemas


def _enums(tools: list[dict[str, Any]]) -> list[list[Any]]:
    found: list[list[Any]] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("enum"), list):
                found.append(value["enum"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(tools)
    return found


def _objects(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("properties"), dict):
                found.append(value)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(tools)
    return found


@st.composite
def schema_growth(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A tool set and the same set with one thing added: a tool, a property, an enum value
    (a string, an integer or an object), a required name, or characters appended to a
    description -- anywhere in the lists and dicts."""
    tools = draw(st.one_of(*SCHEMA_CLASSES.values(), *map(cc.strategy, cc.SCHEMA_CLASSES.values())))
    grown = json.loads(json.dumps(tools))
    kind = draw(st.sampled_from(["tool", "property", "enum", "required", "description"]))
    if kind == "tool":
        tool = draw(tool_schemas("mixed"))
        grown.insert(draw(st.integers(0, len(grown))), tool)
    elif kind == "enum" and _enums(grown):
        values = draw(st.sampled_from(_enums(grown)))
        value = draw(st.one_of(enum_values, st.integers(0, 999), st.just({"type": "object"})))
        values.insert(draw(st.integers(0, len(values))), value)
    elif kind in ("property", "required") and _objects(grown):
        schema = draw(st.sampled_from(_objects(grown)))
        name = draw(identifiers) + "_new"
        if kind == "required":
            schema.setdefault("required", []).append(name)
        else:
            items = list(schema["properties"].items())
            items.insert(draw(st.integers(0, len(items))), (name, draw(properties)))
            schema["properties"] = dict(items)
    else:
        function = draw(st.sampled_from(grown))["function"]
        function["description"] = function.get("description", "") + draw(st.text(min_size=1))
    return tools, grown


@settings(max_examples=150, deadline=None)
@given(drawn=schema_growth())
def test_schema_estimates_are_monotone(drawn: Any) -> None:
    tools, grown = drawn
    for family in (*sorted(FAMILIES), None):
        est = Estimator(family)
        assert est.tools_tokens(grown) >= est.tools_tokens(tools), family
        assert est.tools_costs(grown)[1] >= est.tools_costs(tools)[1], family


@pytest.mark.parametrize("family", [*sorted(FAMILIES), None])
def test_an_object_in_a_long_enum_does_not_halve_the_estimate(family: str | None) -> None:
    # Issue 18: appending one object to a 300-string enum halved the estimate
    # (2,427 -> 1,230) while the exact count rose.
    enum: list[Any] = [f"value_{n}" for n in range(300)]
    tool = {
        "type": "function",
        "function": {"name": "pick", "parameters": {"type": "object", "properties": {
            "choice": {"type": "string", "enum": enum}}}},
    }  # fmt: skip
    grown = json.loads(json.dumps(tool))
    grown["function"]["parameters"]["properties"]["choice"]["enum"].append({"a": 1})
    est = Estimator(family)
    assert est.tools_tokens([grown]) >= est.tools_tokens([tool])
