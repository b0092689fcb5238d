"""The edge benchmarks' harness still works: cases build, sends run, truth is right.

Not a benchmark and no timing: ``bench/bench_edge.py`` measures. This runs its parts
(``bench/_edge.py``, ``bench/_content.py``) on 20 small random runs in both accounting
modes and checks that the harness's truth (the family's template and exact tokenizer over
the request as a chat server renders it) is what the emulator's own count routes answer
for the same request in its wire format, over HTTP.
"""

from __future__ import annotations

import json
import os
import random
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"

if not CORPUS.is_dir():
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"the corpus the bench harness reads is missing: {CORPUS}")
    pytest.skip(f"the bench harness reads {CORPUS}, which is missing", allow_module_level=True)

sys.path.insert(0, str(BENCH))

import _content  # noqa: E402
import _edge  # noqa: E402
from windowguard.accounting.local import TEMPLATE_OF, local_tokenizer  # noqa: E402
from windowguard.emulator import Emulator  # noqa: E402

SMALL_WINDOW = 24_000


def _small_cases(count: int) -> list[_edge.Case]:
    """The first ``count`` sweep cases (seed 0) whose window is small (fast to count)."""
    cases = []
    index = 0
    while len(cases) < count:
        case = _edge.make_case(0, index)
        if case.window <= SMALL_WINDOW:
            cases.append(case)
        index += 1
    return cases


def _require(family: str) -> None:
    if local_tokenizer(family) is None:
        if os.environ.get("CI") == "true":
            raise AssertionError(f"the exact {family} tokenizer must be installed under CI")
        pytest.skip(f"no exact {family} tokenizer installed")


@pytest.fixture(scope="module")
def cases() -> list[_edge.Case]:
    return _small_cases(20)


def test_cases_are_reproducible_and_cover_the_sweep(cases: list[_edge.Case]) -> None:
    again = _small_cases(20)
    assert [c.index for c in again] == [c.index for c in cases]
    assert [json.dumps(c.turns[-1].messages) for c in again] == [
        json.dumps(c.turns[-1].messages) for c in cases
    ]
    assert {c.fmt for c in cases} == set(_edge.FORMATS)
    assert len({c.family for c in cases}) >= 4
    assert any(c.max_tokens is None for c in cases)
    classes = {name for c in cases for t in c.turns for name in t.classes}
    assert "real" in classes and len(classes) > 5  # dense classes arrive as well


def test_runs_send_in_both_modes_and_every_send_is_judged(cases: list[_edge.Case]) -> None:
    truths: dict[str, _edge.Truth] = {}
    pruned = 0
    for case in cases:
        _require(case.family)
        rendered = _edge.render(case)
        truth = truths.setdefault(case.family, _edge.Truth(case.family))
        for mode in _edge.MODES:
            outcome = _edge.simulate(rendered, mode, truth)
            assert outcome.sends, case.index
            for send in outcome.sends:
                if send.refused:
                    assert send.floor_truth is not None and send.floor_truth > _edge.FLOOR
                    assert send.unjustified == (send.floor_truth <= case.window)
                    continue
                assert send.truth is not None and send.truth > 0 and send.estimate > 0
                assert send.max_tokens is not None and send.max_tokens >= 1
                assert send.overflow == (send.truth + send.max_tokens > case.window)
                if send.overflow:  # every overflow got its two refits
                    assert send.stated is not None and send.unstated is not None
                pruned += send.dropped_turns > 0
    assert pruned > 0  # the harness reaches the edge


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "x-api-key": "k", "authorization": "k"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        result: dict[str, Any] = json.loads(answer.read())
    return result


def _emulator_count(rendered: _edge.Rendered, messages: list[Any]) -> int:
    """The emulator's own count route for the request in its wire format."""
    case = rendered.case
    flavor = {"chat": "vllm", "anthropic": "anthropic", "responses": "openai"}[case.fmt]
    with Emulator(
        flavor=flavor,
        tokenizer=local_tokenizer(case.family),
        template=TEMPLATE_OF[case.family],
        context_window=case.window,
    ) as emu:
        if case.fmt == "chat":
            body: dict[str, Any] = {"model": "m", "messages": messages}
            if rendered.tools:
                body["tools"] = rendered.tools
            return int(_post(f"{emu.root_url}/tokenize", body)["count"])
        if case.fmt == "anthropic":
            body = {"model": "m", "messages": messages}
            if rendered.system:
                body["system"] = rendered.system
            if rendered.tools:
                body["tools"] = rendered.tools
            return int(_post(f"{emu.base_url}/messages/count_tokens", body)["input_tokens"])
        body = {"model": "m", "input": messages, "tools": rendered.tools}
        return int(_post(f"{emu.base_url}/responses/input_tokens", body)["input_tokens"])


def test_truth_is_what_the_emulators_count_routes_answer(cases: list[_edge.Case]) -> None:
    checked: set[str] = set()
    for case in cases:
        if case.fmt in checked:
            continue  # one run per format: its first and its last send
        _require(case.family)
        rendered = _edge.render(case)
        truth = _edge.Truth(case.family)
        for turns in (case.sends[0], case.sends[-1]):
            messages = rendered.prefix(turns)
            assert truth.count(rendered, messages) == _emulator_count(rendered, messages)
        checked.add(case.fmt)
    assert checked == set(_edge.FORMATS)


def test_the_issue_case_is_its_shape() -> None:
    _require("o200k")
    case = _edge.issue_case("o200k", "chat")
    rendered = _edge.render(case)
    truth = _edge.Truth("o200k")
    whole = truth.count(rendered, rendered.prefix(15))
    measured = truth.count(rendered, rendered.prefix(14))
    assert whole > case.window > measured  # the list pushes a fitting run past the window
    assert truth.count(rendered, rendered.head_and_newest(15)) + 1_024 < case.window


@pytest.mark.parametrize("name", sorted(_content.CLASSES))
def test_content_classes_are_deterministic_and_sized(name: str) -> None:
    first = _content.generate(name, random.Random(3), 2_000)
    assert first == _content.generate(name, random.Random(3), 2_000)
    assert 1_500 <= len(first) <= 3_000
