"""Segmentation of a transcript into a head and turns, and pairing validation.

Definitions (the tool-loop design; decision 0000, "Head and turns"):

* The **head** is the leading system/developer run plus every message up to and
  including the first user message, and every further user message before the first
  assistant response that follows it: the instructions, an assistant greeting,
  demonstrations and the user's task. It is never dropped. A transcript with no
  assistant response after its first user message is all head. A user message that
  carries only tool results (Anthropic ``tool_result`` blocks) is a result, not a task;
  a Responses ``function_call_output`` is a ``tool`` shape.
* A **turn** is one assistant response — its text, reasoning/thinking and ALL of its
  parallel tool calls, possibly spread over several consecutive assistant items as in
  the Responses API — plus ALL the results answering it and any user messages before
  the next assistant response. After the head, a turn starts at an assistant shape
  whose nearest preceding non-``other`` shape is not an assistant shape; ``other``
  shapes (unknown item types) travel with their neighbours and never start a turn.
* Responses callers often append each call's output right after the call
  (``rs, fc_0, out_0, fc_1, out_1``), so a call item after an output may still belong
  to the response before it. When in doubt, merge — a turn too large costs budget, a
  split one a 400 ("function_call was provided without its required reasoning item"):
  a call item does not start a turn when the current turn holds a reasoning item, nor
  while calls of the current turn still wait for results. A new turn then begins only
  at a reasoning item or an assistant message.
* The **newest turn** is the last one; it is never dropped.

Calls and results pair by id *within their turn*, never through a global id set:
servers reuse ids such as ``call_0`` from turn to turn. Within a turn, calls that share
an id (or carry none, the id ``""``) are answered by position: the first result with
that id answers the first such call. Damage is reported, never repaired: a result that
answers no call of its turn, a call its turn never answers, and any problem an adapter
found in a message (unknown role, content of a wrong type). Calls in the head pair the
same way, the head standing as one unit.

Every rule looks only at the current turn and the shape being added, so a transcript
pruned of whole turns segments into the same head and the same remaining turns, and
appending shapes never changes how earlier ones were segmented.

Because a turn holds every call together with every result answering it, dropping
whole turns can never orphan a call or a result: that is why pruning is turn-atomic.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import overload

from .shapes import Kind, Shape

__all__ = ["Problem", "Segmentation", "TurnIndex", "segment"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """Damage found in a transcript: where (message index) and what."""

    index: int
    problem: str

    def __str__(self) -> str:
        return f"message {self.index}: {self.problem}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Segmentation:
    """The head and turns of a transcript of ``length`` messages.

    Attributes:
        length: number of messages segmented.
        head_stop: ``messages[:head_stop]`` is the head.
        turn_starts: index of the first message of each turn, ascending; turn ``i``
            runs to ``turn_starts[i + 1]`` (or ``length`` for the newest turn).
        problems: damage found, in message order.
    """

    length: int
    head_stop: int
    turn_starts: Sequence[int]
    problems: tuple[Problem, ...]

    @property
    def turns(self) -> tuple[range, ...]:
        """Each turn as a range of message indices."""
        bounds = (*self.turn_starts, self.length)
        return tuple(range(bounds[i], bounds[i + 1]) for i in range(len(self.turn_starts)))

    @property
    def damaged(self) -> bool:
        """Whether any damage was found."""
        return bool(self.problems)


class TurnStarts(Sequence[int]):
    """A read-only view of the first ``length`` turn starts an index has found.

    The index only ever appends, so a view stays true after it grows, and taking one
    costs O(1): a send after appending one turn never copies every turn start. It
    compares and hashes like the tuple of its items.
    """

    __slots__ = ("_items", "_length")

    def __init__(self, items: list[int], length: int) -> None:
        self._items = items
        self._length = length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[int, ...]: ...
    def __getitem__(self, index: int | slice) -> int | tuple[int, ...]:
        if isinstance(index, slice):
            return tuple(self._items[: self._length][index])
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("turn index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[int]:
        items = self._items
        return (items[i] for i in range(self._length))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (TurnStarts, tuple, list)):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


class TurnIndex:
    """Incremental segmentation: feed shapes in order, read a :class:`Segmentation`.

    Appending ``n`` shapes costs O(n): an agent loop that appends one turn per send
    re-segments only that turn. The state is private to one transcript; start a new
    index when earlier messages were dropped or replaced.
    """

    __slots__ = (
        "_closed_problems",
        "_head_stop",
        "_last_kind",
        "_length",
        "_pending",
        "_task_seen",
        "_turn_problems",
        "_turn_reasoning",
        "_turn_starts",
    )

    def __init__(self) -> None:
        self._length = 0
        self._head_stop: int | None = None
        self._turn_starts: list[int] = []
        self._last_kind: Kind | None = None
        # Whether a user message (not one of only tool results) was seen: turns start
        # only after the first one, so the head holds the task.
        self._task_seen = False
        # Calls of the current turn (or of the head) still waiting for a result:
        # id -> opening indices, in order ("" for calls without an id).
        self._pending: dict[str, deque[int]] = {}
        self._turn_reasoning = False
        self._closed_problems: list[Problem] = []
        self._turn_problems: list[Problem] = []

    def __len__(self) -> int:
        return self._length

    def extend(self, shapes: Iterable[Shape]) -> None:
        """Append shapes, in transcript order."""
        for shape in shapes:
            self._add(shape)

    def _starts_turn(self, shape: Shape) -> bool:
        if not self._task_seen or self._last_kind == "assistant":
            return False
        # A call item after a result may be one more call of the response before it
        # (Responses callers interleave outputs): it stays there while the turn holds
        # a reasoning item or waits for results. When in doubt, merge.
        return not (
            shape.call_item
            and self._head_stop is not None
            and (self._turn_reasoning or self._pending)
        )

    def _add(self, shape: Shape) -> None:
        index = self._length
        self._length += 1
        kind = shape.kind
        if kind == "assistant":
            if self._starts_turn(shape):
                self._close_turn()
                if self._head_stop is None:
                    self._head_stop = index
                self._turn_starts.append(index)
            if shape.reasoning:
                self._turn_reasoning = True
        elif kind == "user" and not shape.results_only:
            self._task_seen = True
        if kind != "other":
            self._last_kind = kind
        if shape.problem is not None:
            self._turn_problems.append(Problem(index=index, problem=shape.problem))
        pending = self._pending
        for call_id in shape.opens:
            waiting = pending.get(call_id)
            if waiting is None:
                pending[call_id] = deque((index,))
            else:
                waiting.append(index)
        for call_id in shape.answers:
            waiting = pending.get(call_id)
            if waiting:
                waiting.popleft()
                if not waiting:
                    del pending[call_id]
            elif self._head_stop is None:
                self._turn_problems.append(
                    Problem(
                        index=index,
                        problem=f"a tool result {_for(call_id)} comes before any assistant "
                        "message opened that call",
                    )
                )
            else:
                self._turn_problems.append(
                    Problem(
                        index=index,
                        problem=f"a tool result {_for(call_id)} answers no call of its turn "
                        "(orphaned result, or answered twice)",
                    )
                )

    def _unanswered(self) -> list[Problem]:
        return [
            Problem(
                index=at,
                problem=(
                    f"tool call {call_id!r} is never answered in its turn"
                    if call_id
                    else "a tool call without an id is never answered in its turn"
                ),
            )
            for call_id, indices in self._pending.items()
            for at in indices
        ]

    def _close_turn(self) -> None:
        self._closed_problems.extend(self._turn_problems)
        self._closed_problems.extend(self._unanswered())
        self._turn_problems = []
        self._pending = {}
        self._turn_reasoning = False

    def segmentation(self) -> Segmentation:
        """The segmentation of everything fed so far."""
        problems = self._closed_problems + self._turn_problems + self._unanswered()
        problems.sort(key=lambda p: p.index)
        head_stop = self._length if self._head_stop is None else self._head_stop
        return Segmentation(
            length=self._length,
            head_stop=head_stop,
            turn_starts=TurnStarts(self._turn_starts, len(self._turn_starts)),
            problems=tuple(problems),
        )


def _for(call_id: str) -> str:
    return f"for {call_id!r}" if call_id else "without an id"


def segment(shapes: Sequence[Shape]) -> Segmentation:
    """Segment a transcript's shapes into head and turns and validate pairing.

    Examples:
        >>> from windowguard.core.shapes import Shape
        >>> seg = segment([
        ...     Shape(kind="system"), Shape(kind="user"),
        ...     Shape(kind="assistant", opens=("a",)), Shape(kind="tool", answers=("a",)),
        ... ])
        >>> seg.head_stop, seg.turns, seg.problems
        (2, (range(2, 4),), ())
    """
    index = TurnIndex()
    index.extend(shapes)
    return index.segmentation()
