"""Curated answers through the service: served after moderate and route, before retrieval,
with no model call and nothing reserved beyond the embedding; never to a near miss."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator, Sequence
from decimal import Decimal
from pathlib import Path

import pytest

from candor import guards
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_curated import SqliteCuratedAnswers
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.curated import first, library
from candor.curated.library import Curation
from candor.curated.records import CHIP_TITLE, CuratedAnswer
from candor.deps import Deps
from candor.errors import BudgetExhaustedError, IndexError_
from candor.graph import runner
from candor.ports import Vectors
from candor.results import AskResult, Done
from candor.service import ask, prepare
from candor.settings import Settings
from candor.traces import Trace, traces_since
from candor.types import Chunk, Metadata, Rankings, Usage
from tests.conftest import PASSAGES
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

CURATED = "What does git branch -d do?"
OWNER_TEXT = "git branch -d deletes a merged branch. Use -D to delete it whatever its state."
OWNER_URL = "https://docs.example.com/branches"
# With the hashing embedder, cosine 0.83 to CURATED: its new words only frame the question.
PARAPHRASE = "Explain what git branch -d does."
FLIPPED = "What does git branch -D do?"  # cosine 1.0: the embedder lower-cases words
OTHER_QUESTION = "How do I recover a branch I deleted with git branch -d?"
# The hashing embedder is measured for nothing: the test sets its threshold.
THRESHOLD = 0.8


@pytest.fixture
def curated_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"curated_threshold": THRESHOLD})


@pytest.fixture
def curation(curated_settings: Settings) -> Iterator[Curation]:
    embedder = HashingEmbedder()
    store = SqliteCuratedAnswers(curated_settings.state_path)
    index = SqliteVectorIndex(
        curated_settings.curated_index_path, embedder.dimensions, embedder=embedder.name
    )
    yield Curation(store, index, curated_settings.index_name)
    index.close()
    store.close()


def deps_with(
    settings: Settings,
    chat: ScriptedChatModel,
    index: SqliteVectorIndex,
    state: SqliteStateStore,
    curation: Curation | None,
) -> Deps:
    return Deps(settings, chat, HashingEmbedder(), index, None, state, curated=curation)


def add_owner_answer(curation: Curation) -> str:
    return library.add(curation, HashingEmbedder(), CURATED, OWNER_TEXT, url=OWNER_URL).id


def declines_after_two_grades() -> ScriptedChatModel:
    """What the graph needs to decline a question whose passages do not answer it."""
    return ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [False, False],
            "Rewrite": [{"query": "git branch delete"}],
        }
    )


def nodes_of(result: AskResult) -> list[str]:
    return [step.node for step in result.trace]


def test_a_paraphrase_is_served_the_owners_text_with_no_model_call_and_no_budget(
    curated_settings: Settings,
    index: SqliteVectorIndex,
    state: SqliteStateStore,
    curation: Curation,
) -> None:
    # Given the owner's answer, screening on, and a day's budget already spent
    settings = curated_settings.model_copy(
        update={"screening": True, "budget_daily_usd": Decimal(0)}
    )
    answer_id = add_owner_answer(curation)
    chat = ScriptedChatModel({})  # any model call fails the test
    deps = deps_with(settings, chat, index, state, curation)
    assert first.moderated_without_model(PARAPHRASE, settings)

    # When a visitor asks it in other words
    result = asyncio.run(ask(deps, PARAPHRASE))

    # Then the owner's text answers, with one chip, and no model was called
    assert (result.decision, result.answer) == ("answered", OWNER_TEXT)
    (chip,) = result.citations
    assert (chip.title, chip.url) == (CHIP_TITLE, OWNER_URL)
    assert chat.calls == []
    assert nodes_of(result) == ["moderate", "route", "curated"]
    (trace,) = traces_since(state, 1)
    assert trace.curated_id == answer_id


def test_without_a_curated_match_a_spent_budget_refuses_as_before(
    curated_settings: Settings,
    index: SqliteVectorIndex,
    state: SqliteStateStore,
    curation: Curation,
) -> None:
    settings = curated_settings.model_copy(
        update={"screening": True, "budget_daily_usd": Decimal(0)}
    )
    add_owner_answer(curation)
    deps = deps_with(settings, ScriptedChatModel({}), index, state, curation)

    with pytest.raises(BudgetExhaustedError):
        asyncio.run(ask(deps, OTHER_QUESTION))


def test_the_owners_text_streams_a_sentence_at_a_time(
    curated_settings: Settings,
    index: SqliteVectorIndex,
    state: SqliteStateStore,
    curation: Curation,
) -> None:
    settings = curated_settings.model_copy(update={"screening": True})
    add_owner_answer(curation)
    deps = deps_with(settings, ScriptedChatModel({}), index, state, curation)

    async def read() -> list[object]:
        prepared = await prepare(deps, PARAPHRASE)
        return [event async for event in prepared.events()]

    events = asyncio.run(read())

    tokens = [e.text for e in events if isinstance(e, runner.TokenEvent)]
    assert tokens == [
        "git branch -d deletes a merged branch. ",
        "Use -D to delete it whatever its state.",
    ]
    assert "".join(tokens) == OWNER_TEXT
    assert isinstance(events[-1], Done)


@pytest.mark.parametrize(
    "near_miss", [FLIPPED, OTHER_QUESTION, CURATED.replace("do?", "do in Git 2.0?")]
)
def test_a_near_miss_goes_through_the_graph(
    curated_settings: Settings,
    index: SqliteVectorIndex,
    state: SqliteStateStore,
    curation: Curation,
    near_miss: str,
) -> None:
    add_owner_answer(curation)
    chat = declines_after_two_grades()
    deps = deps_with(curated_settings, chat, index, state, curation)

    result = asyncio.run(ask(deps, near_miss))

    assert result.answer != OWNER_TEXT
    assert result.decision == "declined"
    assert "retrieve" in nodes_of(result)
    (trace,) = traces_since(state, 1)
    assert trace.curated_id is None


def test_unsure_screening_asks_the_model_then_serves_the_owners_text(
    curated_settings: Settings,
    index: SqliteVectorIndex,
    state: SqliteStateStore,
    curation: Curation,
) -> None:
    # Screening off: moderate needs its triage call, so the budget is reserved for the
    # graph and the curated node looks the question up itself, after route.
    add_owner_answer(curation)
    chat = ScriptedChatModel({"Triage": [{"abusive": False, "kind": "question"}]})
    deps = deps_with(curated_settings, chat, index, state, curation)

    result = asyncio.run(ask(deps, PARAPHRASE))

    assert result.answer == OWNER_TEXT
    assert chat.kinds() == ["Triage"]
    assert nodes_of(result) == ["moderate", "route", "curated"]


def test_a_follow_up_is_not_matched_against_curated_questions(
    curated_settings: Settings,
    index: SqliteVectorIndex,
    state: SqliteStateStore,
    curation: Curation,
) -> None:
    add_owner_answer(curation)
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "follow_up"}],
            "judge": [False, False],
            "Rewrite": [{"query": "git branch"}],
        }
    )
    deps = deps_with(curated_settings, chat, index, state, curation)

    result = asyncio.run(ask(deps, "and git branch -d?"))

    assert "curated" not in nodes_of(result)


def test_adding_a_curated_answer_retires_the_cached_answer_it_changes(
    curated_settings: Settings,
    index: SqliteVectorIndex,
    state: SqliteStateStore,
    curation: Curation,
) -> None:
    # Given a question the graph declined, kept in the answer cache
    deps = deps_with(curated_settings, declines_after_two_grades(), index, state, curation)
    before = asyncio.run(ask(deps, CURATED))
    assert before.decision == "declined"
    assert asyncio.run(ask(deps, CURATED)).cached

    # When the owner answers it, the next visitor gets the owner's answer
    answer_id = add_owner_answer(curation)
    chat = ScriptedChatModel({"Triage": [{"abusive": False, "kind": "question"}]})
    after = asyncio.run(ask(dataclasses.replace(deps, chat=chat), CURATED))
    assert (after.answer, after.cached) == (OWNER_TEXT, False)

    # And once it is removed, no cached copy of it is served either
    assert asyncio.run(ask(dataclasses.replace(deps, chat=chat), CURATED)).cached
    assert library.remove(curation, answer_id)
    gone = asyncio.run(ask(dataclasses.replace(deps, chat=declines_after_two_grades()), CURATED))
    assert (gone.cached, gone.decision) == (False, "declined")


class BrokenIndex(SqliteVectorIndex):
    """The curated index, failing every search as an outage would."""

    def query(
        self,
        *,
        vector: Vectors | None,
        keywords: str | None,
        top_k: int,
        where: Metadata | None = None,
    ) -> Rankings:
        raise IndexError_("the curated index is unavailable (test)")


def test_a_failed_curated_lookup_leaves_the_question_to_the_graph(
    curated_settings: Settings,
    index: SqliteVectorIndex,
    state: SqliteStateStore,
    curation: Curation,
    tmp_path: Path,
) -> None:
    add_owner_answer(curation)
    embedder = HashingEmbedder()
    broken = BrokenIndex(tmp_path / "broken.sqlite3", embedder.dimensions, embedder=embedder.name)
    for screening in (True, False):
        settings = curated_settings.model_copy(update={"screening": screening})
        chat = declines_after_two_grades()
        deps = deps_with(settings, chat, index, state, dataclasses.replace(curation, index=broken))

        result = asyncio.run(ask(deps, PARAPHRASE, session_id=f"s{screening}"))

        assert result.decision == "declined"
    broken.close()


def test_a_removed_answer_whose_vector_stayed_is_never_served(
    curated_settings: Settings,
    index: SqliteVectorIndex,
    state: SqliteStateStore,
    curation: Curation,
) -> None:
    answer_id = add_owner_answer(curation)
    # The store forgets it; the index delete never happened (a failure after the store's).
    assert curation.store.remove_curated(curation.index_name, answer_id) is not None
    # Another answer, stored only, keeps the lookup running (it is skipped at 0 answers).
    other = CuratedAnswer("a" + "0" * 12, "unrelated", "x", None, time.time())
    curation.store.put_curated(curation.index_name, other)
    deps = deps_with(curated_settings, declines_after_two_grades(), index, state, curation)

    result = asyncio.run(ask(deps, PARAPHRASE))

    assert result.answer != OWNER_TEXT
    assert library.reindex(curation, HashingEmbedder()).deleted == 1


class RecordingStore(SqliteStateStore):
    """The SQLite state store, recording every reservation it is asked for."""

    reserved: list[Decimal]

    def reserve_budget(
        self, ledger_key: str, amount: Decimal, *, cap: Decimal, expires_at: int
    ) -> bool:
        self.reserved.append(amount)
        return super().reserve_budget(ledger_key, amount, cap=cap, expires_at=expires_at)


class PricedEmbedder(HashingEmbedder):
    """The hashing embedder's vectors, billed as a hosted embedder's (a token a byte)."""

    def __init__(self) -> None:
        super().__init__()
        self.name = "text-embedding-3-small"
        self.texts: list[str] = []

    def embed_with_usage(self, texts: Sequence[str]) -> tuple[Vectors, Usage]:
        self.texts.extend(texts)
        tokens = sum(len(t.encode()) for t in texts)
        return self.embed(texts), Usage(tokens, 0, tokens * 0.02 / 1e6)


def test_a_priced_embedding_is_all_a_curated_answer_reserves(
    curated_settings: Settings, index: SqliteVectorIndex, tmp_path: Path
) -> None:
    settings = curated_settings.model_copy(update={"screening": True})
    state = RecordingStore(tmp_path / "recording.sqlite3")
    state.reserved = []
    embedder = PricedEmbedder()
    curation = Curation(
        SqliteCuratedAnswers(tmp_path / "recording.sqlite3"),
        SqliteVectorIndex(
            tmp_path / "curated.sqlite3", embedder.dimensions, embedder=embedder.name
        ),
        settings.index_name,
    )
    library.add(curation, embedder, CURATED, OWNER_TEXT)
    deps = Deps(settings, ScriptedChatModel({}), embedder, index, None, state, curated=curation)
    whole = guards.reservation_usd(settings, "scripted", embedder)

    result = asyncio.run(ask(deps, PARAPHRASE))

    assert result.answer == OWNER_TEXT
    held = first.reservation_usd(settings, deps)
    assert 0 < held < whole / 10
    assert state.reserved and set(state.reserved) == {held}
    # Settled to what the one embedding of the question cost, no more.
    spent = state.budget_spent(guards.daily_ledger(time.time()))
    assert spent == guards.usd(len(PARAPHRASE.encode()) * 0.02 / 1e6)
    state.close()


def test_the_curated_index_is_apart_from_the_documents(
    curated_settings: Settings, index: SqliteVectorIndex, curation: Curation
) -> None:
    answer_id = add_owner_answer(curation)
    before = index.count()
    assert answer_id not in set(index.list_ids())
    # Deleting every document (as a sync that lost its site would) leaves it in place.
    index.delete(list(index.list_ids()))
    assert index.count() == 0 < before
    assert list(curation.index.list_ids()) == [answer_id]


def test_an_answer_is_not_kept_when_its_question_cannot_be_indexed(
    curated_settings: Settings, curation: Curation, tmp_path: Path
) -> None:
    embedder = HashingEmbedder()
    broken = BrokenUpserts(tmp_path / "b.sqlite3", embedder.dimensions, embedder=embedder.name)
    with pytest.raises(IndexError_):
        library.add(dataclasses.replace(curation, index=broken), embedder, CURATED, OWNER_TEXT)
    assert curation.store.list_curated(curation.index_name) == []
    broken.close()


class BrokenUpserts(SqliteVectorIndex):
    def upsert(self, chunks: Sequence[Chunk], vectors: Vectors) -> int:
        raise IndexError_("the curated index refused the write (test)")


@pytest.mark.parametrize(
    ("question", "answer", "url", "reason"),
    [
        ("", OWNER_TEXT, None, "question is empty"),
        (CURATED, " ", None, "answer is empty"),
        (CURATED, "x" * 4001, None, "at most 4000"),
        (CURATED, "bell\x07", None, "control character"),
        (CURATED, OWNER_TEXT, "javascript:alert(1)", "absolute http"),
    ],
)
def test_a_curated_answer_that_cannot_be_kept_says_why(
    curation: Curation, question: str, answer: str, url: str | None, reason: str
) -> None:
    from candor.errors import CuratedAnswerError

    with pytest.raises(CuratedAnswerError, match=reason):
        library.add(curation, HashingEmbedder(), question, answer, url=url)
    assert curation.store.list_curated(curation.index_name) == []


def test_a_trace_records_which_curated_answer_served_it_also_from_the_cache(
    curated_settings: Settings,
    index: SqliteVectorIndex,
    state: SqliteStateStore,
    curation: Curation,
) -> None:
    answer_id = add_owner_answer(curation)
    settings = curated_settings.model_copy(update={"screening": True})
    deps = deps_with(settings, ScriptedChatModel({}), index, state, curation)

    asyncio.run(ask(deps, PARAPHRASE))
    assert asyncio.run(ask(deps, PARAPHRASE)).cached

    stored: list[Trace] = traces_since(state, 1)
    assert [t.curated_id for t in stored] == [answer_id, answer_id]
    assert len(PASSAGES) == index.count()
