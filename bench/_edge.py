"""The edge sweep's parts (issue 18): random runs, their wire formats, exact truth, sends.

A *case* is one seeded random agent run: a tokenizer family, a wire format (OpenAI
Chat, OpenAI Responses, Anthropic Messages), a window of 4k-200k tokens, 0-30 real tool
schemas (``../shared/corpus/tools``, sometimes with an adversarial one from
:mod:`_content`), a ``max_tokens`` (None in about a third of the cases), a real head and
real corpus turns of which a third of the tool results are replaced by dense content
(:mod:`_content`). It is sent several times as it grows: the first send is cold
(``last_usage=None``), every later one reports the exact prompt tokens of what was sent
before (a provider's usage) and appends one or two turns, so dense content arrives after
measured turns.

**Truth** is the exact prompt of what ``fit`` returned, as the family's server counts
it: :func:`windowguard.accounting.templates.count_prompt` with the family's exact tokenizer
(:func:`windowguard.accounting.local.local_tokenizer`) over the request in OpenAI Chat
form; an Anthropic or Responses request is first converted the way the emulator's own
parsers convert it (tool results become tool messages), as a chat server renders it.

A send **overflows** when truth + the fitted ``max_tokens`` exceed the window. A refusal
(:class:`windowguard.ContextTruncatedError`) is **unjustified** when the truth of head +
newest turn + tools + the 200-token floor fits the window. After an overflow the send
is fitted again once the way the loop does (``observe_overflow``, then ``fit`` with the
reactive safety and ``NO_USAGE``): with the numbers a vLLM server states, and, from a
replayed manager in the same state, with none (OpenAI's "Your input exceeds the context
window of this model"); the run goes on with the refit that had the numbers.

Invariants: a case is a pure function of ``(seed, index)``; message objects are built
once per case and re-sent by identity, as a real loop does; nothing here prints.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tests.reference_templates import reference_count

import _content
import _corpus
import windowguard as wg
from windowguard.accounting.local import TEMPLATE_OF, local_tokenizer
from windowguard.accounting.templates import count_prompt
from windowguard.core.provider_errors import WireError
from windowguard.emulator.flavors import anthropic as anthropic_flavor
from windowguard.emulator.flavors import responses as responses_flavor
from windowguard.run.retry import REACTIVE_SAFETY_TOKENS

FAMILIES = ("o200k", "cl100k", "llama3", "qwen", "mistral")
FORMATS = ("chat", "responses", "anthropic")
WIRE_FORMAT = {"chat": "openai_chat", "responses": "responses", "anthropic": "anthropic"}
MODEL_NAMES = {
    "o200k": "gpt-4o",
    "cl100k": "gpt-4-turbo",
    "llama3": "llama-3.1-8b-instruct",
    "qwen": "qwen-3-8b",
    "mistral": "mistral-small",
}
"""Model names the catalog maps to each family (half the cases name the model)."""
MODES = ("exact", "heuristic")
"""(a) ``counter=None``: the family's exact local tokenizer is found; (b) ``"heuristic"``."""
FLOOR = 200  # the smallest reply a refusal must leave room for (the shrink guard's floor)
DENSE_SHARE = 1 / 3
MIN_WINDOW, MAX_WINDOW = 4_096, 200_000
ISSUE_LIST_TOKENS = 26_000
TRUTH = (
    "for Qwen, Mistral and Llama 3 the vendors' own software (the real Qwen3 jinja template "
    "through transformers, mistral-common's request encoder, Meta's ChatFormat: "
    "tests/reference_templates.py), for o200k/cl100k OpenAI's documented accounting "
    "(windowguard.accounting.templates.count_prompt), each with the family's exact tokenizer"
)

