"""The run journal in PostgreSQL (psycopg 3), for fleets of workers sharing runs.

The same contract as :class:`~windowguard.run.journal.SqliteJournal`: one row per model
call and per tool result, each committed on its own; the run lease in a row of its own,
taken with one ``INSERT ... ON CONFLICT DO UPDATE ... WHERE expired`` statement, so two
workers racing for a run cannot both win. Lease times are the *server's* clock
(``clock_timestamp()``), so workers whose clocks disagree still agree on who holds a
run. Every write renews the writer's lease in its own transaction and is refused once
another worker holds the run.

Tables are prefixed ``windowguard_`` so the journal can live in a database shared with
other things; they are created on first use (under an advisory lock, so a fleet starting
at once does not race). Messages and logs name the server as
``postgresql://user@host:port/db``, never with its password.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...core.exceptions import JournalError
from .base import Journal
from .lease import Claim

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresJournal"]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS windowguard_runs (
        run_id text PRIMARY KEY,
        digest text NOT NULL,
        tools text,
        termination text,
        state text
    )""",
    """CREATE TABLE IF NOT EXISTS windowguard_model_calls (
        run_id text NOT NULL,
        step integer NOT NULL,
        response text NOT NULL,
        PRIMARY KEY (run_id, step)
    )""",
    """CREATE TABLE IF NOT EXISTS windowguard_tool_results (
        run_id text NOT NULL,
        step integer NOT NULL,
        position integer NOT NULL,
        result text NOT NULL,
        PRIMARY KEY (run_id, step, position)
    )""",
    """CREATE TABLE IF NOT EXISTS windowguard_leases (
        run_id text PRIMARY KEY,
        holder text NOT NULL,
        machine text,
        pid integer,
        expires timestamptz NOT NULL
    )""",
)
# pg_advisory_xact_lock key for creating the tables: "wgjournl" as a signed 64-bit int
_SCHEMA_LOCK = int.from_bytes(b"wgjournl", "big", signed=True)

_EXPIRY = "clock_timestamp() + make_interval(secs => %(seconds)s)"
_CLAIM_ROW = (
    "SELECT holder, machine, pid, expires, "
    "extract(epoch FROM expires - clock_timestamp())::float8 "
    "FROM windowguard_leases WHERE run_id = %(run_id)s"
)


