"""The curated answers' contract: the store on SQLite and DynamoDB Local, the library
(store and curated index together) on SQLite and on Pinecone's wire format.

moto is not used: an add or a remove is a transaction of the answer and the
generation, and racing adds must each count, which only a real implementation shows.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from candor.backends.dynamodb_curated import DynamoDBCuratedAnswers
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_curated import SqliteCuratedAnswers
from candor.curated import library, lookup
from candor.curated.library import Curation
from candor.curated.matching import MatchRule
from candor.curated.records import CuratedAnswer, CuratedAnswers, CuratedState, new_id
from candor.errors import StateStoreError
from candor.ports import VectorIndex
from tests.contract.conftest import StateBacking
from tests.support.concurrency import together

pytestmark = pytest.mark.integration

INDEX = "docs"


@pytest.fixture
def opener(state_backing: StateBacking) -> Callable[[], CuratedAnswers]:
    """Opens stores on one shared backing, each as its own process would."""

    def open_store() -> CuratedAnswers:
        if state_backing.kind == "sqlite":
            return state_backing.closing(SqliteCuratedAnswers(state_backing.path))
        return DynamoDBCuratedAnswers(state_backing.table, client=state_backing.client())

    return open_store


@pytest.fixture
def store(opener: Callable[[], CuratedAnswers]) -> CuratedAnswers:
    return opener()


def answer(question: str = "What does git branch -d do?", **kw: object) -> CuratedAnswer:
    fields: dict[str, object] = {
        "id": new_id(),
        "question": question,
        "answer": "It deletes a merged branch.",
        "url": None,
        "created_at": time.time(),
    } | kw
    return CuratedAnswer(**fields)  # type: ignore[arg-type]


def test_a_new_index_has_no_answers_and_generation_zero(store: CuratedAnswers) -> None:
    assert store.curated_state(INDEX) == CuratedState(0, 0)
    assert store.list_curated(INDEX) == []
    assert store.get_curated(INDEX, new_id()) is None


def test_an_answer_is_kept_as_written_and_moves_the_generation(store: CuratedAnswers) -> None:
    kept = answer(url="https://docs.example.com/b", origin="feedback:" + "f" * 32)

    assert store.put_curated(INDEX, kept) == CuratedState(1, 1)

    assert store.get_curated(INDEX, kept.id) == kept
    assert store.list_curated(INDEX) == [kept]
    assert store.curated_state(INDEX) == CuratedState(1, 1)


def test_a_remove_moves_the_generation_and_a_second_remove_finds_nothing(
    store: CuratedAnswers,
) -> None:
    kept = answer()
    store.put_curated(INDEX, kept)

    assert store.remove_curated(INDEX, kept.id) == CuratedState(2, 0)
    assert store.remove_curated(INDEX, kept.id) is None

    assert store.get_curated(INDEX, kept.id) is None
    assert store.curated_state(INDEX) == CuratedState(2, 0)


def test_an_id_is_never_stored_twice(store: CuratedAnswers) -> None:
    kept = answer()
    store.put_curated(INDEX, kept)

    with pytest.raises(StateStoreError):
        store.put_curated(INDEX, answer(id=kept.id, question="another"))

    assert store.get_curated(INDEX, kept.id) == kept
    assert store.curated_state(INDEX) == CuratedState(1, 1)


def test_indexes_keep_their_answers_apart(store: CuratedAnswers) -> None:
    ours, theirs = answer(), answer()
    store.put_curated(INDEX, ours)
    store.put_curated("other", theirs)

    assert store.list_curated(INDEX) == [ours]
    assert store.get_curated(INDEX, theirs.id) is None
    assert store.curated_state("other") == CuratedState(1, 1)


def test_answers_list_oldest_first(store: CuratedAnswers) -> None:
    later, earlier = answer(created_at=2_000.0), answer(created_at=1_000.0)
    store.put_curated(INDEX, later)
    store.put_curated(INDEX, earlier)

    assert [a.id for a in store.list_curated(INDEX)] == [earlier.id, later.id]


def test_racing_adds_and_removes_each_count(opener: Callable[[], CuratedAnswers]) -> None:
    # Twenty instances each add one answer at the same moment; ten then remove theirs.
    added = [answer(f"question {n}") for n in range(20)]
    stores = [opener() for _ in added]

    pairs = list(zip(stores, added, strict=True))
    together(pairs, lambda pair: pair[0].put_curated(INDEX, pair[1]))
    together(pairs[:10], lambda pair: pair[0].remove_curated(INDEX, pair[1].id))

    state = stores[0].curated_state(INDEX)
    assert state == CuratedState(generation=30, count=10)
    assert {a.id for a in stores[0].list_curated(INDEX)} == {a.id for a in added[10:]}


# The library: the store and a curated index of each kind, together.


@pytest.fixture(params=["sqlite", "pinecone"])
def curated_index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorIndex]:
    from tests.support.indexes import vector_index

    with vector_index(request.param, tmp_path) as index:
        yield index


def test_an_added_answer_is_found_and_a_removed_one_is_not(
    store: CuratedAnswers, curated_index: VectorIndex
) -> None:
    embedder = HashingEmbedder()
    curation = Curation(store, curated_index, f"{INDEX}-{uuid.uuid4().hex[:6]}")
    rule = MatchRule(threshold=0.8, synonym=0.8)
    kept = library.add(curation, embedder, "What does git branch -d do?", "It deletes it.")
    library.add(curation, embedder, "What does git stash -u do?", "It stashes untracked files.")

    found = lookup.find("Explain what git branch -d does.", curation, embedder, rule)
    assert found is not None and found.answer == kept
    assert lookup.find("What does git branch -D do?", curation, embedder, rule) is None

    assert library.remove(curation, kept.id)
    assert lookup.find("Explain what git branch -d does.", curation, embedder, rule) is None
    assert [a.question for a in store.list_curated(curation.index_name)] == [
        "What does git stash -u do?"
    ]
