"""The numbers edits report: a clear's placeholder names what the caller's result counts
(not a clamp of it), a clear_inputs receipt counts the arguments it cleared before and
after (not how many calls, nor the calls it skipped), Fit.dropped_messages counts only
the caller's messages left out (a summary sent is none of them), and a summarizer is
given the turns as they were sent."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import windowguard as wg
from windowguard.core.edits import CLEARED_INPUT
from windowguard.core.edits.summary import SUMMARY_PREFIX

HEAD = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]


def _output(lines: int, seed: int) -> str:
    rng = random.Random(seed)
    return "\n".join(f"{i:05d} value_{rng.randrange(10**6)} = compute({i})" for i in range(lines))


def _turn(i: int, lines: int = 25) -> list[dict[str, Any]]:
    call = {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/m{i}.py"})},
    }
    return [
        {"role": "assistant", "content": f"Step {i}", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": _output(lines, i)},
    ]


def _manager(edits: Any, window: int = 8_192) -> wg.ContextWindowManager:
    return wg.ContextWindowManager(
        model_info=wg.ModelInfo(context_window=window, max_output_tokens=1_024),
        counter="heuristic",
        edits=edits,
    )


def _tokens(mgr: wg.ContextWindowManager, text: str) -> int:
    return mgr.estimator.text_tokens(text, "dense")


def test_the_placeholder_of_a_clamped_result_names_the_whole_result() -> None:
    mgr = _manager(
        [wg.ClampToolResults(max_tokens=400), wg.ClearToolResults(keep=1, clear_at_least=0)]
    )
    messages = list(HEAD) + _turn(0, lines=600)
    original = messages[3]["content"]
    fit = mgr.fit(messages)
    assert "tokens of this output cut here" in fit.messages[3]["content"]
    usage: object = None
    for i in range(1, 30):
        messages += _turn(i)
        usage = wg.NO_USAGE
        fit = mgr.fit(messages, last_usage=usage)
        if fit.messages[3]["content"].startswith("[cleared"):
            break
    sent = fit.messages[3]["content"]
    assert sent.startswith("[cleared to save context: read_file("), sent
    named = re.search(r"\), ([\d,]+) tokens\]$", sent)
    assert named is not None, sent
    assert int(named.group(1).replace(",", "")) == _tokens(mgr, original)
    # the receipt frees what was sent (the clamp), not what the caller's result counted
    clear = next(e for e in fit.edits if e.kind == "clear" and 3 in e.messages)
    assert clear.tokens_before < 500


def test_a_clear_inputs_receipt_counts_the_arguments_before_and_after() -> None:
    mgr = _manager([wg.ClearToolResults(keep=1, clear_inputs=True, clear_at_least=0)])
    patch = "*** Begin Patch\n" + "\n".join(f"+ line {n} of the patch" for n in range(40))
    call = {"id": "c0", "type": "custom", "custom": {"name": "apply_patch", "input": patch}}
    messages: list[Any] = [
        *HEAD,
        {"role": "assistant", "content": "patching", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c0", "content": _output(100, 99)},
    ]
    fit = mgr.fit(messages)
    usage: object = None
    for i in range(1, 30):
        messages += _turn(i, lines=60)
        fit = mgr.fit(messages, last_usage=usage)
        usage = wg.NO_USAGE
        cleared = [e for e in fit.edits if e.kind == "clear_inputs" and e.messages == (2,)]
        if cleared:
            break
    else:
        raise AssertionError("the patch's input was never cleared")
    receipt = cleared[0]
    sent = fit.messages[2]["tool_calls"][0]["custom"]["input"]
    assert sent == CLEARED_INPUT
    assert receipt.tool_names == ("apply_patch",)
    assert receipt.tokens_before == _tokens(mgr, patch)
    assert receipt.tokens_after == _tokens(mgr, CLEARED_INPUT)


def test_a_clear_inputs_receipt_leaves_out_the_calls_it_skipped() -> None:
    mgr = wg.ContextWindowManager(
        model_info=wg.ModelInfo(context_window=8_192, max_output_tokens=1_024),
        counter="heuristic",
        edits=[wg.ClearToolResults(keep=1, clear_inputs=True, clear_at_least=0)],
    )
    typed = ["a", "typed", "input", *(f"value {n}" for n in range(30))]  # a toolset call
    messages: list[Any] = [
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t0", "name": "read_file", "input": {"path": "a"}},
                {"type": "tool_use", "id": "t1", "name": "toolset", "input": typed},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t0", "content": _output(200, 1)},
                {"type": "tool_result", "tool_use_id": "t1", "content": _output(200, 2)},
            ],
        },
    ]
    usage: object = None
    receipt = None
    for i in range(30):
        messages += [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"u{i}", "name": "read_file", "input": {"n": i}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"u{i}", "content": _output(120, i)}
                ],
            },
        ]
        fit = mgr.fit(messages, format="anthropic", last_usage=usage)
        usage = wg.NO_USAGE
        found = [e for e in fit.edits if e.kind == "clear_inputs" and e.messages == (1,)]
        if found:
            receipt = found[0]
            break
    assert receipt is not None
    blocks = fit.messages[1]["content"]
    assert blocks[0]["input"] == {} and blocks[1]["input"] == typed  # the typed one skipped
    assert receipt.tool_names == ("read_file",)
    assert receipt.tokens_before == _tokens(mgr, json.dumps({"path": "a"}))
    assert receipt.tokens_after == _tokens(mgr, "{}")


def test_dropped_messages_counts_only_the_callers_messages_left_out() -> None:
    given: list[list[Any]] = []

    def summarize(turns: list[Any], previous: str | None) -> str:
        given.append(list(turns))
        return "short summary"

    mgr = _manager([wg.Summarize(summarize, keep_turns=2)], window=16_384)
    messages = list(HEAD)
    usage: object = None
    for i in range(30):
        messages += _turn(i)
        fit = mgr.fit(messages, last_usage=usage)
        usage = wg.NO_USAGE
        sent = {id(m) for m in fit.messages}
        left_out = sum(1 for m in messages if id(m) not in sent)
        assert fit.dropped_messages == left_out, i
    assert given and fit.messages[2]["content"].startswith(SUMMARY_PREFIX)
    assert fit.dropped_messages > 0


def test_the_summarizer_is_given_the_turns_as_they_were_sent() -> None:
    given: list[list[Any]] = []

    def summarize(turns: list[Any], previous: str | None) -> str:
        given.append(list(turns))
        return "short summary"

    mgr = _manager(
        [wg.ClampToolResults(max_tokens=300), wg.Summarize(summarize, keep_turns=1)],
        window=16_384,
    )
    messages = list(HEAD) + _turn(0, lines=400)
    usage: object = None
    fit = mgr.fit(messages)
    clamped = fit.messages[3]
    assert clamped is not messages[3] and "cut here" in clamped["content"]
    for i in range(1, 40):
        messages += _turn(i)
        fit = mgr.fit(messages, last_usage=usage)
        usage = wg.NO_USAGE
        if given:
            break
    assert given
    first = given[0]
    # the clamped copy that was sent, never the caller's 400-line output
    assert first[1] == clamped
    assert all(type(m) is dict for m in first)
    assert first[0] is messages[2] and first[2] is messages[4]
