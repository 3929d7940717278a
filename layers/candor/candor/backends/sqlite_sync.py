"""The sync's records (candor.sync.records) in the embedded default's SQLite state file.

Two tables of their own beside the state store's: sync_pages, one row per page
(the record as JSON), and sync_sites, one row per site (its page count, its last
sync, and the lease and cursor of a sync in progress). Each write is one
statement, atomic by itself; the lease is one upsert whose update is conditioned
on the lease being free, so two processes cannot both hold it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from candor.backends.sqlite_file import SqliteFile
from candor.sync.records import PageRecord, SiteRecord

SCHEMA = """
CREATE TABLE IF NOT EXISTS sync_pages (
    index_name TEXT NOT NULL,
    site TEXT NOT NULL,
    url TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (index_name, site, url)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sync_sites (
    index_name TEXT NOT NULL,
    site TEXT NOT NULL,
    pages INTEGER NOT NULL DEFAULT 0,
    last_sync REAL,
    summary TEXT NOT NULL DEFAULT '{}',
    holder TEXT,
    lease_until REAL,
    cursor BLOB,
    PRIMARY KEY (index_name, site)
) WITHOUT ROWID;
"""


class SqliteSyncStore(SqliteFile):
    def __init__(self, path: Path, *, timeout: float = 30.0) -> None:
        super().__init__(path, schema=SCHEMA, what="sync records", timeout=timeout)

    def pages(self, index_name: str, site: str) -> list[PageRecord]:
        with self._locked():
            rows = self._db.execute(
                "SELECT body FROM sync_pages WHERE index_name = ? AND site = ? ORDER BY url",
                (index_name, site),
            ).fetchall()
        return [PageRecord.from_json(json.loads(row[0])) for row in rows]

    def put_pages(self, index_name: str, site: str, records: Sequence[PageRecord]) -> None:
        rows = [(index_name, site, r.url, json.dumps(r.to_json())) for r in records]
        # One transaction: a batch of records is written whole or not at all.
        with self._transaction() as db:
            db.executemany(
                """
                INSERT INTO sync_pages (index_name, site, url, body) VALUES (?, ?, ?, ?)
                ON CONFLICT (index_name, site, url) DO UPDATE SET body = excluded.body
                """,
                rows,
            )

    def delete_pages(self, index_name: str, site: str, urls: Sequence[str]) -> None:
        with self._locked():
            self._db.executemany(
                "DELETE FROM sync_pages WHERE index_name = ? AND site = ? AND url = ?",
                [(index_name, site, url) for url in urls],
            )

    def site(self, index_name: str, site: str) -> SiteRecord | None:
        with self._locked():
            row = self._db.execute(
                "SELECT site, pages, last_sync, summary FROM sync_sites "
                "WHERE index_name = ? AND site = ?",
                (index_name, site),
            ).fetchone()
        return None if row is None else _site(row)

    def sites(self, index_name: str) -> list[SiteRecord]:
        with self._locked():
            rows = self._db.execute(
                "SELECT site, pages, last_sync, summary FROM sync_sites "
                "WHERE index_name = ? ORDER BY site",
                (index_name,),
            ).fetchall()
        return [_site(row) for row in rows]

    def put_site(self, index_name: str, record: SiteRecord) -> None:
        with self._locked():
            self._db.execute(
                """
                INSERT INTO sync_sites (index_name, site, pages, last_sync, summary)
                VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (index_name, site) DO UPDATE SET pages = excluded.pages,
                    last_sync = excluded.last_sync, summary = excluded.summary
                """,
                (
                    index_name,
                    record.site,
                    record.pages,
                    record.last_sync,
                    json.dumps(record.summary),
                ),
            )

    def lease(self, index_name: str, site: str, holder: str, *, until: float, now: float) -> bool:
        with self._locked():
            row = self._db.execute(
                """
                INSERT INTO sync_sites (index_name, site, holder, lease_until) VALUES (?, ?, ?, ?)
                ON CONFLICT (index_name, site) DO UPDATE SET holder = excluded.holder,
                    lease_until = excluded.lease_until
                WHERE sync_sites.holder IS NULL OR sync_sites.holder = excluded.holder
                    OR sync_sites.lease_until <= ?
                RETURNING holder
                """,
                (index_name, site, holder, until, now),
            ).fetchone()
        return row is not None

    def release(self, index_name: str, site: str, holder: str) -> None:
        with self._locked():
            self._db.execute(
                "UPDATE sync_sites SET holder = NULL, lease_until = NULL "
                "WHERE index_name = ? AND site = ? AND holder = ?",
                (index_name, site, holder),
            )

    def cursor(self, index_name: str, site: str) -> bytes | None:
        with self._locked():
            row = self._db.execute(
                "SELECT cursor FROM sync_sites WHERE index_name = ? AND site = ?",
                (index_name, site),
            ).fetchone()
        return None if row is None or row[0] is None else bytes(row[0])

    def save_cursor(self, index_name: str, site: str, holder: str, cursor: bytes | None) -> bool:
        with self._locked():
            row = self._db.execute(
                "UPDATE sync_sites SET cursor = ? WHERE index_name = ? AND site = ? "
                "AND holder = ? RETURNING site",
                (cursor, index_name, site, holder),
            ).fetchone()
        return row is not None


def _site(row: tuple[str, int, float | None, str]) -> SiteRecord:
    return SiteRecord(row[0], int(row[1]), row[2], json.loads(row[3]))
