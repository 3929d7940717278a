"""The index follows the documents exactly, on SQLite and on Pinecone (loopback test server).

Re-ingesting unchanged bytes embeds nothing; a document that shrinks keeps exactly
its new chunks; a deleted document leaves nothing; a run that died halfway is
redone; one bad document is reported and its neighbours are indexed. Each holds
with completion records in a state store (as `candor ingest` and the S3 function
run) and with the index as its own evidence (as `candor eval` runs).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from candor.backends.sqlite_state import SqliteStateStore
from candor.ingest import chunk_document, doc_prefix, load_document
from candor.ingest.outcomes import IngestReport
from candor.ingest.pipeline import (
    CHUNKS_KEY,
    HASH_KEY,
    complete,
    count_documents,
    delete_document,
    ingest,
)
from candor.ingest.records import CompletionRecords
from candor.ports import VectorIndex
from candor.types import Chunk
from tests.support.embedders import CountingEmbedder
from tests.support.indexes import BACKENDS, vector_index
from tests.support.pdfs import make_pdf

pytestmark = pytest.mark.integration


@pytest.fixture(params=BACKENDS)
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorIndex]:
    with vector_index(request.param, tmp_path) as index:
        yield index


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture(params=["records", "index-only"])
def records(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CompletionRecords | None]:
    if request.param == "index-only":
        yield None
        return
    state = SqliteStateStore(tmp_path / "state.sqlite3")
    yield CompletionRecords(state, "site")
    state.close()


def markdown(sections: int, *, word: str = "alpha") -> bytes:
    body = "\n\n".join(
        f"## Part {i}\n\n" + " ".join(f"{word}{i} sentence number {j}." for j in range(25))
        for i in range(sections)
    )
    return f"# Manual\n\n{body}\n".encode()


def chunk_count(data: bytes, source: str) -> int:
    return len(chunk_document(load_document(data, source)))


def ids_of(index: VectorIndex, source: str) -> list[str]:
    return sorted(index.list_ids(doc_prefix(source)))


CORPUS = [
    ("guide.md", markdown(5)),
    ("notes.txt", b"Plain notes about the winch and its lines."),
    ("manual.pdf", make_pdf([["Kite manual", "The winch coils loose lines."]], title="Kite")),
]


def test_re_ingesting_an_unchanged_corpus_embeds_no_chunk(
    index: VectorIndex, embedder: CountingEmbedder, records: CompletionRecords | None
) -> None:
    # Given a corpus ingested once
    first = ingest(CORPUS, embedder=embedder, index=index, records=records)
    snapshot = index.fetch(sorted(index.list_ids()))
    embedder.reset()

    # When the same bytes are ingested again
    second = ingest(CORPUS, embedder=embedder, index=index, records=records)

    # Then nothing was embedded or written, and the report says why
    assert embedder.texts == 0
    assert (second.chunks_embedded, second.chunks_upserted, second.chunks_deleted) == (0, 0, 0)
    assert (second.documents_seen, second.documents_unchanged, second.documents_changed) == (
        3,
        3,
        0,
    )
    assert second.documents == first.documents == 3
    assert second.chunks == first.chunks == first.chunks_embedded
    assert index.fetch(sorted(index.list_ids())) == snapshot


def test_changing_one_document_re_embeds_only_that_document(
    index: VectorIndex, embedder: CountingEmbedder, records: CompletionRecords | None
) -> None:
    ingest(CORPUS, embedder=embedder, index=index, records=records)
    embedder.reset()
    edited = [(s, d + b"\nOne more line." if s == "notes.txt" else d) for s, d in CORPUS]

    report = ingest(edited, embedder=embedder, index=index, records=records)

    assert (report.documents_changed, report.documents_unchanged) == (1, 2)
    assert embedder.texts == report.chunks_embedded == chunk_count(edited[1][1], "notes.txt")
    texts = " ".join(c.text for c in index.fetch(ids_of(index, "notes.txt")))
    assert "One more line." in texts


def test_shrinking_a_document_leaves_exactly_its_new_chunks(
    index: VectorIndex, embedder: CountingEmbedder, records: CompletionRecords | None
) -> None:
    # Given a long document and a neighbour
    long, short = markdown(8), markdown(2, word="beta")
    ingest(
        [("doc.md", long), ("other.md", markdown(3))],
        embedder=embedder,
        index=index,
        records=records,
    )
    neighbour = ids_of(index, "other.md")

    # When a shorter version replaces it
    report = ingest([("doc.md", short)], embedder=embedder, index=index, records=records)

    # Then exactly the new version's chunks remain, and the neighbour is untouched
    new_count = chunk_count(short, "doc.md")
    assert ids_of(index, "doc.md") == sorted(f"{doc_prefix('doc.md')}{i}" for i in range(new_count))
    assert report.chunks_deleted == chunk_count(long, "doc.md") - new_count > 0
    assert ids_of(index, "other.md") == neighbour
    text = " ".join(c.text for c in index.fetch(ids_of(index, "doc.md")))
    assert "beta0" in text and "alpha" not in text


def test_deleting_a_document_leaves_none_of_its_chunks(
    index: VectorIndex, embedder: CountingEmbedder, records: CompletionRecords | None
) -> None:
    ingest(CORPUS, embedder=embedder, index=index, records=records)
    before = index.count()
    gone = len(ids_of(index, "guide.md"))

    (outcome,), _ = complete([delete_document("guide.md", index=index, records=records)], records)

    assert (outcome.status, outcome.deleted) == ("deleted", gone)
    assert ids_of(index, "guide.md") == []
    assert index.count() == before - gone
    assert ids_of(index, "notes.txt")
    # A second delete (a duplicate event) finds nothing and changes nothing
    assert delete_document("guide.md", index=index, records=records).status == "absent"


def test_a_run_that_died_halfway_is_redone_by_the_next(
    index: VectorIndex, embedder: CountingEmbedder, records: CompletionRecords | None
) -> None:
    # Given version 1, then version 2 whose ingestion failed after its first batch
    ingest([("doc.md", markdown(3))], embedder=embedder, index=index, records=records)
    v2 = markdown(9, word="gamma")
    failing = CountingEmbedder(fail_after=4)
    broken = ingest([("doc.md", v2)], embedder=failing, index=index, records=records, batch_size=4)
    assert broken.failures and broken.retryable == ["doc.md"]
    assert failing.texts == 4  # one batch of version 2 was written

    # When version 2 is delivered again
    embedder.reset()
    report = ingest([("doc.md", v2)], embedder=embedder, index=index, records=records, batch_size=4)

    # Then it was redone in full (chunk 0, written last, still held version 1)
    count = chunk_count(v2, "doc.md")
    assert report.documents_changed == 1
    assert embedder.texts == count
    assert ids_of(index, "doc.md") == sorted(f"{doc_prefix('doc.md')}{i}" for i in range(count))
    assert all("gamma" in c.text for c in index.fetch(ids_of(index, "doc.md")))


def test_leftover_chunks_of_an_unchanged_document_are_pruned_without_embedding(
    index: VectorIndex, embedder: CountingEmbedder, records: CompletionRecords | None
) -> None:
    ingest([("doc.md", markdown(2))], embedder=embedder, index=index, records=records)
    count = len(ids_of(index, "doc.md"))
    leftover = Chunk(id=f"{doc_prefix('doc.md')}{count + 5}", text="stale", source="doc.md")
    index.upsert([leftover], embedder.embed([leftover.text]))
    embedder.reset()

    report = ingest([("doc.md", markdown(2))], embedder=embedder, index=index, records=records)

    assert embedder.texts == 0
    assert (report.documents_unchanged, report.chunks_deleted) == (1, 1)
    assert len(ids_of(index, "doc.md")) == count


def test_every_chunk_carries_the_fingerprint_and_the_chunk_count(
    index: VectorIndex, embedder: CountingEmbedder, records: CompletionRecords | None
) -> None:
    ingest([("doc.md", markdown(3))], embedder=embedder, index=index, records=records)

    chunks = index.fetch(ids_of(index, "doc.md"))

    assert {c.metadata[CHUNKS_KEY] for c in chunks} == {len(chunks)}
    assert len({c.metadata[HASH_KEY] for c in chunks}) == 1


def test_other_chunking_settings_re_embed_the_same_bytes(
    index: VectorIndex, embedder: CountingEmbedder, records: CompletionRecords | None
) -> None:
    ingest([("doc.md", markdown(3))], embedder=embedder, index=index, records=records)
    embedder.reset()

    report = ingest(
        [("doc.md", markdown(3))], embedder=embedder, index=index, records=records, max_chars=400
    )

    assert report.documents_changed == 1
    assert embedder.texts == report.chunks_embedded > 0


def test_a_corrupt_pdf_is_reported_and_its_neighbours_indexed(
    index: VectorIndex, embedder: CountingEmbedder, records: CompletionRecords | None
) -> None:
    documents = [
        ("before.md", markdown(1)),
        ("broken.pdf", make_pdf([["Half a file"]])[:150]),
        ("scanned.pdf", make_pdf([[], []])),
        ("after.pdf", make_pdf([["The winch coils loose lines."]], title="Winch")),
    ]

    report = ingest(documents, embedder=embedder, index=index, records=records)

    reasons = dict(report.failures)
    assert sorted(reasons) == ["broken.pdf", "scanned.pdf"]
    assert "not a readable PDF" in reasons["broken.pdf"]
    assert "no extractable text" in reasons["scanned.pdf"]
    assert report.retryable == []  # the documents' fault: retrying cannot help
    assert ids_of(index, "before.md") and ids_of(index, "after.pdf")
    (chunk,) = index.fetch(ids_of(index, "after.pdf"))
    assert (chunk.title, chunk.text) == ("Winch", "The winch coils loose lines.")


WINCH = make_pdf([["The winch coils loose lines."]], title="Winch")
FAILING_VERSIONS = {
    "oversized": ("doc.md", markdown(1), markdown(40), "over the limit of 6000"),
    "emptied": ("doc.md", markdown(1), b"", "no text to index"),
    "corrupt-pdf": ("manual.pdf", WINCH, WINCH[:150], "not a readable PDF"),
    "scanned-pdf": ("manual.pdf", WINCH, make_pdf([[], []]), "no extractable text"),
    "too-many-chunks": ("doc.md", markdown(1), markdown(8), "over the limit of 5"),
}


@pytest.mark.parametrize("case", list(FAILING_VERSIONS))
def test_a_new_version_that_fails_to_load_takes_the_old_one_out_of_the_index(
    case: str,
    index: VectorIndex,
    embedder: CountingEmbedder,
    records: CompletionRecords | None,
) -> None:
    # Given a document in the index
    source, old, new, why = FAILING_VERSIONS[case]

    def run(document: bytes, *others: tuple[str, bytes]) -> IngestReport:
        return ingest(
            [(source, document), *others],
            embedder=embedder,
            index=index,
            records=records,
            max_bytes=6_000,
            max_chunks=5,
        )

    first = run(old)
    assert first.failures == [] and ids_of(index, source)
    old_ids = ids_of(index, source)
    embedder.reset()

    # When its new version cannot be read (the document's fault)
    report = run(new, ("small.txt", b"Fits."))

    # Then the failure says why and that the old version left the index, which no
    # longer answers from text the owner replaced
    ((failed, reason),) = report.failures
    assert failed == source and why in reason
    assert "previous version was removed from the index" in reason
    assert report.retryable == []  # the document's fault: retrying cannot help
    assert ids_of(index, source) == []
    assert report.chunks_deleted == len(old_ids)
    old_words = "winch coils loose lines" if source.endswith(".pdf") else "alpha0 sentence"
    hits = index.query(vector=None, keywords=old_words, top_k=5).keyword
    assert [hit.chunk.source for hit in hits if hit.chunk.source == source] == []
    assert embedder.texts == 1  # small.txt only: nothing of the refused version
    if records is not None:
        # cached answers that cited the old version are retired, and nothing is
        # recorded as complete for the document
        assert report.corpus_version == (first.corpus_version or 0) + 1
        assert records.record(source) is None

    # And the next good version is ingested as usual
    fixed = run(old)
    assert fixed.failures == [] and ids_of(index, source) == old_ids


def test_a_new_version_that_fails_in_a_backend_keeps_the_old_one_for_the_retry(
    index: VectorIndex, records: CompletionRecords | None
) -> None:
    ingest([("doc.md", markdown(1))], embedder=CountingEmbedder(), index=index, records=records)
    before = ids_of(index, "doc.md")

    report = ingest(
        [("doc.md", markdown(2, word="beta"))],
        embedder=CountingEmbedder(fail_after=0),
        index=index,
        records=records,
    )

    assert report.retryable == ["doc.md"]
    assert ids_of(index, "doc.md") == before


def test_the_corpus_version_is_bumped_once_per_run_that_changes_the_index(
    index: VectorIndex, embedder: CountingEmbedder, tmp_path: Path
) -> None:
    state = SqliteStateStore(tmp_path / "state.sqlite3")
    records = CompletionRecords(state, "site")

    first = ingest(CORPUS, embedder=embedder, index=index, records=records)
    again = ingest(CORPUS, embedder=embedder, index=index, records=records)
    shrunk = ingest([("guide.md", markdown(1))], embedder=embedder, index=index, records=records)

    assert (first.corpus_version, again.corpus_version, shrunk.corpus_version) == (1, None, 2)
    assert state.corpus_version("site") == 2
    state.close()


def test_documents_are_counted_by_their_id_prefixes(
    index: VectorIndex, embedder: CountingEmbedder, records: CompletionRecords | None
) -> None:
    ingest(CORPUS, embedder=embedder, index=index, records=records)

    assert count_documents(index) == 3
