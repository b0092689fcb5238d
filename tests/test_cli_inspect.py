"""``windowguard inspect``: one total per transcript, a reply budget that respects the
model's output cap and the window, and a tiny window said in numbers, never a negative
budget. Run through the real command on real files."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import windowguard as wg
from windowguard.cli import main

EXAMPLE = "example:coding-agent"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _report(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = _run(capsys, "inspect", *argv, "--json")
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "argv",
    [("--model", "gpt-4o", "--no-edits"), ("--no-edits",), ("--window", "16000"), ()],
    ids=["gpt-4o", "its own model", "16k with edits", "default"],
)
def test_one_transcript_has_one_total(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    report = _report(capsys, EXAMPLE, *argv)
    fit, rows = report["fit"], report["rows"]
    # the fitted request is counted as the rows are: fixed part plus what is sent of each
    sent = report["fixed_tokens"] + sum(row["sent_tokens"] for row in rows)
    assert fit["estimated_tokens"] == sent
    assert fit["pressure"] == sent / report["context_window"]
    if not fit["edits"]:  # nothing edited or dropped: the same request, the same total
        assert fit["estimated_tokens"] == report["estimated_tokens"]
    code, out, _ = _run(capsys, "inspect", EXAMPLE, "--plain", *argv)
    assert code == 0
    (total_line,) = [line for line in out.splitlines() if " of the window [" in line]
    (fit_line,) = [line for line in out.splitlines() if line.startswith("fit: ")]
    assert total_line.startswith(f"{report['estimated_tokens']} tokens = ")
    assert f"sends {sent} tokens," in fit_line and "~" not in fit_line


def test_max_tokens_respects_the_output_cap_and_the_window(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the sample's own model: a 1M window and no known output cap
    report = _report(capsys, EXAMPLE)
    window, fit = report["context_window"], report["fit"]
    assert window == 1_048_576 and fit["max_tokens"] == window // 8  # not ~1,0xx,xxx
    assert fit["max_tokens_source"] == "window/8: no --max-tokens, no known output cap"
    cap = wg.lookup_model("gpt-4o").max_output_tokens  # type: ignore[union-attr]
    report = _report(capsys, EXAMPLE, "--model", "gpt-4o")
    assert report["fit"]["max_tokens"] == cap
    assert report["fit"]["max_tokens_source"] == "the model's output cap"
    report = _report(capsys, EXAMPLE, "--model", "gpt-4o", "--max-tokens", "50000")
    assert report["fit"]["max_tokens"] == cap
    assert report["fit"]["max_tokens_source"] == (
        "the model's output cap; --max-tokens asked 50000"
    )
    # a small window: what the window leaves, and it says so
    report = _report(capsys, EXAMPLE, "--window", "20000", "--max-tokens", "30000")
    fit = report["fit"]
    assert fit["max_tokens"] < 30000
    assert fit["max_tokens"] + fit["manager_estimated_tokens"] <= 20000
    assert fit["max_tokens_source"] == "--max-tokens, shrunk to the room the window leaves"


def test_a_tiny_window_is_an_error_in_numbers_and_its_advice_works(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _run(capsys, "inspect", EXAMPLE, "--window", "200", "--plain")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "no input budget: a window of 200 tokens" in err
    assert not re.search(r"-\d", err)  # no negative budget
    assert "turn 32 (newest)" in out  # the per-turn report is still printed
    (advice,) = re.findall(r"pass --context-window (\d+) or more", err)
    code, out, err = _run(capsys, "inspect", EXAMPLE, "--window", "200", "--json")
    assert code == 2
    report = json.loads(out)
    assert report["fit"]["budget"] == 0 and "no input budget" in report["fit"]["error"]
    code, out, err = _run(capsys, "inspect", EXAMPLE, "--window", advice, "--json")
    assert code == 0, err
    assert json.loads(out)["fit"]["budget"] > 0


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    window=st.integers(1, 300_000),
    max_tokens=st.one_of(st.none(), st.integers(1, 400_000)),
    safety=st.integers(0, 2000),
    cap_share=st.one_of(st.none(), st.floats(0.0, 1.0)),  # a cap is never over the window
)
def test_no_window_gives_a_negative_budget_or_a_reply_past_the_window_or_cap(
    capsys: pytest.CaptureFixture[str],
    tmp_path_factory: pytest.TempPathFactory,
    window: int,
    max_tokens: int | None,
    safety: int,
    cap_share: float | None,
) -> None:
    cap = None if cap_share is None else max(1, int(window * cap_share))
    path = tmp_path_factory.mktemp("t") / "t.json"
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Count the lines. " * 40},
        {"role": "assistant", "content": "There are " + "many " * 30 + "lines."},
    ]
    path.write_text(json.dumps(messages))
    argv = ["inspect", str(path), "--window", str(window), "--safety", str(safety), "--json"]
    argv += [] if max_tokens is None else ["--max-tokens", str(max_tokens)]
    argv += [] if cap is None else ["--max-output-tokens", str(cap)]
    code, out, err = _run(capsys, *argv)
    fit = json.loads(out)["fit"]
    assert fit["budget"] >= 0
    if code == 2:
        assert "no input budget" in err and not re.search(r"-\d", err)
        return
    assert code == 0, err
    if "error" in fit:  # CONTEXT_TRUNCATED: said, with no negative number
        assert fit["error"].startswith("CONTEXT_TRUNCATED") and not re.search(r"-\d", fit["error"])
        return
    assert 0 < fit["max_tokens"] <= window
    assert cap is None or fit["max_tokens"] <= cap
    assert max_tokens is None or fit["max_tokens"] <= max_tokens
    if cap is None and max_tokens is None:
        assert fit["max_tokens"] <= max(window // 8, 1)


def test_window_is_the_proxys_name_for_context_window(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    short = _report(capsys, EXAMPLE, "--window", "32768")
    long = _report(capsys, EXAMPLE, "--context-window", "32768")
    assert short["context_window"] == long["context_window"] == 32768
    assert short["window_source"] == "explicit"


def test_fit_with_a_tiny_window_says_so_without_a_negative_budget(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_file = tmp_path / "fitted.json"
    code, _, err = _run(capsys, "fit", EXAMPLE, "--window", "200", "-o", str(out_file))
    assert code == 2 and len(err.strip().splitlines()) == 1 and not out_file.exists()
    assert "CONTEXT_TRUNCATED" in err and "context window 200 leaves no input budget" in err
    assert not re.search(r"-\d", err)
