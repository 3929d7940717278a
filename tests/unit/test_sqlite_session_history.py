"""The SQLite store's session history: forgotten on disk too, not only hidden from reads."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from candor.backends import sqlite_state
from candor.backends.sqlite_state import SqliteStateStore
from candor.ports import Turn

pytestmark = pytest.mark.unit


def history_rows(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return [row[0] for row in db.execute("SELECT id FROM session_history")]
    finally:
        db.close()


def test_the_purge_deletes_history_past_its_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_state, "PURGE_EVERY", 2)
    path = tmp_path / "state.sqlite3"
    store = SqliteStateStore(path)
    try:
        past, later = int(time.time()) - 1, int(time.time()) + 3600
        store.append_turn("gone", Turn("q", "a", "answered"), keep=3, expires_at=past)
        store.append_turn("kept", Turn("q", "a", "answered"), keep=3, expires_at=later)
    finally:
        store.close()

    assert history_rows(path) == ["kept"]


def test_a_file_from_before_session_history_forgets_the_turns_it_kept(tmp_path: Path) -> None:
    # Such files kept the turns in sessions.history, with no expiry at all.
    path = tmp_path / "state.sqlite3"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, status TEXT NOT NULL DEFAULT 'active',"
        " history TEXT NOT NULL DEFAULT '[]', updated_at REAL NOT NULL)"
    )
    db.execute(
        "INSERT INTO sessions VALUES ('s', 'warned', ?, 0)",
        ('[{"question": "secret question", "answer": "a", "decision": "answered"}]',),
    )
    db.commit()
    db.close()

    store = SqliteStateStore(path)
    try:
        session = store.get_session("s")
    finally:
        store.close()

    assert session.status == "warned"
    assert session.history == []
    assert b"secret question" not in path.read_bytes()
