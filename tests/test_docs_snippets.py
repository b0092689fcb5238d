"""Every fenced code block in ``docs/`` runs in a test, or is checked as what it is.

The README's snippets have their own test (tests/test_readme_snippets.py); this one reads
every ``docs/**/*.md`` page, takes its fenced blocks in order and, per block language:

* ``python``: written to a file and run in a fresh interpreter (the full test
  environment: every extra). ``127.0.0.1:8000`` and ``localhost:8000`` are an emulator the
  test starts (``windowguard emulate --flavor openai``, the README's convention) unless
  the block or an earlier block of the page serves that port otherwise; a comment
  ``# Serve a model first: windowguard emulate ...`` in the block starts that server. The
  block must exit 0 and print each of its ``#> text`` lines, in that order.
* ``console`` (``$ `` lines are commands, the rest their output) and ``bash``/``sh``/
  ``shell`` (every line a command): ``windowguard emulate`` and ``windowguard proxy`` start
  in the background on a free port, and later blocks of the page reach them at the
  port they name; other ``windowguard ...`` commands (also piped from ``echo``) run in the
  page's working directory, which holds ``transcript.json`` (the shipped example
  transcript) and ``body.json`` (a provider error body), and must exit 0; the output a
  console block shows must appear in what the command printed (``…`` elides). ``pip
  install`` lines must name extras pyproject.toml defines and packages the test
  environment has. Other programs (``curl``, ``your-agent``) are shown, not run.
* ``json`` parses (an object with ``"event"`` names a real event and its real fields),
  ``yaml`` and ``toml`` parse; ``text`` and other listings are not run.
* A block without a language fails: say what it is.

Everything runs with ``HOME`` in the test's directory (``~/...`` paths land there) and
``OPENAI_API_KEY``/``ANTHROPIC_API_KEY`` set to ``unused``, as a user's shell has keys;
nothing leaves the machine. mkdocstrings' ``::: windowguard.X`` lines are not fenced
blocks and are not read.

A block that cannot run on any machine is marked ``<!-- not-run: reason -->`` on the line
before it; the reason is printed. ``<!-- serve: windowguard emulate ... -->`` there starts
the server a block talks to when the block itself shows a real one. ``<!-- needs:
postgres -->`` runs the block with ``AGENT_JOURNAL_URL`` set to the test PostgreSQL server
(tests/journal_backends.py: skipped without one, required under ``CI=true``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
import yaml

from .journal_backends import postgres_url

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent  # the installed `windowguard` command
DEFAULT_SERVER = "windowguard emulate --flavor openai --port 8000"

FENCE = re.compile(
    r"^(?P<indent>[ ]*)```(?P<lang>[^\s`]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ ]*$",
    re.M | re.S,
)
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>not-run|serve|needs):\s*(?P<value>.*?)\s*-->\s*$")
SERVE_COMMENT = re.compile(r"#\s*Serve a model first:\s*(?P<command>windowguard \S.*?)\s*$", re.M)
LOCAL_PORT = re.compile(r"\b(?:127\.0\.0\.1|localhost):(?P<port>\d{2,5})\b")
EXPECTED_OUTPUT = re.compile(r"^\s*#> ?(?P<line>.*)$", re.M)
ELISION = {"…", "..."}
PYTHON = {"python", "py"}
SHELL = {"bash", "sh", "shell", "console"}
PIPE_SOURCES = {"echo", "printf", "cat"}


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and its markers."""

    page: str
    line: int
    lang: str
    code: str
    markers: tuple[tuple[str, str], ...] = ()

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def marker(self, kind: str) -> str | None:
        return next((value for k, value in self.markers if k == kind), None)


