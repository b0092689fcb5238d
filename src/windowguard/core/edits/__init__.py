"""Edit stages: keeping what matters when a request does not fit (issue 19).

Before whole turns are dropped, a request can be made to fit by editing what it sends:
cutting one oversized tool result to its start and end (:class:`ClampToolResults`),
replacing old tool results by short placeholders (:class:`ClearToolResults`), and -- opt
in -- folding old turns into a summary (:class:`Summarize`). This package holds the
format-level machinery the manager's pipeline calls; it is part of the pure core: no
I/O, no clock, no run.

* :mod:`.parts` finds tool results and calls in any wire format, paired by id within
  their turn exactly as :mod:`windowguard.core.turns` pairs them.
* :mod:`.rewrite` builds an edited message: a new object of the caller's own type with
  only the targeted content replaced; the caller's object is never mutated.
* :mod:`.text` clamps a text to a token budget and writes placeholders, deterministically
  (byte-stable across sends, for prompt caches).
* :mod:`.summary` makes the summary message and what a summarizer is given.
* :mod:`.records` holds the receipts (``EditRecord``, the ``context_edited`` event).

Guarantees every stage keeps, as dropping does: the head and the newest turn are always
sent, pairing is never broken (a call and its result stay together, edited or not),
unedited messages are the caller's own objects, and the caller's list is never changed.
"""

from .config import (
    DEFAULT_EDITS,
    MIN_CLAMP_TOKENS,
    ClampToolResults,
    ClearToolResults,
    EditStage,
    SpillTarget,
    Summarize,
    Summarizer,
    check_edits,
)
from .parts import HEAD_TURN, CallRef, ResultRef, looks_failed, tool_calls, tool_results
from .records import EDIT_KINDS, EditKind, EditRecord
from .rewrite import (
    CLEARED_INPUT,
    InputsCleared,
    clear_call_inputs,
    media_droppable,
    replace_result_text,
)
from .summary import (
    DEFAULT_INSTRUCTIONS,
    SUMMARY_PREFIX,
    arun_summarizer,
    render_turns,
    run_summarizer,
    summary_message,
    summary_prompt,
)
from .text import (
    DEFAULT_PLACEHOLDER,
    PAGE_CHARS,
    PLACEHOLDER_FIELDS,
    Keep,
    check_placeholder,
    clamp_text,
    placeholder_text,
)

__all__ = [
    "CLEARED_INPUT",
    "DEFAULT_EDITS",
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_PLACEHOLDER",
    "EDIT_KINDS",
    "HEAD_TURN",
    "MIN_CLAMP_TOKENS",
    "PAGE_CHARS",
    "PLACEHOLDER_FIELDS",
    "SUMMARY_PREFIX",
    "CallRef",
    "ClampToolResults",
    "ClearToolResults",
    "EditKind",
    "EditRecord",
    "EditStage",
    "InputsCleared",
    "Keep",
    "ResultRef",
    "SpillTarget",
    "Summarize",
    "Summarizer",
    "arun_summarizer",
    "check_edits",
    "check_placeholder",
    "clamp_text",
    "clear_call_inputs",
    "looks_failed",
    "media_droppable",
    "placeholder_text",
    "render_turns",
    "replace_result_text",
    "run_summarizer",
    "summary_message",
    "summary_prompt",
    "tool_calls",
    "tool_results",
]