Message = dict[str, Any]


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """One turn in OpenAI Chat form and the content class of what it brought."""

    messages: tuple[Message, ...]
    classes: tuple[str, ...]  # per tool result (or pasted user content): "real" or a class


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One random run, before rendering into its wire format."""

    index: int
    family: str
    fmt: str
    window: int
    max_output_tokens: int | None
    max_tokens: int | None
    by_model_name: bool
    tools: tuple[Message, ...]
    head: tuple[Message, ...]
    turns: tuple[Turn, ...]
    sends: tuple[int, ...]  # turns in each send, increasing; the last is all of them
    label: str = ""


@functools.cache
def tool_pool() -> tuple[Message, ...]:
    """Every real tool schema in ``../shared/corpus/tools``, unique by name."""
    tools: dict[str, Message] = {}

    def walk(value: object) -> None:
        if isinstance(value, list):
            for item in value:
                if isinstance(item, dict) and isinstance(item.get("function"), dict):
                    tools.setdefault(item["function"]["name"], item)
        elif isinstance(value, dict):
            for inner in value.values():
                walk(inner)

    for path in sorted((_corpus.CORPUS_DIR / "tools").glob("*.json")):
        walk(json.loads(path.read_text(encoding="utf-8")).get("tools"))
    return tuple(tools.values())


@functools.cache
def _turns(with_calls: bool) -> tuple[tuple[Message, ...], ...]:
    pool = _corpus.turn_pool()
    if with_calls:
        return tuple(t for t in pool if t[0].get("tool_calls"))
    return tuple(t for t in pool if not t[0].get("tool_calls") and len(t) > 1)


@functools.cache
def _heads() -> tuple[tuple[Message, ...], ...]:
    heads = []
    for run in _corpus.load_runs():
        head = run.messages[: _corpus.split_head(run.messages)]
        if head and head[-1].get("role") == "user":
            heads.append(tuple(head))
    return tuple(heads)


def _dense(rng: random.Random, window: int) -> tuple[str, str]:
    """A dense class and its text: 100 tokens to 30 % of the window, about 3 chars each."""
    name = rng.choice(tuple(_content.CLASSES))
    tokens = math.exp(rng.uniform(math.log(100), math.log(max(200, 0.3 * window))))
    return name, _content.generate(name, rng, int(3 * tokens))


def _turn(rng: random.Random, number: int, window: int, with_calls: bool) -> Turn:
    """A real corpus turn, fresh ids, a third of its results (or pasted content) dense."""
    source = rng.choice(_turns(with_calls))
    ids: dict[str, str] = {}
    messages: list[Message] = []
    classes: list[str] = []
    for message in copy.deepcopy(list(source)):
        role = message.get("role")
        if role == "assistant":
            for k, call in enumerate(message.get("tool_calls") or ()):
                ids[call.get("id")] = call["id"] = f"call_{number}_{k}"
        elif role in ("tool", "user"):
            if role == "tool":
                message["tool_call_id"] = ids.get(str(message.get("tool_call_id")), "call_x")
            if rng.random() < DENSE_SHARE:
                name, message["content"] = _dense(rng, window)
                classes.append(name)
            else:
                classes.append("real")
        messages.append(message)
    return Turn(messages=tuple(messages), classes=tuple(classes))


def _rough_tokens(messages: Sequence[Message]) -> int:
    return sum(len(json.dumps(m, ensure_ascii=False)) for m in messages) // 3


def make_case(seed: int, index: int) -> Case:
    """The ``index``-th random run of ``seed`` (see the module docstring)."""
    rng = random.Random(f"windowguard-edge:{seed}:{index}")
    family, fmt = rng.choice(FAMILIES), rng.choice(FORMATS)
    window = int(math.exp(rng.uniform(math.log(MIN_WINDOW), math.log(MAX_WINDOW))))
    cap = rng.choice((None, None, 4_096, 8_192, 32_000))
    max_output = None if cap is None or cap >= window // 2 else cap
    max_tokens: int | None = None
    if rng.random() >= 1 / 3:
        max_tokens = min(rng.choice((256, 512, 1_024, 2_048, 4_096, 8_192, 16_384)), window // 3)
    n_tools = rng.randint(0, 30)
    tools = [copy.deepcopy(t) for t in rng.sample(tool_pool(), n_tools)]
    if tools and rng.random() < 0.2:
        tools[rng.randrange(len(tools))] = rng.choice(_content.adversarial_tools(rng))
    head = tuple(copy.deepcopy(list(rng.choice(_heads()))))
    target = window * math.exp(rng.uniform(math.log(0.3), math.log(2.5)))
    turns: list[Turn] = []
    size = _rough_tokens(head)
    while size < target or not turns:
        turn = _turn(rng, len(turns), window, with_calls=bool(tools))
        turns.append(turn)
        size += _rough_tokens(turn.messages)
    sends = [len(turns)]
    for _ in range(rng.choice((1, 2, 3, 4, 6, 8, 12, 16)) - 1):
        previous = sends[-1] - (1 if rng.random() < 0.75 else 2)
        if previous < 0:
            break
        sends.append(previous)
    return Case(
        index=index,
        family=family,
        fmt=fmt,
        window=window,
        max_output_tokens=max_output,
        max_tokens=max_tokens,
        by_model_name=rng.random() < 0.5,
        tools=tuple(tools),
        head=head,
        turns=tuple(turns),
        sends=tuple(reversed(sends)),
    )


def issue_case(family: str, fmt: str, *, seed: int = 0) -> Case:
    """The issue's failing case: 14 exactly measured turns (5-7k tokens, 8-10k with the
    head and tools), then one comma-separated word list of about 26k exact tokens: 34-36k
    in all, sent into a 32k window with ``max_tokens=1024``; head + the list take about
    29k, so it fits once the oldest turns are dropped."""
    rng = random.Random(f"windowguard-edge-issue:{seed}:{family}:{fmt}")
    head = tuple(copy.deepcopy(list(_heads()[0])))
    pool = [t for t in _turns(True) if 400 <= _rough_tokens(t) <= 900]
    turns = []
    for number in range(14):
        messages = copy.deepcopy(list(rng.choice(pool)))
        ids: dict[str, str] = {}
        for message in messages:
            for k, call in enumerate(message.get("tool_calls") or ()):
                ids[call.get("id")] = call["id"] = f"call_{number}_{k}"
            if message.get("role") == "tool":
                message["tool_call_id"] = ids.get(str(message.get("tool_call_id")), "call_x")
        turns.append(Turn(messages=tuple(messages), classes=("real",)))
    counter = local_tokenizer(family)
    sample = _content.generate("comma word list", random.Random(1), 20_000)
    chars = int(ISSUE_LIST_TOKENS * len(sample) / counter.count(sample)) if counter else 70_000
    words = _content.generate("comma word list", rng, chars)
    call = {
        "id": "call_14_0",
        "type": "function",
        "function": {"name": "list_items", "arguments": '{"kind": "all"}'},
    }
    turns.append(
        Turn(
            messages=(
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_14_0", "content": words},
            ),
            classes=("comma word list",),
        )
    )
    return Case(
        index=-1,
        family=family,
        fmt=fmt,
        window=32_768,
        max_output_tokens=None,
        max_tokens=1_024,
        by_model_name=False,
        tools=tuple(copy.deepcopy(list(tool_pool()[7:10]))),
        head=head,
        turns=tuple(turns),
        sends=tuple(range(1, 16)),
        label="issue 18",
    )


# --------------------------------------------------------------------------- rendering


@dataclass(frozen=True, slots=True, kw_only=True)
class Rendered:
    """A case in its wire format: message objects made once, re-sent by identity."""

    case: Case
    messages: list[Any]
    system: str | None
    tools: list[Message]
    head_stop: int
    turn_starts: tuple[int, ...]  # message index where each turn starts, then the end

    @property
    def format(self) -> str:
        return WIRE_FORMAT[self.case.fmt]

    def prefix(self, turns: int) -> list[Any]:
        """The transcript of a send holding the first ``turns`` turns (same objects)."""
        return self.messages[: self.turn_starts[turns]]

    def head_and_newest(self, turns: int) -> list[Any]:
        """Head + the newest turn of that send: what a refusal says cannot fit."""
        if turns == 0:
            return self.messages[: self.head_stop]
        newest = self.messages[self.turn_starts[turns - 1] : self.turn_starts[turns]]
        return self.messages[: self.head_stop] + newest


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def _arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    raw = call["function"].get("arguments") or "{}"
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"input": raw}


def _anthropic(head: Sequence[Message], turns: Sequence[Turn]) -> tuple[list[Any], str | None]:
    system = "\n\n".join(_text_of(m["content"]) for m in head if m["role"] == "system") or None
    messages: list[Any] = [
        {"role": "user", "content": _text_of(m["content"])} for m in head if m["role"] == "user"
    ]
    for turn in turns:
        user: list[dict[str, Any]] = []
        for message in turn.messages:
            if message["role"] == "assistant":
                blocks: list[dict[str, Any]] = []
                if _text_of(message.get("content")):
                    blocks.append({"type": "text", "text": _text_of(message["content"])})
                for call in message.get("tool_calls") or ():
                    use_id = "toolu_" + call["id"].removeprefix("call_")
                    name = call["function"]["name"]
                    block = {"type": "tool_use", "id": use_id, "name": name}
                    blocks.append(block | {"input": _arguments(call)})
                messages.append({"role": "assistant", "content": blocks})
            elif message["role"] == "tool":
                use_id = "toolu_" + message["tool_call_id"].removeprefix("call_")
                text = _text_of(message["content"])
                user.append({"type": "tool_result", "tool_use_id": use_id, "content": text})
            else:
                user.append({"type": "text", "text": _text_of(message["content"])})
        if user:
            messages.append({"role": "user", "content": user})
    return messages, system


def _responses(messages: Sequence[Message]) -> list[Any]:
    items: list[Any] = []
    for message in messages:
        role = message["role"]
        if role in ("system", "user"):
            items.append({"role": role, "content": _text_of(message["content"])})
        elif role == "assistant":
            text = _text_of(message.get("content"))
            if text:
                part = {"type": "output_text", "text": text}
                items.append({"type": "message", "role": "assistant", "content": [part]})
            for call in message.get("tool_calls") or ():
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": call["function"]["name"],
                        "arguments": call["function"].get("arguments") or "{}",
                    }
                )
        else:
            call_id, output = message["tool_call_id"], _text_of(message["content"])
            items.append({"type": "function_call_output", "call_id": call_id, "output": output})
    return items


def render(case: Case) -> Rendered:
    """The case's messages, system and tools in its wire format."""
    head = [copy.deepcopy(m) for m in case.head]
    if case.fmt == "anthropic":
        head_messages, system = _anthropic(head, [])
        starts = [len(head_messages)]
        messages = list(head_messages)
        for turn in case.turns:
            messages.extend(_anthropic([], [turn])[0])
            starts.append(len(messages))
        tools = [
            {
                "name": t["function"]["name"],
                "description": t["function"].get("description") or "",
                "input_schema": t["function"].get("parameters") or {"type": "object"},
            }
            for t in case.tools
        ]
        return Rendered(
            case=case,
            messages=messages,
            system=system,
            tools=tools,
            head_stop=len(head_messages),
            turn_starts=(len(head_messages), *starts[1:]),
        )
    convert = _responses if case.fmt == "responses" else (lambda ms: copy.deepcopy(list(ms)))
    messages = list(convert(head))
    starts = [len(messages)]
    for turn in case.turns:
        messages.extend(convert(turn.messages))
        starts.append(len(messages))
    tools = [copy.deepcopy(t) for t in case.tools]
    if case.fmt == "responses":
        tools = [{"type": "function", **t["function"]} for t in tools]
    return Rendered(
        case=case,
        messages=messages,
        system=None,
        tools=tools,
        head_stop=starts[0],
        turn_starts=tuple(starts),
    )


