"""tinytodo: a small to-do list kept in a JSON file."""

from .models import Priority, Task
from .query import Query, parse_query
from .store import TaskStore

__all__ = ["Priority", "Query", "Task", "TaskStore", "parse_query"]
__version__ = "0.3.1"
