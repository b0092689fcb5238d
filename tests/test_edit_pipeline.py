"""The edit pipeline in the manager: clamp, clear, then drop whole turns (issue 19).

A loop is simulated the way a caller runs one — fit, send what was fitted, report the
prompt tokens the server counted (the family's exact tokenizer through its template),
append, fit again — and every send is checked: it fits the window, keeps the head and
the newest turn, never separates a call from its result, sends the caller's own objects
where nothing was edited and new objects of the same type where something was, leaves
the caller's transcript untouched, and sends an edit made once byte for byte again.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import windowguard as wg
from windowguard.accounting.templates import count_prompt
from windowguard.core.adapters import shaper
from windowguard.core.turns import segment

from .exact_tokenizers import require

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} in the repository.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
    for name in ("read_file", "run_tests", "grep")
]
HEAD = [
    {"role": "system", "content": "You are a careful coding agent."},
    {"role": "user", "content": "Find the failing test and fix it."},
]


def output(rng: random.Random, lines: int) -> str:
    return "\n".join(
        f"{n:05d}  value_{rng.randrange(10**6)} = compute({n}, {n * 7})" for n in range(lines)
    )


def turn(i: int, tool: str, text: str) -> list[dict[str, Any]]:
    call = {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": tool, "arguments": json.dumps({"path": f"src/m{i}.py"})},
    }
    return [
        {"role": "assistant", "content": f"Step {i}: I run {tool}.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": text},
    ]


class Loop:
    """A caller's loop against a server that counts exactly, checking every send."""

    def __init__(self, mgr: wg.ContextWindowManager, window: int, max_tokens: int | None):
        self.counter = require("o200k")
        self.mgr = mgr
        self.window = window
        self.max_tokens = max_tokens
        self.messages: list[Any] = copy.deepcopy(HEAD)
        self.usage: object = None
        self.previous: list[Any] = []
        self.extends = 0
        self.full = False
        self.after_full = 0
        self.sends = 0
        self.truncated = 0

    def truth(self, messages: list[Any]) -> int:
        return count_prompt(self.counter, messages, TOOLS, template="openai")

    def step(self, new: list[Any]) -> wg.Fit | None:
        self.messages += new
        before = copy.deepcopy(self.messages)
        try:
            fit = self.mgr.fit(
                self.messages, tools=TOOLS, max_tokens=self.max_tokens, last_usage=self.usage
            )
        except wg.ContextTruncatedError:
            # justified only when head + newest turn (as the edits leave them) cannot fit
            self.truncated += 1
            self.usage = wg.NO_USAGE
            assert self.messages == before
            return None
        assert self.messages == before, "the caller's transcript was changed"
        sent = list(fit.messages)
        prompt = self.truth(sent)
        assert prompt + fit.max_tokens <= self.window, (prompt, fit.max_tokens, self.window)
        # the head and the newest turn are sent, in order
        assert sent[: len(HEAD)] == self.messages[: len(HEAD)]
        assert sent[: len(HEAD)][0] is self.messages[0]
        newest_call = max(i for i, m in enumerate(self.messages) if m["role"] == "assistant")
        assert sent[-1]["role"] == self.messages[-1]["role"]
        assert sent[-(len(self.messages) - newest_call)]["role"] == "assistant"
        # no call without its result, no result without its call
        shape = shaper("openai_chat")
        assert not segment([shape(m) for m in sent]).problems
        # unedited messages are the caller's own objects; edited ones new dicts with only
        # a result's content, or a call's arguments (clear_inputs), replaced
        mine = {id(m) for m in self.messages}
        calls = {m["tool_calls"][0]["id"]: m for m in self.messages if m.get("tool_calls")}
        results = {m["tool_call_id"]: m for m in self.messages if m["role"] == "tool"}
        for message in sent:
            if id(message) in mine:
                continue
            assert isinstance(message, dict)
            if message["role"] == "tool":
                original = results[message["tool_call_id"]]
                assert message == {**original, "content": message["content"]}
            else:
                original = calls[message["tool_calls"][0]["id"]]
                emptied = [
                    {**c, "function": {**c["function"], "arguments": "{}"}}
                    for c in original["tool_calls"]
                ]
                assert message == {**original, "tool_calls": emptied}
        # an edit made once is sent again byte for byte while its message is kept
        kept_before = {m["tool_call_id"]: m for m in self.previous if m.get("role") == "tool"}
        for message in sent:
            old = kept_before.get(message.get("tool_call_id"))
            if old is not None and message["role"] == "tool":
                assert (
                    old["content"] == message["content"]
                    or old is message
                    or (message["content"].startswith("[cleared to save context"))
                )
        if fit.edits or fit.dropped_turns:
            self.full = True  # the window is full: from now on, count what extends
        elif self.full:
            self.after_full += 1
        if self.full and self.previous and sent[: len(self.previous)] == self.previous:
            self.extends += 1
        if self.full and fit.edits:
            self.after_full += 1
        self.previous = sent
        self.sends += 1
        self.usage = prompt
        return fit