# --------------------------------------------------------------------------- truth


class _Memo:
    """An exact counter that remembers each text's count (runs re-send the same texts)."""

    def __init__(self, counter: wg.TokenCounter) -> None:
        self._counter = counter
        self._known: dict[str, int] = {}

    def count(self, text: str) -> int:
        known = self._known.get(text)
        if known is None:
            if len(self._known) > 50_000:
                self._known.clear()
            known = self._known[text] = self._counter.count(text)
        return known


def chat_form(
    fmt: str, messages: Sequence[Any], system: str | None, tools: Sequence[Message]
) -> tuple[list[Message], list[Message]]:
    """A request as a chat server renders it: the emulator's own conversion."""
    if fmt == "chat":
        return list(messages), list(tools)
    if fmt == "anthropic":
        body: dict[str, Any] = {"model": "m", "max_tokens": 1, "messages": list(messages)}
        if system:
            body["system"] = system
        if tools:
            body["tools"] = list(tools)
        parsed = anthropic_flavor.parse_messages_request(body)
    else:
        parsed = responses_flavor.parse_create_request(
            {"model": "m", "input": list(messages), "tools": list(tools)}
        )
    if isinstance(parsed, WireError):
        raise AssertionError(f"the bench built an invalid {fmt} request: {parsed.body}")
    return [dict(m) for m in parsed.messages], [dict(t) for t in parsed.tools]


