"""The windowguard command: fit, and one-line errors for bad input."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import pytest

from windowguard.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_fit_bundled_example_prunes_and_writes_same_shape(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
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
        "-o",
        str(out_file),
    )
    assert code == 0
    fitted = json.loads(out_file.read_text())
    assert set(fitted) >= {"messages", "tools"}
    assert 2 < len(fitted["messages"]) < 66
    assert fitted["messages"][1]["role"] == "user"  # the task is kept
    assert "dropped" in err and "window 32768" in err


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
