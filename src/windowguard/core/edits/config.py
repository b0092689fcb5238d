"""The edit stages' configuration values: what ``ContextWindowManager(edits=[...])`` takes.

Each is a frozen value validated when it is made (a :class:`ConfigurationError` names the
option and the value); sequences given as lists are kept as tuples. The stages run
cheapest first, each stopping as soon as the request fits, before whole turns are
dropped: :class:`ClampToolResults` (cut one oversized result), :class:`ClearToolResults`
(replace old results by placeholders), then dropping, then the opt-in
:class:`Summarize`. Their options follow the field's names where they mean the same:
Anthropic's ``clear_tool_uses_20250919`` (``keep``, ``exclude_tools``,
``clear_at_least``, ``clear_tool_inputs``) and LangChain's ``ClearToolUsesEdit``
(``placeholder``), pydantic-ai-harness ``ToolOutputLimits`` (``head_tail`` / ``head`` /
``tail``, a spill store with a paging tool).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, Protocol, runtime_checkable

from ..exceptions import ConfigurationError
from .summary import DEFAULT_INSTRUCTIONS
from .text import Keep, check_placeholder

__all__ = [
    "DEFAULT_EDITS",
    "MIN_CLAMP_TOKENS",
    "ClampToolResults",
    "ClearToolResults",
    "EditStage",
    "SpillTarget",
    "Summarize",
    "Summarizer",
    "check_edits",
]

MIN_CLAMP_TOKENS = 100
"""The smallest ``ClampToolResults.max_tokens``: room for the marker and a few lines."""

Summarizer = Callable[[list[Any], str | None], str | Awaitable[str]]
"""``summarizer(turns, previous_summary) -> str`` (or an awaitable of it): ``turns`` are
the whole turns to fold in as they were sent (the caller's own message objects, and
windowguard's edited copy where a result was clamped or cleared), ``previous_summary``
the text of the summary they extend (None for the first)."""


@runtime_checkable
class SpillTarget(Protocol):
    """Where clamped outputs are kept whole (:class:`windowguard.SpillStore` is one).

    ``put`` must be deterministic and idempotent: the same text gets the same handle on
    every send, so the clamped result stays byte-stable.
    """

    def put(self, text: str, *, tool_name: str | None = None) -> str:
        """Keep ``text``; return its handle."""
        ...

    def read(self, handle: str, offset: int = 0, limit: int | None = None) -> str:
        """A page of a kept text, with a header naming the range and the total."""
        ...


def _names(owner: str, value: object) -> tuple[str, ...]:
    option = f"{owner}(exclude_tools=...)"
    if isinstance(value, str) or not isinstance(value, Iterable):
        hint = f" (for one tool, write exclude_tools=[{value!r}])" if isinstance(value, str) else ""
        raise ConfigurationError(
            f"{option} must be a list or tuple of tool names, got {value!r}{hint}"
        )
    names = tuple(value)
    if not all(isinstance(n, str) and n for n in names):
        raise ConfigurationError(f"{option} must hold non-empty tool names, got {names!r}")
    if isinstance(value, (set, frozenset)):
        names = tuple(sorted(names))  # a set has no order: keep the value deterministic
    return names


def _count(option: str, value: object, minimum: int) -> None:
    if type(value) is not int or value < minimum:  # bool is no count
        raise ConfigurationError(f"{option} must be an int >= {minimum}, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClampToolResults:
    """Cut any single tool result over ``max_tokens`` to its start and end.

    Applies to every turn, the newest included: an output larger than the window no
    longer ends the run. Text parts only; images and documents are untouched. An error
    result keeps what says it failed.

    Attributes:
        max_tokens: the most tokens one result may keep, marker included: a count
            (>= 100), or a fraction of the request's input budget in (0, 1] (at least
            100 tokens), so one setting serves every window.
        keep: ``"head_tail"`` (half each; Codex's middle truncation), ``"head"`` or
            ``"tail"``.
        exclude_tools: tools whose results are never clamped.
        spill: where the whole output is kept (a :class:`windowguard.SpillStore`); the
            marker then says how to page through it with ``read_spilled``, which
            ``ToolLoop`` offers the model.
    """

    max_tokens: int | float
    keep: Keep = "head_tail"
    exclude_tools: tuple[str, ...] = ()
    spill: SpillTarget | None = None

    def limit(self, budget: int) -> int:
        """The most tokens one result may keep in a request of input ``budget``."""
        share = self.max_tokens
        if isinstance(share, float):
            return max(MIN_CLAMP_TOKENS, int(budget * share))
        return share

    def __post_init__(self) -> None:
        share = self.max_tokens
        if isinstance(share, float):
            if not 0.0 < share <= 1.0:
                raise ConfigurationError(
                    f"ClampToolResults(max_tokens=...) as a fraction of the input budget must "
                    f"lie in (0, 1], got {share!r}"
                )
        else:
            _count("ClampToolResults(max_tokens=...)", share, MIN_CLAMP_TOKENS)
        if self.keep not in ("head_tail", "head", "tail"):
            raise ConfigurationError(
                f"ClampToolResults(keep=...) must be 'head_tail', 'head' or 'tail', got "
                f"{self.keep!r}"
            )
        names = _names("ClampToolResults", self.exclude_tools)
        object.__setattr__(self, "exclude_tools", names)
        if self.spill is not None and not isinstance(self.spill, SpillTarget):
            raise ConfigurationError(
                f"ClampToolResults(spill=...) must be a SpillStore (anything with put() and "
                f"read()), got {self.spill!r}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class ClearToolResults:
    """Replace old tool results (outside the newest ``keep`` turns) by a placeholder.

    Oldest first, in blocks down to a low-water mark, and only when that frees at least
    ``clear_at_least`` tokens: each clear rewrites the prompt from the first cleared
    result on, so clearing little at a time would pay a cache write on every send
    (Anthropic's advice for ``clear_tool_uses_20250919``). A result once cleared stays
    cleared, byte for byte. The call and its result stay paired; the assistant's text,
    reasoning and calls stay. The placeholder stands for the whole result: its images and
    documents go with its text (a Responses output of a fixed type, such as a computer
    call's screenshot, is never rewritten).

    Attributes:
        keep: the newest turns whose results are never cleared (>= 1: the newest turn
            is always kept whole).
        exclude_tools: tools whose results are never cleared.
        clear_inputs: also clear the cleared results' call arguments (to ``{}``), where
            the provider allows it (never next to Anthropic thinking or a Responses
            reasoning item).
        clear_at_least: the fewest tokens one clearing must free, or it does not happen.
        placeholder: a ``str.format`` template with the fields ``tool``, ``arguments``,
            ``tokens``, ``call_id``
            (None: :data:`~windowguard.core.edits.text.DEFAULT_PLACEHOLDER`).
        low_water: the fraction of the input budget one block of clears brings the
            request down to (None: the manager's ``low_water``). Cleared results can be
            fetched again, dropped turns cannot, so clearing deeper than dropping keeps
            more of what the agent cannot get back.
        trigger: when a block is cleared. None: only when the request would otherwise
            lose turns; an int: also once the request passes that many tokens; a float
            in (0, 1]: that fraction of the input budget (as Anthropic's
            ``clear_tool_uses_20250919`` ``trigger``). A trigger at or below the
            low-water mark never clears more than the mark allows.
    """

    keep: int = 3
    exclude_tools: tuple[str, ...] = ()
    clear_inputs: bool = False
    clear_at_least: int = 1_000
    placeholder: str | None = None
    low_water: float | None = None
    trigger: int | float | None = None

    def __post_init__(self) -> None:
        _count("ClearToolResults(keep=...)", self.keep, 1)
        names = _names("ClearToolResults", self.exclude_tools)
        object.__setattr__(self, "exclude_tools", names)
        if not isinstance(self.clear_inputs, bool):
            raise ConfigurationError(
                f"ClearToolResults(clear_inputs=...) must be True or False, got "
                f"{self.clear_inputs!r}"
            )
        _count("ClearToolResults(clear_at_least=...)", self.clear_at_least, 0)
        mark = self.low_water
        if mark is not None and (
            isinstance(mark, bool) or not isinstance(mark, (int, float)) or not 0.1 <= mark <= 1.0
        ):
            raise ConfigurationError(
                f"ClearToolResults(low_water=...) must be None or lie in [0.1, 1.0], got {mark!r}"
            )
        if self.placeholder is not None:
            try:
                check_placeholder(self.placeholder)
            except ConfigurationError as exc:
                raise ConfigurationError(f"ClearToolResults(placeholder=...): {exc}") from exc
        _trigger("ClearToolResults", self.trigger)


@dataclass(frozen=True, slots=True)
class Summarize:
    """Opt-in: fold whole old turns into one summary instead of losing them.

    Called only when clearing and dropping would otherwise lose turns, on whole turns
    only, incrementally (``summarizer(turns, previous_summary)`` updates the previous
    summary rather than summarizing summaries). The summary stands as one user message
    after the head (:func:`~windowguard.core.edits.summary.summary_message`).

    Attributes:
        summarizer: ``(turns, previous_summary) -> str``, sync or async.
        keep_turns: the newest turns never summarized (>= 1).
        trigger: None: summarize only when turns would otherwise be dropped; an int:
            also once the request reaches that many tokens; a float in (0, 1]: that
            fraction of the input budget.
        instructions: what a summary must keep, for a summarizer built on a model
            (:func:`~windowguard.core.edits.summary.summary_prompt` puts it first).
    """

    summarizer: Summarizer
    _: KW_ONLY
    keep_turns: int = 3
    trigger: int | float | None = None
    instructions: str = DEFAULT_INSTRUCTIONS

    def __post_init__(self) -> None:
        if not callable(self.summarizer):
            raise ConfigurationError(
                f"Summarize(summarizer=...) must be a callable (turns, previous_summary) -> "
                f"str, got {self.summarizer!r}"
            )
        _count("Summarize(keep_turns=...)", self.keep_turns, 1)
        _trigger("Summarize", self.trigger)
        if not isinstance(self.instructions, str) or not self.instructions.strip():
            raise ConfigurationError(
                f"Summarize(instructions=...) must be non-empty text, got {self.instructions!r}"
            )

    @property
    def is_async(self) -> bool:
        """Whether the summarizer is a coroutine function (or an object whose
        ``__call__`` is one); a sync one returning an awaitable is awaited too."""
        fn = self.summarizer
        return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - a callable object's __call__
        )


def _trigger(stage: str, trigger: object) -> None:
    """Refuse a ``trigger`` that is neither None, a token count >= 1 nor a fraction in
    (0, 1]."""
    if trigger is None:
        return
    if isinstance(trigger, bool) or not isinstance(trigger, (int, float)):
        raise ConfigurationError(
            f"{stage}(trigger=...) must be None, a token count or a fraction, got {trigger!r}"
        )
    if isinstance(trigger, int) and trigger < 1:
        raise ConfigurationError(f"{stage}(trigger=...) must be >= 1, got {trigger}")
    if isinstance(trigger, float) and not 0.0 < trigger <= 1.0:
        raise ConfigurationError(
            f"{stage}(trigger=...) as a fraction must be in (0, 1], got {trigger}"
        )


def trigger_tokens(trigger: int | float | None, budget: int) -> int | None:
    """A stage's ``trigger`` in tokens of a request with input ``budget`` (None: none)."""
    if trigger is None:
        return None
    return trigger if isinstance(trigger, int) else int(trigger * budget)


EditStage = ClampToolResults | ClearToolResults | Summarize
"""One edit stage's configuration."""


DEFAULT_EDITS: tuple[EditStage, ...] = (
    ClampToolResults(max_tokens=0.25),
    ClearToolResults(keep=1, clear_inputs=True, low_water=0.3, trigger=0.55),
)
"""The edits a manager runs when none are named (decision 0006, chosen on the replay
benchmark ``bench/bench_retention.py``): any tool result over a quarter of the input
budget is cut to head and tail; once the request passes 55 % of the budget (or would lose
turns), every result but the newest turn's is cleared (with its call's arguments, where
the provider allows it), in one block down to 30 % of the budget; whole turns are dropped
only when the request would not fit otherwise. ``edits=()`` drops only, exactly as
before."""


def check_edits(edits: Sequence[object] | None) -> tuple[EditStage, ...]:
    """Validate a manager's ``edits=`` option: edit values, at most one of each kind;
    None is :data:`DEFAULT_EDITS`.

    The pipeline's order is fixed (clamp, clear, drop, summarize), whatever order they
    are given in; the tuple keeps the given order.

    Raises:
        ConfigurationError: a value that is not an edit stage, or two of one kind.
    """
    if edits is None:
        return DEFAULT_EDITS
    if isinstance(edits, (str, bytes)) or not isinstance(edits, Iterable):
        raise ConfigurationError(f"edits must be a list of edit stages, got {edits!r}")
    found: dict[type, EditStage] = {}
    for edit in edits:
        if not isinstance(edit, (ClampToolResults, ClearToolResults, Summarize)):
            raise ConfigurationError(
                f"edits must hold wg.ClampToolResults, wg.ClearToolResults or wg.Summarize "
                f"values, got {edit!r}"
            )
        if type(edit) in found:
            raise ConfigurationError(f"edits holds two {type(edit).__name__} values: give one")
        found[type(edit)] = edit
    return tuple(found.values())