TRUTH_TALLY = {"reference": 0, "template": 0}
REFERENCE_FAMILIES = ("qwen", "mistral", "llama3")
"""Families whose servers' own software renders the truth (tests/reference_templates.py:
the real Qwen3 jinja template through transformers, mistral-common's request encoder,
Meta's ChatFormat); OpenAI's families use OpenAI's documented accounting."""


class Truth:
    """Exact prompt tokens of a family's server (see the module docstring): the family's
    own software where it exists offline, else windowguard's template accounting."""

    def __init__(self, family: str) -> None:
        counter = local_tokenizer(family)
        if counter is None:
            raise SystemExit(f"no exact {family} tokenizer is installed: the sweep needs it")
        self.family = family
        self.template = TEMPLATE_OF[family]
        self.counter = _Memo(counter)

    def count(self, rendered: Rendered, messages: Sequence[Any]) -> int:
        chat, tools = chat_form(rendered.case.fmt, messages, rendered.system, rendered.tools)
        if self.family in REFERENCE_FAMILIES:
            try:
                counted = reference_count(self.family, chat, tools or None)
            except Exception:  # the reference refuses it (mistral-common: empty turns)
                pass
            else:
                TRUTH_TALLY["reference"] += 1
                return counted
        TRUTH_TALLY["template"] += 1
        return count_prompt(self.counter, chat, tools or None, template=self.template)


