"""`candor handoffs list|show|retry` and the hand-off counts of `candor insights`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from candor.backends.sqlite_handoffs import SqliteHandoffStore
from candor.cli import main
from candor.handoffs.store import Handoff
from candor.handoffs.transcript import Content, Entry
from tests.conftest import clear_candor_env
from tests.support.webhook_server import webhook_receiver

pytestmark = pytest.mark.integration

SECRET = "webhook-secret-0123456789"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SqliteHandoffStore:
    clear_candor_env(monkeypatch)
    monkeypatch.setenv("CANDOR_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("CANDOR_EMBEDDER_BACKEND", "hashing")
    return SqliteHandoffStore(tmp_path / "state.sqlite3")


def put(store: SqliteHandoffStore, *, after_decline: bool, state: str = "pending") -> Handoff:
    content = Content(
        email="visitor@example.org",
        message="Please call me back.",
        site_name="Example Docs",
        scope="conversation",
        transcript=(Entry("How do I sync to a cloud drive?", "I cannot say.", "declined"),),
        after_decline=after_decline,
    )
    handoff = Handoff(
        f"{len(store.handoffs_on(time.strftime('%Y-%m-%d', time.gmtime()), now=time.time())):032x}",
        "s",
        time.time(),
        int(time.time()) + 3600,
        content.to_json(),
        state=state,  # type: ignore[arg-type]
    )
    store.put_handoff(handoff)
    return handoff


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_list_shows_each_handoff_with_its_state(
    store: SqliteHandoffStore, capsys: pytest.CaptureFixture[str]
) -> None:
    first = put(store, after_decline=True)
    put(store, after_decline=False, state="delivered")

    code, out = run(capsys, "handoffs", "list", "--json")

    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert (rows[0]["id"], rows[0]["after_decline"]) == (first.id, True)
    assert [r["state"] for r in rows] == ["pending", "delivered"]
    code, text = run(capsys, "handoffs", "list", "--state", "pending")
    assert first.id in text and "visitor@example.org" in text and "after a decline" in text
    assert len(text.splitlines()) == 1


def test_show_prints_the_conversation(
    store: SqliteHandoffStore, capsys: pytest.CaptureFixture[str]
) -> None:
    handoff = put(store, after_decline=True)

    code, out = run(capsys, "handoffs", "show", handoff.id)

    assert code == 0
    assert "How do I sync to a cloud drive?" in out and "Please call me back." in out


def test_retry_forwards_what_was_not_delivered(
    store: SqliteHandoffStore,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waiting = put(store, after_decline=True, state="failed")
    with webhook_receiver() as receiver:
        monkeypatch.setenv("CANDOR_HANDOFF_WEBHOOK_URL", receiver.url)
        monkeypatch.setenv("CANDOR_HANDOFF_WEBHOOK_SECRET", SECRET)

        code, out = run(capsys, "handoffs", "retry")
        _, second = run(capsys, "handoffs", "retry", waiting.id)

    assert code == 0 and f"{waiting.id}: delivered" in out
    assert "not sent (delivered already" in second
    assert len(receiver.received) == 1


def test_insights_count_handoffs_and_those_after_a_decline(
    store: SqliteHandoffStore, capsys: pytest.CaptureFixture[str]
) -> None:
    put(store, after_decline=True)
    put(store, after_decline=True, state="delivered")
    put(store, after_decline=False, state="delivered")

    code, out = run(capsys, "insights", "--json")
    markdown: Any = run(capsys, "insights")[1]

    assert code == 0
    assert json.loads(out)["handoffs"] == {
        "n": 3,
        "after_decline": 2,
        "delivered": 2,
        "pending": 1,
        "failed": 0,
    }
    assert "3 visitors asked for a person, 2 of them after candor declined" in markdown
