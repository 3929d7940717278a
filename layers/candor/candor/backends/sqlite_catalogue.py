"""The document catalogue of the embedded default: a table in the SQLite state file.

It shares the file with the state store (candor.backends.sqlite_state), as the
completion records it sits beside do, through a connection of its own.
"""

from __future__ import annotations

from pathlib import Path

from candor.backends.sqlite_file import SqliteFile

SCHEMA = """
CREATE TABLE IF NOT EXISTS catalogue (
    index_name TEXT NOT NULL,
    source TEXT NOT NULL,
    stamp TEXT NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (index_name, source)
) WITHOUT ROWID;
"""


class SqliteCatalogueStore(SqliteFile):
    def __init__(self, path: Path, *, timeout: float = 30.0) -> None:
        super().__init__(path, schema=SCHEMA, what="catalogue", timeout=timeout)

    def catalogue_stamp(self, index_name: str, source: str) -> str | None:
        with self._locked():
            row = self._db.execute(
                "SELECT stamp FROM catalogue WHERE index_name = ? AND source = ?",
                (index_name, source),
            ).fetchone()
        return None if row is None else str(row[0])

    def put_catalogue(self, index_name: str, source: str, stamp: str, body: bytes) -> None:
        with self._locked():
            self._db.execute(
                "INSERT INTO catalogue (index_name, source, stamp, body) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (index_name, source) DO UPDATE "
                "SET stamp = excluded.stamp, body = excluded.body",
                (index_name, source, stamp, body),
            )

    def delete_catalogue(self, index_name: str, source: str) -> None:
        with self._locked():
            self._db.execute(
                "DELETE FROM catalogue WHERE index_name = ? AND source = ?", (index_name, source)
            )

    def catalogue(self, index_name: str) -> list[bytes]:
        with self._locked():
            rows = self._db.execute(
                "SELECT body FROM catalogue WHERE index_name = ?", (index_name,)
            ).fetchall()
        return [bytes(row[0]) for row in rows]
