"""Curated answers in the embedded default's state file (candor.curated.records).

Tables of their own in the same SQLite file as the StateStore: one row per answer,
and one per index with its generation and count. An add or a remove writes both
in one transaction, so a reader sees the answer and the generation move together.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from candor.backends.sqlite_file import SqliteFile
from candor.curated.records import CuratedAnswer, CuratedState
from candor.errors import StateStoreError

SCHEMA = """
CREATE TABLE IF NOT EXISTS curated_answers (
    index_name TEXT NOT NULL,
    id TEXT NOT NULL,
    created_at REAL NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (index_name, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS curated_state (
    index_name TEXT PRIMARY KEY,
    generation INTEGER NOT NULL,
    count INTEGER NOT NULL
) WITHOUT ROWID;
"""

_MOVE = """
INSERT INTO curated_state (index_name, generation, count) VALUES (?1, 1, ?2)
ON CONFLICT (index_name) DO UPDATE SET generation = generation + 1, count = count + ?2
RETURNING generation, count
"""


class SqliteCuratedAnswers(SqliteFile):
    def __init__(self, path: Path, *, timeout: float = 30.0) -> None:
        super().__init__(path, schema=SCHEMA, what="curated answers", timeout=timeout)

    def put_curated(self, index_name: str, answer: CuratedAnswer) -> CuratedState:
        with self._transaction() as db:
            try:
                db.execute(
                    "INSERT INTO curated_answers (index_name, id, created_at, body) "
                    "VALUES (?, ?, ?, ?)",
                    (index_name, answer.id, answer.created_at, answer.to_json()),
                )
            except sqlite3.IntegrityError:
                raise StateStoreError(f"a curated answer {answer.id} exists already") from None
            (row,) = db.execute(_MOVE, (index_name, 1)).fetchall()
        return CuratedState(generation=row[0], count=row[1])

    def get_curated(self, index_name: str, answer_id: str) -> CuratedAnswer | None:
        with self._locked():
            row = self._db.execute(
                "SELECT body FROM curated_answers WHERE index_name = ? AND id = ?",
                (index_name, answer_id),
            ).fetchone()
        return CuratedAnswer.from_json(row[0]) if row else None

    def list_curated(self, index_name: str) -> list[CuratedAnswer]:
        with self._locked():
            rows = self._db.execute(
                "SELECT body FROM curated_answers WHERE index_name = ? ORDER BY created_at, id",
                (index_name,),
            ).fetchall()
        return [CuratedAnswer.from_json(row[0]) for row in rows]

    def remove_curated(self, index_name: str, answer_id: str) -> CuratedState | None:
        with self._transaction() as db:
            gone = db.execute(
                "DELETE FROM curated_answers WHERE index_name = ? AND id = ?",
                (index_name, answer_id),
            ).rowcount
            if not gone:
                return None
            (row,) = db.execute(_MOVE, (index_name, -1)).fetchall()
        return CuratedState(generation=row[0], count=row[1])

    def curated_state(self, index_name: str) -> CuratedState:
        with self._locked():
            row = self._db.execute(
                "SELECT generation, count FROM curated_state WHERE index_name = ?",
                (index_name,),
            ).fetchone()
        return CuratedState(generation=row[0], count=row[1]) if row else CuratedState()
