"""End to end on the embedded default: a gap opens when a page goes, and closes when it is back.

On the fixture manual (tests/fixtures/docs, three pages of a made-up `kite` tool),
ingested with `candor ingest` and the local embedder:

1. a visitor asks about `kite push --guarded` and is answered, citing kite-push.html;
2. the owner removes that page (`candor forget`); three visitors ask what only it
   answers: each is declined, and `candor gaps list` shows one gap of three questions;
3. `candor insights` lists the first answer among those that cited what is gone;
4. the owner restores the page (`candor ingest` again) and runs the gaps check: the
   gap closes, naming kite-push.html, and `candor insights` counts it closed.

The chat model is scripted (what it writes is not the point); the grounding gate,
retrieval, the citation and support checks, the gaps and the records are real.
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from candor.api.app import create_app
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.cli import main
from candor.cli.gaps import run_check
from candor.deps import Deps
from candor.factory import build_curation, build_embedder, build_gaps
from candor.settings import DEFAULT_PRICES, Settings
from tests.conftest import clear_candor_env
from tests.support import local_models
from tests.support.edge import allowing, browser
from tests.support.fakes import ScriptedChatModel

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

local_models.require(*local_models.EMBEDDER)

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "docs"
PAGE = "kite-push.html"
FIRST = "What does kite push --guarded do?"
ONLY_THAT_PAGE = (
    "How does the --guarded option of kite push work?",
    "What is kite push --guarded for?",
    "Explain kite push --guarded to me.",
)
ANSWER = "It replaces a remote kite only if it is still the one you last saw [1]."


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def answering_chat() -> ScriptedChatModel:
    """Whatever moderate may ask (screening decides most with no call), and an answer
    for each question the graph finds answerable (the names settle the grade)."""
    return ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}] * 10,
            "judge": [True] * 10,
            "text": [ANSWER] * 10,
        }
    )


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Settings, Path]]:
    clear_candor_env(monkeypatch)
    data, pages = tmp_path / "data", tmp_path / "pages"
    shutil.copytree(DOCS, pages)
    monkeypatch.setenv("CANDOR_DATA_DIR", str(data))
    settings = Settings(
        data_dir=data,
        site_name="Kite Docs",
        contact="help@example.com",
        prices={**DEFAULT_PRICES, "scripted": DEFAULT_PRICES["gpt-4o-mini"]},
    )
    yield settings, pages


def visitor_deps(settings: Settings, chat: ScriptedChatModel) -> Deps:
    """What the server builds from the same files (the CLI wrote them), with the chat
    model scripted."""
    embedder = build_embedder(settings)
    index = SqliteVectorIndex(settings.index_path, embedder.dimensions, embedder=embedder.name)
    state = SqliteStateStore(settings.state_path)
    curation = build_curation(settings, embedder)
    return allowing(Deps(settings, chat, embedder, index, None, state, curated=curation))


def ask(deps: Deps, question: str) -> dict[str, Any]:
    response = browser(create_app(lambda: deps)).post("/ask", json={"question": question})
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def test_a_gap_opens_when_a_page_goes_and_closes_when_it_is_back(
    site: tuple[Settings, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    settings, pages = site
    cli(capsys, "ingest", str(pages))

    # 1. Answered while the page is there, citing it
    deps = visitor_deps(settings, answering_chat())
    first = ask(deps, FIRST)
    assert first["decision"] == "answered"
    assert PAGE in [c["source"] for c in first["citations"]]

    # 2. The page goes; three questions only it answers are each declined
    assert "removed" in cli(capsys, "forget", PAGE)
    declined = [ask(deps, question) for question in ONLY_THAT_PAGE]
    assert [d["decision"] for d in declined] == ["declined"] * 3

    listed = [json.loads(line) for line in cli(capsys, "gaps", "list", "--json").splitlines()]
    (gap,) = listed
    assert gap["status"] == "open" and gap["asked"] == 3
    assert sorted(gap["questions"]) == sorted(ONLY_THAT_PAGE)

    # 3. The answer given while the page was there is listed as citing what is gone
    report = json.loads(cli(capsys, "insights", "--json"))
    (stale,) = report["cited_since_changed"]
    assert (stale["trace_id"], stale["source"], stale["status"]) == (
        first["trace_id"],
        PAGE,
        "removed",
    )
    assert stale["question"] == FIRST
    assert [g["id"] for g in report["gaps"]["opened"]] == [gap["id"]]
    assert "| " + gap["id"] + " | 3 |" in cli(capsys, "insights")

    # 4. The page is back: the check closes the gap and names the page
    cli(capsys, "ingest", str(pages))
    out = io.StringIO()
    checking = visitor_deps(settings, answering_chat())
    assert run_check(checking, build_gaps(settings), only=None, out=out) == 0
    assert f"{gap['id']}: closed by {PAGE}" in out.getvalue()

    (closed,) = [
        json.loads(line) for line in cli(capsys, "gaps", "list", "--all", "--json").splitlines()
    ]
    assert (closed["status"], closed["closed_by"]) == ("closed", [PAGE])
    assert all(check["answered"] for check in closed["last_check"])
    report = json.loads(cli(capsys, "insights", "--json"))
    assert [g["id"] for g in report["gaps"]["closed"]] == [gap["id"]]
    assert report["gaps"]["open"] == []
    # The same version of the page is back: the first answer's document says it again.
    assert report["cited_since_changed"] == []
