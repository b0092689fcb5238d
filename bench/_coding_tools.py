"""A coding agent's tools for the bench: real source text, realistic command output.

The agent works on windowguard itself, frozen at one commit (:data:`SOURCE_COMMIT`), so
what its tools return never changes while the library does. Three tools, as
:class:`windowguard.Tool` values whose every argument is a closed set (a JSON-schema
``enum``, or integer bounds) so an emulated model that builds arguments from the schemas
always asks for something that exists:

* ``read_file(path, start_line, max_lines)``: 60-300 lines of a real file, numbered like
  ``cat -n``;
* ``run_command(command)``: pytest, git, ls, wc, ruff and mypy output — git's real
  output at the pinned commit, the rest generated from the pinned files (pytest runs the
  real test names, some failing with a traceback through the real test source);
* ``grep(pattern, path)``: ``grep -rn`` over the pinned files, cut at 150 matches the way
  agent harnesses cut long output.

Invariants: a result is a pure function of the arguments and the seed given to
:func:`coding_tools`; nothing reads the working tree, the clock or the network. The
pinned files are read once through ``git cat-file`` (the bench needs the repository's
history, not a checkout of that commit).
"""

from __future__ import annotations

import functools
import hashlib
import random
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import windowguard as wg

ROOT = Path(__file__).resolve().parents[1]

#: the commit whose files and history the tools show (windowguard's own source)
SOURCE_COMMIT = "29217c3952ef9f2b44fb56befd2925eb37463869"

_MIN_READABLE_LINES = 80
_GREP_LIMIT = 150
_OUTPUT_LINE_LIMIT = 150

GREP_PATTERNS = (
    "def fit",
    "ContextTruncatedError",
    "context_window",
    "max_tokens",
    "calibrat",
    "class ",
    "raise ",
    "import ",
    "return None",
    "budget",
    "estimate",
    "prompt_tokens",
    "self._",
    "assert ",
)
GREP_PATHS = (
    "src/windowguard",
    "src/windowguard/providers",
    "src/windowguard/emulator",
    "src/windowguard/failures",
    "tests",
)
COMMANDS = (
    "pytest -q",
    "pytest -v tests/test_manager.py",
    "pytest -v tests/test_loop.py tests/test_loop_e2e.py",
    "pytest -x -q tests/test_estimate.py tests/test_templates.py",
    "pytest --collect-only -q tests/test_providers_openai.py tests/test_emulator_openai.py",
    "git log --oneline -n 60",
    "git log --stat -n 12",
    "git show HEAD~4",
    "git diff HEAD~2",
    "git diff --stat HEAD~20",
    "git status",
    "ls -la src/windowguard",
    "ls -la tests",
    "wc -l src/windowguard/*.py src/windowguard/*/*.py",
    "find src tests -name '*.py'",
    "ruff check src tests",
    "mypy src/windowguard",
)


def _git(*args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(
            f"bench/_coding_tools.py needs git and commit {SOURCE_COMMIT[:7]} of this "
            f"repository (git {' '.join(args[:2])} failed: {exc})"
        ) from exc
    return done.stdout


@dataclass(frozen=True, slots=True)
class _Entry:
    path: str
    size: int


@functools.cache
def _tree() -> tuple[_Entry, ...]:
    out = _git("ls-tree", "-r", "-l", SOURCE_COMMIT, "src/windowguard", "tests")
    entries = []
    for line in out.splitlines():
        meta, path = line.split("\t", 1)
        size = meta.split()[3]
        entries.append(_Entry(path, int(size) if size.isdigit() else 0))
    return tuple(entries)


@functools.cache
def source_files() -> dict[str, list[str]]:
    """Every ``.py`` file of ``src/windowguard`` and ``tests`` at the pinned commit."""
    paths = [e.path for e in _tree() if e.path.endswith(".py")]
    batch = "".join(f"{SOURCE_COMMIT}:{p}\n" for p in paths)
    done = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "--batch"],
        input=batch.encode(),
        capture_output=True,
        check=True,
    )
    data, files, at = done.stdout, {}, 0
    for path in paths:
        header_end = data.index(b"\n", at)
        size = int(data[at:header_end].split()[2])
        body = data[header_end + 1 : header_end + 1 + size]
        files[path] = body.decode("utf-8").splitlines()
        at = header_end + 1 + size + 1
    return files


def readable_files() -> tuple[str, ...]:
    """The files ``read_file`` offers: those long enough for a 60-300 line read."""
    return tuple(p for p, lines in source_files().items() if len(lines) >= _MIN_READABLE_LINES)


# --- read_file and grep ------------------------------------------------------------


def read_file(path: str, start_line: int, max_lines: int) -> str:
    """``max_lines`` lines of ``path`` from ``start_line`` (moved back to fit), ``cat -n``."""
    lines = source_files()[path]
    count = min(max_lines, len(lines))
    first = max(1, min(start_line, len(lines) - count + 1))
    shown = lines[first - 1 : first - 1 + count]
    body = "\n".join(f"{n:6}\t{text}" for n, text in enumerate(shown, first))
    return f"{body}\n[{path}: lines {first}-{first + count - 1} of {len(lines)}]"


