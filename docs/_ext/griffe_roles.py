"""A griffe extension for the reference site (mkdocs.yml): reStructuredText as Markdown.

The docstrings are Google style with two reStructuredText habits Markdown would show
verbatim. Before mkdocstrings renders a docstring:

- each Sphinx role (``:class:`Fit```, ``:meth:`~windowguard.ContextWindowManager.fit```)
  becomes a code span of its target (``~`` keeps the last dotted part, as Sphinx does);
- each literal block (a paragraph ending in ``::`` and the indented block after it)
  becomes a fenced code block, Python when it compiles, and the ``::`` a colon.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|mod|data|exc|obj|const):`([^`]+)`")


def _target(match: re.Match[str]) -> str:
    text = match.group(1).strip()
    if "<" in text and text.endswith(">"):  # :class:`title <target>`
        return f"`{text[: text.index('<')].strip()}`"
    if text.startswith("~"):
        text = text[1:].rsplit(".", 1)[-1]
    text = text.lstrip("!.")
    return f"`{text}`"


def plain_roles(text: str) -> str:
    """``text`` with every Sphinx cross-reference role replaced by a code span."""
    return _ROLE.sub(_target, text)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def fenced_literals(text: str) -> str:
    """``text`` with every reStructuredText literal block (``::``) as a fenced block."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.rstrip().endswith("::"):
            out.append(line)
            i += 1
            continue
        base = _indent(line)
        end = i + 1
        while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > base):
            end += 1
        while end > i + 1 and not lines[end - 1].strip():
            end -= 1
        body = textwrap.dedent("\n".join(lines[i + 1 : end])).strip("\n")
        if not body:  # a "::" with nothing indented after it is not a literal block
            out.append(line)
            i += 1
            continue
        intro = line.rstrip()[:-1]
        if intro.strip() != ":":
            out += [intro, ""]
        try:
            compile(body, "<docstring>", "exec")
            language = "python"
        except SyntaxError:
            language = "text"
        pad = " " * base
        out += [pad + "```" + language, *(pad + b if b else b for b in body.split("\n"))]
        out += [pad + "```"]
        i = end
    return "\n".join(out)


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles and literal blocks in every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fenced_literals(plain_roles(obj.docstring.value))
