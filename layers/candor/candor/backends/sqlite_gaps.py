"""Gaps in the embedded default's state file (candor.gaps.records): a table of their own."""

from __future__ import annotations

from pathlib import Path

from candor.backends.sqlite_file import SqliteFile
from candor.gaps.records import Gap

SCHEMA = """
CREATE TABLE IF NOT EXISTS gaps (
    index_name TEXT NOT NULL,
    id TEXT NOT NULL,
    version INTEGER NOT NULL,
    opened_at REAL NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (index_name, id)
) WITHOUT ROWID;
"""


class SqliteGaps(SqliteFile):
    def __init__(self, path: Path, *, timeout: float = 30.0) -> None:
        super().__init__(path, schema=SCHEMA, what="gaps", timeout=timeout)

    def list_gaps(self, index_name: str) -> list[Gap]:
        with self._locked():
            rows = self._db.execute(
                "SELECT body FROM gaps WHERE index_name = ? ORDER BY opened_at, id",
                (index_name,),
            ).fetchall()
        return [Gap.from_json(row[0]) for row in rows]

    def get_gap(self, index_name: str, gap_id: str) -> Gap | None:
        with self._locked():
            row = self._db.execute(
                "SELECT body FROM gaps WHERE index_name = ? AND id = ?", (index_name, gap_id)
            ).fetchone()
        return Gap.from_json(row[0]) if row else None

    def save_gap(self, gap: Gap) -> bool:
        with self._locked():
            if gap.version == 1:
                written = self._db.execute(
                    "INSERT INTO gaps (index_name, id, version, opened_at, body) "
                    "VALUES (?, ?, 1, ?, ?) ON CONFLICT DO NOTHING",
                    (gap.index_name, gap.id, gap.opened_at, gap.to_json()),
                ).rowcount
            else:
                written = self._db.execute(
                    "UPDATE gaps SET version = ?, body = ? "
                    "WHERE index_name = ? AND id = ? AND version = ?",
                    (gap.version, gap.to_json(), gap.index_name, gap.id, gap.version - 1),
                ).rowcount
        return written == 1
