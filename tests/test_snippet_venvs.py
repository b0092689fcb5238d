"""Each README and docs snippet runs as written with only the extras its install line names.

tests/test_readme_snippets.py and tests/test_docs_snippets.py run the snippets in the test
environment, which has every extra; a snippet whose install line forgets one would still
pass there. Here each snippet gets a fresh virtualenv holding exactly what its install
line names (``pip install -e "<repo>[<its extras>]"`` plus any other package the line
names), the servers it talks to (``windowguard emulate``, ``windowguard proxy``) run from
that virtualenv too, and the snippet runs in it and must exit 0 and print something.

* README: a ```` ```python ```` block whose paragraph above names an install line
  (``pip install "windowguard[...]"`` or ``pip install windowguard``). The server it
  needs is the ``windowguard emulate ...`` its code names in a comment, else the one its
  section names, else ``windowguard emulate --flavor openai``.
* docs/: every python block of a page that has an install line in a fenced shell block,
  except blocks marked ``<!-- not-run: ... -->`` or ``<!-- needs: ... -->`` (a PostgreSQL
  server: tests/test_docs_snippets.py runs those); its servers are those the page's shell
  blocks before it start, or its ``# Serve a model first: ...`` comment.

Documented ports (``127.0.0.1:8000``, the proxy's ``8788``) are mapped to free ones.
Building the virtualenvs needs the package index and minutes, so this runs under
``CI=true`` or ``WINDOWGUARD_TEST_VENVS=1`` and skips otherwise. Virtualenvs are shared
by snippets that name the same install, and pip's cache is used.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
ENABLED = os.environ.get("CI") == "true" or os.environ.get("WINDOWGUARD_TEST_VENVS") == "1"
SKIP_REASON = (
    "builds a virtualenv per install line from the package index (minutes): "
    "set WINDOWGUARD_TEST_VENVS=1 (always on under CI=true)"
)
DEFAULT_SERVER = "windowguard emulate --flavor openai --port 8000"

INSTALL = re.compile(
    r'pip install (?:"windowguard\[(?P<extras>[^\]]+)\]"|windowguard\b)'
    r"(?P<packages>(?: +[A-Za-z0-9][\w.\-\[\]]*)*)"
)
FENCE = re.compile(r"^```(?P<lang>[^\s`]*)[^\n]*\n(?P<body>.*?)^```[ ]*$", re.M | re.S)
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>not-run|serve|needs):\s*(?P<value>.*?)\s*-->\s*$")
SERVER = re.compile(r"windowguard (?:emulate|proxy)\b[^`\n&#]*")
LOCAL_PORT = re.compile(r"\b(?:127\.0\.0\.1|localhost):(?P<port>\d{2,5})\b")


@dataclass(frozen=True)
class Install:
    extras: tuple[str, ...]
    packages: tuple[str, ...]

    def __str__(self) -> str:
        extras = f"[{','.join(self.extras)}]" if self.extras else ""
        return " ".join([f'"windowguard{extras}"', *self.packages])


@dataclass(frozen=True)
class Snippet:
    where: str
    install: Install
    code: str
    servers: tuple[str, ...]  # `windowguard emulate|proxy ...` commands, in start order


def _install(match: re.Match[str]) -> Install:
    extras = tuple(sorted(e.strip() for e in (match.group("extras") or "").split(",") if e))
    return Install(extras, tuple(sorted(match.group("packages").split())))


def _servers_for(code: str, fallback: tuple[str, ...]) -> tuple[str, ...]:
    if not LOCAL_PORT.search(code):
        return ()
    named = [m.group(0).strip() for m in SERVER.finditer(code)]
    return tuple(named) or fallback


def readme_snippets() -> list[Snippet]:
    text = README.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        if match.group("lang") != "python":
            continue
        before = text[: match.start()].rstrip("\n")
        paragraph = before[before.rfind("\n\n") + 2 :]
        install = INSTALL.search(paragraph)
        if install is None:
            continue
        section = before[before.rfind("\n## ") :]
        fallback = tuple(m.group(0).strip() for m in SERVER.finditer(section))[:1]
        line = text.count("\n", 0, match.start()) + 1
        found.append(
            Snippet(
                f"README.md:{line}",
                _install(install),
                match.group("body"),
                _servers_for(match.group("body"), fallback or (DEFAULT_SERVER,)),
            )
        )
    return found


def docs_snippets() -> list[Snippet]:
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        lines = text.splitlines()
        install: Install | None = None
        started: list[str] = []
        for match in FENCE.finditer(text):
            lang, body = match.group("lang"), match.group("body")
            line = text.count("\n", 0, match.start()) + 1
            markers = {}
            above = line - 2
            while above >= 0 and (marker := MARKER.match(lines[above])):
                markers[marker.group("kind")] = marker.group("value")
                above -= 1
            if lang != "python":
                if named := INSTALL.search(body):  # the latest install line applies
                    install = _install(named)
                commands = [
                    line.removeprefix("$ ")
                    for line in body.splitlines()
                    if lang != "console" or line.startswith("$ ")
                ]
                servers = [m.group(0).strip() for c in commands for m in SERVER.finditer(c)]
                if servers:  # the page's newest servers are the ones a snippet talks to
                    started = servers
                continue
            if install is None or "not-run" in markers or "needs" in markers:
                continue
            served = tuple(started)
            if "serve" in markers:
                served = (markers["serve"],)
            where = f"{page.relative_to(ROOT).as_posix()}:{line}"
            found.append(
                Snippet(where, install, body, _servers_for(body, served or (DEFAULT_SERVER,)))
            )
    return found


SNIPPETS = readme_snippets() + docs_snippets()


def test_the_snippets_and_their_installs_are_found() -> None:
    """Runs everywhere: the extraction finds the README's snippets and every extra an
    install line names exists in pyproject.toml."""
    where = {s.where.split(":")[0] for s in SNIPPETS}
    assert "README.md" in where
    names = " ".join(s.code for s in SNIPPETS if s.where.startswith("README"))
    for expected in (
        "wg.guard(",
        "create_agent",
        "call_model_input_filter",
        "ContextWindowCapability(",
        "completion(",
    ):
        assert expected in names, f"no README snippet with an install line uses {expected}"
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for snippet in SNIPPETS:
        for extra in snippet.install.extras:
            assert re.search(rf"^{re.escape(extra)} = \[", pyproject, re.M), (
                f"{snippet.where}: no extra {extra!r} in pyproject.toml"
            )
        if snippet.servers:
            assert "emulator" in snippet.install.extras, (
                f"{snippet.where} runs against `windowguard emulate` but its install line "
                f"({snippet.install}) does not name the emulator extra"
            )


# --- the virtualenvs ---------------------------------------------------------------------


class Venvs:
    """One virtualenv per install, built on first use."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.built: dict[Install, Path] = {}

    def get(self, install: Install) -> Path:
        if install not in self.built:
            folder = self.root / ("-".join(install.extras + install.packages) or "base")
            subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
            target = f"{ROOT}[{','.join(install.extras)}]" if install.extras else str(ROOT)
            done = subprocess.run(
                [
                    str(folder / "bin" / "python"),
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "-e",
                    target,
                    *install.packages,
                ],
                capture_output=True,
                text=True,
                timeout=1800,
            )
            assert done.returncode == 0, f"pip install {install}:\n{done.stderr[-4000:]}"
            self.built[install] = folder
        return self.built[install]


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> Venvs:
    if not ENABLED:
        pytest.skip(SKIP_REASON)
    return Venvs(tmp_path_factory.mktemp("venvs"))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _wait_for(port: int, process: subprocess.Popen[str], log: Path) -> None:
    for _ in range(600):  # up to a minute, polling
        if process.poll() is not None:
            raise AssertionError(f"the server exited {process.returncode}:\n{log.read_text()}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"the server never listened on {port}:\n{log.read_text()}")


def _rewrite(text: str, mapping: dict[int, int]) -> str:
    def real(match: re.Match[str]) -> str:
        port = mapping.get(int(match.group("port")))
        return f"127.0.0.1:{port}" if port else match.group(0)

    return LOCAL_PORT.sub(real, text)


def _start(command: str, venv: Path, mapping: dict[int, int], tmp: Path) -> subprocess.Popen[str]:
    argv = shlex.split(command)
    proxy = argv[1] == "proxy"
    documented = 8788 if proxy else 0
    if "--port" in argv:
        at = argv.index("--port")
        documented = int(argv[at + 1])
        del argv[at : at + 2]
    real = _free_port()
    mapping[documented] = real
    argv = [_rewrite(arg, mapping) for arg in argv]
    log = tmp / f"{argv[1]}-{real}.log"
    with log.open("w") as errors:  # the server keeps its own copy of the descriptor
        process = subprocess.Popen(
            [str(venv / "bin" / "windowguard"), *argv[1:], "--port", str(real)],
            stdout=subprocess.DEVNULL,
            stderr=errors,
            text=True,
            cwd=tmp,
        )
    _wait_for(real, process, log)
    return process


@pytest.mark.skipif(not ENABLED, reason=SKIP_REASON)
@pytest.mark.parametrize("snippet", SNIPPETS, ids=[s.where for s in SNIPPETS])
def test_the_snippet_runs_with_only_the_extras_it_names(
    snippet: Snippet, venvs: Venvs, tmp_path: Path
) -> None:
    venv = venvs.get(snippet.install)
    mapping: dict[int, int] = {}
    servers: list[subprocess.Popen[str]] = []
    try:
        for command in snippet.servers:
            servers.append(_start(command, venv, mapping, tmp_path))
        script = tmp_path / "snippet.py"
        script.write_text(_rewrite(snippet.code, mapping), encoding="utf-8")
        env = dict(os.environ)
        env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # never fetch LiteLLM's map from GitHub
        env.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
        env.pop("VIRTUAL_ENV", None)
        done = subprocess.run(
            [str(venv / "bin" / "python"), str(script)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
            env=env,
        )
    finally:
        for process in reversed(servers):
            process.terminate()
            process.wait(timeout=30)
    assert done.returncode == 0, (
        f"{snippet.where} with pip install {snippet.install}:\n"
        f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    )
    if "print(" in snippet.code:
        assert done.stdout.strip(), f"{snippet.where} printed nothing"
