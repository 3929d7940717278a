"""Ingestion converges under faults: whichever write fails, the next delivery completes it.

The index and the state store are real (SQLite; Pinecone through its wire-format
test server) behind the fault-injecting wrappers of tests/support/faults.py,
which fail the Nth write. After the retry the new version must be what keyword
search finds, and the answer cache must serve no answer from before the change
(shown with candor.service.ask and the scripted model).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.ingest import doc_prefix
from candor.ingest.chunking import MAX_HEADING_BYTES
from candor.ingest.outcomes import IngestReport
from candor.ingest.pipeline import complete, delete_document, ingest
from candor.ingest.reading import MAX_CHUNK_BYTES, Chunking, fingerprint
from candor.ingest.records import PENDING, CompletionRecords
from candor.ports import StateStore, VectorIndex
from candor.service import ask
from candor.settings import Settings
from tests.support import pinecone_server
from tests.support.embedders import CountingEmbedder
from tests.support.fakes import ScriptedChatModel
from tests.support.faults import FailNth, FaultyIndex, FaultyStateStore

pytestmark = pytest.mark.integration

SOURCE = "guides/winch.md"
QUESTION = "How does the winch coil its lines?"
# Version 1 has two passages, version 2 one: changing it writes both and prunes a tail.
V1 = (
    b"# Winch\n\n## Coiling\n\n"
    + b" ".join(b"The winch coils loose lines by hand, turn after turn." for _ in range(12))
    + b"\n\n## Storage\n\n"
    + b" ".join(b"Keep the winch dry and out of the sun in winter." for _ in range(12))
    + b"\n"
)
V2 = b"# Winch\n\n## Coiling\n\nThe winch coils its lines with the autocoil lever.\n"
OLD_ANSWER = "Turn the lines by hand [1]."
NEW_ANSWER = "Pull the autocoil lever [1]."
ANSWERABLE = {"abusive": False, "kind": "question"}


def answering(*answers: str) -> ScriptedChatModel:
    """A model that answers QUESTION from the passages, once per answer given."""
    return ScriptedChatModel(
        {
            "Triage": [ANSWERABLE] * len(answers),
            "judge": [True] * len(answers),
            "text": list(answers),
        }
    )


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder(HashingEmbedder())


@pytest.fixture
def local_index(settings: Settings, embedder: CountingEmbedder) -> Iterator[SqliteVectorIndex]:
    with SqliteVectorIndex(settings.index_path, embedder.dimensions) as index:
        yield index


@pytest.fixture
def store(settings: Settings) -> Iterator[SqliteStateStore]:
    store = SqliteStateStore(settings.state_path)
    yield store
    store.close()


def run(
    data: bytes,
    *,
    embedder: CountingEmbedder,
    index: VectorIndex,
    state: StateStore,
    settings: Settings,
) -> IngestReport:
    """One delivery of SOURCE, as `candor ingest` makes it: the index name's records."""
    return ingest(
        [(SOURCE, data)],
        embedder=embedder,
        index=index,
        records=CompletionRecords(state, settings.index_name),
    )


def keyword_sources(index: VectorIndex, words: str) -> list[str]:
    return [hit.chunk.source for hit in index.query(vector=None, keywords=words, top_k=5).keyword]


def stored_text(index: VectorIndex) -> str:
    return " ".join(chunk.text for chunk in index.fetch(sorted(index.list_ids(doc_prefix(SOURCE)))))


def answer(deps: Deps) -> tuple[str, bool]:
    result = asyncio.run(ask(deps, QUESTION))
    return result.answer, result.cached


# -- the order of the writes ------------------------------------------------------


def test_the_completion_record_is_written_last_after_every_index_write_and_the_bump(
    settings: Settings,
    embedder: CountingEmbedder,
    local_index: SqliteVectorIndex,
    store: SqliteStateStore,
) -> None:
    # Given version 1, and one log of the writes to the index and the state store
    run(V1, embedder=embedder, index=local_index, state=store, settings=settings)
    log = FailNth(nth=10**6)  # never fires: it only records

    # When version 2 replaces it
    run(
        V2,
        embedder=embedder,
        index=FaultyIndex(local_index, log),
        state=FaultyStateStore(store, log),
        settings=settings,
    )

    # Then the record went PENDING first, and was completed after the chunks, the
    # stale tail's deletion and the bump
    assert log.writes == [
        "set_ingest_record",
        "upsert",
        "delete",
        "bump_corpus_version",
        "set_ingest_record",
    ]
    version = fingerprint(V2, embedder=embedder, chunking=Chunking())
    assert store.ingest_record(settings.index_name, SOURCE) == version


