"""What the emulator answers: the policy protocol and the built-in scenarios.

A *policy* is any callable that takes the parsed request (:class:`EmulatorRequest`) and
returns a :class:`Reply` (text and/or tool calls) or a plain string. The emulator does
everything else: counting, limits, wire format, streaming.

Built-in scenarios are deterministic functions of the request and the seed — no state
is kept between calls, so many clients can share one emulator and the same seed always
plays the same conversation:

* ``"coding-agent"`` (:class:`CodingAgent`): while fewer than ``iterations`` assistant
  tool-call turns are in the transcript and the request offers tools, it calls 1-3 of
  them at once (parallel calls included) with plausible arguments built from their JSON
  schemas; then it answers in text.
* ``"echo"`` (:func:`echo`): answers with the text of the newest user message or tool
  result.

The messages a policy sees are always in OpenAI Chat Completions form (Anthropic
requests are converted), with tools as :class:`ToolSpec` values.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.exceptions import ConfigurationError

__all__ = [
    "SCENARIOS",
    "CodingAgent",
    "EmulatorRequest",
    "Policy",
    "Reply",
    "ToolCall",
    "ToolSpec",
    "arguments_from_schema",
    "echo",
    "resolve_policy",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool offered in the request, in flavour-neutral form.

    Attributes:
        name: the function name.
        description: its description ("" when absent).
        parameters: its JSON schema (an empty object schema when absent).
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A tool call the policy wants the model to make.

    Attributes:
        name: the tool's name.
        arguments: the arguments, as a mapping or as JSON text.
        id: the call id; None lets the emulator assign a deterministic one in the
            flavour's style (``call_…`` or ``toolu_…``).
    """

    name: str
    arguments: Mapping[str, Any] | str
    id: str | None = None

    def arguments_json(self) -> str:
        """The arguments as JSON text (the OpenAI wire form)."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), ensure_ascii=False)

    def arguments_object(self) -> dict[str, Any]:
        """The arguments as an object (the Anthropic ``tool_use.input`` form).

        Raises:
            ConfigurationError: ``arguments`` is JSON text that is not an object.
        """
        if not isinstance(self.arguments, str):
            return dict(self.arguments)
        try:
            value = json.loads(self.arguments)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(
                f"tool call {self.name!r}: arguments are not valid JSON ({exc})"
            ) from exc
        if not isinstance(value, dict):
            raise ConfigurationError(f"tool call {self.name!r}: arguments must be a JSON object")
        return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """What the model answers: text, tool calls, or both.

    Attributes:
        text: the assistant text ("" for none).
        tool_calls: the tool calls, in order (several means parallel calls).
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class EmulatorRequest:
    """The parsed request a policy answers.

    Attributes:
        flavor: ``"openai"``, ``"vllm"``, ``"llamacpp"`` or ``"anthropic"``.
        model: the model name the client asked for.
        messages: the transcript in OpenAI Chat Completions form (system first).
        tools: the tools offered.
        prompt_tokens: the exact prompt count the emulator reports as usage.
        max_output_tokens: the reply budget after the flavour's limits; a longer reply
            is cut to it and reported as stopped for length.
        stream: whether the client asked for a stream.
        call_number: this model call's number, from 1, in arrival order.
        seed: the emulator's seed, for deterministic policies.
        body: the request body as the client sent it.
    """

    flavor: str
    model: str
    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[ToolSpec, ...] = ()
    prompt_tokens: int
    max_output_tokens: int
    stream: bool = False
    call_number: int
    seed: int = 0
    body: Mapping[str, Any]


Policy = Callable[[EmulatorRequest], "Reply | str"]


def echo(request: EmulatorRequest) -> Reply:
    """Answer with the text of the newest user message or tool result."""
    for message in reversed(request.messages):
        if message.get("role") in ("user", "tool"):
            return Reply(text=_text_of(message.get("content")))
    return Reply(text="")


@dataclass(frozen=True, slots=True, kw_only=True)
class CodingAgent:
    """A deterministic coding agent: some rounds of tool calls, then a text answer.

    Attributes:
        iterations: how many tool-call turns to make before answering in text.
        max_parallel: the most tool calls in one turn (calls per turn are 1..this).
    """

    iterations: int = 3
    max_parallel: int = 3

    def __post_init__(self) -> None:
        if self.iterations < 0:
            raise ConfigurationError(f"iterations must be >= 0, got {self.iterations}")
        if self.max_parallel < 1:
            raise ConfigurationError(f"max_parallel must be >= 1, got {self.max_parallel}")

    def __call__(self, request: EmulatorRequest) -> Reply:
        """Answer one request (see the class docstring)."""
        done = sum(
            1 for m in request.messages if m.get("role") == "assistant" and m.get("tool_calls")
        )
        names = ",".join(tool.name for tool in request.tools)
        rng = random.Random(f"coding-agent:{request.seed}:{done}:{names}")
        if request.tools and done < self.iterations:
            count = rng.randint(1, min(self.max_parallel, len(request.tools)))
            chosen = rng.sample(list(request.tools), count)
            calls = tuple(
                ToolCall(name=tool.name, arguments=arguments_from_schema(tool.parameters, rng))
                for tool in chosen
            )
            return Reply(tool_calls=calls)
        results = sum(1 for m in request.messages if m.get("role") == "tool")
        task = _first_user_text(request.messages)
        return Reply(
            text=(
                f"Done. I made {done} rounds of tool calls and read {results} tool results. "
                f"Summary of the task {task[:80]!r}: the change is in place and the tests pass."
            )
        )


