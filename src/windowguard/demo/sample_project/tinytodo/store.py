"""TaskStore: the JSON file that holds the tasks, and the ids.

Invariants: ids are unique positive integers; the file is always a JSON list of task
objects; writes are atomic (write a temporary file, then rename it over the old one).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .models import Priority, Task

DEFAULT_PATH = Path.home() / ".tinytodo.json"


def default_path() -> Path:
    """The store file: ``$TINYTODO_FILE`` or ``~/.tinytodo.json``."""
    named = os.environ.get("TINYTODO_FILE")
    return Path(named) if named else DEFAULT_PATH


class TaskStore:
    """Tasks kept in one JSON file.

    Example:
        >>> store = TaskStore(Path("/tmp/todo.json"))
        >>> task = store.add("water the plants")
        >>> store.get(task.id).title
        'water the plants'
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_path()
        self._tasks: dict[int, Task] = {}
        self._loaded = False

    def __iter__(self) -> Iterator[Task]:
        self._load()
        return iter(sorted(self._tasks.values(), key=lambda t: t.id))

    def __len__(self) -> int:
        self._load()
        return len(self._tasks)

    def get(self, task_id: int) -> Task:
        """The task with this id.

        Raises:
            KeyError: no such task.
        """
        self._load()
        if task_id not in self._tasks:
            raise KeyError(f"no task {task_id}")
        return self._tasks[task_id]

    def add(
        self,
        title: str,
        *,
        due: str | None = None,
        priority: Priority = Priority.NORMAL,
        tags: tuple[str, ...] = (),
    ) -> Task:
        """Add a task and save; returns it with its new id."""
        self._load()
        import datetime as dt

        task = Task(
            id=self._next_id(),
            title=title,
            due=dt.date.fromisoformat(due) if due else None,
            priority=priority,
            tags=tags,
        )
        self._tasks[task.id] = task
        self._save()
        return task

    def complete(self, task_id: int) -> Task:
        """Mark a task done and save."""
        task = self.get(task_id).complete()
        self._tasks[task_id] = task
        self._save()
        return task

    def remove(self, task_id: int) -> None:
        """Delete a task and save."""
        self.get(task_id)
        del self._tasks[task_id]
        self._save()

    def _next_id(self) -> int:
        # Known issue (README): the highest id is reused after it is removed.
        return max(self._tasks, default=0) + 1

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        if not self.path.exists():
            return
        raw = json.loads(self.path.read_text(encoding="utf-8"))
        if not isinstance(raw, list):
            raise ValueError(f"{self.path}: expected a JSON list of tasks")
        for item in raw:
            task = Task.from_json(item)
            if task.id in self._tasks:
                raise ValueError(f"{self.path}: duplicate task id {task.id}")
            self._tasks[task.id] = task

    def _save(self) -> None:
        data = [task.to_json() for task in self]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tinytodo-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2)
            handle.write("\n")
        os.replace(tmp, self.path)