@settings(max_examples=25)
@given(
    st.integers(0, 2**32),
    st.sampled_from([8_192, 16_384, 32_768]),
    st.sampled_from([None, 512, 2_048]),
    st.sampled_from(["clamp", "clear", "both"]),
    st.integers(1, 4),
)
def test_every_send_fits_keeps_head_newest_and_pairs(
    seed: int, window: int, max_tokens: int | None, which: str, keep: int
) -> None:
    rng = random.Random(seed)
    edits: list[Any] = []
    if which in ("clamp", "both"):
        edits.append(wg.ClampToolResults(max_tokens=window // 4))
    if which in ("clear", "both"):
        edits.append(wg.ClearToolResults(keep=keep, clear_at_least=rng.choice([0, 500, 2_000])))
    mgr = wg.ContextWindowManager(model_info=wg.ModelInfo(window, tokenizer="o200k"), edits=edits)
    loop = Loop(mgr, window, max_tokens)
    for i in range(30):
        lines = rng.choice([5, 40, 150, 400]) if rng.random() > 0.08 else 6_000
        loop.step(turn(i, rng.choice(["read_file", "run_tests", "grep"]), output(rng, lines)))
    assert loop.sends >= 20


def test_an_output_larger_than_the_window_is_clamped_and_the_run_goes_on() -> None:
    rng = random.Random(5)
    window = 32_768
    mgr = wg.ContextWindowManager(
        model_info=wg.ModelInfo(window, tokenizer="o200k"),
        edits=[wg.ClampToolResults(max_tokens=8_000)],
    )
    loop = Loop(mgr, window, 1_024)
    loop.step(turn(0, "read_file", output(rng, 50)))
    huge = output(rng, 25_000)  # ~300k tokens
    assert loop.truth(HEAD + turn(1, "run_tests", huge)) > 250_000
    fit = loop.step(turn(1, "run_tests", huge))
    assert fit is not None
    (clamp,) = [e for e in fit.edits if e.kind == "clamp"]
    assert clamp.tool_names == ("run_tests",) and clamp.tokens_before > 250_000
    assert clamp.tokens_after <= 8_000
    edited = fit.messages[-1]
    assert edited is not loop.messages[-1] and edited["tool_call_id"] == "call_1"
    assert edited["content"].startswith("00000") and "cut here" in edited["content"]
    # the run goes on, and the clamped output is sent again, byte for byte
    for i in range(2, 8):
        again = loop.step(turn(i, "read_file", output(rng, 100)))
        assert again is not None
        assert any(m is edited for m in again.messages) or again.dropped_turns
    assert loop.truncated == 0
    # without a clamp stage (drop only) the same output ends the run
    plain = Loop(
        wg.ContextWindowManager(model_info=wg.ModelInfo(window, tokenizer="o200k"), edits=()),
        window,
        1_024,
    )
    plain.step(turn(0, "read_file", output(rng, 50)))
    assert plain.step(turn(1, "run_tests", huge)) is None and plain.truncated == 1
    # the default edits clamp it too (to a quarter of the input budget)
    default = Loop(
        wg.ContextWindowManager(model_info=wg.ModelInfo(window, tokenizer="o200k")), window, 1_024
    )
    default.step(turn(0, "read_file", output(rng, 50)))
    fit = default.step(turn(1, "run_tests", huge))
    assert fit is not None and default.truncated == 0
    (clamp,) = [e for e in fit.edits if e.kind == "clamp"]
    assert clamp.messages == (5,) and clamp.tokens_after <= fit.budget // 4


def test_clearing_keeps_the_reasoning_drops_nothing_and_extends_the_prefix() -> None:
    rng = random.Random(11)
    window = 32_768
    clearing = wg.ContextWindowManager(
        model_info=wg.ModelInfo(window, tokenizer="o200k"),
        edits=[wg.ClearToolResults(keep=3, clear_at_least=1_000)],
    )
    dropping = wg.ContextWindowManager(model_info=wg.ModelInfo(window, tokenizer="o200k"), edits=())
    loops = [Loop(clearing, window, 1_024), Loop(dropping, window, 1_024)]
    for i in range(120):
        new = turn(i, rng.choice(["read_file", "grep"]), output(rng, rng.choice([30, 90, 200])))
        for loop in loops:
            loop.step(copy.deepcopy(new))
    cleared, dropped = loops
    last = cleared.previous
    # every assistant message (the agent's reasoning and calls) of the clearing run that
    # is still sent; more of them than the dropping run keeps
    reasoning = sum(1 for m in last if m["role"] == "assistant")
    assert reasoning > sum(1 for m in dropped.previous if m["role"] == "assistant")
    placeholders = [
        m
        for m in last
        if m["role"] == "tool" and m["content"].startswith("[cleared to save context")
    ]
    assert (placeholders and "read_file" in placeholders[0]["content"]) or "grep" in placeholders[
        0
    ]["content"]
    # the newest 3 turns' results are whole
    assert all(not m["content"].startswith("[tool") for m in last[-6:] if m["role"] == "tool")
    # cleared in blocks: most sends extend the previous request byte for byte
    assert cleared.after_full > 60
    assert cleared.extends / cleared.after_full >= 0.8


def test_no_edits_is_exactly_drop_only() -> None:
    rng = random.Random(2)
    window = 8_192

    def manager(edits: Any) -> wg.ContextWindowManager:
        return wg.ContextWindowManager(
            model_info=wg.ModelInfo(window, tokenizer="o200k"), edits=edits
        )

    empty, listed, default = (Loop(manager(e), window, 512) for e in ((), [], None))
    cleared = dropped = 0
    for i in range(40):
        new = turn(i, "read_file", output(rng, rng.choice([20, 80, 160])))
        fa, fb = empty.step(copy.deepcopy(new)), listed.step(copy.deepcopy(new))
        assert fa is not None and fb is not None
        assert fa.messages == fb.messages and fa.max_tokens == fb.max_tokens
        assert [e.kind for e in fa.edits] == [e.kind for e in fb.edits]
        assert all(e.kind == "drop" for e in fa.edits)
        # drop only: the head and a run of whole newest turns, every one the caller's own
        sent, mine = fa.messages, empty.messages
        kept = len(sent) - len(HEAD)
        assert all(a is b for a, b in zip(sent, mine[: len(HEAD)]))
        assert all(a is b for a, b in zip(sent[len(HEAD) :], mine[len(mine) - kept :]))
        assert fa.dropped_messages == len(mine) - len(sent)
        dropped += fa.dropped_turns > 0
        fc = default.step(copy.deepcopy(new))
        assert fc is not None
        cleared += any(e.kind == "clear" for e in fc.edits)
    assert empty.sends == 40 and dropped  # the window was full: turns were dropped
    assert cleared  # the same run under the default edits clears (None is not drop only)


@pytest.mark.parametrize("bad", [["clear"], [wg.ClearToolResults(), wg.ClearToolResults()], "x"])
def test_bad_edits_are_named(bad: Any) -> None:
    with pytest.raises(wg.ConfigurationError, match="edit"):
        wg.ContextWindowManager(model="gpt-4o", edits=bad)
