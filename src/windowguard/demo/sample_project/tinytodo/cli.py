"""The ``tinytodo`` command: add, list, done, remove."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .models import Priority, Task
from .query import parse_query
from .store import TaskStore


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``tinytodo``."""
    parser = argparse.ArgumentParser(prog="tinytodo", description="A small to-do list.")
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add", help="add a task")
    add.add_argument("title")
    add.add_argument("--due", help="YYYY-MM-DD")
    add.add_argument("--priority", default="normal", help="low, normal or high")
    add.add_argument("--tag", action="append", default=[], help="a label (repeatable)")
    show = sub.add_parser("list", help="list open tasks")
    show.add_argument("--due", help="today, tomorrow, overdue, week or YYYY-MM-DD")
    show.add_argument("--priority", help="minimum priority")
    show.add_argument("--text", help="substring of the title or a tag")
    show.add_argument("--all", action="store_true", help="include completed tasks")
    done = sub.add_parser("done", help="mark a task done")
    done.add_argument("id", type=int)
    remove = sub.add_parser("remove", help="delete a task")
    remove.add_argument("id", type=int)
    return parser


def format_task(task: Task) -> str:
    """One line per task: id, box, priority mark, title, due day and tags."""
    box = "[x]" if task.done else "[ ]"
    mark = {Priority.HIGH: "!!", Priority.NORMAL: " !", Priority.LOW: "  "}[task.priority]
    due = f"  (due {task.due.isoformat()})" if task.due else ""
    tags = "  " + " ".join(f"#{t}" for t in task.tags) if task.tags else ""
    return f"{task.id:>3} {box} {mark} {task.title}{due}{tags}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    args = build_parser().parse_args(argv)
    store = TaskStore()
    try:
        if args.command == "add":
            task = store.add(
                args.title,
                due=args.due,
                priority=Priority.parse(args.priority),
                tags=tuple(args.tag),
            )
            print(f"added {task.id}: {task.title}")
        elif args.command == "list":
            query = parse_query(
                due=args.due, priority=args.priority, text=args.text, include_done=args.all
            )
            for task in query.apply(store):
                print(format_task(task))
        elif args.command == "done":
            print(format_task(store.complete(args.id)))
        elif args.command == "remove":
            store.remove(args.id)
            print(f"removed {args.id}")
    except (KeyError, ValueError) as exc:
        print(f"tinytodo: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
