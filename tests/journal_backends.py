"""The journals the contract suite runs against: SQLite always, PostgreSQL when a server is
reachable at ``WINDOWGUARD_TEST_POSTGRES`` (``bash .ci/run`` starts one and sets it).

Outside CI, the PostgreSQL tests skip with the reason; under ``CI=true`` they must run,
so a missing or unreachable server fails them instead.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import windowguard as wg

POSTGRES_ENV = "WINDOWGUARD_TEST_POSTGRES"
BACKENDS = ("sqlite", "postgres")


@functools.cache
def _postgres_problem() -> str | None:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        return (
            f"no PostgreSQL server for the journal tests: set {POSTGRES_ENV}="
            "postgresql://user@host:port/db (bash .ci/run starts one and sets it)"
        )
    try:
        import psycopg
    except ImportError:
        return 'psycopg is not installed: pip install -e ".[test]"'
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"the PostgreSQL server at {POSTGRES_ENV} is not reachable: {exc}"
    return None


def postgres_url() -> str:
    """The test server's URL; skips (fails under CI=true) when there is none."""
    problem = _postgres_problem()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true requires the PostgreSQL journal tests to run: {problem}")
        pytest.skip(problem)
    return os.environ[POSTGRES_ENV]


def new_run_id(prefix: str = "run") -> str:
    """A run id no other test (nor an earlier run on a shared server) has used."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class Backend:
    """Opens journals of one kind on one store, and reaches into its tables."""

    def __init__(self, name: str, tmp_path: Path) -> None:
        self.name = name
        if name == "sqlite":
            self.target = str(tmp_path / "runs.db")
        else:
            self.target = postgres_url()
        self._open: list[wg.Journal] = []

    def open(self, **kw: Any) -> wg.Journal:
        """A new journal object (another runner, when two are open) on the same store."""
        journal: wg.Journal
        if self.name == "sqlite":
            journal = wg.SqliteJournal(self.target, **kw)
        else:
            journal = wg.PostgresJournal(self.target, **kw)
        self._open.append(journal)
        return journal

    def spec(self) -> str:
        """How a worker process opens this store: ``sqlite:PATH`` or the URL."""
        return f"sqlite:{self.target}" if self.name == "sqlite" else self.target

    def table(self, name: str) -> str:
        return name if self.name == "sqlite" else f"windowguard_{name}"

    def execute(self, sql: str, params: tuple[Any, ...]) -> None:
        """Run SQL with ``?`` placeholders straight on the store (to damage a row)."""
        if self.name == "sqlite":
            with sqlite3.connect(self.target) as db:
                db.execute(sql, params)
            return
        import psycopg

        with psycopg.connect(self.target, autocommit=True) as conn:
            conn.execute(sql.replace("?", "%s"), params)

    def close(self) -> None:
        while self._open:
            self._open.pop().close()


def backend_for(name: str, tmp_path: Path) -> Iterator[Backend]:
    """The body of a test module's ``backend`` fixture (parametrized over BACKENDS)."""
    store = Backend(name, tmp_path)
    yield store
    store.close()


def open_journal(spec: str, **kw: Any) -> wg.Journal:
    """A worker's journal from :meth:`Backend.spec`."""
    if spec.startswith("sqlite:"):
        return wg.SqliteJournal(spec.removeprefix("sqlite:"), **kw)
    return wg.PostgresJournal(spec, **kw)
