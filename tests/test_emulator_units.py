"""The emulator's pure parts (faults, scenarios, limits) and its command line."""

from __future__ import annotations

import io
import json
import random
import threading
import time
import urllib.request
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from windowguard.core.exceptions import ConfigurationError
from windowguard.core.provider_errors import WireError
from windowguard.emulator import (
    CodingAgent,
    EmulatorRequest,
    Fault,
    FaultPlan,
    ToolSpec,
    parse_faults,
)
from windowguard.emulator.cli import main
from windowguard.emulator.limits import Limits, ReplyBudget, enforce
from windowguard.emulator.scenarios import arguments_from_schema, resolve_policy


def test_parse_faults_schedule_and_probability() -> None:
    plan = parse_faults("3,4:429@2.5; 7:500 ;p=0.5:503", seed=1)
    assert plan.fault_for(3) == Fault(status=429, retry_after_seconds=2.5)
    assert plan.fault_for(4) == Fault(status=429, retry_after_seconds=2.5)
    assert plan.fault_for(7) == Fault(status=500)
    random_calls = [n for n in range(8, 408) if plan.fault_for(n) is not None]
    assert 120 < len(random_calls) < 280
    assert all(plan.fault_for(n) == Fault(status=503) for n in random_calls)


@pytest.mark.parametrize("spec", ["3", "x:429", "3:418", "p=1.5:503", "2:429@soon", "0:500"])
def test_bad_fault_specs_raise_configuration_error(spec: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_faults(spec)


@settings(deadline=None)
@given(seed=st.integers(0, 10**6), probability=st.floats(0, 1), call=st.integers(1, 10**6))
def test_fault_draw_depends_only_on_seed_and_call(seed: int, probability: float, call: int) -> None:
    first = FaultPlan(probability=probability, seed=seed)
    second = FaultPlan(probability=probability, seed=seed)
    assert first.fault_for(call) == second.fault_for(call)


def test_fault_plan_at() -> None:
    plan = FaultPlan.at({3: 429, 4: Fault(status=502)})
    assert [plan.fault_for(n) for n in range(1, 6)] == [
        None,
        None,
        Fault(status=429),
        Fault(status=502),
        None,
    ]


schemas = st.recursive(
    st.sampled_from(
        [
            {"type": "string"},
            {"type": "integer", "minimum": 3, "maximum": 9},
            {"type": "boolean"},
            {"type": "string", "enum": ["a", "b"]},
            {"type": ["string", "null"]},
        ]
    ),
    lambda inner: st.one_of(
        st.builds(lambda items: {"type": "array", "items": items}, inner),
        st.dictionaries(
            st.sampled_from(["path", "query", "n", "flag", "x"]), inner, max_size=4
        ).flatmap(
            lambda props: (
                st.lists(st.sampled_from(sorted(props)), unique=True).map(
                    lambda required: {"type": "object", "properties": props, "required": required}
                )
                if props
                else st.just({"type": "object", "properties": {}})
            )
        ),
    ),
    max_leaves=8,
)


def conforms(value: Any, schema: dict[str, Any]) -> bool:
    if "enum" in schema:
        return value in schema["enum"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = "string"
    if kind == "object":
        props = schema.get("properties", {})
        return (
            isinstance(value, dict)
            and set(schema.get("required", [])) <= set(value)
            and all(conforms(value[key], props[key]) for key in value)
        )
    if kind == "array":
        return isinstance(value, list) and all(conforms(item, schema["items"]) for item in value)
    if kind == "integer":
        return isinstance(value, int) and schema["minimum"] <= value <= schema["maximum"]
    if kind == "boolean":
        return isinstance(value, bool)
    return isinstance(value, str)


@settings(deadline=None)
@given(schema=schemas.filter(lambda s: s.get("type") == "object"), seed=st.integers(0, 1000))
def test_arguments_conform_to_their_schema(schema: dict[str, Any], seed: int) -> None:
    value = arguments_from_schema(schema, random.Random(seed))
    assert conforms(value, schema)
    assert value == arguments_from_schema(schema, random.Random(seed))


def request(
    messages: list[dict[str, Any]], tools: tuple[ToolSpec, ...], seed: int = 0
) -> EmulatorRequest:
    return EmulatorRequest(
        flavor="openai",
        model="m",
        messages=tuple(messages),
        tools=tools,
        prompt_tokens=10,
        max_output_tokens=100,
        call_number=1,
        seed=seed,
        body={},
    )


def test_coding_agent_without_tools_answers_in_text() -> None:
    reply = CodingAgent()(request([{"role": "user", "content": "hi"}], ()))
    assert reply.text
    assert reply.tool_calls == ()


def test_resolve_policy() -> None:
    assert resolve_policy("coding-agent:5") == CodingAgent(iterations=5)
    with pytest.raises(ConfigurationError, match="unknown scenario"):
        resolve_policy("poetry")
    with pytest.raises(ConfigurationError):
        resolve_policy("coding-agent:many")


@settings(deadline=None)
@given(
    flavor=st.sampled_from(["openai", "vllm", "llamacpp", "anthropic"]),
    window=st.integers(1, 5000),
    prompt=st.integers(0, 6000),
    requested=st.one_of(st.none(), st.integers(1, 6000)),
    cap=st.one_of(st.none(), st.integers(1, 3000)),
    beta=st.booleans(),
)
def test_enforce_never_lets_a_reply_overflow(
    flavor: str, window: int, prompt: int, requested: int | None, cap: int | None, beta: bool
) -> None:
    limits = Limits(flavor=flavor, model="m", context_window=window, max_output_tokens=cap)  # type: ignore[arg-type]
    if flavor == "anthropic" and requested is None:
        requested = 1
    result = enforce(
        limits, prompt_tokens=prompt, requested_output=requested, window_exceeded_beta=beta
    )
    if isinstance(result, WireError):
        assert result.status == 400
        over_window = prompt + (requested or 0) > window or prompt >= window
        over_cap = cap is not None and requested is not None and requested > cap
        assert over_window or over_cap
        return
    assert isinstance(result, ReplyBudget)
    assert prompt + result.max_output_tokens <= window
    if requested is not None and not (flavor == "anthropic" and beta):
        assert result.max_output_tokens <= requested
    if flavor in ("openai", "anthropic") and requested is not None and not beta:
        assert result.max_output_tokens == requested  # these never lower silently
    if flavor in ("vllm", "llamacpp") and requested is None:
        assert result.max_output_tokens == min(window - prompt, cap or window)


def test_cli_serves_until_stopped() -> None:
    stop = threading.Event()
    out = io.StringIO()
    codes: list[int] = []
    thread = threading.Thread(
        target=lambda: codes.append(
            main(["--flavor", "vllm", "--window", "5000", "--scenario", "echo"], stop=stop, out=out)
        )
    )
    thread.start()
    try:
        for _ in range(100):
            if out.getvalue():
                break
            time.sleep(0.05)
        base_url = out.getvalue().splitlines()[0]
        assert base_url.startswith("http://127.0.0.1:")
        assert base_url.endswith("/v1")
        with urllib.request.urlopen(f"{base_url}/models", timeout=5) as response:
            assert json.loads(response.read())["data"][0]["max_model_len"] == 5000
    finally:
        stop.set()
        thread.join(timeout=10)
    assert codes == [0]


def test_cli_rejects_unusable_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--window", "0"]) == 2
    assert "context_window" in capsys.readouterr().err
    assert main(["--faults", "3:418"]) == 2
