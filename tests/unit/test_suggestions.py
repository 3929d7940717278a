"""Starter questions: written from the index, kept only when the graph answers them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from candor import guards, suggestions
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.deps import Deps
from candor.errors import BudgetExhaustedError
from candor.graph.state import Citation, GraphState, SupportCheck
from candor.settings import Settings
from candor.types import Chunk
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

QUESTION = {"abusive": False, "kind": "question"}

PAGES = [
    Chunk(
        "k1-0",
        "When you publish your work with kite, the tool first compares the branch on the "
        "server with the state your local copy remembers. If somebody else has published "
        "in the meantime, kite stops and tells you which commits you have not seen yet, "
        "so nobody loses changes by accident. You can then fetch, look and try again.",
        "kite-push.html",
        "kite push",
    ),
    Chunk(
        "k2-0",
        "Kite keeps a journal of every place your branch pointed to during the last ninety "
        "days. When a reset or a rebase went wrong, open the journal, pick the entry from "
        "before the mistake, and move the branch back to it. Nothing that was committed is "
        "lost while it is still listed in the journal, even if no branch shows it anymore.",
        "kite-journal.html",
        "kite journal",
    ),
    Chunk(
        "k3-0",
        "Large binary files slow every clone down, because each version is stored whole. "
        "Kite can keep such files outside the repository and store a small pointer in their "
        "place, so that a clone downloads only the versions a checkout actually needs, which "
        "saves time and disk space for everybody who works on the project every day.",
        "kite-large.html",
        "kite large files",
    ),
]

WRITTEN = [
    "Why did my upload get stopped when a colleague had shared theirs first?",
    "Is there any way to make cloning quicker with big pictures?",
    "How do I undo a bad rebase and get my old branch state back?",
]
ANSWERED = "Kite stops and tells you which commits you have not seen yet [1]."


@pytest.fixture
def deps(settings: Settings) -> Iterator[Deps]:
    from candor.backends.sqlite_state import SqliteStateStore

    embedder = HashingEmbedder()
    index = SqliteVectorIndex(settings.index_path, embedder.dimensions, embedder=embedder.name)
    index.upsert(PAGES, embedder.embed([c.text for c in PAGES]))
    state = SqliteStateStore(settings.state_path)
    configured = settings.model_copy(update={"suggest_questions": True})
    yield Deps(configured, ScriptedChatModel(), embedder, index, None, state)
    index.close()
    state.close()


class Checked:
    """Deps with a scripted model, and that model, for its calls."""

    def __init__(self, deps: Deps, script: dict[str, list[Any]]) -> None:
        self.chat = ScriptedChatModel(script)
        self.deps = Deps(deps.settings, self.chat, deps.embedder, deps.index, None, deps.state)


def scripted(deps: Deps, script: dict[str, list[Any]]) -> Deps:
    return Checked(deps, script).deps


def one_declined_of_three() -> dict[str, list[Any]]:
    # In call order: write, answer; write (declined: two grades say no, one rewrite);
    # write, answer.
    return {
        "text": [WRITTEN[0], ANSWERED, WRITTEN[1], WRITTEN[2], ANSWERED],
        "Triage": [QUESTION] * 3,
        "judge": [True, False, False, True],
        "Rewrite": [{"query": "kite clone large files"}],
    }


def test_a_refresh_keeps_the_questions_its_graph_answers_and_drops_the_declined(
    deps: Deps,
) -> None:
    checked = Checked(deps, one_declined_of_three())

    done = asyncio.run(suggestions.refresh(checked.deps, version=1))

    assert done.kept == [WRITTEN[0], WRITTEN[2]]
    assert done.rejected == {WRITTEN[1]: "the graph declined"}
    assert checked.chat.kinds().count("text") == 5  # every call was scripted and made


def test_the_widget_serves_the_stored_questions_with_no_model_call(deps: Deps) -> None:
    checked = scripted(deps, one_declined_of_three())
    asyncio.run(suggestions.refresh(checked, version=0))
    served = Checked(deps, {})

    questions = asyncio.run(suggestions.Suggestions().for_widget(served.deps))

    assert questions == [WRITTEN[0], WRITTEN[2]]
    assert served.chat.calls == []


def test_a_new_corpus_version_serves_none_and_starts_one_refresh(deps: Deps) -> None:
    asyncio.run(suggestions.refresh(scripted(deps, one_declined_of_three()), version=0))
    deps.state.bump_corpus_version(deps.settings.index_name)
    refreshing = Checked(deps, one_declined_of_three())
    widget = suggestions.Suggestions()

    async def visit() -> tuple[list[str], list[str], list[str]]:
        first = await widget.for_widget(refreshing.deps)
        again = await suggestions.Suggestions().for_widget(refreshing.deps)  # another process
        await widget.idle()
        widget._memo = None
        return first, again, await widget.for_widget(refreshing.deps)

    first, again, after = asyncio.run(visit())

    assert first == again == []
    assert after == [WRITTEN[0], WRITTEN[2]]
    assert refreshing.chat.kinds().count("text") == 5, "one refresh, not two"


def test_the_owners_questions_are_served_as_set_and_none_is_written(deps: Deps) -> None:
    owner = deps.settings.model_copy(
        update={"suggested_questions": ("How do I publish?", "Where is the journal?")}
    )
    served = Deps(owner, ScriptedChatModel(), deps.embedder, deps.index, None, deps.state)

    assert asyncio.run(suggestions.Suggestions().for_widget(served)) == [
        "How do I publish?",
        "Where is the journal?",
    ]


def test_a_refresh_is_reserved_on_the_days_budget_and_trued_up(deps: Deps) -> None:
    chat = ScriptedChatModel(one_declined_of_three(), cost_per_call=0.0001)
    checked = Deps(deps.settings, chat, deps.embedder, deps.index, None, deps.state)
    ledger = guards.daily_ledger(time.time())

    done = asyncio.run(suggestions.refresh(checked, version=1))

    spent = deps.state.budget_spent(ledger)
    assert spent == guards.usd(done.cost_usd)
    assert 0 < spent <= suggestions.reservation(checked)


def test_a_spent_budget_writes_no_question(deps: Deps) -> None:
    broke = deps.settings.model_copy(update={"budget_daily_usd": 0})
    chat = ScriptedChatModel()
    checked = Deps(broke, chat, deps.embedder, deps.index, None, deps.state)

    with pytest.raises(BudgetExhaustedError):
        asyncio.run(suggestions.refresh(checked, version=1))
    assert chat.calls == []


def cited() -> tuple[Citation, ...]:
    return (Citation("k1-0", "kite-push.html", "kite push", "…"),)


@pytest.mark.parametrize(
    ("final", "reason"),
    [
        (GraphState("q", "s", 3, decision="answered", citations=cited()), None),
        (GraphState("q", "s", 3, decision="declined"), "the graph declined"),
        (GraphState("q", "s", 3, decision="answered"), "the answer cites nothing"),
        (
            GraphState(
                "q",
                "s",
                3,
                decision="answered",
                citations=cited(),
                support=SupportCheck(specifics=1, unsupported=("90",), removed=("It keeps 90.",)),
            ),
            "the answer held an unsupported specific",
        ),
    ],
)
def test_only_a_cited_answer_with_every_specific_supported_makes_a_starter(
    final: GraphState, reason: str | None
) -> None:
    assert suggestions.answers_it(final) == reason


def test_suggested_questions_are_read_as_a_json_array_or_separated_by_bars(
    tmp_path: Path,
) -> None:
    as_json = Settings(data_dir=tmp_path, suggested_questions='["One?", "Two?"]')
    as_bars = Settings(
        data_dir=tmp_path, suggested_questions="One? | Two? | Three? | Four? | Five?"
    )

    assert as_json.suggested_questions == ("One?", "Two?")
    assert as_bars.suggested_questions == ("One?", "Two?", "Three?", "Four?")
