"""Adapters: each wire format's messages -> :class:`~windowguard.core.shapes.Shape`.

Three formats are supported: OpenAI Chat Completions (``"openai_chat"``), Anthropic
Messages (``"anthropic"``) and OpenAI Responses input items (``"responses"``). Every
adapter reads dicts and the official SDKs' typed objects alike and never copies a
message. :func:`detect_format` guesses the format from the messages; a transcript of
plain ``{"role", "content": str}`` messages reads the same in every format, so the
guess only matters once format-specific structure appears.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import get_args

from ..exceptions import UnknownFormatError
from ..shapes import Format, Shape
from . import anthropic, openai_chat, responses
from ._common import field, type_name

__all__ = [
    "FORMATS",
    "ShapedTranscript",
    "check_format",
    "check_messages",
    "detect_format",
    "format_evidence",
    "shape_message",
    "shape_messages",
    "shaper",
]

FORMATS: tuple[Format, ...] = get_args(Format)

_ANTHROPIC_BLOCKS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use", "document"}
)
_RESPONSES_PARTS = frozenset({"input_text", "output_text", "input_image", "input_file"})
_CHAT_PARTS = frozenset({"image_url", "input_audio"})

_SHAPERS: dict[str, Callable[[object], Shape]] = {
    "openai_chat": openai_chat.shape_message,
    "anthropic": anthropic.shape_message,
    "responses": responses.shape_message,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ShapedTranscript:
    """The shapes of a whole transcript.

    Attributes:
        format: the wire format the shapes were read in.
        shapes: one shape per message, in order.
        system_shapes: shapes of Anthropic's separate ``system`` argument (else empty).
    """

    format: Format
    shapes: tuple[Shape, ...]
    system_shapes: tuple[Shape, ...] = ()


def check_messages(messages: object) -> Sequence[object]:
    """Return ``messages`` as a sequence, or raise naming what was given instead."""
    if type(messages) is list or type(messages) is tuple:  # skips two ABC checks
        return messages
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise UnknownFormatError(f"messages must be a list of messages, got {type_name(messages)}")
    return messages


def check_format(format: str | None) -> Format | None:
    """Validate an explicit format name."""
    if format is None or format in FORMATS:
        return format
    raise UnknownFormatError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")


def detect_format(messages: Sequence[object], *, system: object = None) -> Format:
    """Guess the wire format of ``messages``.

    Args:
        messages: the transcript.
        system: Anthropic's separate system argument; when given, the format is Anthropic.

    Returns:
        ``"openai_chat"``, ``"anthropic"`` or ``"responses"``; plain text-only
        transcripts read the same in every format and are reported as ``"openai_chat"``.
    """
    check_messages(messages)
    return format_evidence(messages, system=system) or "openai_chat"


def format_evidence(messages: Iterable[object], *, system: object = None) -> Format | None:
    """The format ``messages`` show evidence of, or None when they read the same in all."""
    if system is not None:
        return "anthropic"
    for message in messages:
        item_type = field(message, "type")
        if isinstance(item_type, str) and item_type in responses.RESPONSES_ITEM_TYPES:
            return "responses"
        role = field(message, "role")
        if role in ("tool", "function") or field(message, "tool_calls"):
            return "openai_chat"
        content = field(message, "content")
        if isinstance(content, (list, tuple)):
            for part in content:
                part_type = field(part, "type")
                if part_type in _ANTHROPIC_BLOCKS:
                    return "anthropic"
                if part_type in _RESPONSES_PARTS:
                    return "responses"
                if part_type in _CHAT_PARTS:
                    return "openai_chat"
                if part_type == "image" and field(part, "source") is not None:
                    return "anthropic"
    return None


def shaper(format: Format) -> Callable[[object], Shape]:
    """The per-message shape function of ``format``."""
    return _SHAPERS[format]


def shape_message(message: object, format: Format) -> Shape:
    """The shape of one message in ``format``."""
    return _SHAPERS[format](message)


def shape_messages(
    messages: Sequence[object], *, format: str | None = None, system: object = None
) -> ShapedTranscript:
    """Shape a whole transcript.

    Args:
        messages: the transcript (dicts or SDK objects).
        format: the wire format; detected when None.
        system: Anthropic's separate system argument (format becomes Anthropic).

    Raises:
        UnknownFormatError: ``messages`` is not a list, ``format`` is unknown, or a
            ``system`` argument was given with a non-Anthropic format.
    """
    check_messages(messages)
    fmt = check_format(format) or detect_format(messages, system=system)
    if system is not None and fmt != "anthropic":
        raise UnknownFormatError(
            f"a separate system argument is only used by the Anthropic format, not {fmt}"
        )
    shape = _SHAPERS[fmt]
    return ShapedTranscript(
        format=fmt,
        shapes=tuple(shape(m) for m in messages),
        system_shapes=anthropic.shape_system(system) if fmt == "anthropic" else (),
    )