# --------------------------------------------------------------------------- sends


@dataclass(frozen=True, slots=True, kw_only=True)
class Refit:
    """One refit after an overflow: ``fits``, ``overflows``, ``identical`` or ``refused``."""

    outcome: str
    truth: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Send:
    """One fit of a case and what the truth says of it."""

    number: int
    turns: int
    window: int
    estimate: int
    truth: int | None  # None for a refusal
    max_tokens: int | None
    budget: int | None
    dropped_turns: int
    exact: bool
    refused: bool = False
    floor_truth: int | None = None  # a refusal: truth(head + newest turn + tools) + floor
    unjustified: bool = False
    newest: tuple[str, ...] = ()  # content classes appended since the previous send
    stated: Refit | None = None  # after an overflow: the refit with the provider's numbers
    unstated: Refit | None = None  # ... and with none

    @property
    def overflow(self) -> bool:
        """Truth + the fitted ``max_tokens`` exceed the window."""
        return (
            self.truth is not None
            and self.max_tokens is not None
            and self.truth + self.max_tokens > self.window
        )


@dataclass(slots=True)
class Outcome:
    """A case's sends in one accounting mode."""

    case: Case
    mode: str
    sends: list[Send] = field(default_factory=list)
    seconds: float = 0.0


EDITS: dict[str, object] = {"drop only": (), "default": None}
"""The edit policies a sweep may run with: ``edits=()`` (the default here) measures the
accounting alone, every send filled as far as the counts allow; the library's default
edits clamp a result over a quarter of the budget and clear old ones, so fewer sends
come near the edge at all."""
edits_policy = "drop only"


def make_manager(case: Case, mode: str) -> wg.ContextWindowManager:
    """The manager of a case: by model name (the catalog's family) or by ModelInfo."""
    info = wg.ModelInfo(
        case.window,
        max_output_tokens=case.max_output_tokens,
        tokenizer=None if case.by_model_name else case.family,
    )
    model = MODEL_NAMES[case.family] if case.by_model_name else None
    manager = wg.ContextWindowManager(
        model,
        model_info=info,
        counter="heuristic" if mode == "heuristic" else None,
        edits=EDITS[edits_policy],  # type: ignore[arg-type]
    )
    if manager.model_info.tokenizer != case.family:
        raise AssertionError(f"{model} resolved to {manager.model_info.tokenizer}")
    return manager


def _fit(
    manager: wg.ContextWindowManager,
    rendered: Rendered,
    turns: int,
    last_usage: object,
    safety: int | None = None,
) -> wg.Fit:
    return manager.fit(
        rendered.prefix(turns),
        tools=rendered.tools or None,
        max_tokens=rendered.case.max_tokens,
        last_usage=last_usage,
        system=rendered.system,
        format=rendered.format,
        safety=safety,
    )


