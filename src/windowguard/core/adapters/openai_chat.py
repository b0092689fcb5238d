"""OpenAI Chat Completions messages -> shapes.

Accepts plain dicts and the ``openai`` SDK's typed message objects (people append
``response.choices[0].message`` straight to their list). Roles:

* ``system`` / ``developer``: instructions (``kind="system"``).
* ``user``: text, or content parts (``text``, ``image_url``, ``input_audio``, ``file``);
  media parts cost a fixed amount each, never their base64 length.
* ``assistant``: text (``content`` as a string or ``text``/``refusal`` parts),
  ``reasoning_content`` (DeepSeek / vLLM reasoning parsers), and ``tool_calls``; each
  call opens its ``id``. The legacy ``function_call`` opens ``function:<name>``.
* ``tool``: a tool result answering ``tool_call_id``; legacy ``function`` answers
  ``function:<name>``.

Some servers and local models repeat ids within one response or leave them out: a
call or result without an id carries ``""`` and pairs by position within its turn.

Reference: https://platform.openai.com/docs/api-reference/chat/create (messages).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..shapes import Segment, Shape
from ._common import call_id_of, call_segment, field, getter, json_text, segment, type_name

__all__ = ["shape_message"]

_MEDIA_PART_TYPES = frozenset({"image_url", "input_audio", "file", "input_image", "image"})


def shape_message(message: object) -> Shape:
    """Extract the shape of one Chat Completions message (dict or SDK object)."""
    get = getter(message)
    role = get("role")
    if role is None:
        return Shape(kind="other", problem=f"a {type_name(message)} with no 'role'")
    if role in ("system", "developer"):
        segments, media, problem = _content(get("content"), "prose")
        return Shape(kind="system", segments=segments, media_items=media, problem=problem)
    if role == "user":
        segments, media, problem = _content(get("content"), "prose")
        return Shape(kind="user", segments=segments, media_items=media, problem=problem)
    if role == "assistant":
        return _assistant(get)
    if role == "tool":
        # A missing tool_call_id (local servers) answers the turn's id-less calls in order.
        call_id, id_problem = call_id_of(get("tool_call_id"), "a tool message's 'tool_call_id'")
        segments, media, problem = _content(get("content"), "dense")
        return Shape(
            kind="tool",
            answers=(call_id,),
            segments=segments,
            media_items=media,
            problem=problem or id_problem,
        )
    if role == "function":
        name = get("name")
        segments, media, problem = _content(get("content"), "dense")
        return Shape(
            kind="tool",
            answers=(f"function:{name}",),
            segments=segments,
            media_items=media,
            problem=problem,
        )
    return Shape(kind="other", problem=f"unknown role {role!r}")


def _assistant(get: Callable[..., Any]) -> Shape:
    segments, media, problem = _content(get("content"), "prose", allow_none=True)
    extra: list[Segment] = []
    reasoning = get("reasoning_content") or get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        extra.append(segment("prose", reasoning, reasoning=True))
    opens: list[str] = []
    tool_calls = get("tool_calls")
    if tool_calls is not None:
        if not isinstance(tool_calls, (list, tuple)):
            problem = problem or f"'tool_calls' must be a list, got {type_name(tool_calls)}"
        else:
            for call in tool_calls:
                call_id, id_problem = call_id_of(field(call, "id"), "a tool call's 'id'")
                problem = problem or id_problem
                opens.append(call_id)
                extra.extend(_call_segments(call))
    function_call = get("function_call")
    if function_call is not None:
        name = field(function_call, "name")
        opens.append(f"function:{name}")
        extra.append(call_segment(str(name), _text_or_json(field(function_call, "arguments"))))
    return Shape(
        kind="assistant",
        opens=tuple(opens),
        segments=segments + tuple(extra),
        media_items=media,
        problem=problem,
    )


def _call_segments(call: object) -> tuple[Segment, ...]:
    function = field(call, "function")
    if function is not None:
        name = field(function, "name") or ""
        return (call_segment(str(name), _text_or_json(field(function, "arguments"))),)
    custom = field(call, "custom")
    if custom is not None:
        name = field(custom, "name") or ""
        return (call_segment(str(name), _text_or_json(field(custom, "input"))),)
    return (segment("dense", json_text(call)),)


def _text_or_json(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json_text(value)


def _content(
    content: object, content_class: Any, *, allow_none: bool = False
) -> tuple[tuple[Segment, ...], int, str | None]:
    """Segments, media count and problem of a ``content`` field."""
    if isinstance(content, str):
        return ((segment(content_class, content),) if content else ()), 0, None
    if content is None:
        return (), 0, (None if allow_none else "'content' is missing or null")
    if not isinstance(content, (list, tuple)):
        return (), 0, f"'content' must be a string or a list of parts, got {type_name(content)}"
    segments: list[Segment] = []
    media = 0
    problem: str | None = None
    for part in content:
        if isinstance(part, str):
            segments.append(segment(content_class, part))
            continue
        kind = field(part, "type")
        if kind in ("text", "input_text", "output_text"):
            text = field(part, "text")
            if isinstance(text, str):
                segments.append(segment(content_class, text))
            else:
                problem = problem or f"a text part whose 'text' is {type_name(text)}"
        elif kind == "refusal":
            text = field(part, "refusal")
            if isinstance(text, str):
                segments.append(segment("prose", text))
        elif kind in _MEDIA_PART_TYPES:
            media += 1
        elif kind is None:
            problem = problem or f"a content part with no 'type' ({type_name(part)})"
        else:
            segments.append(segment("dense", json_text(part)))
    return tuple(segments), media, problem