#: the built-in scenarios by name
SCENARIOS: Mapping[str, Policy] = {"coding-agent": CodingAgent(), "echo": echo}


def resolve_policy(scenario: str | Policy) -> Policy:
    """Turn a scenario name (``"coding-agent"``, ``"coding-agent:5"``, ``"echo"``) or a
    callable into a policy.

    Raises:
        ConfigurationError: an unknown scenario name or a bad iteration count.
    """
    if callable(scenario):
        return scenario
    name, _, argument = scenario.partition(":")
    if name == "coding-agent" and argument:
        try:
            return CodingAgent(iterations=int(argument))
        except ValueError:
            raise ConfigurationError(
                f"scenario {scenario!r}: iterations {argument!r} is not a whole number"
            ) from None
    if name not in SCENARIOS or argument:
        raise ConfigurationError(
            f"unknown scenario {scenario!r}; use one of {sorted(SCENARIOS)} "
            "('coding-agent:N' sets the iterations) or pass a callable policy"
        )
    return SCENARIOS[name]


def coerce_reply(answer: Reply | str) -> Reply:
    """A policy's answer as a :class:`Reply`.

    Raises:
        ConfigurationError: the policy returned something else.
    """
    if isinstance(answer, Reply):
        return answer
    if isinstance(answer, str):
        return Reply(text=answer)
    raise ConfigurationError(f"a policy must return Reply or str, got {type(answer).__name__}")


# --- plausible arguments from JSON schemas ---------------------------------------

_WORDS = ("alpha", "beta", "config", "parser", "cache", "retry", "window", "budget", "token")
_STRING_HINTS: tuple[tuple[tuple[str, ...], Callable[[random.Random], str]], ...] = (
    (
        ("path", "file", "filename", "dir"),
        lambda r: f"src/{r.choice(_WORDS)}/{r.choice(_WORDS)}.py",
    ),
    (("command", "cmd", "shell"), lambda r: r.choice(("pytest -q", "ls -la", "git status"))),
    (("url", "uri", "link"), lambda r: f"https://example.com/{r.choice(_WORDS)}"),
    (("pattern", "query", "regex", "search"), lambda r: r.choice(_WORDS)),
    (("content", "text", "body", "code"), lambda r: " ".join(r.choices(_WORDS, k=8))),
)


def arguments_from_schema(schema: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """Build plausible arguments for a tool from its JSON schema.

    Every required property is present; optional ones appear about half the time.
    Values respect ``enum``, ``default``, numeric bounds and nested ``items`` /
    ``properties``. A schema that is not an object schema gives ``{}``.
    """
    value = _value(schema, "", rng, depth=0)
    return value if isinstance(value, dict) else {}


def _value(schema: Mapping[str, Any], name: str, rng: random.Random, *, depth: int) -> Any:
    if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
        return rng.choice(schema["enum"])
    if "const" in schema:
        return schema["const"]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options and isinstance(options[0], Mapping):
            return _value(options[0], name, rng, depth=depth)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "object":
        return _object(schema, rng, depth=depth)
    if kind == "array":
        items = schema.get("items")
        item_schema = items if isinstance(items, Mapping) else {}
        if depth >= 4:
            return []
        count = max(int(schema.get("minItems", 1)), 1)
        return [_value(item_schema, name, rng, depth=depth + 1) for _ in range(count)]
    if kind in ("integer", "number"):
        low = int(schema.get("minimum", 1))
        high = int(schema.get("maximum", max(low, 1) + 99))
        number = rng.randint(low, max(low, high))
        return number if kind == "integer" else float(number)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return _string(name, rng)


def _object(schema: Mapping[str, Any], rng: random.Random, *, depth: int) -> dict[str, Any]:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or depth >= 4:
        return {}
    raw_required = schema.get("required")
    required = set(raw_required) if isinstance(raw_required, list) else set()
    result: dict[str, Any] = {}
    for key, sub in properties.items():
        if key in required or rng.random() < 0.5:
            result[key] = _value(sub if isinstance(sub, Mapping) else {}, key, rng, depth=depth + 1)
    return result


def _string(name: str, rng: random.Random) -> str:
    lowered = name.lower()
    for hints, make in _STRING_HINTS:
        if any(hint in lowered for hint in hints):
            return make(rng)
    return rng.choice(_WORDS)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def _first_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    for message in messages:
        if message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""
