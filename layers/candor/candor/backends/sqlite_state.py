"""The StateStore of the embedded default: one SQLite file, atomic single statements.

Each state change is one UPDATE ... WHERE ... RETURNING (or an upsert), so two
processes sharing the file cannot interleave a read and a write.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

from candor.ports import Session, SessionStatus, Turn

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'warned', 'ended')),
    history TEXT NOT NULL DEFAULT '[]',
    updated_at REAL NOT NULL
);
"""


class SqliteStateStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: autocommit; every statement below is atomic by itself.
        self._db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)
        self._lock = threading.Lock()

    def close(self) -> None:
        self._db.close()

    def get_session(self, session_id: str) -> Session:
        with self._lock:
            row = self._db.execute(
                "SELECT status, history FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
        if row is None:
            return Session(session_id)
        history = [Turn(**turn) for turn in json.loads(row[1])]
        return Session(session_id, row[0], history)

    def record_offence(self, session_id: str) -> SessionStatus:
        with self._lock:
            row = self._db.execute(
                """
                INSERT INTO sessions (id, status, updated_at) VALUES (?, 'warned', ?)
                ON CONFLICT (id) DO UPDATE SET
                    status = CASE status WHEN 'active' THEN 'warned' ELSE 'ended' END,
                    updated_at = excluded.updated_at
                RETURNING status
                """,
                (session_id, time.time()),
            ).fetchone()
        status: SessionStatus = row[0]
        return status

    def append_turn(self, session_id: str, turn: Turn, *, keep: int) -> None:
        entry = json.dumps(
            {"question": turn.question, "answer": turn.answer, "decision": turn.decision}
        )
        with self._lock:
            # json_insert appends; the subquery then keeps the last `keep` entries,
            # all inside one statement.
            self._db.execute(
                """
                INSERT INTO sessions (id, history, updated_at)
                VALUES (?1, json_array(json(?2)), ?3)
                ON CONFLICT (id) DO UPDATE SET
                    history = (
                        SELECT json_group_array(json(value)) FROM (
                            SELECT key, value FROM (
                                SELECT key, value FROM json_each(
                                    json_insert(sessions.history, '$[#]', json(?2))
                                )
                                ORDER BY key DESC LIMIT ?4
                            ) ORDER BY key
                        )
                    ),
                    updated_at = excluded.updated_at
                """,
                (session_id, entry, time.time(), keep),
            )
