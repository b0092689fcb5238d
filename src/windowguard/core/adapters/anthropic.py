"""Anthropic Messages -> shapes.

The system prompt is a separate ``system`` argument (a string or a list of text
blocks), shaped by :func:`shape_system`. ``messages`` alternate ``user`` and
``assistant``; content is a string or a list of blocks (dicts or the ``anthropic``
SDK's block objects, which people append straight from ``response.content``):

* assistant: ``text``; ``thinking`` (its text counts; the opaque ``signature`` is
  carried, not counted) and ``redacted_thinking`` (opaque ``data``, counted densely to
  err high); ``tool_use`` opens its ``id``; server-tool blocks (``server_tool_use``,
  ``web_search_tool_result``, ``mcp_tool_use`` ...) are self-contained and travel
  inside their assistant message.
* user: ``text``, media (``image``, ``document``; a fixed cost each, a plain-text
  document counts its text), and ``tool_result`` blocks answering ``tool_use_id``.
  A user message may mix tool results and text; one of tool results only is marked
  ``results_only`` (it answers calls, it is not the user's task).

A ``tool_use`` without an ``id`` or a ``tool_result`` without a ``tool_use_id`` carries
``""`` and pairs by position within its turn, as the other formats' id-less calls do.

Reference: https://docs.anthropic.com/en/api/messages and
https://docs.anthropic.com/en/docs/build-with-claude/tool-use.
"""

from __future__ import annotations

from ..shapes import Segment, Shape
from ._common import call_id_of, call_segment, field, json_text, segment, type_name

__all__ = ["shape_message", "shape_system"]

_SELF_CONTAINED = frozenset(
    {
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
        "tool_search_tool_result",
    }
)


def shape_system(system: object) -> tuple[Shape, ...]:
    """Shape the separate ``system`` argument (None, a string or text blocks)."""
    if system is None:
        return ()
    segments, media, answers, opens, problem = _blocks(system, role="system")
    del answers, opens
    return (Shape(kind="system", segments=segments, media_items=media, problem=problem),)


def shape_message(message: object) -> Shape:
    """Extract the shape of one Messages API message (dict or SDK object)."""
    role = field(message, "role")
    if role not in ("user", "assistant"):
        if role is None:
            return Shape(kind="other", problem=f"a {type_name(message)} with no 'role'")
        hint = " (pass system prompts as the separate system= argument)" if role == "system" else ""
        return Shape(kind="other", problem=f"unknown role {role!r}{hint}")
    content = field(message, "content")
    segments, media, answers, opens, problem = _blocks(content, role=role)
    return Shape(
        kind="assistant" if role == "assistant" else "user",
        opens=opens,
        answers=answers,
        segments=segments,
        media_items=media,
        problem=problem,
        results_only=role == "user" and _results_only(content),
    )


def _results_only(content: object) -> bool:
    """Whether a user message's content is tool results and nothing else: it answers
    calls, it does not state a task."""
    return (
        isinstance(content, (list, tuple))
        and bool(content)
        and all(field(block, "type") == "tool_result" for block in content)
    )


def _blocks(
    content: object, *, role: str
) -> tuple[tuple[Segment, ...], int, tuple[str, ...], tuple[str, ...], str | None]:
    if isinstance(content, str):
        return ((segment("prose", content),) if content else ()), 0, (), (), None
    if not isinstance(content, (list, tuple)):
        wrong = f"'content' must be a string or a list of blocks, got {type_name(content)}"
        return (), 0, (), (), wrong
    segments: list[Segment] = []
    answers: list[str] = []
    opens: list[str] = []
    media = 0
    problem: str | None = None
    for block in content:
        kind = field(block, "type")
        if kind == "text":
            text = field(block, "text")
            if isinstance(text, str):
                segments.append(segment("prose", text))
            else:
                problem = problem or f"a text block whose 'text' is {type_name(text)}"
        elif kind == "thinking":
            text = field(block, "thinking")
            if isinstance(text, str):
                segments.append(segment("prose", text, reasoning=True))
        elif kind == "redacted_thinking":
            data = field(block, "data")
            if isinstance(data, str):
                segments.append(segment("dense", data))
        elif kind == "tool_use":
            call_id, id_problem = call_id_of(field(block, "id"), "a tool_use block's 'id'")
            problem = problem or id_problem
            if role != "assistant":
                problem = problem or f"a tool_use block ({call_id}) in a {role} message"
            opens.append(call_id)
            name = field(block, "name") or ""
            segments.append(call_segment(str(name), json_text(field(block, "input") or {})))
        elif kind == "tool_result":
            call_id, id_problem = call_id_of(
                field(block, "tool_use_id"), "a tool_result block's 'tool_use_id'"
            )
            problem = problem or id_problem
            if role != "user":
                problem = problem or f"a tool_result block ({call_id}) in a {role} message"
            answers.append(call_id)
            inner, inner_media, _, _, inner_problem = _blocks(
                field(block, "content") or "", role="tool_result"
            )
            result = len(answers) - 1
            segments.extend(
                Segment(content_class="dense", text=s.text, result=result) for s in inner
            )
            media += inner_media
            problem = problem or inner_problem
        elif kind in ("image", "document", "search_result"):
            text = _document_text(block)
            if text is None:
                media += 1
            else:
                segments.append(segment("prose", text))
        elif kind in _SELF_CONTAINED:
            segments.append(segment("dense", json_text(block)))
        elif kind is None:
            problem = problem or f"a content block with no 'type' ({type_name(block)})"
        else:
            segments.append(segment("dense", json_text(block)))
    return tuple(segments), media, tuple(answers), tuple(opens), problem


def _document_text(block: object) -> str | None:
    """The text of a plain-text document or search result; None for binary media."""
    if field(block, "type") == "search_result":
        return json_text(block)
    source = field(block, "source")
    if field(source, "type") == "text":
        data = field(source, "data")
        return data if isinstance(data, str) else None
    return None
