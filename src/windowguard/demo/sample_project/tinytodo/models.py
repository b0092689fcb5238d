"""Tasks and priorities: plain frozen values, serialised as JSON objects."""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass, replace
from typing import Any


class Priority(enum.IntEnum):
    """How urgent a task is; higher sorts first."""

    LOW = 1
    NORMAL = 2
    HIGH = 3

    @classmethod
    def parse(cls, text: str) -> Priority:
        """Parse ``low``, ``normal`` or ``high`` (any case)."""
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown priority {text!r}; use low, normal or high") from None


@dataclass(frozen=True)
class Task:
    """One to-do item.

    Attributes:
        id: a small positive integer, unique within a store.
        title: what to do.
        due: the day it is due, if any.
        priority: how urgent it is.
        done: whether it has been completed.
        tags: free-form labels.
    """

    id: int
    title: str
    due: dt.date | None = None
    priority: Priority = Priority.NORMAL
    done: bool = False
    tags: tuple[str, ...] = ()

    def complete(self) -> Task:
        """The same task, marked done."""
        return replace(self, done=True)

    def is_overdue(self, today: dt.date) -> bool:
        """True when the task is open and its due day has passed."""
        return not self.done and self.due is not None and self.due < today

    def to_json(self) -> dict[str, Any]:
        """The task as a JSON-ready dict."""
        return {
            "id": self.id,
            "title": self.title,
            "due": self.due.isoformat() if self.due else None,
            "priority": self.priority.name.lower(),
            "done": self.done,
            "tags": list(self.tags),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Task:
        """Read a task written by :meth:`to_json`.

        Raises:
            ValueError: a field is missing or malformed.
        """
        try:
            due = data.get("due")
            return cls(
                id=int(data["id"]),
                title=str(data["title"]),
                due=dt.date.fromisoformat(due) if due else None,
                priority=Priority.parse(str(data.get("priority", "normal"))),
                done=bool(data.get("done", False)),
                tags=tuple(str(t) for t in data.get("tags", ())),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed task {data!r}: {exc}") from exc
