"""Queries: which tasks ``tinytodo list`` shows, and in what order.

``--due`` takes ``today``, ``tomorrow``, ``overdue``, ``week`` or an ISO date;
``--priority`` a minimum priority; ``--text`` a case-insensitive substring of the
title or a tag. Results sort by priority (high first), then due day, then id.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from .models import Priority, Task


@dataclass(frozen=True)
class Query:
    """A filter over tasks.

    Attributes:
        due_from: first due day shown (inclusive), or None for no lower bound.
        due_until: last due day shown (inclusive), or None for no upper bound.
        min_priority: lowest priority shown.
        text: substring of title or tags, lowercased.
        include_done: show completed tasks too.
    """

    due_from: dt.date | None = None
    due_until: dt.date | None = None
    min_priority: Priority = Priority.LOW
    text: str = ""
    include_done: bool = False

    def matches(self, task: Task) -> bool:
        """Whether ``task`` passes every part of the filter."""
        if task.done and not self.include_done:
            return False
        if task.priority < self.min_priority:
            return False
        if self.due_from is not None or self.due_until is not None:
            if task.due is None:
                return False
            if self.due_from is not None and task.due < self.due_from:
                return False
            if self.due_until is not None and task.due > self.due_until:
                return False
        if self.text:
            haystack = [task.title.lower(), *(t.lower() for t in task.tags)]
            if not any(self.text in item for item in haystack):
                return False
        return True

    def apply(self, tasks: Iterable[Task]) -> list[Task]:
        """The matching tasks, sorted for display."""
        chosen = [t for t in tasks if self.matches(t)]
        return sorted(chosen, key=_display_order)


def _display_order(task: Task) -> tuple[int, dt.date, int]:
    return (-int(task.priority), task.due or dt.date.max, task.id)


def parse_due(text: str, today: dt.date) -> tuple[dt.date | None, dt.date | None]:
    """Turn a ``--due`` value into an inclusive (from, until) range.

    Raises:
        ValueError: the text is neither a keyword nor an ISO date.
    """
    word = text.strip().lower()
    if word == "today":
        # Known issue (README): no lower bound, so overdue tasks show up too.
        return None, today
    if word == "tomorrow":
        day = today + dt.timedelta(days=1)
        return day, day
    if word == "overdue":
        return None, today - dt.timedelta(days=1)
    if word == "week":
        return today, today + dt.timedelta(days=6)
    try:
        day = dt.date.fromisoformat(word)
    except ValueError:
        raise ValueError(
            f"--due {text!r}: use today, tomorrow, overdue, week or YYYY-MM-DD"
        ) from None
    return day, day


def parse_query(
    *,
    due: str | None = None,
    priority: str | None = None,
    text: str | None = None,
    include_done: bool = False,
    today: dt.date | None = None,
) -> Query:
    """Build a :class:`Query` from the command line's options."""
    day = today or dt.date.today()
    due_from, due_until = parse_due(due, day) if due else (None, None)
    return Query(
        due_from=due_from,
        due_until=due_until,
        min_priority=Priority.parse(priority) if priority else Priority.LOW,
        text=(text or "").strip().lower(),
        include_done=include_done,
    )
