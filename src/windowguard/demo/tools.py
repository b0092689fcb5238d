"""The demo agent's tools: list, read and search the sample project shipped with the package.

The sample project (``tinytodo``, a small to-do list in a JSON file) lives in
``windowguard/demo/sample_project`` as package data and is read through
:mod:`importlib.resources`, so the demo works from a wheel, a zip or a checkout.

Invariants: the tools only read, never write; every argument is a closed set (a JSON
schema ``enum`` of the project's real files, folders and search terms), so the
emulator's coding-agent scenario — which builds arguments from the schemas — always
asks for things that exist, and every result is the project's real text.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from importlib import resources
from typing import TYPE_CHECKING

from ..run.tools import Tool

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

__all__ = ["SEARCH_TERMS", "project_files", "project_tools", "read_project_file"]

#: what the agent may search for (substrings, case-sensitive, like ``grep -F``)
SEARCH_TERMS = (
    "today",
    "due",
    "Priority",
    "def ",
    "TaskStore",
    "parse_query",
    "raise",
    "_save",
    "Known issue",
)

_SKIPPED = ("__pycache__", ".pyc", ".pytest_cache")


def _root() -> Traversable:
    return resources.files("windowguard.demo").joinpath("sample_project")


def _walk(node: Traversable, prefix: str) -> Iterator[tuple[str, Traversable]]:
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        if any(mark in child.name for mark in _SKIPPED):
            continue
        path = f"{prefix}{child.name}"
        if child.is_dir():
            yield from _walk(child, path + "/")
        else:
            yield path, child


def project_files() -> tuple[str, ...]:
    """The sample project's files, as sorted relative paths (``tinytodo/store.py``)."""
    return tuple(path for path, _ in _walk(_root(), ""))


def read_project_file(path: str) -> str:
    """The text of one of :func:`project_files`.

    Raises:
        FileNotFoundError: ``path`` is not a file of the sample project.
    """
    for name, node in _walk(_root(), ""):
        if name == path:
            text: str = node.read_text(encoding="utf-8")
            return text
    raise FileNotFoundError(f"no file {path!r} in the sample project")


def _folders(files: tuple[str, ...]) -> tuple[str, ...]:
    return (".", *sorted({f.rsplit("/", 1)[0] for f in files if "/" in f}))


def project_tools() -> tuple[Tool, ...]:
    """The agent's three tools: ``list_files``, ``read_file`` and ``search``.

    Returns:
        Tools whose schemas enumerate the sample project's real folders, files and
        search terms.
    """
    files = project_files()
    folders = _folders(files)

    def list_files(directory: str) -> str:
        chosen = [f for f in files if directory == "." or f.startswith(directory + "/")]
        lines = [f"{f}  ({read_project_file(f).count(chr(10))} lines)" for f in chosen]
        return "\n".join(lines) or f"{directory}: empty"

    def read_file(path: str) -> str:
        text = read_project_file(path)
        numbered = (f"{n:>4}  {line}" for n, line in enumerate(text.splitlines(), 1))
        return f"{path}:\n" + "\n".join(numbered)

    def search(pattern: str) -> str:
        hits = [
            f"{f}:{n}: {line.strip()}"
            for f in files
            for n, line in enumerate(read_project_file(f).splitlines(), 1)
            if pattern in line
        ]
        return "\n".join(hits) or f"no match for {pattern!r}"

    def schema(name: str, values: tuple[str, ...], description: str) -> dict[str, object]:
        return {
            "type": "object",
            "properties": {
                name: {"type": "string", "enum": list(values), "description": description}
            },
            "required": [name],
        }

    return (
        Tool(
            name="list_files",
            description="List the project's files under a folder, with their line counts.",
            parameters=schema("directory", folders, "folder relative to the project root"),
            fn=list_files,
        ),
        Tool(
            name="read_file",
            description="Read a whole file of the project, with line numbers.",
            parameters=schema("path", files, "file relative to the project root"),
            fn=read_file,
        ),
        Tool(
            name="search",
            description="Search every file of the project for a substring; path:line: text.",
            parameters=schema("pattern", SEARCH_TERMS, "the substring to look for"),
            fn=search,
        ),
    )
