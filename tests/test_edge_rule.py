"""The edge rule (decision 0004, revision 2): whenever an exact count is at hand, no
send overflows and none that fits is refused, whatever the content.

Each test runs a loop the way a caller does (fit, send what was fitted, report the
prompt tokens the server counted, append, fit again) with the server's count taken
from the family's exact tokenizer through its chat template (``truth``), and checks
every send: ``truth(fit.messages) + fit.max_tokens <= window``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest

import windowguard as wg
from windowguard.accounting.templates import count_prompt

from .exact_tokenizers import TEMPLATE_OF, require

FAMILIES = ("o200k", "cl100k", "llama3", "qwen", "mistral")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file from the repository.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]
WORDS = [
    "apple",
    "banana",
    "cherry",
    "damson",
    "elder",
    "fig",
    "grape",
    "hazel",
    "ice",
    "juniper",
    "kiwi",
    "lemon",
    "mango",
    "nectar",
    "olive",
    "peach",
    "quince",
    "rowan",
    "sloe",
    "tamarind",
    "ugli",
    "vanilla",
    "walnut",
    "yam",
    "zest",
]


def comma_list(rng: random.Random, words: int) -> str:
    """The issue's case: ``"apple, banana, cherry, ..."``: every comma and every word is
    a pre-token of its own."""
    return ", ".join(rng.choice(WORDS) for _ in range(words))


def prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)) + "."


def punct_lines(rng: random.Random, lines: int) -> str:
    return "\n".join(rng.choice(";:,.!?") for _ in range(lines))


def welsh(rng: random.Random, words: int) -> str:
    syllables = ("llan", "gwy", "ddw", "rhy", "ffw", "chw", "wyll", "ae", "ŵyr", "ŷch")
    return " ".join(
        "".join(rng.choice(syllables) for _ in range(rng.randint(2, 5))) for _ in range(words)
    )


def json_strings(rng: random.Random, items: int) -> str:
    return json.dumps([rng.choice(WORDS) + str(i) for i in range(items)], indent=2)


CONTENT: dict[str, Callable[[random.Random, int], str]] = {
    "comma list": comma_list,
    "punctuation per line": punct_lines,
    "welsh": welsh,
    "json string array": json_strings,
}


def turn(i: int, result: str) -> list[dict[str, Any]]:
    call = {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": f"f{i}.txt"})},
    }
    return [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": result},
    ]


HEAD = [
    {"role": "system", "content": "You are a careful coding agent."},
    {"role": "user", "content": "Read the files one after the other and report."},
]


def sized(
    make: Callable[[random.Random, int], str], rng: random.Random, tokens: int, server: Server
) -> str:
    """A tool result of about ``tokens`` exact tokens (as the template shows it) from
    ``make``."""
    size = 64
    text = make(rng, size)
    while server.truth(turn(0, text), None) < tokens:
        size = size * 5 // 4
        text = make(rng, size)
    return text


class Server:
    """What a server of ``family`` counts, and the window it enforces."""

    def __init__(self, family: str, window: int) -> None:
        self.counter = require(family)
        self.template = TEMPLATE_OF[family]
        self.window = window
        self.sends = 0

    def truth(self, messages: list[Any], tools: list[Any] | None = TOOLS) -> int:
        return count_prompt(self.counter, messages, tools, template=self.template)

    def send(self, fit: wg.Fit, tools: list[Any] | None = TOOLS) -> int:
        """The prompt tokens of what was fitted; the test fails on an overflow."""
        self.sends += 1
        prompt = self.truth(list(fit.messages), tools)
        assert prompt + fit.max_tokens <= self.window, (
            f"send {self.sends} overflows: {prompt} + {fit.max_tokens} > {self.window} "
            f"(counted {fit.estimated_tokens}, upper {fit.upper_tokens}, exact {fit.exact})"
        )
        return prompt


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind", list(CONTENT))
def test_dense_content_after_measured_turns_never_overflows(family: str, kind: str) -> None:
    """The issue's case: 14 exactly measured turns of prose, then one result of dense
    content the heuristic under-counts, sent into a 32k window."""
    rng = random.Random(f"{family}-{kind}")
    server = Server(family, 32_768)
    # drop only: the count must catch the dense content (the default would clamp it first)
    mgr = wg.ContextWindowManager(model_info=wg.ModelInfo(32_768, tokenizer=family), edits=())
    messages = list(HEAD)
    usage: object = None
    for i in range(14):
        messages += turn(i, prose(rng, 700))
        fit = mgr.fit(messages, tools=TOOLS, max_tokens=1_024, last_usage=usage)
        usage = server.send(fit)
    assert not fit.dropped_turns
    # about 20k tokens of it: alone with the head it fits; after the 14 turns it cannot
    messages += turn(14, sized(CONTENT[kind], rng, 20_000, server))
    fit = mgr.fit(messages, tools=TOOLS, max_tokens=1_024, last_usage=usage)
    server.send(fit)
    assert fit.dropped_turns > 0
    assert fit.exact or fit.upper_tokens >= server.truth(list(fit.messages))


@pytest.mark.parametrize("family", FAMILIES)
def test_dense_content_with_the_default_edits_never_overflows(family: str) -> None:
    """The same loop with the default edit stages: the dense result is clamped, old
    results are cleared, and no send overflows."""
    rng = random.Random(f"default-{family}")
    server = Server(family, 32_768)
    mgr = wg.ContextWindowManager(model_info=wg.ModelInfo(32_768, tokenizer=family))
    messages = list(HEAD)
    usage: object = None
    for i in range(14):
        messages += turn(i, prose(rng, 700))
        fit = mgr.fit(messages, tools=TOOLS, max_tokens=1_024, last_usage=usage)
        usage = server.send(fit)
    for i, kind in enumerate(CONTENT, start=14):
        messages += turn(i, sized(CONTENT[kind], rng, 20_000, server))
        fit = mgr.fit(messages, tools=TOOLS, max_tokens=1_024, last_usage=usage)
        usage = server.send(fit)
        assert any(e.kind == "clamp" for e in fit.edits)  # a quarter of the budget at most


@pytest.mark.parametrize("family", FAMILIES)
def test_a_report_over_two_turns_never_leaves_the_newer_one_short(family: str) -> None:
    """One report measures two appended turns (the response in between carried no
    usage); the older is then pruned: what stays of the span is counted by its own
    exact count, never by a share that was never measured on its own."""
    rng = random.Random(family)
    window = 16_384
    server = Server(family, window)
    mgr = wg.ContextWindowManager(
        model_info=wg.ModelInfo(window, tokenizer=family), pruning="minimal", edits=()
    )
    messages = list(HEAD)
    usage: object = None
    for i in range(40):
        # two turns per report: a prose turn and a dense one the heuristic under-counts
        messages += turn(2 * i, prose(rng, 300))
        fit = mgr.fit(messages, tools=TOOLS, max_tokens=1_024, last_usage=usage)
        server.send(fit)
        usage = wg.NO_USAGE  # this response carried no usage
        messages += turn(2 * i + 1, comma_list(rng, 700))
        fit = mgr.fit(messages, tools=TOOLS, max_tokens=1_024, last_usage=usage)
        usage = server.send(fit)
    assert fit.dropped_turns > 0


@pytest.mark.parametrize("family", ["o200k", "qwen"])
def test_no_max_tokens_near_the_edge_never_overflows(family: str) -> None:
    """``max_tokens=None`` lets the manager pick the largest reply that fits: it is
    fitted against the upper count, so an under-estimated prompt cannot eat it."""
    rng = random.Random(family)
    window = 16_384
    server = Server(family, window)
    mgr = wg.ContextWindowManager(model_info=wg.ModelInfo(window, tokenizer=family))
    messages = list(HEAD)
    usage: object = None
    for i in range(30):
        content = CONTENT[list(CONTENT)[i % len(CONTENT)]](rng, 300 + 40 * i)
        messages += turn(i, content)
        try:
            fit = mgr.fit(messages, tools=TOOLS, max_tokens=None, last_usage=usage)
        except wg.ContextTruncatedError:
            assert_justified(server, messages)
            break
        usage = server.send(fit)
        assert fit.max_tokens >= 200


def assert_justified(server: Server, messages: list[Any], floor: int = 200) -> None:
    """A refusal is justified when head + newest turn + tools, counted exactly, leave
    less than the smallest reply."""
    newest = max(i for i, m in enumerate(messages) if m.get("role") == "assistant")
    needed = server.truth(HEAD + messages[newest:])
    assert needed + floor > server.window, f"refused although {needed} + {floor} fit"


class CountingCounter:
    """A caller's own exact tokenizer, which says how often it was asked."""

    name = "my-tokenizer"

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0

    def count(self, text: str) -> int:
        self.calls += 1
        return int(self.inner.count(text))