# -- any one write fails ----------------------------------------------------------


@pytest.mark.parametrize(
    "nth", [1, 2, 3, 4, 5], ids=["pending", "upsert", "prune", "bump", "completion"]
)
def test_whichever_write_fails_the_retry_serves_the_new_version_and_no_old_answer(
    nth: int,
    settings: Settings,
    embedder: CountingEmbedder,
    local_index: SqliteVectorIndex,
    store: SqliteStateStore,
) -> None:
    # Given version 1, and its answer in the cache
    run(V1, embedder=embedder, index=local_index, state=store, settings=settings)
    deps = Deps(settings, answering(OLD_ANSWER, NEW_ANSWER), embedder, local_index, None, store)
    assert answer(deps) == (OLD_ANSWER, False)
    assert answer(deps) == (OLD_ANSWER, True)

    # When version 2 arrives and the nth write fails (a bare exception, as a driver raises)
    fail = FailNth(nth)
    faulty_index, faulty_state = FaultyIndex(local_index, fail), FaultyStateStore(store, fail)
    first = run(V2, embedder=embedder, index=faulty_index, state=faulty_state, settings=settings)
    assert fail.fired
    assert first.retryable == [SOURCE]

    # And it is delivered again
    again = run(V2, embedder=embedder, index=faulty_index, state=faulty_state, settings=settings)

    # Then the retry redid the document, keyword search finds version 2 only, and
    # the cache no longer serves the answer from version 1
    assert (again.documents_changed, again.retryable) == (1, [])
    assert keyword_sources(local_index, "autocoil lever") == [SOURCE]
    assert "by hand" not in stored_text(local_index)
    assert answer(deps) == (NEW_ANSWER, False)
    # And the document has converged: a third delivery costs no embedding
    embedder.reset()
    third = run(V2, embedder=embedder, index=local_index, state=store, settings=settings)
    assert (third.documents_unchanged, embedder.texts) == (1, 0)


def test_a_failed_corpus_version_bump_is_retried_so_no_cached_answer_outlives_the_change(
    settings: Settings,
    embedder: CountingEmbedder,
    local_index: SqliteVectorIndex,
    store: SqliteStateStore,
) -> None:
    # Given version 1 and its cached answer
    run(V1, embedder=embedder, index=local_index, state=store, settings=settings)
    deps = Deps(settings, answering(OLD_ANSWER, NEW_ANSWER), embedder, local_index, None, store)
    answer(deps)
    version_before = store.corpus_version(settings.index_name)

    # When version 2 is written but the bump fails, and the event is delivered again
    faulty = FaultyStateStore(store, FailNth(1, methods={"bump_corpus_version"}))
    first = run(V2, embedder=embedder, index=local_index, state=faulty, settings=settings)
    again = run(V2, embedder=embedder, index=local_index, state=faulty, settings=settings)

    # Then the first run says why it must be retried, the retry did not take the
    # document for unchanged, and it bumped the version: the old answer is gone
    ((_, reason),) = first.failures
    assert "corpus version was not bumped" in reason
    assert again.documents_changed == 1
    assert store.corpus_version(settings.index_name) == version_before + 1
    assert answer(deps) == (NEW_ANSWER, False)


def test_a_delete_whose_bump_failed_is_redone_and_bumps_on_the_retry(
    settings: Settings,
    embedder: CountingEmbedder,
    local_index: SqliteVectorIndex,
    store: SqliteStateStore,
) -> None:
    # Given an ingested document, deleted while the bump fails
    run(V1, embedder=embedder, index=local_index, state=store, settings=settings)
    before = store.corpus_version(settings.index_name)
    faulty = CompletionRecords(
        FaultyStateStore(store, FailNth(1, methods={"bump_corpus_version"})), settings.index_name
    )
    (first,), _ = complete([delete_document(SOURCE, index=local_index, records=faulty)], faulty)
    assert (first.status, first.retryable) == ("failed", True)
    assert local_index.count() == 0

    # When the delete is delivered again (the index has nothing left to delete)
    (again,), version = complete(
        [delete_document(SOURCE, index=local_index, records=faulty)], faulty
    )

    # Then it is not taken for "absent": it bumps the version and clears the record
    assert again.status == "deleted"
    assert version == store.corpus_version(settings.index_name) == before + 1
    assert store.ingest_record(settings.index_name, SOURCE) is None
    # And a further delivery finds nothing to do
    (third,), _ = complete([delete_document(SOURCE, index=local_index, records=faulty)], faulty)
    assert third.status == "absent"


