"""The StateStore of the embedded default: one SQLite file, atomic single statements.

Each state change is one UPDATE ... WHERE ... RETURNING (or an upsert with a
WHERE on its update), so two processes sharing the file cannot interleave a read
and a write. Money is kept as whole nano-dollars: SQLite has no decimal type and
a float ledger would drift from the cap it is compared with.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from pathlib import Path
from typing import Any

from candor.backends import rate_windows
from candor.backends.sqlite_file import SqliteFile
from candor.ports import (
    CacheKey,
    RateDecision,
    RatingOutcome,
    Session,
    SessionStatus,
    StoredTrace,
    Turn,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'warned', 'ended')),
    history TEXT NOT NULL DEFAULT '[]',
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS session_history (
    id TEXT PRIMARY KEY,
    turns TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS rate_windows (
    key TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    hits INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (key, window_start)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ledgers (
    key TEXT PRIMARY KEY,
    spent_nanos INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS answer_cache (
    digest TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS corpus_versions (
    index_name TEXT PRIMARY KEY,
    version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS traces (
    trace_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    day TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at INTEGER NOT NULL,
    body TEXT NOT NULL,
    feedback TEXT
);
CREATE INDEX IF NOT EXISTS traces_by_day ON traces (day, created_at);
"""

NANO = Decimal("1e-9")
# StoredTrace's fields, in order.
TRACE_COLUMNS = "trace_id, session_id, created_at, expires_at, body, feedback"
# Expired windows, ledgers, cache entries, verdicts, traces and session history are
# deleted every this many writes (DynamoDB deletes them by TTL).
PURGE_EVERY = 500


def to_nanos(amount: Decimal, *, rounding: str = ROUND_CEILING) -> int:
    return int((amount / NANO).to_integral_value(rounding=rounding))


def from_nanos(nanos: int) -> Decimal:
    return (Decimal(nanos) * NANO).normalize()


