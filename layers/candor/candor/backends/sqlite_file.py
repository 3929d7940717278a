"""What every table of the embedded default's state file shares: one connection, one lock.

The state store, curated answers, gaps, hand-offs and sync records each keep tables
of their own in the same SQLite file (CANDOR_DATA_DIR/state.sqlite3); each is a
`SqliteFile` with its own schema and the name its errors give.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from candor.errors import StateStoreError


class SqliteFile:
    """A connection to a state file whose tables `schema` creates (if they are missing).

    `timeout`: seconds a write waits for another process's lock before it fails.
    `what` names the records in errors ("SQLite gaps /path: database is locked").
    """

    def __init__(self, path: Path, *, schema: str, what: str, timeout: float = 30.0) -> None:
        self.path = path
        self._what = what
        self._lock = threading.Lock()
        with self._locked():
            path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: autocommit; every statement is atomic by itself, and
            # `_transaction` groups the ones that must go together.
            self._db = sqlite3.connect(
                path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(schema)

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the connection; a lock that stays held, a full disk or a broken file
        becomes a StateStoreError (the API's 503), with SQLite's reason as its cause."""
        with self._lock:
            try:
                yield
            except sqlite3.Error as e:
                raise StateStoreError(f"SQLite {self._what} {self.path}: {e}") from e

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """Statements that commit together or not at all (BEGIN IMMEDIATE: the write
        lock is taken first, so a read inside sees what the write will change)."""
        with self._locked():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
