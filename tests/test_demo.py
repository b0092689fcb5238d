"""The demo: sample-project tools, the deterministic agent, both runs, and `windowguard demo`."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest

from windowguard.cli import main
from windowguard.cli.demo import summary_rows
from windowguard.core.events import ContextEdited, ModelCall, ToolResultEvent
from windowguard.core.exceptions import ConfigurationError, ContextTruncatedError
from windowguard.core.failures import FailureKind
from windowguard.demo import DemoAgent, DemoOptions, project_files, project_tools, run_scenario
from windowguard.demo.chart import read_events, series_from_events
from windowguard.demo.runner import DemoRun
from windowguard.emulator import EmulatorRequest, ToolSpec

SMALL = {"context_window": 6144, "iterations": 10, "max_tokens": 512}


def _tool(name: str):  # type: ignore[no-untyped-def]
    return {t.name: t for t in project_tools()}[name]


def test_project_files_are_the_shipped_sample() -> None:
    files = project_files()
    assert "tinytodo/query.py" in files and "README.md" in files
    assert not any("__pycache__" in f or f.endswith(".pyc") for f in files)
    root = resources.files("windowguard.demo").joinpath("sample_project")
    assert (
        _tool("read_file")
        .fn(path="tinytodo/query.py")
        .splitlines()[1]
        .endswith(root.joinpath("tinytodo/query.py").read_text().splitlines()[0])
    )


def test_search_and_list_return_real_lines() -> None:
    hits = _tool("search").fn(pattern="def parse_due").splitlines()
    assert hits and all(h.startswith("tinytodo/query.py:") for h in hits)
    listing = _tool("list_files").fn(directory="tinytodo")
    assert "tinytodo/store.py" in listing and "README.md" not in listing


def test_tool_schemas_enumerate_only_existing_things() -> None:
    files = set(project_files())
    read = _tool("read_file").parameters["properties"]["path"]["enum"]
    assert set(read) == files


def _request(call_number: int, seed: int = 0) -> EmulatorRequest:
    tools = tuple(
        ToolSpec(name=t.name, description=t.description, parameters=t.parameters)
        for t in project_tools()
    )
    return EmulatorRequest(
        flavor="vllm",
        model="m",
        messages=({"role": "user", "content": "x"},),
        tools=tools,
        prompt_tokens=10,
        max_output_tokens=100,
        call_number=call_number,
        seed=seed,
        body={},
    )


def test_agent_is_a_function_of_seed_and_call_number() -> None:
    agent = DemoAgent(iterations=5)
    assert agent(_request(4, seed=1)) == agent(_request(4, seed=1))
    assert agent(_request(6)).tool_calls == ()
    assert "query.py" in agent(_request(6)).text
    replies = {repr(agent(_request(4, seed=s))) for s in range(8)}
    assert len(replies) > 1  # the seed matters after the scripted plan


def test_options_reject_unknown_flavour_and_tiny_window() -> None:
    with pytest.raises(ConfigurationError, match="flavour"):
        DemoOptions(flavor="gemini")
    with pytest.raises(ConfigurationError, match="too small"):
        DemoOptions(context_window=512)


@pytest.mark.parametrize("edits", [None, ()], ids=["default edits", "drop only"])
@pytest.mark.parametrize("flavor", ["vllm", "anthropic", "llamacpp", "openai"])
def test_guarded_completes_where_unguarded_overflows(
    flavor: str, edits: tuple[object, ...] | None
) -> None:
    options = DemoOptions(flavor=flavor, edits=edits, **SMALL)  # type: ignore[arg-type]
    guarded = run_scenario(options, managed=True)
    unguarded = run_scenario(options, managed=False)
    assert guarded.termination == "COMPLETED" and "query.py" in guarded.answer
    assert guarded.peak_pressure < 1.0
    assert guarded.model_calls == SMALL["iterations"] + 1
    # the window is exercised: the default clears old results before it would drop a
    # turn, drop only drops whole turns and edits nothing
    new_edits = [e for e in guarded.events if isinstance(e, ContextEdited) and e.new]
    if edits is None:
        assert guarded.edited_sends > 0 and guarded.cleared_results > 0
        assert guarded.cleared_results == sum(
            len(e.messages) for e in new_edits if e.edit == "clear"
        )
    else:
        assert guarded.prunes > 0 and guarded.edited_sends == 0
        assert not [e for e in new_edits if e.edit != "drop"]
        assert guarded.cleared_results == guarded.clamped_results == 0
    assert unguarded.termination == "PROVIDER_ERROR"
    assert unguarded.failure is not None
    assert unguarded.failure.kind is FailureKind.CONTEXT_OVERFLOW
    assert unguarded.failed_at_call == unguarded.model_calls + 1
    # the same model behaviour until the failure: identical pressures before any cut
    cuts = ("transcript_pruned", "context_edited")
    first_cut = next(i for i, e in enumerate(guarded.events) if e.kind in cuts)
    before = sum(1 for e in guarded.events[:first_cut] if e.kind == "context_pressure")
    assert before > 0 and guarded.pressures[:before] == unguarded.pressures[:before]
    for run in (guarded, unguarded):
        assert not any(isinstance(e, ToolResultEvent) and e.is_error for e in run.events)


def test_a_reply_budget_that_leaves_no_room_is_shrunk() -> None:
    # Above half the window, so the transcript is fitted to a capped reserve, and more
    # than the window leaves once the prompt is in: the shrink guard fits it.
    options = DemoOptions(context_window=8192, iterations=2, max_tokens=7900)
    run = run_scenario(options, managed=True)
    assert run.termination == "COMPLETED" and run.shrinks > 0
    for event in run.events:
        if isinstance(event, ModelCall):
            assert event.input_tokens is not None and event.max_tokens is not None
            assert event.input_tokens + event.max_tokens <= 8192


def test_demo_command_small(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    code = main(
        [
            "demo",
            "--window",
            "6144",
            "--iterations",
            "10",
            "--max-tokens",
            "512",
            "--out",
            str(out_dir),
            "--plain",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "summary" in out and "COMPLETED" in out and "context_overflow" in out
    assert "[guarded]" in out and "[unguarded]" in out
    guarded = read_events(out_dir / "events-guarded.jsonl")
    unguarded = read_events(out_dir / "events-unguarded.jsonl")
    assert {"context_edited", "run_finished"} <= {e["event"] for e in guarded}
    # the default edits clear old tool results: said as it happens and in the summary,
    # with the count the events give
    cleared = sum(
        len(e["messages"])
        for e in guarded
        if e["event"] == "context_edited" and e["edit"] == "clear" and e["new"]
    )
    said = [int(n) for n in re.findall(r"~ cleared (\d+) results? \(-", out)]
    assert cleared and sum(said) == cleared  # one line per send that cleared
    row = next(line for line in out.splitlines() if line.startswith("tool results cleared"))
    assert row.split()[-6:-3] == [str(cleared), "/", "0"]
    assert series_from_events(unguarded, "u").failures[-1][1] == "context_overflow"
    assert (out_dir / "pressure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for name in ("events-guarded.jsonl", "events-unguarded.jsonl", "pressure.png"):
        assert str(out_dir / name) in out
    # a second run replaces the files rather than appending to them
    assert (
        main(
            [
                "demo",
                "--window",
                "6144",
                "--iterations",
                "10",
                "--max-tokens",
                "512",
                "--out",
                str(out_dir),
                "--plain",
                "--no-chart",
            ]
        )
        == 0
    )
    assert len(read_events(out_dir / "events-guarded.jsonl")) == len(guarded)
    json.dumps(guarded)
    # --no-edits: the guarded run drops whole turns and edits nothing
    argv = ["demo", "--window", "6144", "--iterations", "10", "--max-tokens", "512"]
    capsys.readouterr()
    assert (
        main([*argv, "--no-edits", "--out", str(tmp_path / "drop"), "--plain", "--no-chart"]) == 0
    )
    out = capsys.readouterr().out
    assert "edits: none" in out and "pruned" in out and "~ cleared" not in out
    dropping = read_events(tmp_path / "drop" / "events-guarded.jsonl")
    assert "transcript_pruned" in {e["event"] for e in dropping}
    assert all(e["edit"] == "drop" for e in dropping if e["event"] == "context_edited")


def test_demo_bad_options_exit_nonzero(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as info:
        main(["demo", "--flavor", "gemini"])
    assert info.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    code = main(["demo", "--window", "100", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "too small" in err and len(err.strip().splitlines()) == 1
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code = main(["demo", "--out", str(blocker / "sub")])
    err = capsys.readouterr().err
    assert code == 2 and "output folder" in err and "Traceback" not in err


def _run_value(**fields: object) -> DemoRun:
    base: dict[str, object] = {
        "managed": True,
        "termination": "CONTEXT_TRUNCATED",
        "model_calls": 3,
        "tool_calls": 5,
        "pressures": (0.2, 0.4),
        "peak_pressure": 0.4,
        "window_use": 0.5,
        "edited_sends": 0,
        "cleared_results": 0,
        "clamped_results": 0,
        "prunes": 1,
        "new_cuts": 1,
        "dropped_turns": 1,
        "shrinks": 0,
        "input_tokens": 1950,
        "transcript_messages": 10,
        "failure": None,
        "failed_at_call": None,
        "answer": "",
        "window_source": "discovered",
        "events": (),
    }
    return DemoRun(**{**base, **fields})  # type: ignore[arg-type]


def test_summary_says_why_a_run_was_truncated() -> None:
    exact = ContextTruncatedError(
        estimated_tokens=2163,
        budget=524,
        context_window=2048,
        exact=True,
        source="ledger",
        floor=200,
    )
    estimated = ContextTruncatedError(estimated_tokens=1430, budget=524, context_window=2048)
    rows = summary_rows(_run_value(error=exact), _run_value(error=estimated))
    failure = {name: (a, b) for name, a, b in rows}["failure"]
    assert (
        failure[0]
        == "refused call 4 (nothing sent): head + newest turn + tools 2163 exact + 200 output > 2048"
    )
    assert (
        failure[1]
        == "refused call 4 (nothing sent): head + newest turn ~1430 > budget 524 (window 2048)"
    )


def test_demo_command_shows_why_the_guarded_run_was_truncated(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # 2048 tokens less a 1024-token reply cannot hold the task, the tools and two files
    # (whole: drop only; the default edits clamp them and complete, below)
    argv = ["demo", "--window", "2048", "--iterations", "4", "--no-chart", "--plain"]
    code = main([*argv, "--no-edits", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert "= CONTEXT_TRUNCATED after" in out
    refused = next(line for line in out.splitlines() if "refused:" in line)
    assert "context window 2048" in refused and "nothing was sent" in refused
    failure = next(line for line in out.splitlines() if line.startswith("failure"))
    assert "refused call" in failure and "> 2048" in failure
    code = main([*argv, "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0 and "= COMPLETED after" in out and "~ clamped" in out
    row = next(line for line in out.splitlines() if line.startswith("tool results cleared"))
    assert int(row.split()[-4]) > 0  # with windowguard: results clamped
