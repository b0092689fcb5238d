"""The typing suite (``tests/typing/``) passes ``mypy --strict``, as CI checks it.

Each file there is user code that must type-check: the README's Quickstart with
``Fit[ChatCompletionMessageParam]``, ``wg.guard`` returning the client's own type, the
LiteLLM wrappers with LiteLLM's signature, the integrations' constructors. Lines that must
*fail* carry ``# type: ignore[code]``; ``--strict`` includes ``warn_unused_ignores``, so a
check that stops failing fails the suite. mypy runs in a subprocess with the project's
configuration and cache (``.ci/run`` runs the same command after its own ``mypy``).
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

from windowguard.emulator import EmulatorRequest

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "tests" / "typing"


def _mypy(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", *map(str, paths)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_typing_suite_passes_mypy_strict() -> None:
    files = sorted(SUITE.glob("*.py"))
    assert {f.name for f in files} >= {
        "quickstart.py",
        "guard_clients.py",
        "litellm_wrapper.py",
        "integrations.py",
    }
    done = _mypy(SUITE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Success: no issues found in {len(files)} source files" in done.stdout


def test_the_typed_quickstart_also_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    # Type-checked code that does not run would prove little: run it against the emulator
    # (its client pointed there instead of port 8000), reading a file as the README does.
    from openai import OpenAI

    from windowguard.emulator import Emulator, Reply, ToolCall

    def policy(request: EmulatorRequest) -> Reply:
        if request.call_number == 1:
            return Reply(
                tool_calls=(ToolCall(name="read_file", arguments={"path": "pyproject.toml"}),)
            )
        assert "windowguard" in str(request.messages[-1]["content"])
        return Reply(text="It is windowguard.")

    spec = importlib.util.spec_from_file_location("typed_quickstart", SUITE / "quickstart.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.chdir(ROOT)
    with Emulator(flavor="openai", context_window=8192, scenario=policy) as emu:
        module.client = OpenAI(base_url=emu.base_url, api_key="unused", max_retries=0)
        assert module.main() == "It is windowguard."
        assert [record.status for record in emu.records] == [200, 200]


def test_a_lost_expected_error_fails_the_suite(tmp_path: Path) -> None:
    # A line the suite expects to fail, once it no longer fails, is an unused ignore.
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import windowguard as wg\n"
        "from openai import OpenAI\n"
        "client = wg.guard(OpenAI(api_key='x'))\n"
        "client.chat.completions.create  # type: ignore[attr-defined]\n"
        "client.chat.completions.creat  # type: ignore[attr-defined]\n"
    )
    done = _mypy(probe)
    assert done.returncode == 1
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1
    assert re.search(r"probe\.py:4: error: Unused \"type: ignore\" comment", errors[0])


def _overloads(module: Path, protocol: str) -> list[set[str]]:
    """The parameter names of each ``__call__`` overload of ``protocol`` (an overload
    leaves no trace at run time, so they are read from the source)."""
    tree = ast.parse(module.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == protocol)
    calls = [
        n
        for n in cls.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "__call__"
    ]
    return [{a.arg for a in (*c.args.posonlyargs, *c.args.args, *c.args.kwonlyargs)} for c in calls]


def test_the_litellm_signature_names_only_litellm_parameters() -> None:
    litellm = pytest.importorskip("litellm")
    from windowguard.integrations import _litellm_types as typed

    assert typed.__file__ is not None
    ours_only = {"self", "model_info", "edits"}
    for protocol, original in (
        ("Completion", litellm.completion),
        ("ACompletion", litellm.acompletion),
    ):
        theirs = inspect.signature(original)
        overloads = _overloads(Path(typed.__file__), protocol)
        assert len(overloads) == 3
        for names in overloads:
            assert {"model", "messages", "stream"} <= names
            assert names - ours_only <= set(theirs.parameters), names - set(theirs.parameters)
        returned = str(theirs.return_annotation)
        assert "ModelResponse" in returned
        assert "CustomStreamWrapper" in returned
