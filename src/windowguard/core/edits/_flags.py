"""Edit stages from command-line style options, for the surfaces that are configured by
flags: ``windowguard proxy`` (and its :class:`~windowguard.proxy.ProxyConfig`) and
``windowguard inspect`` / ``fit``.

``--clamp-tool-results TOKENS`` is :class:`~windowguard.ClampToolResults` (``max_tokens``),
``--spill-dir DIR`` its :class:`~windowguard.SpillStore`, ``--clear-tool-results KEEP``
:class:`~windowguard.ClearToolResults` (``keep``), ``--clear-at-least TOKENS`` its
``clear_at_least`` and ``--clear-trigger TOKENS|FRACTION`` its ``trigger``. There is no
summary flag: a summarizer is code.

Invariants: every option is checked by the stage it configures, and an error names the
flag it came from (``--clamp-tool-results: ... must be an int >= 100``); an option that
only refines another (``--spill-dir``, ``--clear-at-least``, ``--clear-trigger``) without
it is refused, never
ignored. :func:`edit_stages` makes no directory unless given a spill store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..exceptions import ConfigurationError
from .config import (
    DEFAULT_EDITS,
    ClampToolResults,
    ClearToolResults,
    EditStage,
    SpillTarget,
)

__all__ = ["describe_edits", "edit_stages"]


def edit_stages(
    *,
    clamp_tool_results: int | None = None,
    spill: SpillTarget | None = None,
    spill_dir: object = None,
    clear_tool_results: int | None = None,
    clear_at_least: int | None = None,
    clear_trigger: int | float | None = None,
    no_edits: bool = False,
) -> tuple[EditStage, ...] | None:
    """The edit stages the flags ask for, cheapest first: None (no flag) is the
    manager's default (:data:`~windowguard.DEFAULT_EDITS`), ``()`` (``--no-edits``) drops
    only.

    Args:
        clamp_tool_results: ``--clamp-tool-results``: the most tokens one result keeps.
        spill: the store the clamp keeps whole outputs in (made from ``--spill-dir`` by
            the caller; None while only checking the flags).
        spill_dir: ``--spill-dir`` as given (checked: it needs ``--clamp-tool-results``).
        clear_tool_results: ``--clear-tool-results``: the newest turns kept whole.
        clear_at_least: ``--clear-at-least``: the fewest tokens one clearing frees.
        clear_trigger: ``--clear-trigger``: clear once the request passes this many tokens
            (an int) or this fraction of the input budget (a float in (0, 1]).
        no_edits: ``--no-edits``: drop whole turns only.

    Raises:
        ConfigurationError: a value out of range, or a refining flag without the flag it
            refines; the message names the flag.
    """
    if spill_dir is not None and (not isinstance(spill_dir, str) or not spill_dir):
        raise ConfigurationError(f"--spill-dir must be a directory path, got {spill_dir!r}")
    if (spill_dir is not None or spill is not None) and clamp_tool_results is None:
        raise ConfigurationError(
            "--spill-dir keeps the outputs --clamp-tool-results cuts; pass "
            "--clamp-tool-results TOKENS as well"
        )
    if clear_at_least is not None and clear_tool_results is None:
        raise ConfigurationError(
            "--clear-at-least sets how much one clearing must free; pass "
            "--clear-tool-results KEEP as well"
        )
    if clear_trigger is not None and clear_tool_results is None:
        raise ConfigurationError(
            "--clear-trigger sets when a clearing happens; pass --clear-tool-results KEEP as well"
        )
    named = clamp_tool_results is not None or clear_tool_results is not None
    if no_edits and named:
        raise ConfigurationError(
            "--no-edits drops whole turns only; it cannot go with --clamp-tool-results or "
            "--clear-tool-results"
        )
    if no_edits:
        return ()
    if not named:
        return None
    stages: list[EditStage] = []
    if clamp_tool_results is not None:
        try:
            stages.append(ClampToolResults(max_tokens=clamp_tool_results, spill=spill))
        except ConfigurationError as exc:
            raise ConfigurationError(f"--clamp-tool-results: {exc}") from exc
    if clear_tool_results is not None:
        try:
            stages.append(ClearToolResults(keep=clear_tool_results))
        except ConfigurationError as exc:
            raise ConfigurationError(f"--clear-tool-results: {exc}") from exc
        refinements = (
            ("--clear-at-least", "clear_at_least", clear_at_least),
            ("--clear-trigger", "trigger", clear_trigger),
        )
        for flag, option, value in refinements:
            if value is None:
                continue
            try:
                stages[-1] = replace(stages[-1], **{option: value})  # type: ignore[arg-type]
            except ConfigurationError as exc:
                raise ConfigurationError(f"{flag}: {exc}") from exc
    return tuple(stages)


def describe_edits(stages: Sequence[EditStage] | None) -> str:
    """One line saying what is edited before whole turns are dropped (None: the
    default)."""
    if stages is None:
        stages = DEFAULT_EDITS
    said: list[str] = []
    for stage in stages:
        if isinstance(stage, ClampToolResults):
            kept = f", whole outputs kept in {stage.spill!r}" if stage.spill is not None else ""
            limit = stage.max_tokens
            size = f"{limit:.0%} of the input budget" if isinstance(limit, float) else limit
            size = size if isinstance(limit, float) else f"{limit} tokens"
            said.append(f"clamp tool results over {size}{kept}")
        elif isinstance(stage, ClearToolResults):
            inputs = " and their calls' arguments" if stage.clear_inputs else ""
            mark = stage.low_water
            down = f", down to {mark:.0%} of the input budget" if mark is not None else ""
            trigger = stage.trigger
            when = ""
            if isinstance(trigger, float):
                when = f" once the request passes {trigger:.0%} of the input budget"
            elif isinstance(trigger, int):
                when = f" once the request passes {trigger} tokens"
            said.append(
                f"clear tool results{inputs} outside the newest {stage.keep} turns{when} "
                f"(at least {stage.clear_at_least} tokens at a time{down})"
            )
        else:
            said.append(f"summarize turns older than the newest {stage.keep_turns}")
    if not said:
        return "edits: none (whole turns are dropped)"
    return "edits: " + "; ".join(said) + "; then whole turns are dropped"