def _refit(
    manager: wg.ContextWindowManager,
    rendered: Rendered,
    truth: Truth,
    turns: int,
    refused: wg.Fit,
    stated: int | None,
) -> tuple[Refit, wg.Fit | None]:
    """The loop's one refit after an overflow of ``refused``."""
    window = rendered.case.window
    manager.observe_overflow(stated, window if stated is not None else None)
    try:
        fit = _fit(manager, rendered, turns, wg.NO_USAGE, safety=REACTIVE_SAFETY_TOKENS)
    except wg.ContextTruncatedError:
        return Refit(outcome="refused"), None
    same = [id(m) for m in fit.messages] == [id(m) for m in refused.messages]
    if same and fit.max_tokens == refused.max_tokens:
        return Refit(outcome="identical"), fit
    exact = truth.count(rendered, fit.messages)
    outcome = "overflows" if exact + fit.max_tokens > window else "fits"
    return Refit(outcome=outcome, truth=exact), fit


def simulate(rendered: Rendered, mode: str, truth: Truth) -> Outcome:
    """Send a case as a run does (see the module docstring)."""
    case = rendered.case
    outcome = Outcome(case=case, mode=mode)
    manager = make_manager(case, mode)
    # What the manager was told, in order, so a twin can be replayed into its state:
    # (turns, last_usage, safety) for a fit, (turns, stated prompt tokens, None) for an
    # overflow and the refit after it.
    history: list[tuple[str, int, object]] = []
    last_usage: object = None
    previous = 0
    for number, turns in enumerate(case.sends):
        newest = tuple(c for t in case.turns[previous:turns] for c in t.classes)
        if number == 0:
            newest = tuple(c for t in case.turns[:turns] for c in t.classes)
        previous = turns
        try:
            fit = _fit(manager, rendered, turns, last_usage)
        except wg.ContextTruncatedError as exc:
            floor = truth.count(rendered, rendered.head_and_newest(turns)) + FLOOR
            outcome.sends.append(
                Send(
                    number=number,
                    turns=turns,
                    window=case.window,
                    estimate=exc.estimated_tokens,
                    truth=None,
                    max_tokens=None,
                    budget=exc.budget,
                    dropped_turns=0,
                    exact=bool(exc.exact),
                    refused=True,
                    floor_truth=floor,
                    unjustified=floor <= case.window,
                    newest=newest,
                )
            )
            break
        history.append(("fit", turns, last_usage))
        exact = truth.count(rendered, fit.messages)
        send = Send(
            number=number,
            turns=turns,
            window=case.window,
            estimate=fit.estimated_tokens,
            truth=exact,
            max_tokens=fit.max_tokens,
            budget=fit.budget,
            dropped_turns=fit.dropped_turns,
            exact=fit.exact,
            newest=newest,
        )
        last_usage = exact
        if send.overflow:
            # OpenAI states no numbers: a manager replayed to this very state refits.
            twin = _replay(case, mode, rendered, history)
            unstated, _ = _refit(twin, rendered, truth, turns, fit, None)
            stated, refit = _refit(manager, rendered, truth, turns, fit, exact)
            history.append(("overflow", turns, exact))
            send = replace(send, stated=stated, unstated=unstated)
            outcome.sends.append(send)
            if refit is None or stated.truth is None or stated.outcome != "fits":
                break  # the run ends: refused, or refused by the provider again
            last_usage = stated.truth
            continue
        outcome.sends.append(send)
    return outcome


def _replay(
    case: Case, mode: str, rendered: Rendered, history: Sequence[tuple[str, int, object]]
) -> wg.ContextWindowManager:
    """A fresh manager told the same things in the same order: the same state."""
    twin = make_manager(case, mode)
    for action, turns, value in history:
        if action == "fit":
            _fit(twin, rendered, turns, value)
        else:
            assert isinstance(value, int)
            twin.observe_overflow(value, case.window)
            with contextlib.suppress(wg.ContextTruncatedError):
                _fit(twin, rendered, turns, wg.NO_USAGE, safety=REACTIVE_SAFETY_TOKENS)
    return twin