def test_a_run_that_failed_leaves_its_record_pending(
    settings: Settings,
    embedder: CountingEmbedder,
    local_index: SqliteVectorIndex,
    store: SqliteStateStore,
) -> None:
    run(V1, embedder=embedder, index=local_index, state=store, settings=settings)

    faulty = FaultyIndex(local_index, FailNth(1, methods={"upsert"}))
    run(V2, embedder=embedder, index=faulty, state=store, settings=settings)

    assert store.ingest_record(settings.index_name, SOURCE) == PENDING


# -- Pinecone: a dense and a sparse index ----------------------------------------


@pytest.fixture
def pinecone() -> Iterator[tuple[VectorIndex, pinecone_server.FakeIndex]]:
    """A PineconeVectorIndex over the wire-format test servers, and the sparse server's state."""
    from pinecone import Pinecone

    from candor.backends.pinecone_index import PineconeVectorIndex

    with (
        pinecone_server.serve("dense", 384) as dense,
        pinecone_server.serve("sparse") as sparse,
    ):
        client = Pinecone(api_key="test-key")
        dense_index, sparse_index = client.index(host=dense.url), client.index(host=sparse.url)
        index = PineconeVectorIndex(
            dense_index, sparse=sparse_index, dimensions=384, namespace="site"
        )
        try:
            yield index, sparse.index
        finally:
            index.close()
            dense_index.close()
            sparse_index.close()


def test_a_sparse_write_that_fails_after_the_dense_write_is_repaired_by_the_retry(
    pinecone: tuple[VectorIndex, pinecone_server.FakeIndex],
    settings: Settings,
    embedder: CountingEmbedder,
    store: SqliteStateStore,
) -> None:
    index, sparse = pinecone
    run(V1, embedder=embedder, index=index, state=store, settings=settings)
    deps = Deps(settings, answering(OLD_ANSWER, NEW_ANSWER), embedder, index, None, store)
    answer(deps)

    # When version 2's dense write lands and its sparse write fails (past the SDK's retries)
    sparse.failures.extend([503] * 4)
    first = run(V2, embedder=embedder, index=index, state=store, settings=settings)
    sparse.failures.clear()
    assert first.retryable == [SOURCE]
    assert "autocoil" in stored_text(index)  # the dense index holds version 2...
    assert keyword_sources(index, "autocoil lever") == []  # ...the keyword index does not

    # And the event is delivered again
    again = run(V2, embedder=embedder, index=index, state=store, settings=settings)

    # Then the retry wrote it again: keyword search finds it, and no old answer is served
    assert again.documents_changed == 1
    assert keyword_sources(index, "autocoil lever") == [SOURCE]
    assert answer(deps) == (NEW_ANSWER, False)


def test_a_heading_over_pinecones_metadata_limit_lands_on_the_first_delivery(
    pinecone: tuple[VectorIndex, pinecone_server.FakeIndex],
    settings: Settings,
    embedder: CountingEmbedder,
    store: SqliteStateStore,
) -> None:
    # Given a document whose one heading is 54 KB (Pinecone takes 40 KB of metadata)
    index, _ = pinecone
    heading = "winch " * 9_000
    data = f"# Manual\n\n## {heading}\n\nThe autocoil lever coils the lines.\n".encode()

    # When it is delivered once
    report = run(data, embedder=embedder, index=index, state=store, settings=settings)

    # Then it is in both indexes, under its heading cut to the cap
    assert (report.documents_changed, report.failures) == (1, [])
    assert keyword_sources(index, "autocoil lever") == [SOURCE]
    (chunk,) = index.fetch(sorted(index.list_ids(doc_prefix(SOURCE))))
    assert chunk.heading.startswith("winch winch")
    assert len(chunk.heading.encode()) <= MAX_HEADING_BYTES
    # And a second delivery embeds nothing
    embedder.reset()
    again = run(data, embedder=embedder, index=index, state=store, settings=settings)
    assert (again.documents_unchanged, embedder.texts) == (1, 0)


# -- whose fault ------------------------------------------------------------------


def test_a_passage_too_large_for_any_index_is_the_documents_fault_and_is_not_embedded(
    settings: Settings,
    embedder: CountingEmbedder,
    local_index: SqliteVectorIndex,
    store: SqliteStateStore,
) -> None:
    # Given chunking so coarse that one passage holds 80 KB (40,000 two-byte letters)
    data = ("é" * 40_000).encode()

    report = ingest(
        [("wide.txt", data)],
        embedder=embedder,
        index=local_index,
        records=CompletionRecords(store, settings.index_name),
        max_chars=50_000,
        overlap=0,
    )

    ((source, reason),) = report.failures
    assert source == "wide.txt" and f"over the {MAX_CHUNK_BYTES}" in reason
    assert report.retryable == []
    assert embedder.texts == 0
