"""Rewriting one message: a tool result's text, a tool call's input.

:func:`replace_result_text` and :func:`clear_call_inputs` return a NEW message of the
caller's own type with only the targeted content replaced. The caller's message is never
mutated; ids, roles, the order of blocks, every other block (thinking and its signature,
encrypted reasoning, images, documents, ``cache_control``) and every other field stay as
they were; containers are copied only along the edited path, so each untouched block or
call is the caller's own object (:mod:`windowguard.core.edits._objects`). A message nothing was
changed in is returned as is.

Where a result has several text parts, the new text replaces the first and the others
are removed (an edit stands for all of the result's text); non-text parts keep their
place (a clamp), or go with the text when ``drop_media`` is set (a clear: the placeholder
stands for the whole result, as Anthropic's ``clear_tool_uses_20250919`` and LangChain's
``ClearToolUsesEdit`` replace it whole). A result with no text part gets one, first.
Calls whose input may not be changed next to provider reasoning are skipped and reported
(see :mod:`windowguard.core.edits.parts`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..adapters._common import field, type_name
from ..exceptions import ConfigurationError
from ..shapes import Format
from ._objects import is_model, replaced, with_items
from .parts import CallRef

__all__ = [
    "CLEARED_INPUT",
    "InputsCleared",
    "clear_call_inputs",
    "media_droppable",
    "replace_result_text",
]

CLEARED_INPUT = "[input cleared to save context]"
"""What a free-text tool input (an OpenAI custom tool) is replaced by. JSON inputs become
``{}`` instead, so the call stays valid function arguments (pydantic-ai-harness and
LangChain's ``ClearToolUsesEdit`` do the same); the cleared result's placeholder still
names the original arguments."""

_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
_RESPONSES_OUTPUTS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "computer_call_output",
        "local_shell_call_output",
        "shell_call_output",
        "apply_patch_call_output",
    }
)
# The Responses outputs whose parts may be any text, image or file: the others carry a
# typed output (a computer call's screenshot, a shell call's results) the API requires.
_FREE_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})


@dataclass(frozen=True, slots=True, kw_only=True)
class InputsCleared:
    """What :func:`clear_call_inputs` did.

    Attributes:
        message: the new message (the caller's own object when nothing was cleared).
        cleared: the parts whose input was replaced.
        skipped: the parts left alone, each with the reason.
    """

    message: Any
    cleared: tuple[int, ...] = ()
    skipped: tuple[tuple[int, str], ...] = ()


def media_droppable(message: object, fmt: Format) -> bool:
    """Whether ``replace_result_text(..., drop_media=True)`` can drop the images, documents
    and other non-text parts of ``message``'s tool results: in every Chat and Anthropic
    result, and in a Responses ``function_call_output`` or ``custom_tool_call_output``
    (the other outputs are typed: a computer call's output must stay a screenshot)."""
    if fmt != "responses":
        return True
    return field(message, "type") in _FREE_OUTPUTS


def replace_result_text(
    message: Any, fmt: Format, replacements: Mapping[int, str], *, drop_media: bool = False
) -> Any:
    """A copy of ``message`` whose tool results' text is replaced.

    Args:
        message: a tool result message (OpenAI ``tool``/``function`` message, Anthropic
            user message, Responses ``*_call_output`` item), dict or SDK object.
        fmt: its wire format.
        replacements: new text by ``ResultRef.part``.
        drop_media: also remove the replaced results' non-text parts (images,
            documents), where :func:`media_droppable` allows it; else they keep their
            place. A result left with nothing but the new text holds it as a string
            when it had no text part.

    Returns:
        A new object of the caller's type; ``message`` itself when ``replacements`` is
        empty.

    Raises:
        ConfigurationError: a part that is not a tool result of this message, or new
            text that is empty or not a string.
    """
    for part, text in replacements.items():
        if not isinstance(text, str) or not text:
            raise ConfigurationError(
                f"the new text of part {part} must be a non-empty string, got {text!r:.40}"
            )
    if not replacements:
        return message
    if fmt == "anthropic":
        return _anthropic_results(message, replacements, drop_media)
    _only_part_zero(replacements, message, "a tool result")
    text = replacements[0]
    if fmt == "openai_chat":
        if field(message, "role") not in ("tool", "function"):
            raise _not_a(message, "tool result", 0)
        content = _new_content(field(message, "content"), text, "text", drop_media)
        return replaced(message, content=content)
    if field(message, "type") not in _RESPONSES_OUTPUTS:
        raise _not_a(message, "tool result", 0)
    drop = drop_media and media_droppable(message, fmt)
    output = _new_content(field(message, "output"), text, "input_text", drop)
    return replaced(message, output=output)


def clear_call_inputs(
    message: Any,
    fmt: Format,
    parts: Collection[int | CallRef],
    placeholder: str = CLEARED_INPUT,
) -> InputsCleared:
    """A copy of ``message`` whose tool calls' inputs are cleared.

    JSON inputs become ``{}`` (``"{}"`` where arguments are text), free-text inputs
    (OpenAI custom tools) become ``placeholder``. Calls in an Anthropic assistant message
    that carries thinking blocks, calls with typed inputs (Anthropic toolset calls,
    built-in Responses calls) are skipped, and the result says why. What only the whole
    turn shows -- a Responses call whose turn holds a reasoning item -- is in the
    ``CallRef`` :func:`~windowguard.core.edits.parts.tool_calls` made: pass the refs, and those
    with ``clearable=False`` are skipped with their ``reason``.

    Args:
        message: an assistant message (OpenAI, Anthropic) or a Responses call item.
        fmt: its wire format.
        parts: the calls to clear: their ``CallRef`` (preferred), or their ``part``.
        placeholder: what a free-text input is replaced by.

    Raises:
        ConfigurationError: a part that is not a tool call of this message, or an empty
            placeholder.
    """
    if not isinstance(placeholder, str) or not placeholder:
        raise ConfigurationError(f"placeholder must be a non-empty string, got {placeholder!r}")
    wanted: list[int] = []
    refused: list[tuple[int, str]] = []
    for part in parts:
        if isinstance(part, CallRef):
            if part.clearable:
                wanted.append(part.part)
            else:
                refused.append((part.part, part.reason or "not clearable"))
        else:
            wanted.append(part)
    wanted = sorted(set(wanted))
    done = _clear(message, fmt, wanted, placeholder) if wanted else InputsCleared(message=message)
    if not refused:
        return done
    skipped = tuple(sorted({*done.skipped, *refused}))
    return InputsCleared(message=done.message, cleared=done.cleared, skipped=skipped)


def _clear(message: Any, fmt: Format, wanted: list[int], placeholder: str) -> InputsCleared:
    if fmt == "openai_chat":
        return _chat_calls(message, wanted, placeholder)
    if fmt == "anthropic":
        return _anthropic_calls(message, wanted)
    _only_part_zero(dict.fromkeys(wanted, ""), message, "a tool call")
    kind = field(message, "type")
    if kind == "function_call":
        return InputsCleared(message=replaced(message, arguments="{}"), cleared=(0,))
    if kind == "custom_tool_call":
        return InputsCleared(message=replaced(message, input=placeholder), cleared=(0,))
    if isinstance(kind, str) and kind.endswith("_call") and kind != "mcp_call":
        return InputsCleared(
            message=message, skipped=((0, f"a built-in {kind} has a typed input"),)
        )
    raise _not_a(message, "tool call", 0)


# -- results ---------------------------------------------------------------------------


def _anthropic_results(message: Any, replacements: Mapping[int, str], drop_media: bool) -> Any:
    content = field(message, "content")
    if not isinstance(content, (list, tuple)):
        raise _not_a(message, "tool result", min(replacements))
    blocks = list(content)
    for part, text in replacements.items():
        block = blocks[part] if 0 <= part < len(blocks) else None
        if block is None or field(block, "type") != "tool_result":
            raise _not_a(message, "tool_result block", part)
        content_of = _new_content(field(block, "content"), text, "text", drop_media)
        blocks[part] = replaced(block, content=content_of)
    return replaced(message, content=with_items(content, blocks))


def _new_content(content: object, text: str, text_type: str, drop_media: bool = False) -> Any:
    """``content`` (a string or a list of parts) with its text replaced by ``text``, and
    its other parts removed when ``drop_media``."""
    if content is None or isinstance(content, str):
        return text
    if not isinstance(content, (list, tuple)):
        raise ConfigurationError(
            f"a tool result's content must be a string or a list of parts, got {type_name(content)}"
        )
    new: list[Any] = []
    placed = False
    for part in content:
        if isinstance(part, str) or field(part, "type") in _TEXT_PARTS:
            if not placed:
                new.append(text if isinstance(part, str) else replaced(part, text=text))
                placed = True
            continue  # the other text parts are replaced by the one new text
        if not drop_media:
            new.append(part)
    if not placed:
        if drop_media:
            return text  # nothing of the result is left but the new text
        if any(is_model(part) for part in content):
            raise ConfigurationError(
                "this tool result holds no text part and its parts are SDK objects: there "
                "is no text to replace (its images or documents are never edited)"
            )
        new.insert(0, {"type": text_type, "text": text})
    return with_items(content, new)


# -- calls -----------------------------------------------------------------------------


def _chat_calls(message: Any, wanted: Sequence[int], placeholder: str) -> InputsCleared:
    if field(message, "role") != "assistant":
        raise _not_a(message, "tool call", wanted[0])
    tool_calls = field(message, "tool_calls")
    calls = list(tool_calls) if isinstance(tool_calls, (list, tuple)) else []
    changes: dict[str, Any] = {}
    cleared: list[int] = []
    skipped: list[tuple[int, str]] = []
    for part in wanted:
        if part == -1:
            function_call = field(message, "function_call")
            if function_call is None:
                raise _not_a(message, "function_call", part)
            changes["function_call"] = replaced(function_call, arguments="{}")
            cleared.append(part)
            continue
        if not 0 <= part < len(calls):
            raise _not_a(message, "tool call", part)
        call = calls[part]
        function = field(call, "function")
        custom = field(call, "custom")
        if function is not None:
            calls[part] = replaced(call, function=replaced(function, arguments="{}"))
        elif custom is not None:
            calls[part] = replaced(call, custom=replaced(custom, input=placeholder))
        else:
            skipped.append((part, "a tool call of an unknown type"))
            continue
        cleared.append(part)
    if any(p >= 0 for p in cleared):
        assert isinstance(tool_calls, (list, tuple))
        changes["tool_calls"] = with_items(tool_calls, calls)
    new = replaced(message, **changes) if changes else message
    return InputsCleared(message=new, cleared=tuple(cleared), skipped=tuple(skipped))


def _anthropic_calls(message: Any, wanted: Sequence[int]) -> InputsCleared:
    content = field(message, "content")
    blocks = list(content) if isinstance(content, (list, tuple)) else []
    for part in wanted:
        if not 0 <= part < len(blocks) or field(blocks[part], "type") != "tool_use":
            raise _not_a(message, "tool_use block", part)
    if any(field(b, "type") in ("thinking", "redacted_thinking") for b in blocks):
        why = (
            "its assistant message carries signed thinking blocks, which Anthropic requires "
            "back exactly as returned"
        )
        return InputsCleared(message=message, skipped=tuple((p, why) for p in wanted))
    cleared: list[int] = []
    skipped: list[tuple[int, str]] = []
    for part in wanted:
        block = blocks[part]
        tool_input = field(block, "input")
        if tool_input is not None and not isinstance(tool_input, dict):
            skipped.append((part, "its input is a typed object (an Anthropic toolset call)"))
            continue
        blocks[part] = replaced(block, input={})
        cleared.append(part)
    if not cleared:
        return InputsCleared(message=message, skipped=tuple(skipped))
    assert isinstance(content, (list, tuple))
    new = replaced(message, content=with_items(content, blocks))
    return InputsCleared(message=new, cleared=tuple(cleared), skipped=tuple(skipped))


# -- errors ----------------------------------------------------------------------------


def _only_part_zero(parts: Mapping[int, object], message: object, what: str) -> None:
    for part in parts:
        if part != 0:
            raise _not_a(message, what, part)


def _not_a(message: object, what: str, part: int) -> ConfigurationError:
    role = field(message, "role") or field(message, "type")
    return ConfigurationError(
        f"part {part} of this {type_name(message)} ({role!r}) is not a {what}; pass the part "
        "of a ResultRef / CallRef found in this message"
    )