def grep(pattern: str, path: str) -> str:
    """``grep -rn pattern path`` over the pinned files, cut at 150 matches."""
    hits = [
        f"{name}:{n}:{text}"
        for name, lines in source_files().items()
        if name == path or name.startswith(path + "/")
        for n, text in enumerate(lines, 1)
        if pattern in text
    ]
    if not hits:
        return ""
    if len(hits) > _GREP_LIMIT:
        more = len(hits) - _GREP_LIMIT
        hits = [*hits[:_GREP_LIMIT], f"[... {more} more matches not shown; narrow the search]"]
    return "\n".join(hits)


# --- run_command ---------------------------------------------------------------------


def _tests_of(path: str) -> list[tuple[str, int]]:
    return [
        (line.split("def ", 1)[1].split("(", 1)[0], n)
        for n, line in enumerate(source_files()[path], 1)
        if line.startswith(("def test_", "async def test_"))
    ]


def _test_files(selected: tuple[str, ...] = ()) -> list[str]:
    names = sorted(p for p in source_files() if p.startswith("tests/test_"))
    return [p for p in names if not selected or p in selected]


def _failing(rng: random.Random, tests: list[tuple[str, str, int]], k: int) -> set[int]:
    return set(rng.sample(range(len(tests)), min(k, len(tests))))


def _traceback(path: str, name: str, line: int, rng: random.Random) -> list[str]:
    lines = source_files()[path]
    end = line
    while end < len(lines) and (lines[end].startswith((" ", "\t")) or not lines[end].strip()):
        end += 1
    body = lines[line - 1 : end]
    while body and not body[-1].strip():
        body.pop()
    cut = max(1, len(body) - rng.randint(0, min(4, len(body) - 1)))
    got = rng.randint(900, 30_000)
    want = got + rng.choice((-1, 1)) * rng.randint(1, 400)
    out = [f"{'_' * 20} {name} {'_' * 20}", ""]
    out += [f"    {text}" for text in body[: cut - 1]]
    failing = body[cut - 1] if body else "    assert result"
    out += [f">   {failing}", f"E   assert {got} == {want}", f"E    +  where {got} = len(...)"]
    out += ["", f"{path}:{line + cut - 1}: AssertionError"]
    return out


def _pytest(command: str, seed: int) -> str:
    rng = random.Random(f"pytest:{seed}:{command}")
    words = command.split()
    selected = tuple(w for w in words if w.startswith("tests/"))
    tests = [(p, name, n) for p in _test_files(selected) for name, n in _tests_of(p)]
    head = [
        "=" * 29 + " test session starts " + "=" * 30,
        "platform linux -- Python 3.11.7, pytest-9.2.0, pluggy-1.6.0",
        "rootdir: /work/repo",
        "configfile: pyproject.toml",
        "plugins: hypothesis-6.170.17",
        f"collected {len(tests)} items",
        "",
    ]
    if "--collect-only" in words:
        body = [f"{p}::{name}" for p, name, _ in tests]
        return "\n".join([*body, "", f"{len(tests)} tests collected in 0.41s"])
    failed = _failing(rng, tests, rng.choice((0, 1, 1, 2, 3)))
    if "-x" in words and failed:
        first = min(failed)
        tests, failed = tests[: first + 1], {first}
    out = list(head)
    if "-v" in words:
        for i, (p, name, _) in enumerate(tests):
            status = "FAILED" if i in failed else "PASSED"
            percent = (i + 1) * 100 // len(tests)
            out.append(f"{p}::{name} {status}".ljust(72) + f" [{percent:3}%]")
    else:
        marks = "".join("F" if i in failed else "." for i in range(len(tests)))
        for at in range(0, len(marks), 72):
            percent = min(at + 72, len(marks)) * 100 // len(tests)
            out.append(marks[at : at + 72].ljust(72) + f" [{percent:3}%]")
    if failed:
        out += ["", "=" * 35 + " FAILURES " + "=" * 35]
        for i in sorted(failed):
            p, name, n = tests[i]
            out += _traceback(p, name, n, rng)
        out += ["=" * 28 + " short test summary info " + "=" * 27]
        out += [f"FAILED {tests[i][0]}::{tests[i][1]} - AssertionError" for i in sorted(failed)]
        if "-x" in words:
            out.append(
                "!!!!!!!!!!!!!!!!!!!!!!!!!! stopping after 1 failures !!!!!!!!!!!!!!!!!!!!!!!!!!"
            )
    seconds = rng.uniform(0.02, 0.12) * len(tests)
    passed = len(tests) - len(failed)
    summary = f"{len(failed)} failed, {passed} passed" if failed else f"{passed} passed"
    out.append(f"{'=' * 20} {summary} in {seconds:.2f}s {'=' * 20}")
    return "\n".join(out)