def _address(conninfo: str) -> str:
    """``conninfo`` as ``postgresql://user@host:port/db``, without a password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(conninfo)
    except Exception:
        return "a PostgreSQL database"
    user = f"{parts['user']}@" if parts.get("user") else ""
    host = str(parts.get("host") or "localhost")
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{host}{port}/{parts.get('dbname') or ''}"


class PostgresJournal(Journal):
    """A run journal in a PostgreSQL database, shared by every worker pointed at it.

    Args:
        conninfo: a libpq connection string or URL
            (``postgresql://user:password@host:5432/db``).
        lease_seconds: how long a worker's hold on a run lasts without renewal; a
            worker that dies is replaced after this long at most (at once when it ran
            on the same machine).
        wait: how long a second worker waits for a held run before ``RunLockedError``.
        connect_timeout: seconds to wait for the server when connecting.

    Raises:
        ImportError: psycopg 3 is not installed (``pip install "windowguard[postgres]"``).
        JournalError: the server cannot be reached or the tables cannot be created.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        lease_seconds: float = 30.0,
        wait: float = 0.0,
        connect_timeout: float = 10.0,
    ) -> None:
        try:
            import psycopg
        except ImportError as exc:
            raise ImportError(
                'PostgresJournal needs psycopg 3: pip install "windowguard[postgres]"'
            ) from exc
        super().__init__(lease_seconds=lease_seconds, wait=wait)
        self._psycopg = psycopg
        self._conninfo = conninfo
        self._connect_timeout = connect_timeout
        self.where = _address(conninfo)
        self._lock = threading.RLock()
        self._conn: psycopg.Connection[Any] | None = None
        try:
            with self._transaction() as conn:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                for statement in _SCHEMA:
                    conn.execute(statement)
        except JournalError:
            self._close()
            raise

    def _connection(self) -> psycopg.Connection[Any]:
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            try:
                conn = self._psycopg.connect(
                    self._conninfo,
                    autocommit=True,
                    connect_timeout=max(1, round(self._connect_timeout)),
                    application_name="windowguard-journal",
                )
            except self._psycopg.Error as exc:
                raise JournalError(
                    f"cannot reach the PostgreSQL run journal {self.where}: {exc}"
                ) from exc
            self._conn = conn
        return conn

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:
        with self._lock:
            conn = self._connection()
            try:
                with conn.transaction():
                    yield conn
            except self._psycopg.Error as exc:
                raise JournalError(f"PostgreSQL run journal {self.where}: {exc}") from exc

    def _fetch(self, sql: str, params: dict[str, Any]) -> Any:
        with self._transaction() as conn:
            return conn.execute(sql, params).fetchone()

    @staticmethod
    def _claim_of(row: Any) -> Claim | None:
        if row is None:
            return None
        return Claim(
            holder=str(row[0]),
            machine=row[1],
            pid=row[2],
            expires_at=row[3],
            seconds_left=float(row[4]),
        )

    def _fence(self, conn: psycopg.Connection[Any], run_id: str, holder: str | None) -> None:
        """Inside a write: renew ``holder``'s lease, or refuse while another holds it."""
        params = {"run_id": run_id, "holder": holder, "seconds": self.lease_seconds}
        if holder is not None:
            renewed = conn.execute(
                f"UPDATE windowguard_leases SET expires = {_EXPIRY} "
                "WHERE run_id = %(run_id)s AND holder = %(holder)s RETURNING expires",
                params,
            ).fetchone()
            if renewed is not None:
                return
            self._forget(run_id, holder)
            claim = self._claim_of(conn.execute(_CLAIM_ROW, params).fetchone())
            raise self._locked(run_id, claim, lost=True)
        claim = self._claim_of(conn.execute(_CLAIM_ROW, params).fetchone())
        if claim is not None and claim.live:
            raise self._locked(run_id, claim)

    # -- storage primitives ---------------------------------------------------------------

    def _read_run(self, run_id: str) -> tuple[str, Any, Any, Any] | None:
        row = self._fetch(
            "SELECT digest, tools, termination, state FROM windowguard_runs "
            "WHERE run_id = %(run_id)s",
            {"run_id": run_id},
        )
        return None if row is None else (str(row[0]), row[1], row[2], row[3])

    def _create_run(self, run_id: str, digest: str, tools: str) -> None:
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO windowguard_runs (run_id, digest, tools) "
                "VALUES (%(run_id)s, %(digest)s, %(tools)s) ON CONFLICT (run_id) DO NOTHING",
                {"run_id": run_id, "digest": digest, "tools": tools},
            )

    def _write_tools(self, run_id: str, tools: str) -> None:
        with self._transaction() as conn:
            conn.execute(
                "UPDATE windowguard_runs SET tools = %(tools)s WHERE run_id = %(run_id)s",
                {"run_id": run_id, "tools": tools},
            )

    def _read_row(self, table: str, run_id: str, step: int, position: int) -> Any:
        params = {"run_id": run_id, "step": step, "position": position}
        if table == "model_calls":
            row = self._fetch(
                "SELECT response FROM windowguard_model_calls "
                "WHERE run_id = %(run_id)s AND step = %(step)s",
                params,
            )
        else:
            row = self._fetch(
                "SELECT result FROM windowguard_tool_results "
                "WHERE run_id = %(run_id)s AND step = %(step)s AND position = %(position)s",
                params,
            )
        return None if row is None else row[0]

    def _write_row(
        self, table: str, run_id: str, step: int, position: int, text: str, holder: str | None
    ) -> None:
        params = {"run_id": run_id, "step": step, "position": position, "text": text}
        with self._transaction() as conn:
            self._fence(conn, run_id, holder)
            if table == "model_calls":
                conn.execute(
                    "INSERT INTO windowguard_model_calls (run_id, step, response) "
                    "VALUES (%(run_id)s, %(step)s, %(text)s) "
                    "ON CONFLICT (run_id, step) DO UPDATE SET response = excluded.response",
                    params,
                )
            else:
                conn.execute(
                    "INSERT INTO windowguard_tool_results (run_id, step, position, result) "
                    "VALUES (%(run_id)s, %(step)s, %(position)s, %(text)s) "
                    "ON CONFLICT (run_id, step, position) DO UPDATE SET result = excluded.result",
                    params,
                )

    def _write_end(
        self, run_id: str, termination: str, state: str | None, holder: str | None
    ) -> None:
        params = {"run_id": run_id, "termination": termination, "state": state, "holder": holder}
        with self._transaction() as conn:
            self._fence(conn, run_id, holder)
            conn.execute(
                "UPDATE windowguard_runs SET termination = %(termination)s, state = %(state)s "
                "WHERE run_id = %(run_id)s",
                params,
            )
            if holder is not None:
                conn.execute(
                    "DELETE FROM windowguard_leases "
                    "WHERE run_id = %(run_id)s AND holder = %(holder)s",
                    params,
                )

    def _count_rows(self, run_id: str) -> tuple[int, int]:
        row = self._fetch(
            "SELECT (SELECT count(*) FROM windowguard_model_calls WHERE run_id = %(run_id)s), "
            "(SELECT count(*) FROM windowguard_tool_results WHERE run_id = %(run_id)s "
            "AND position >= 0)",
            {"run_id": run_id},
        )
        return int(row[0]), int(row[1])

    def _claim(
        self, run_id: str, holder: str, *, steal: str | None
    ) -> tuple[datetime | None, Claim | None]:
        params = {
            "run_id": run_id,
            "holder": holder,
            "machine": self._machine,
            "pid": os.getpid(),
            "seconds": self.lease_seconds,
            "steal": steal,
        }
        with self._transaction() as conn:
            taken = conn.execute(
                "INSERT INTO windowguard_leases AS l (run_id, holder, machine, pid, expires) "
                f"VALUES (%(run_id)s, %(holder)s, %(machine)s, %(pid)s, {_EXPIRY}) "
                "ON CONFLICT (run_id) DO UPDATE SET holder = excluded.holder, "
                "machine = excluded.machine, pid = excluded.pid, expires = excluded.expires "
                "WHERE l.expires <= clock_timestamp() OR l.holder = excluded.holder "
                "OR l.holder = %(steal)s "
                "RETURNING expires",
                params,
            ).fetchone()
            if taken is not None:
                expires_at: datetime = taken[0]
                return expires_at, None
            return None, self._claim_of(conn.execute(_CLAIM_ROW, params).fetchone())

    def _extend(self, run_id: str, holder: str) -> datetime | None:
        row = self._fetch(
            f"UPDATE windowguard_leases SET expires = {_EXPIRY} "
            "WHERE run_id = %(run_id)s AND holder = %(holder)s RETURNING expires",
            {"run_id": run_id, "holder": holder, "seconds": self.lease_seconds},
        )
        return None if row is None else row[0]

    def _drop(self, run_id: str, holder: str) -> None:
        with self._transaction() as conn:
            conn.execute(
                "DELETE FROM windowguard_leases WHERE run_id = %(run_id)s AND holder = %(holder)s",
                {"run_id": run_id, "holder": holder},
            )

    def _read_claim(self, run_id: str) -> Claim | None:
        return self._claim_of(self._fetch(_CLAIM_ROW, {"run_id": run_id}))

    def _close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
