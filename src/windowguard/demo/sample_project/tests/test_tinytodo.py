# mypy: disable-error-code="import-not-found"
"""Tests of tinytodo's store and queries."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from tinytodo import Priority, TaskStore, parse_query

TODAY = dt.date(2024, 5, 3)


def test_add_assigns_increasing_ids(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "todo.json")
    first = store.add("one")
    second = store.add("two")
    assert (first.id, second.id) == (1, 2)
    assert [t.title for t in TaskStore(tmp_path / "todo.json")] == ["one", "two"]


def test_complete_hides_task_from_default_list(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "todo.json")
    task = store.add("ship it")
    store.complete(task.id)
    assert parse_query(today=TODAY).apply(store) == []
    assert len(parse_query(include_done=True, today=TODAY).apply(store)) == 1


def test_priority_sorts_high_first(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "todo.json")
    store.add("later", priority=Priority.LOW)
    store.add("now", priority=Priority.HIGH)
    titles = [t.title for t in parse_query(today=TODAY).apply(store)]
    assert titles == ["now", "later"]


def test_due_today_excludes_overdue(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "todo.json")
    store.add("yesterday", due="2024-05-02")
    store.add("today", due="2024-05-03")
    titles = [t.title for t in parse_query(due="today", today=TODAY).apply(store)]
    assert titles == ["today"]  # fails: the known issue in the README