def test_a_callers_counter_is_authoritative_and_named() -> None:
    counter = CountingCounter(require("o200k"))
    server = Server("o200k", 8_192)
    mgr = wg.ContextWindowManager(model="gpt-4o", counter=counter)
    mgr.model_info = wg.ModelInfo(8_192, tokenizer="o200k")
    rng = random.Random(3)
    messages = list(HEAD)
    usage: object = None
    for i in range(12):
        messages += turn(i, comma_list(rng, 300))
        fit = mgr.fit(messages, tools=TOOLS, max_tokens=512, last_usage=usage)
        usage = server.send(fit)
        assert "counter:my-tokenizer" in fit.sources or fit.exact
        assert not any(s.startswith("local:") for s in fit.sources)
    assert counter.calls >= 12  # every new message, not only near the edge


def test_tokens_the_request_does_not_show_are_hidden_not_calibrated() -> None:
    """Responses reasoning passed by id: the server counts reasoning tokens the request
    does not show. They are kept apart, and minimal requests are never refused."""
    window = 16_000
    mgr = wg.ContextWindowManager(
        model_info=wg.ModelInfo(window, tokenizer="o200k"), counter="heuristic"
    )
    items: list[Any] = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Work through the steps."},
    ]
    usage: object = None
    hidden_total = 0
    hidden_seen = 0
    for i in range(12):
        items += [
            {"type": "reasoning", "id": f"rs_{i}", "summary": []},
            {"type": "function_call", "call_id": f"c{i}", "name": "step", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{i}", "output": f"step {i} done"},
        ]
        fit = mgr.fit(items, max_tokens=500, last_usage=usage)
        hidden_seen += sum(e.hidden_tokens for e in fit.events if isinstance(e, wg.UsageMeasured))
        # the server counts ~1,500 reasoning tokens per kept reasoning item
        kept_reasoning = sum(1 for m in fit.messages if m.get("type") == "reasoning")
        hidden_total = 1_500 * kept_reasoning
        usage = 60 * len(fit.messages) + hidden_total
    assert hidden_seen > 0
    assert mgr.calibration.factor < 1.6
