"""Hand-offs in the embedded default's SQLite state file, in a table of their own.

Each change is one statement, so two processes sharing the file (`candor serve`
and `candor handoffs retry`) cannot both claim a hand-off.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from candor.backends.sqlite_file import SqliteFile
from candor.handoffs.store import Handoff, HandoffState

SCHEMA = """
CREATE TABLE IF NOT EXISTS handoffs (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    day TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at INTEGER NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    delivered_to TEXT NOT NULL DEFAULT '[]',
    last_error TEXT NOT NULL DEFAULT '',
    lease_until REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS handoffs_by_day ON handoffs (day, created_at);
"""
COLUMNS = (
    "id, session_id, created_at, expires_at, body, state, attempts, delivered_to, "
    "last_error, lease_until"
)


def _handoff(row: tuple[Any, ...]) -> Handoff:
    values = list(row)
    values[7] = tuple(json.loads(values[7]))
    return Handoff(*values)


class SqliteHandoffStore(SqliteFile):
    def __init__(self, path: Path, *, timeout: float = 30.0) -> None:
        super().__init__(path, schema=SCHEMA, what="hand-off store", timeout=timeout)

    def put_handoff(self, handoff: Handoff) -> bool:
        with self._locked():
            rows = self._db.execute(
                "INSERT INTO handoffs (id, session_id, day, created_at, expires_at, body, state, "
                "attempts, delivered_to, last_error, lease_until) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING id",
                (
                    handoff.id,
                    handoff.session_id,
                    handoff.day,
                    handoff.created_at,
                    handoff.expires_at,
                    handoff.body,
                    handoff.state,
                    handoff.attempts,
                    json.dumps(list(handoff.delivered_to)),
                    handoff.last_error,
                    handoff.lease_until,
                ),
            ).fetchall()
            # Expired hand-offs go as new ones arrive: a few an hour at most.
            self._db.execute("DELETE FROM handoffs WHERE expires_at < ?", (handoff.created_at,))
        return bool(rows)

    def get_handoff(self, handoff_id: str, *, now: float) -> Handoff | None:
        with self._locked():
            row = self._db.execute(
                f"SELECT {COLUMNS} FROM handoffs WHERE id = ? AND expires_at > ?",
                (handoff_id, now),
            ).fetchone()
        return None if row is None else _handoff(row)

    def claim_handoff(self, handoff_id: str, *, lease_until: float, now: float) -> Handoff | None:
        with self._locked():
            row = self._db.execute(
                f"""
                UPDATE handoffs SET lease_until = ?, attempts = attempts + 1
                WHERE id = ? AND state != 'delivered' AND lease_until <= ? AND expires_at > ?
                RETURNING {COLUMNS}
                """,
                (lease_until, handoff_id, now, now),
            ).fetchone()
        return None if row is None else _handoff(row)

    def finish_attempt(
        self,
        handoff_id: str,
        *,
        state: HandoffState,
        delivered_to: tuple[str, ...],
        error: str,
    ) -> None:
        with self._locked():
            self._db.execute(
                "UPDATE handoffs SET state = ?, delivered_to = ?, last_error = ?, lease_until = 0 "
                "WHERE id = ?",
                (state, json.dumps(list(delivered_to)), error, handoff_id),
            ).fetchall()

    def handoffs_on(self, day: str, *, now: float) -> list[Handoff]:
        with self._locked():
            rows = self._db.execute(
                f"SELECT {COLUMNS} FROM handoffs WHERE day = ? AND expires_at > ? "
                "ORDER BY created_at, id",
                (day, now),
            ).fetchall()
        return [_handoff(row) for row in rows]