def _ls(directory: str) -> str:
    children: dict[str, int | None] = {}
    for entry in _tree():
        if not entry.path.startswith(directory + "/"):
            continue
        rest = entry.path[len(directory) + 1 :]
        if "/" in rest:
            children.setdefault(rest.split("/", 1)[0], None)
        else:
            children[rest] = entry.size
    rows = [f"total {sum(s or 4 for s in children.values()) // 1024 + 8}"]
    rows.append("drwxr-xr-x  9 dev dev  4096 Nov 29 14:02 .")
    rows.append("drwxr-xr-x 12 dev dev  4096 Nov 29 14:02 ..")
    for name, size in sorted(children.items()):
        if size is None:
            rows.append(f"drwxr-xr-x  2 dev dev  4096 Nov 29 14:02 {name}")
        else:
            rows.append(f"-rw-r--r--  1 dev dev {size:5} Nov 29 14:02 {name}")
    return "\n".join(rows)


def _wc() -> str:
    files = sorted(
        p for p in source_files() if p.startswith("src/windowguard/") and p.count("/") <= 3
    )
    counts = [len(source_files()[p]) for p in files]
    rows = [f"{c:6} {p}" for c, p in zip(counts, files, strict=True)]
    return "\n".join([*rows, f"{sum(counts):6} total"])


def _cut(text: str) -> str:
    lines = text.rstrip("\n").splitlines()
    if len(lines) <= _OUTPUT_LINE_LIMIT:
        return "\n".join(lines)
    more = len(lines) - _OUTPUT_LINE_LIMIT
    return "\n".join([*lines[:_OUTPUT_LINE_LIMIT], f"[... output cut: {more} more lines]"])


@functools.cache
def _git_output(command: str) -> str:
    c = SOURCE_COMMIT
    args = {
        "git log --oneline -n 60": ("log", "--oneline", "-n", "60", c),
        "git log --stat -n 12": ("log", "--stat", "-n", "12", c),
        "git show HEAD~4": ("show", f"{c}~4"),
        "git diff HEAD~2": ("diff", f"{c}~2", c),
        "git diff --stat HEAD~20": ("diff", "--stat", f"{c}~20", c),
    }[command]
    return _cut(_git(*args))


def run_command(command: str, seed: int) -> str:
    """The output of one of :data:`COMMANDS`, deterministic per ``(command, seed)``."""
    if command.startswith("pytest"):
        return _pytest(command, seed)
    if command.startswith("git ") and command != "git status":
        return _git_output(command)
    if command == "git status":
        return "On branch main\nYour branch is up to date with 'origin/main'.\n\n" + (
            "nothing to commit, working tree clean"
        )
    if command.startswith("find "):
        return "\n".join(f"./{p}" for p in sorted(source_files()))
    if command.startswith("ls -la "):
        return _ls(command.removeprefix("ls -la "))
    if command.startswith("wc -l"):
        return _wc()
    if command.startswith("ruff"):
        return "All checks passed!"
    if command.startswith("mypy"):
        count = sum(1 for p in source_files() if p.startswith("src/windowguard/"))
        return f"Success: no issues found in {count} source files"
    raise ValueError(f"unknown command {command!r}")


# --- the tools -------------------------------------------------------------------------


def _schema(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


def _enum(values: tuple[str, ...], description: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(values), "description": description}


def coding_tools(seed: int = 0) -> tuple[wg.Tool, ...]:
    """``read_file``, ``run_command`` and ``grep`` over the pinned repository.

    Args:
        seed: varies the generated command output (which tests fail, timings).
    """
    run: Callable[[str], str] = functools.partial(run_command, seed=seed)
    return (
        wg.Tool(
            name="read_file",
            description=(
                "Read part of a file of the repository, with line numbers (like cat -n). "
                "Shows max_lines lines from start_line, moved back when the file ends sooner."
            ),
            parameters=_schema(
                {
                    "path": _enum(readable_files(), "file path relative to the repository root"),
                    "start_line": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 400,
                        "description": "first line to show, from 1",
                    },
                    "max_lines": {
                        "type": "integer",
                        "minimum": 60,
                        "maximum": 300,
                        "description": "how many lines to show",
                    },
                }
            ),
            fn=read_file,
        ),
        wg.Tool(
            name="run_command",
            description=(
                "Run a shell command in the repository root and return its output "
                "(stdout and stderr, long output cut)."
            ),
            parameters=_schema({"command": _enum(COMMANDS, "the command line to run")}),
            fn=run,
        ),
        wg.Tool(
            name="grep",
            description=(
                "Search files for a fixed string (grep -rn); path:line:text, "
                f"at most {_GREP_LIMIT} matches."
            ),
            parameters=_schema(
                {
                    "pattern": _enum(GREP_PATTERNS, "the text to look for (case-sensitive)"),
                    "path": _enum(GREP_PATHS, "file or folder to search"),
                }
            ),
            fn=grep,
        ),
    )


def wire_tools(tools: tuple[wg.Tool, ...]) -> list[dict[str, Any]]:
    """The tools as an OpenAI-compatible provider sends them (``tools=[...]``)."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": dict(t.parameters),
            },
        }
        for t in tools
    ]


def digest(text: str) -> str:
    """A short content hash (for checking runs are deterministic)."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]
