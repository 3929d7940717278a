"""End to end on the embedded default: a visitor's better answer, approved by the owner as
a curated answer, is served to a paraphrase with no model call; a near miss is not.

The visitor, the owner and the next visitors go through the same doors as on a site:
POST /ask and /feedback (a scripted chat model, since what the model writes is not the
point), `candor feedback review --approve KEY --as-answer`, and POST /ask/stream. The
embedder is the local one, with the match rule measured for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from candor.api.app import create_app
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.cli import main
from candor.curated.records import CHIP_TITLE
from candor.deps import Deps
from candor.factory import build_curation, build_embedder
from candor.settings import DEFAULT_PRICES, Settings
from tests.conftest import PASSAGES, clear_candor_env
from tests.support import local_models, sse
from tests.support.edge import allowing, browser
from tests.support.fakes import ScriptedChatModel

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

local_models.require(*local_models.EMBEDDER)

ASKED = "How do I undo my last commit but keep its changes staged?"
BETTER = (
    "Run git reset --soft HEAD~1. The branch moves back one commit, "
    "and the commit's changes stay staged."
)
PARAPHRASE = "What's the way to undo my last commit and keep its changes staged?"
NEAR_MISSES = (
    "How do I undo my last 2 commits but keep their changes staged?",  # another number
    "How do I undo my last commit but keep its changes unstaged?",  # another question
)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deps]:
    """The site's deps on the local embedder, and the environment that points the CLI
    at the same files. The graph declines the first question (its passages do not
    answer it), as the scripted grades say."""
    clear_candor_env(monkeypatch)
    monkeypatch.setenv("CANDOR_DATA_DIR", str(tmp_path / "data"))
    settings = Settings(
        data_dir=tmp_path / "data",
        site_name="Example Docs",
        contact="help@example.com",
        prices={**DEFAULT_PRICES, "scripted": DEFAULT_PRICES["gpt-4o-mini"]},
    )
    embedder = build_embedder(settings)
    index = SqliteVectorIndex(settings.index_path, embedder.dimensions, embedder=embedder.name)
    index.upsert(PASSAGES, embedder.embed([c.text for c in PASSAGES]))
    state = SqliteStateStore(settings.state_path)
    curation = build_curation(settings, embedder)
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}] * 3,
            "judge": [False, False] * 3,
            "Rewrite": [{"query": "undo commit"}] * 3,
        }
    )
    deps = allowing(Deps(settings, chat, embedder, index, None, state, curated=curation))
    yield deps
    index.close()
    state.close()


def test_an_approved_better_answer_serves_a_paraphrase_with_no_model_call_and_no_near_miss(
    site: Deps, capsys: pytest.CaptureFixture[str]
) -> None:
    deps = site
    chat = deps.chat
    assert isinstance(chat, ScriptedChatModel)
    http = browser(create_app(lambda: deps))

    # Given a visitor whose question was declined, who wrote what the answer should be
    asked = http.post("/ask", json={"question": ASKED}).json()
    assert asked["decision"] == "declined"
    rating = {
        "trace_id": asked["trace_id"],
        "session_id": asked["session_id"],
        "score": -1,
        "reason": "not_found",
        "better_answer": BETTER,
    }
    assert http.post("/feedback", json=rating).status_code == 200

    # When the owner approves it as a curated answer
    capsys.readouterr()
    assert main(["feedback", "review", "--json"]) == 0
    (pending,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert pending["better_answer"] == BETTER
    key = pending["key"]
    assert main(["feedback", "review", "--approve", key, "--as-answer"]) == 0
    assert "kept as curated answer a" in capsys.readouterr().out

    # Then a visitor who asks it in other words is served it, streamed, with no model call
    calls_before = len(chat.calls)
    stream = http.post("/ask/stream", json={"question": PARAPHRASE})
    events = sse.parse_text(stream.text)
    done = events[-1].data
    assert (done["decision"], done["answer"]) == ("answered", BETTER)
    assert [c["title"] for c in done["citations"]] == [CHIP_TITLE]
    tokens = [e.data["text"] for e in events if e.name == "token"]
    assert len(tokens) == 2 and "".join(tokens) == BETTER
    assert [s["node"] for s in done["trace"]] == ["moderate", "route", "curated"]
    assert len(chat.calls) == calls_before

    # And a near miss goes through the graph, as if no curated answer existed
    for near_miss in NEAR_MISSES:
        missed = http.post("/ask", json={"question": near_miss}).json()
        assert missed["answer"] != BETTER
        assert "retrieve" in [s["node"] for s in missed["trace"]]
    assert len(chat.calls) > calls_before

    # And the owner's list counts the one it served
    capsys.readouterr()
    assert main(["answers", "list", "--json"]) == 0
    (listed,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (listed["question"], listed["answer"], listed["served"]) == (ASKED, BETTER, 1)
    assert listed["origin"] == f"feedback:{asked['trace_id']}"
