"""The document catalogue of the embedded default: a table in the SQLite state file.

It shares the file with the state store (candor.backends.sqlite_state), as the
completion records it sits beside do, through a connection of its own.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from candor.errors import StateStoreError

SCHEMA = """
CREATE TABLE IF NOT EXISTS catalogue (
    index_name TEXT NOT NULL,
    source TEXT NOT NULL,
    stamp TEXT NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (index_name, source)
) WITHOUT ROWID;
"""


class SqliteCatalogueStore:
    def __init__(self, path: Path, *, timeout: float = 30.0) -> None:
        self.path = path
        self._lock = threading.Lock()
        with self._locked():
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(SCHEMA)

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._lock:
            try:
                yield
            except sqlite3.Error as e:
                raise StateStoreError(f"the catalogue in {self.path} failed: {e}") from e

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
