"""OpenAI Responses API input items -> shapes.

Items are dicts or the ``openai`` SDK's item objects (``response.output`` appended
to the next request's ``input``):

* ``message`` (also the type-less ``{"role", "content"}`` shorthand): ``user``,
  ``system``/``developer`` or ``assistant``; content parts ``input_text``,
  ``output_text``, ``refusal``, media (``input_image``, ``input_file``,
  ``input_audio``) at a fixed cost.
* ``reasoning``: summary and content text count as prose; ``encrypted_content`` is
  carried verbatim and counted densely (it stands for reasoning tokens the model will
  read again).
* Calls and their outputs pair by ``call_id``: ``function_call`` /
  ``function_call_output`` and the built-in ``custom_tool_call``, ``computer_call``,
  ``local_shell_call``, ``shell_call``, ``apply_patch_call`` with their ``*_output``;
  ``mcp_approval_request`` pairs with ``mcp_approval_response`` by
  ``approval_request_id``.
* Self-contained output items (``web_search_call``, ``file_search_call``,
  ``image_generation_call``, ``code_interpreter_call``, ``mcp_call``,
  ``mcp_list_tools``) belong to the assistant response they came in.
* Unknown item types, and ``item_reference`` (which points at server-side state we
  cannot see), are ``kind="other"``: carried along with their neighbours.

Reasoning items are marked ``reasoning`` and every ``*_call`` item ``call_item``, so
segmentation keeps a response's calls with its reasoning item even when the caller
appends each output right after its call: OpenAI refuses a ``function_call`` sent
without its reasoning item ("Item 'fc_…' of type 'function_call' was provided without
its required 'reasoning' item"). A call or output without a ``call_id`` carries ``""``
and pairs by position within its turn.

Reference: https://platform.openai.com/docs/api-reference/responses/create (input).
"""

from __future__ import annotations

from ..shapes import Kind, Segment, Shape
from ._common import call_id_of, call_segment, field, json_text, segment, type_name

__all__ = ["RESPONSES_ITEM_TYPES", "shape_message"]

_PAIRED_CALLS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "computer_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
    }
)
_PAIRED_OUTPUTS = frozenset(f"{t}_output" for t in _PAIRED_CALLS)
_SELF_CONTAINED = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "image_generation_call",
        "code_interpreter_call",
        "mcp_call",
        "mcp_list_tools",
        "tool_search_call",
    }
)
RESPONSES_ITEM_TYPES = (
    frozenset({"message", "reasoning", "mcp_approval_request", "mcp_approval_response"})
    | _PAIRED_CALLS
    | _PAIRED_OUTPUTS
    | _SELF_CONTAINED
    | frozenset({"item_reference", "compaction"})
)
_MEDIA = frozenset({"input_image", "input_file", "input_audio", "computer_screenshot"})


def shape_message(item: object) -> Shape:
    """Extract the shape of one Responses input item (dict or SDK object)."""
    kind = field(item, "type")
    if kind is None:
        if field(item, "role") is None:
            return Shape(kind="other", problem=f"a {type_name(item)} with no 'type' or 'role'")
        kind = "message"
    if kind == "message":
        return _message(item)
    if kind == "reasoning":
        segments: list[Segment] = []
        parts = [*_parts(field(item, "summary")), *_parts(field(item, "content"))]
        for part in parts:
            text = field(part, "text")
            if isinstance(text, str):
                segments.append(segment("prose", text))
        encrypted = field(item, "encrypted_content")
        if isinstance(encrypted, str):
            segments.append(segment("dense", encrypted))
        return Shape(kind="assistant", segments=tuple(segments), reasoning=True)
    if kind in _PAIRED_CALLS:
        call_id, problem = call_id_of(field(item, "call_id"), f"a {kind}'s 'call_id'")
        return Shape(
            kind="assistant",
            opens=(call_id,),
            segments=_call_body(item),
            problem=problem,
            call_item=True,
        )
    if kind in _PAIRED_OUTPUTS:
        # Only call_id names the call; an output item's own ``id`` names the output.
        call_id, problem = call_id_of(field(item, "call_id"), f"a {kind}'s 'call_id'")
        segments_, media = _output(field(item, "output"))
        return Shape(
            kind="tool", answers=(call_id,), segments=segments_, media_items=media, problem=problem
        )
    if kind == "mcp_approval_request":
        request_id = field(item, "id")
        opens = (request_id,) if isinstance(request_id, str) and request_id else ()
        return Shape(
            kind="assistant",
            opens=opens,
            segments=(segment("dense", json_text(item)),),
            call_item=True,
        )
    if kind == "mcp_approval_response":
        request_id = field(item, "approval_request_id")
        answers = (request_id,) if isinstance(request_id, str) and request_id else ()
        return Shape(kind="tool", answers=answers, segments=(segment("dense", json_text(item)),))
    if kind in _SELF_CONTAINED:
        return Shape(
            kind="assistant", segments=(segment("dense", json_text(item)),), call_item=True
        )
    return Shape(kind="other", segments=(segment("dense", json_text(item)),))


def _parts(value: object) -> tuple[object, ...]:
    return tuple(value) if isinstance(value, (list, tuple)) else ()


def _message(item: object) -> Shape:
    role = field(item, "role")
    content = field(item, "content")
    segments: list[Segment] = []
    media = 0
    problem: str | None = None
    if isinstance(content, str):
        if content:
            segments.append(segment("prose", content))
    elif isinstance(content, (list, tuple)):
        for part in content:
            part_type = field(part, "type")
            if part_type in ("input_text", "output_text", "text"):
                text = field(part, "text")
                if isinstance(text, str):
                    segments.append(segment("prose", text))
                else:
                    problem = problem or f"a text part whose 'text' is {type_name(text)}"
            elif part_type == "refusal":
                text = field(part, "refusal")
                if isinstance(text, str):
                    segments.append(segment("prose", text))
            elif part_type in _MEDIA:
                media += 1
            else:
                segments.append(segment("dense", json_text(part)))
    else:
        problem = f"'content' must be a string or a list of parts, got {type_name(content)}"
    kind: Kind
    if role in ("system", "developer"):
        kind = "system"
    elif role == "user":
        kind = "user"
    elif role == "assistant":
        kind = "assistant"
    else:
        return Shape(kind="other", segments=tuple(segments), problem=f"unknown role {role!r}")
    return Shape(kind=kind, segments=tuple(segments), media_items=media, problem=problem)


def _call_body(item: object) -> tuple[Segment, ...]:
    name = field(item, "name") or ""
    for key in ("arguments", "input", "action", "operation"):
        value = field(item, key)
        if value is not None:
            text = value if isinstance(value, str) else json_text(value)
            return (call_segment(str(name), text),)
    return (call_segment(str(name), ""),) if name else ()


def _output(output: object) -> tuple[tuple[Segment, ...], int]:
    if output is None:
        return (), 0
    if isinstance(output, str):
        return ((segment("dense", output),) if output else ()), 0
    if isinstance(output, (list, tuple)):
        segments: list[Segment] = []
        media = 0
        for part in output:
            if field(part, "type") in _MEDIA:
                media += 1
            else:
                text = field(part, "text")
                segments.append(
                    segment("dense", text if isinstance(text, str) else json_text(part))
                )
        return tuple(segments), media
    if field(output, "type") in _MEDIA:
        return (), 1
    return (segment("dense", json_text(output)),), 0