class SqliteStateStore(SqliteFile):
    def __init__(self, path: Path, *, timeout: float = 30.0) -> None:
        """`timeout`: seconds a write waits for another process's lock before it fails."""
        self._writes = 0
        super().__init__(
            path,
            schema=SCHEMA + INGEST_RECORDS_SCHEMA + VERDICTS_SCHEMA,
            what="state store",
            timeout=timeout,
        )
        with self._locked():
            # Files written before session_history kept the turns in sessions.history,
            # with no expiry: forget them (the column stays, always '[]').
            self._db.execute("UPDATE sessions SET history = '[]' WHERE history != '[]'")

    # Sessions and moderation.

    def get_session(self, session_id: str) -> Session:
        now = time.time()
        with self._locked():
            status = self._db.execute(
                "SELECT status FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            # An expired row is history past its window: never read, deleted by the purge.
            turns = self._db.execute(
                "SELECT turns FROM session_history WHERE id = ? AND expires_at > ?",
                (session_id, now),
            ).fetchone()
        history = [Turn(**turn) for turn in json.loads(turns[0])] if turns else []
        return Session(session_id, status[0] if status else "active", history)

    def session_status(self, session_id: str) -> SessionStatus:
        with self._locked():
            row = self._db.execute(
                "SELECT status FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
        status: SessionStatus = row[0] if row else "active"
        return status

    def record_offence(self, session_id: str) -> SessionStatus:
        with self._locked():
            (row,) = self._db.execute(
                """
                INSERT INTO sessions (id, status, updated_at) VALUES (?, 'warned', ?)
                ON CONFLICT (id) DO UPDATE SET
                    status = CASE status WHEN 'active' THEN 'warned' ELSE 'ended' END,
                    updated_at = excluded.updated_at
                RETURNING status
                """,
                (session_id, time.time()),
            ).fetchall()
        status: SessionStatus = row[0]
        return status

    def append_turn(self, session_id: str, turn: Turn, *, keep: int, expires_at: int) -> None:
        entry = json.dumps(asdict(turn))
        # json_insert appends; the subquery then keeps the last `keep` entries, all
        # inside one statement. An expired row starts over: its turns are past the window.
        self._write(
            """
            INSERT INTO session_history (id, turns, expires_at)
            VALUES (?1, CASE WHEN ?4 > 0 THEN json_array(json(?2)) ELSE '[]' END, ?3)
            ON CONFLICT (id) DO UPDATE SET
                turns = (
                    SELECT json_group_array(json(value)) FROM (
                        SELECT key, value FROM (
                            SELECT key, value FROM json_each(
                                json_insert(
                                    CASE WHEN session_history.expires_at > ?5
                                        THEN session_history.turns ELSE '[]' END,
                                    '$[#]',
                                    json(?2)
                                )
                            )
                            ORDER BY key DESC LIMIT ?4
                        ) ORDER BY key
                    )
                ),
                expires_at = excluded.expires_at
            """,
            (session_id, entry, expires_at, keep, time.time()),
        )

    # Rate limits.

    def hit_rate_limit(
        self, key: str, *, window_seconds: int, limit: int, now: float
    ) -> RateDecision:
        w = rate_windows.windows(window_seconds, now)
        with self._locked():
            # Under the connection's lock and in one transaction with the write, so
            # another process's hit cannot land between the read and the write.
            self._db.execute("BEGIN IMMEDIATE")
            try:
                previous = self._hits(key, w.previous_start)
                cap = rate_windows.allowance(limit, previous, w)
                # A refused hit leaves the row alone: the WHERE on the update fails
                # and RETURNING yields no row.
                rows = (
                    self._db.execute(
                        """
                        INSERT INTO rate_windows (key, window_start, hits, expires_at)
                        VALUES (?1, ?2, 1, ?3)
                        ON CONFLICT (key, window_start) DO UPDATE SET hits = hits + 1
                        WHERE rate_windows.hits < ?4
                        RETURNING hits
                        """,
                        (key, w.start, w.expires_at, cap),
                    ).fetchall()
                    if cap > 0
                    else []
                )
                current = None if rows else self._hits(key, w.start)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._count_write()
        if current is None:
            return RateDecision(True)
        return RateDecision(False, rate_windows.retry_after(limit, previous, current, w))

    def _hits(self, key: str, window_start: int) -> int:
        row = self._db.execute(
            "SELECT hits FROM rate_windows WHERE key = ? AND window_start = ?",
            (key, window_start),
        ).fetchone()
        return int(row[0]) if row else 0

    # Spending.

    def reserve_budget(
        self, ledger_key: str, amount: Decimal, *, cap: Decimal, expires_at: int
    ) -> bool:
        if amount < 0:
            raise ValueError(f"a reservation cannot be negative: {amount}")
        nanos = to_nanos(amount)
        limit = to_nanos(cap, rounding=ROUND_FLOOR) - nanos
        if limit < 0:
            return False
        row = self._write(
            """
            INSERT INTO ledgers (key, spent_nanos, expires_at) VALUES (?1, ?2, ?3)
            ON CONFLICT (key) DO UPDATE SET
                spent_nanos = ledgers.spent_nanos + excluded.spent_nanos,
                expires_at = max(ledgers.expires_at, excluded.expires_at)
            WHERE ledgers.spent_nanos <= ?4
            RETURNING spent_nanos
            """,
            (ledger_key, nanos, expires_at, limit),
        )
        return row is not None

    def settle_budget(self, ledger_key: str, *, reserved: Decimal, actual: Decimal) -> None:
        delta = to_nanos(actual) - to_nanos(reserved)
        if delta:
            self._write(
                "UPDATE ledgers SET spent_nanos = spent_nanos + ? WHERE key = ? RETURNING key",
                (delta, ledger_key),
            )

    def budget_spent(self, ledger_key: str) -> Decimal:
        with self._locked():
            row = self._db.execute(
                "SELECT spent_nanos FROM ledgers WHERE key = ?", (ledger_key,)
            ).fetchone()
        return from_nanos(row[0]) if row else Decimal(0)

    # Answer cache and corpus versions.

    def cache_get(self, key: CacheKey, *, now: float) -> str | None:
        with self._locked():
            row = self._db.execute(
                "SELECT value FROM answer_cache WHERE digest = ? AND expires_at > ?",
                (key.digest, now),
            ).fetchone()
        return None if row is None else str(row[0])

    def cache_put(self, key: CacheKey, value: str, *, expires_at: int) -> None:
        self._write(
            """
            INSERT INTO answer_cache (digest, value, expires_at) VALUES (?, ?, ?)
            ON CONFLICT (digest) DO UPDATE SET
                value = excluded.value, expires_at = excluded.expires_at
            RETURNING digest
            """,
            (key.digest, value, expires_at),
        )

    # Screening verdicts (candor.screening.verdicts).

    def verdict_get(self, digest: str, *, now: float) -> str | None:
        with self._locked():
            row = self._db.execute(
                "SELECT verdict FROM verdicts WHERE digest = ? AND expires_at > ?",
                (digest, now),
            ).fetchone()
        return None if row is None else str(row[0])

    def verdict_put(self, digest: str, verdict: str, *, expires_at: int) -> None:
        self._write(
            """
            INSERT INTO verdicts (digest, verdict, expires_at) VALUES (?, ?, ?)
            ON CONFLICT (digest) DO UPDATE SET
                verdict = excluded.verdict, expires_at = excluded.expires_at
            RETURNING digest
            """,
            (digest, verdict, expires_at),
        )

    def corpus_version(self, index_name: str) -> int:
        with self._locked():
            row = self._db.execute(
                "SELECT version FROM corpus_versions WHERE index_name = ?", (index_name,)
            ).fetchone()
        return int(row[0]) if row else 0

    def bump_corpus_version(self, index_name: str) -> int:
        row = self._write(
            """
            INSERT INTO corpus_versions (index_name, version) VALUES (?, 1)
            ON CONFLICT (index_name) DO UPDATE SET version = version + 1
            RETURNING version
            """,
            (index_name,),
        )
        assert row is not None  # an upsert without a WHERE always returns its row
        return int(row[0])

    def _write(self, sql: str, parameters: tuple[object, ...]) -> tuple[Any, ...] | None:
        with self._locked():
            # fetchall steps the statement to its end, so autocommit commits here.
            rows = self._db.execute(sql, parameters).fetchall()
            self._count_write()
        return tuple(rows[0]) if rows else None

    def _count_write(self) -> None:
        self._writes += 1
        if self._writes % PURGE_EVERY == 0:
            self._purge(time.time())

    def _purge(self, now: float) -> None:
        for table in (
            "rate_windows",
            "ledgers",
            "answer_cache",
            "verdicts",
            "traces",
            "session_history",
        ):
            self._db.execute(f"DELETE FROM {table} WHERE expires_at < ?", (now,))

    # Traces and feedback.

    def put_trace(self, trace: StoredTrace) -> None:
        self._write(
            """
            INSERT INTO traces (trace_id, session_id, day, created_at, expires_at, body)
            VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (trace_id) DO UPDATE SET
                session_id = excluded.session_id, day = excluded.day,
                created_at = excluded.created_at, expires_at = excluded.expires_at,
                body = excluded.body
            RETURNING trace_id
            """,
            (
                trace.trace_id,
                trace.session_id,
                trace.day,
                trace.created_at,
                trace.expires_at,
                trace.body,
            ),
        )

    def get_trace(self, trace_id: str, *, now: float) -> StoredTrace | None:
        with self._locked():
            row = self._db.execute(
                f"SELECT {TRACE_COLUMNS} FROM traces WHERE trace_id = ? AND expires_at > ?",
                (trace_id, now),
            ).fetchone()
        return None if row is None else StoredTrace(*row)

    def rate_trace(
        self, trace_id: str, session_id: str, feedback: str, *, now: float
    ) -> RatingOutcome:
        row = self._write(
            """
            UPDATE traces SET feedback = ?
            WHERE trace_id = ? AND session_id = ? AND expires_at > ?
            RETURNING trace_id
            """,
            (feedback, trace_id, session_id, now),
        )
        if row is not None:
            return "rated"
        # Nothing was written; a read tells the two refusals apart.
        return "forbidden" if self.get_trace(trace_id, now=now) else "unknown"

    def review_feedback(self, trace_id: str, seen: str, reviewed: str, *, now: float) -> bool:
        row = self._write(
            """
            UPDATE traces SET feedback = ?
            WHERE trace_id = ? AND feedback = ? AND expires_at > ?
            RETURNING trace_id
            """,
            (reviewed, trace_id, seen, now),
        )
        return row is not None

    def traces_on(self, day: str, *, now: float) -> list[StoredTrace]:
        with self._locked():
            rows = self._db.execute(
                f"SELECT {TRACE_COLUMNS} FROM traces WHERE day = ? AND expires_at > ? "
                "ORDER BY created_at, trace_id",
                (day, now),
            ).fetchall()
        return [StoredTrace(*row) for row in rows]

    # Ingest completion records (candor.ingest.records).

    def ingest_record(self, index_name: str, source: str) -> str | None:
        with self._locked():
            row = self._db.execute(
                "SELECT record FROM ingest_records WHERE index_name = ? AND source = ?",
                (index_name, source),
            ).fetchone()
        return None if row is None else str(row[0])

    def set_ingest_record(self, index_name: str, source: str, record: str | None) -> None:
        if record is None:
            self._write(
                "DELETE FROM ingest_records WHERE index_name = ? AND source = ? RETURNING source",
                (index_name, source),
            )
            return
        self._write(
            """
            INSERT INTO ingest_records (index_name, source, record) VALUES (?, ?, ?)
            ON CONFLICT (index_name, source) DO UPDATE SET record = excluded.record
            RETURNING source
            """,
            (index_name, source, record),
        )


# Kept apart from SCHEMA so that the tables of each feature stay in one place.
INGEST_RECORDS_SCHEMA = """
CREATE TABLE IF NOT EXISTS ingest_records (
    index_name TEXT NOT NULL,
    source TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (index_name, source)
) WITHOUT ROWID;
"""

VERDICTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    digest TEXT PRIMARY KEY,
    verdict TEXT NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
"""
