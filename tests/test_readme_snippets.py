"""The README's "Already have a loop?" snippets run as written against `windowguard emulate`.

Each snippet is extracted from README.md, pointed at an emulator started with the real
command line (``windowguard emulate --flavor openai``, its default 8,192-token window;
only the port differs from the README's 8000) and run in a fresh interpreter. Each one
re-sends a transcript about twice the window: it exits 0 only when no request overflowed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
SECTION = "## Already have a loop?"
README_URL = "http://127.0.0.1:8000/v1"


def _snippets() -> list[tuple[str, str]]:
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start : end if end >= 0 else len(text)]
    found: list[tuple[str, str]] = []
    for match in re.finditer(r"\*\*([^*]+)\*\*.*?```python\n(.*?)```", section, re.S):
        found.append((match.group(1).strip(" ."), match.group(2)))
    return found


SNIPPETS = _snippets()


def test_the_section_has_a_snippet_for_the_guard_and_every_integration() -> None:
    names = " ".join(name for name, _ in SNIPPETS)
    for expected in ("wg.guard", "LangChain", "OpenAI Agents SDK", "pydantic-ai", "LiteLLM"):
        assert expected in names, f"no README snippet for {expected}"
    for name, code in SNIPPETS:
        assert README_URL in code, f"the {name} snippet does not talk to `windowguard emulate`"


@pytest.fixture(scope="module")
def emulator_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    windowguard = Path(sys.executable).with_name("windowguard")  # the installed command
    log = tmp_path_factory.mktemp("emulator") / "stderr.log"
    with (
        log.open("w") as errors,
        subprocess.Popen(
            [str(windowguard), "emulate", "--flavor", "openai", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        ) as process,
    ):
        try:
            assert process.stdout is not None
            url = process.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:"), log.read_text()
            yield url
        finally:
            process.terminate()
            process.wait(timeout=10)


@pytest.mark.parametrize(("name", "code"), SNIPPETS, ids=[name for name, _ in SNIPPETS])
def test_snippet_runs_as_written(name: str, code: str, emulator_url: str, tmp_path: Path) -> None:
    script = tmp_path / "snippet.py"
    script.write_text(code.replace(README_URL, emulator_url), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=_environment(),
    )
    assert done.returncode == 0, f"{name}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    assert done.stdout.strip(), f"the {name} snippet printed nothing"


def _environment() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # never fetch LiteLLM's map from GitHub
    env.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
    return env


def test_the_counter_snippet_runs_as_written() -> None:
    """README "Counting tokens": a caller's own counter is used and named."""
    text = README.read_text(encoding="utf-8")
    start = text.index("Plug in your own exact tokenizer")
    code = re.search(r"```python\n(.*?)```", text[start:], re.S)
    assert code is not None
    exec(compile(code.group(1), "README.md", "exec"), {})