def blocks_of(text: str, page: str) -> list[Block]:
    """The fenced blocks of a markdown text, in order, dedented, with their markers."""
    lines = text.splitlines()
    found = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        markers = []
        above = line - 2  # the line before the fence, 0-based
        while above >= 0 and (marker := MARKER.match(lines[above])):
            markers.append((marker.group("kind"), marker.group("value")))
            above -= 1
        body = textwrap.dedent(match.group("body"))
        found.append(Block(page, line, match.group("lang").lower(), body, tuple(markers)))
    return found


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def _page_id(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


PAGES = [page for page in _pages() if FENCE.search(page.read_text(encoding="utf-8"))]


# --- the extraction itself ------------------------------------------------------------


def test_blocks_are_found_with_their_language_indentation_and_markers() -> None:
    text = (
        "# Page\n\n::: windowguard.guard\n\n"
        "```python\nprint(1)\n```\n\n"
        "- an item:\n\n  <!-- not-run: needs a cloud account -->\n"
        "  ```bash\n  windowguard models\n  ```\n\n"
        "```\nplain\n```\n"
    )
    found = blocks_of(text, "page.md")
    assert [(b.line, b.lang, b.code) for b in found] == [
        (5, "python", "print(1)\n"),
        (12, "bash", "windowguard models\n"),
        (16, "", "plain\n"),
    ]
    assert found[1].marker("not-run") == "needs a cloud account"
    assert found[0].markers == () and found[2].markers == ()


def test_every_page_with_code_is_tested_and_not_run_blocks_say_why() -> None:
    assert len(PAGES) >= 10, [page.name for page in PAGES]
    for page in PAGES:
        for block in blocks_of(page.read_text(encoding="utf-8"), _page_id(page)):
            reason = block.marker("not-run")
            if reason is not None:
                assert len(reason) >= 10, f"{block.where}: say why the block cannot run"
                print(f"not run: {block.where} ({block.lang}): {reason}")


def test_the_checks_refuse_what_is_wrong(tmp_path: Path) -> None:
    """Each kind of check finds a wrong block, and passes the right one."""
    assert _check_json('{"event": "context_edited", "edit": "clear"}') is None
    assert "no field ['edits']" in (_check_json('{"event": "context_edited", "edits": 1}') or "")
    assert "no event kind" in (_check_json('{"event": "context_trimmed"}') or "")
    assert "not JSON" in (_check_json("{'single': 'quotes'}") or "")
    assert _check_install(["windowguard[proxy,emulator]", "-U"]) == []
    assert _check_install(["windowguard[tiktokenz]"]) == [
        "`pip install windowguard[tiktokenz]`: no extra 'tiktokenz'"
    ]
    assert _check_install(["no-such-package-here"]) != []
    assert _missing(["a", "…", "c"], "a\nb\nc  \n") == []
    assert _missing(["a", "d"], "a\nb") == ["shown but not printed: 'd'"]
    assert _runnable(shlex.split("echo '{}' | windowguard classify", comments=True))
    assert not _runnable(shlex.split("curl -s x | windowguard classify", comments=True))
    session = Session(tmp_path)
    try:
        right = Block("page.md", 1, "python", "print(6 * 7)\n#> 42\n")
        wrong = Block("page.md", 1, "python", "print(6 * 9)\n#> 42\n")
        failing = Block("page.md", 1, "python", "raise SystemExit(3)\n")
        assert _check(right, session) is None
        twice = Block("page.md", 1, "python", "print(1)\nprint(2)\n#> 2\n#> 1\n")
        assert "#> lines say ['2', '1']" in (_check(twice, session) or "")
        assert "printed ['54']" in (_check(wrong, session) or "")
        assert "exit 3" in (_check(failing, session) or "")
        assert "without a language" in (_check(Block("page.md", 1, "", "x\n"), session) or "")
        assert _check(Block("page.md", 1, "yaml", "a: [1, 2]\n"), session) is None
        assert "not yaml" in (_check(Block("page.md", 1, "yaml", "a: [1, 2\n"), session) or "")
        assert "not toml" in (_check(Block("page.md", 1, "toml", "a = \n"), session) or "")
    finally:
        session.close()


# --- running a page ---------------------------------------------------------------------


class Server:
    """A ``windowguard emulate``/``proxy`` process, its banner, its output drained."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str], log: Path) -> None:
        self.argv = argv
        self.log = log
        self.errors = log.open("w")
        self.process = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=self.errors, text=True
        )
        assert self.process.stdout is not None
        proxy = argv[1] == "proxy"
        self.banner: list[str] = []
        for line in self.process.stdout:
            self.banner.append(line.rstrip("\n"))
            if ("listening on" in line) if proxy else line.startswith("http"):
                break
        else:
            self.stop()
            raise AssertionError(f"{shlex.join(argv)} did not start:\n{log.read_text()}")
        found = LOCAL_PORT.search(self.banner[-1])
        assert found is not None, self.banner
        self.port = int(found.group("port"))
        self._drain = threading.Thread(target=self._read, args=(self.process.stdout,))
        self._drain.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.banner.append(line.rstrip("\n"))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        if hasattr(self, "_drain"):
            self._drain.join(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.errors.close()


class Session:
    """A page's working directory, environment and servers (documented port -> server)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.servers: dict[int, Server] = {}
        self.started: list[Server] = []
        home = workdir / "home"
        home.mkdir()
        shutil.copy(
            ROOT / "src/windowguard/examples/coding_agent.json", workdir / "transcript.json"
        )
        body = {  # OpenAI's refusal of a prompt over the window
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, "
                "your messages resulted in 130517 tokens. Please reduce the length of the "
                "messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
        (workdir / "body.json").write_text(json.dumps(body), encoding="utf-8")
        env = dict(os.environ)
        env.update(
            HOME=str(home),  # `~/...` paths in a block land in the test's directory
            PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            OPENAI_API_KEY="unused",  # never a real key: nothing leaves this machine
            ANTHROPIC_API_KEY="unused",
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            OPENAI_AGENTS_DISABLE_TRACING="1",
        )
        for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "AGENT_JOURNAL_URL"):
            env.pop(name, None)
        self.env = env

    def close(self) -> None:
        for server in reversed(self.started):
            server.stop()

    def rewrite(self, text: str) -> str:
        """The documented local ports replaced by the servers' real ones."""

        def real(match: re.Match[str]) -> str:
            server = self.servers.get(int(match.group("port")))
            return f"127.0.0.1:{server.port}" if server else match.group(0)

        return LOCAL_PORT.sub(real, text)

    def serve(self, command: str) -> Server:
        """Start ``windowguard emulate|proxy ...`` and map the port it names to it."""
        argv = shlex.split(self.rewrite(command), comments=True)
        argv = [a for a in argv if a != "&"]
        proxy = argv[1] == "proxy"
        port = 8788 if proxy else 0
        if "--port" in argv:
            at = argv.index("--port")
            port = int(argv[at + 1])
            del argv[at : at + 2]
        argv = [str(BIN / "windowguard"), *argv[1:], "--port", "0"]  # its banner names it
        log = self.workdir / f"server-{len(self.started)}.log"
        server = Server(argv, cwd=self.workdir, env=self.env, log=log)
        self.started.append(server)
        if port:
            self.servers[port] = server
        return server

    def documented(self, text: str) -> str:
        """The servers' real ports written back as the documented ones."""
        for port, server in self.servers.items():
            text = text.replace(f"127.0.0.1:{server.port}", f"127.0.0.1:{port}")
        return text

    def ensure_servers(self, block: Block) -> None:
        """Start what the block's marker and ``# Serve a model first:`` comments name."""
        if (served := block.marker("serve")) is not None:
            self.serve(served)
        for command in SERVE_COMMENT.findall(block.code):
            self.serve(command)

    def ensure_default(self, text: str) -> None:
        """Port 8000 named and not served yet: the README's emulator."""
        ports = {int(m.group("port")) for m in LOCAL_PORT.finditer(text)}
        if 8000 in ports and 8000 not in self.servers:
            self.serve(DEFAULT_SERVER)


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    page = Session(tmp_path)
    try:
        yield page
    finally:
        page.close()


@pytest.mark.parametrize("page", PAGES, ids=[_page_id(page) for page in PAGES])
def test_every_block_of_the_page_runs_or_checks(page: Path, session: Session) -> None:
    problems: list[str] = []
    for block in blocks_of(page.read_text(encoding="utf-8"), _page_id(page)):
        reason = block.marker("not-run")
        if reason is not None:
            print(f"not run: {block.where}: {reason}")
            continue
        try:
            problem = _check(block, session)
        except AssertionError as exc:
            problem = str(exc)
        if problem:
            problems.append(f"{block.where} ({block.lang or 'no language'}): {problem}")
    assert not problems, "\n\n".join(problems)


def _check(block: Block, session: Session) -> str | None:
    if not block.lang:
        return "a block without a language: tag it (python, console, bash, json, text ...)"
    if block.lang in PYTHON:
        return _run_python(block, session)
    if block.lang in SHELL:
        return _run_shell(block, session)
    if block.lang == "json":
        return _check_json(block.code)
    try:
        if block.lang in {"yaml", "yml"}:
            yaml.safe_load(block.code)
        elif block.lang == "toml":
            tomllib.loads(block.code)
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as exc:
        return f"not {block.lang}: {exc}"
    return None  # text, output and other listings: shown as they are


def _run_python(block: Block, session: Session) -> str | None:
    env = dict(session.env)
    if block.marker("needs") == "postgres":
        try:
            env["AGENT_JOURNAL_URL"] = postgres_url()  # fails under CI=true without one
        except pytest.skip.Exception as skipped:
            print(f"skipped: {block.where}: {skipped}")
            return None
    session.ensure_servers(block)
    session.ensure_default(block.code)
    script = session.workdir / f"block_{block.line}.py"
    script.write_text(session.rewrite(block.code), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=session.workdir,
        env=env,
    )
    if done.returncode != 0:
        return f"exit {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    expected = [m.group("line").rstrip() for m in EXPECTED_OUTPUT.finditer(block.code)]
    printed = [line.rstrip() for line in session.documented(done.stdout).splitlines()]
    lines = iter(printed)
    if not all(line in lines for line in expected):  # each one, in this order
        return f"printed {printed}, the block's #> lines say {expected}"
    return None


def _commands(block: Block) -> list[tuple[str, list[str]]]:
    """Each command with the output lines the block shows after it."""
    lines = block.code.splitlines()
    if block.lang == "console":
        commands: list[tuple[str, list[str]]] = []
        for line in lines:
            if line.startswith("$ "):
                commands.append((line[2:], []))
            elif commands and line.strip():
                commands[-1][1].append(line)
        return commands
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    return [(line, []) for line in joined.splitlines() if line.strip() and line[0] != "#"]


def _run_shell(block: Block, session: Session) -> str | None:
    problems = []
    session.ensure_servers(block)
    for command, output in _commands(block):
        words = shlex.split(command, comments=True)
        while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
            words = words[1:]  # VAR=value before the program
        if not words:
            continue
        if words[:2] == ["pip", "install"]:
            problems += _check_install(words[2:])
        elif words[0] == "windowguard" and words[1:2] in (["emulate"], ["proxy"]):
            if words[1] == "proxy":
                session.ensure_default(command)
            server = session.serve(command)
            problems += _missing(output, session.documented("\n".join(server.banner)))
        elif _runnable(words):
            session.ensure_default(command)
            problems += _run_command(command, output, session)
        else:
            print(f"shown, not run: {block.where}: {command}")
    return "\n".join(problems) or None


def _runnable(words: list[str]) -> bool:
    """A ``windowguard`` command, alone or fed by ``echo``/``printf``/``cat``."""
    programs = [words[0]] + [words[i + 1] for i, w in enumerate(words[:-1]) if w == "|"]
    return "windowguard" in programs and set(programs) <= {"windowguard", *PIPE_SOURCES}


def _run_command(command: str, output: list[str], session: Session) -> list[str]:
    done = subprocess.run(
        ["bash", "-c", session.rewrite(command)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=session.workdir,
        env=session.env,
    )
    if done.returncode != 0:
        return [
            f"`{command}` exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        ]
    return _missing(output, session.documented(done.stdout + done.stderr))


def _missing(shown: list[str], printed: str) -> list[str]:
    lines = {line.rstrip() for line in printed.splitlines()}
    return [
        f"shown but not printed: {line!r}"
        for line in shown
        if line.strip() not in ELISION and line.rstrip() not in lines
    ]


def _check_install(words: list[str]) -> list[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = set(pyproject["project"]["optional-dependencies"])
    problems = []
    for word in words:
        if word.startswith("-"):
            continue
        requirement = re.fullmatch(r"(?P<name>[A-Za-z0-9_.-]+)(?:\[(?P<extras>[^\]]*)\])?.*", word)
        assert requirement is not None, word
        name = requirement.group("name")
        named = {e.strip() for e in (requirement.group("extras") or "").split(",") if e.strip()}
        if name in {"windowguard", "."}:
            problems += [f"`pip install {word}`: no extra {e!r}" for e in sorted(named - extras)]
        else:
            try:
                _distribution(name)
            except LookupError:
                problems.append(f"`pip install {word}`: not in the test environment")
    return problems


def _distribution(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError as exc:
        raise LookupError(name) from exc


def _check_json(code: str) -> str | None:
    try:
        value = json.loads(code)
    except json.JSONDecodeError as exc:
        return f"not JSON: {exc}"
    if isinstance(value, dict) and "event" in value:
        events = {cls.kind: cls for cls in _event_classes()}
        cls = events.get(value["event"])
        if cls is None:
            return f"no event kind {value['event']!r}; known: {sorted(events)}"
        fields = {f.name for f in dataclasses.fields(cls)} | {"event"}
        unknown = sorted(set(value) - fields)
        if unknown:
            return f"{cls.__name__} has no field {unknown}; its fields: {sorted(fields)}"
    return None


def _event_classes() -> list[Any]:
    from windowguard.core.events import Event

    found, todo = [], list(Event.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found
