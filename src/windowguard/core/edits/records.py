"""Receipts: what an edit stage did, as a value (``Fit.edits``) and as an event.

An :class:`EditRecord` names the stage, the messages it touched (indices in the caller's
transcript, so a record is meaningful against the list the caller passed), the tools
involved and the tokens before and after. Records hold no time and no random id: the same
sends give the same records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..events import ContextEdited
from ..exceptions import ConfigurationError

__all__ = ["EDIT_KINDS", "EditKind", "EditRecord"]

EditKind = Literal["clamp", "clear", "clear_inputs", "summarize", "drop"]
EDIT_KINDS: tuple[str, ...] = ("clamp", "clear", "clear_inputs", "summarize", "drop")


@dataclass(frozen=True, slots=True, kw_only=True)
class EditRecord:
    """One applied edit.

    Attributes:
        kind: ``"clamp"`` (a result cut to head and tail), ``"clear"`` (results replaced
            by placeholders), ``"clear_inputs"`` (call arguments cleared),
            ``"summarize"`` (turns folded into a summary), ``"drop"`` (whole turns
            dropped).
        messages: the caller's message indices it touched, ascending.
        tool_names: the tools involved, in message order, without repeats.
        tokens_before: what those messages counted before the edit.
        tokens_after: what they count after it (0 for dropped messages; the summary
            message for ``"summarize"``).
    """

    kind: EditKind
    messages: tuple[int, ...]
    tool_names: tuple[str, ...] = ()
    tokens_before: int
    tokens_after: int

    def __post_init__(self) -> None:
        if self.kind not in EDIT_KINDS:
            raise ConfigurationError(
                f"EditRecord kind must be one of {EDIT_KINDS}, got {self.kind!r}"
            )
        object.__setattr__(self, "messages", tuple(sorted(set(self.messages))))
        object.__setattr__(self, "tool_names", tuple(dict.fromkeys(self.tool_names)))
        if self.tokens_before < 0 or self.tokens_after < 0:
            raise ConfigurationError(
                f"EditRecord tokens must be >= 0, got {self.tokens_before} -> {self.tokens_after}"
            )

    @property
    def tokens_freed(self) -> int:
        """Tokens this edit saved (never negative)."""
        return max(0, self.tokens_before - self.tokens_after)

    def event(self, *, new: bool = True) -> ContextEdited:
        """The ``context_edited`` event of this edit (``new``: made on this send)."""
        return ContextEdited(
            edit=self.kind,
            messages=self.messages,
            tool_names=self.tool_names,
            tokens_before=self.tokens_before,
            tokens_after=self.tokens_after,
            tokens_freed=self.tokens_freed,
            new=new,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for ``inspect``, journals and reports)."""
        return {
            "kind": self.kind,
            "messages": list(self.messages),
            "tool_names": list(self.tool_names),
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "tokens_freed": self.tokens_freed,
        }
