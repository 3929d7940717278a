"""The ingest pipeline with real embedded backends: HashingEmbedder and a SQLite index."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.errors import IngestError
from candor.ingest import (
    chunk_document,
    doc_prefix,
    embedding_text,
    ingest,
    iter_paths,
    load_document,
)
from candor.ports import Embedder, Vectors
from candor.types import Chunk
from tests.support.pdfs import make_pdf

pytestmark = pytest.mark.integration

DIMENSIONS = 384
FIXTURES = Path(__file__).parent.parent / "fixtures" / "docs"


@pytest.fixture
def embedder() -> HashingEmbedder:
    return HashingEmbedder(dimensions=DIMENSIONS)


@pytest.fixture
def index(tmp_path: Path) -> Iterator[SqliteVectorIndex]:
    with SqliteVectorIndex(tmp_path / "index.sqlite3", DIMENSIONS) as index:
        yield index


class CountingEmbedder:
    """An Embedder that records the batches it is given, then delegates."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimensions = inner.dimensions
        self.batches: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.batches.append(list(texts))
        return self.inner.embed(texts)


class ShortEmbedder:
    """A broken Embedder: one vector fewer than it was given texts."""

    name = "short"
    dimensions = DIMENSIONS

    def embed(self, texts: Sequence[str]) -> Vectors:
        return np.zeros((max(len(texts) - 1, 0), DIMENSIONS), dtype=np.float32)


def _markdown(sections: int, *, words: str = "alpha") -> bytes:
    body = "\n\n".join(
        f"## Part {i}\n\n" + " ".join(f"{words}{i} sentence number {j}." for j in range(25))
        for i in range(sections)
    )
    return f"# Manual\n\n{body}\n".encode()


def _ids(index: SqliteVectorIndex, source: str) -> list[str]:
    return list(index.list_ids(doc_prefix(source)))


def test_counts_match_the_chunker_and_the_index(
    embedder: HashingEmbedder, index: SqliteVectorIndex
) -> None:
    documents = [
        ("a.md", _markdown(4)),
        ("b.txt", b"Just one line of text."),
        ("c.md", _markdown(1)),
    ]
    expected = sum(len(chunk_document(load_document(d, s))) for s, d in documents)

    report = ingest(documents, embedder=embedder, index=index)

    assert (report.documents, report.chunks, report.failures) == (3, expected, [])
    assert index.count() == expected
    assert report.seconds > 0


def test_failures_are_recorded_and_the_other_documents_still_indexed(
    embedder: HashingEmbedder, index: SqliteVectorIndex
) -> None:
    documents = [
        ("good-1.md", _markdown(2)),
        ("latin1.txt", b"caf\xe9"),
        ("paper.pdf", b"%PDF-1.7"),
        ("slides.pptx", b"PK\x03\x04"),
        ("blank.md", b"\n\n"),
        ("good-2.txt", b"Still indexed."),
    ]

    report = ingest(documents, embedder=embedder, index=index)

    assert report.documents == 2
    assert [source for source, _ in report.failures] == [
        "latin1.txt",
        "paper.pdf",
        "slides.pptx",
        "blank.md",
    ]
    reasons = dict(report.failures)
    assert "not UTF-8" in reasons["latin1.txt"]
    assert "not a readable PDF" in reasons["paper.pdf"]
    assert "unsupported file type '.pptx'" in reasons["slides.pptx"]
    assert "no text to index" in reasons["blank.md"]
    assert _ids(index, "good-1.md") and _ids(index, "good-2.txt")
    assert index.count() == report.chunks


def test_a_backend_failure_fails_that_document_only(index: SqliteVectorIndex) -> None:
    report = ingest([("a.md", _markdown(2))], embedder=ShortEmbedder(), index=index)

    ((source, reason),) = report.failures
    assert source == "a.md"
    assert "shape" in reason
    assert index.count() == 0


def test_shrinking_a_document_leaves_exactly_its_new_chunks(
    embedder: HashingEmbedder, index: SqliteVectorIndex
) -> None:
    ingest([("doc.md", _markdown(6)), ("other.md", _markdown(3))], embedder=embedder, index=index)
    before_other = sorted(_ids(index, "other.md"))

    report = ingest([("doc.md", _markdown(2, words="beta"))], embedder=embedder, index=index)

    new_count = len(chunk_document(load_document(_markdown(2, words="beta"), "doc.md")))
    assert sorted(_ids(index, "doc.md")) == sorted(
        f"{doc_prefix('doc.md')}{i}" for i in range(new_count)
    )
    assert report.deleted > 0
    assert sorted(_ids(index, "other.md")) == before_other
    texts = " ".join(c.text for c in index.fetch(_ids(index, "doc.md")))
    assert "beta0" in texts and "alpha" not in texts


def test_re_ingesting_the_same_documents_changes_nothing(
    embedder: HashingEmbedder, index: SqliteVectorIndex
) -> None:
    documents = [("a.md", _markdown(3)), ("b.txt", b"Plain text.")]
    first = ingest(documents, embedder=embedder, index=index)
    snapshot = index.fetch(sorted(index.list_ids()))

    second = ingest(documents, embedder=embedder, index=index)

    assert (second.documents, second.chunks, second.deleted) == (2, first.chunks, 0)
    assert index.fetch(sorted(index.list_ids())) == snapshot


def test_a_pdf_over_the_page_limit_is_refused_before_any_embedding(
    embedder: HashingEmbedder, index: SqliteVectorIndex
) -> None:
    # A few hundred kilobytes of PDF can be thousands of pages: bytes do not bound the
    # work. Past the default page limit it is refused before any page is read.
    line = "Page {} of the pamphlet, with a line of text on it."
    many = make_pdf([[line.format(n)] for n in range(2_001)])
    counting = CountingEmbedder(embedder)

    report = ingest([("pamphlet.pdf", many)], embedder=counting, index=index)

    ((source, reason),) = report.failures
    assert source == "pamphlet.pdf"
    assert "2001 pages is over the limit of 2000 (CANDOR_INGEST_MAX_PDF_PAGES)" in reason
    assert counting.batches == []
    assert _ids(index, "pamphlet.pdf") == []


def test_a_document_over_the_chunk_limit_is_refused_before_any_embedding(
    embedder: HashingEmbedder, index: SqliteVectorIndex
) -> None:
    counting = CountingEmbedder(embedder)

    report = ingest(
        [("a.md", _markdown(12)), ("b.md", _markdown(1))],
        embedder=counting,
        index=index,
        max_chunks=10,
    )

    ((source, reason),) = report.failures
    assert source == "a.md"
    assert "passages is over the limit of 10 (CANDOR_INGEST_MAX_CHUNKS)" in reason
    assert sum(map(len, counting.batches)) == len(_ids(index, "b.md")) > 0  # b.md only
    assert _ids(index, "a.md") == []


def test_batches_are_at_most_batch_size_and_progress_counts_every_document(
    embedder: HashingEmbedder, index: SqliteVectorIndex
) -> None:
    counting = CountingEmbedder(embedder)
    seen: list[int] = []

    report = ingest(
        [("a.md", _markdown(12)), ("bad.pdf", b"%PDF"), ("b.md", _markdown(5))],
        embedder=counting,
        index=index,
        batch_size=4,
        progress=seen.append,
    )

    assert all(0 < len(batch) <= 4 for batch in counting.batches)
    assert sum(len(batch) for batch in counting.batches) == report.chunks
    assert seen == [1, 1, 1]


def test_the_embedder_sees_title_and_heading_before_the_text() -> None:
    chunk = Chunk(
        id="x-0", text="Body.", source="s", title="git-push(1)", heading="OPTIONS > --force"
    )

    assert embedding_text(chunk) == "git-push(1) — OPTIONS > --force\nBody."
    assert embedding_text(Chunk(id="x-1", text="Body.", source="s")) == "Body."


def test_report_to_json_has_the_counts_and_failures(
    embedder: HashingEmbedder, index: SqliteVectorIndex
) -> None:
    report = ingest(
        [("a.txt", b"Text."), ("b.pdf", b"%PDF")], embedder=embedder, index=index, batch_size=1
    )

    data = report.to_json()

    assert {k: data[k] for k in ("documents", "chunks", "deleted", "failed")} == {
        "documents": 1,
        "chunks": 1,
        "deleted": 0,
        "failed": 1,
    }
    assert data["failures"][0]["source"] == "b.pdf"
    assert isinstance(data["seconds"], float)


# -- iter_paths -----------------------------------------------------------------


def test_iter_paths_reads_a_file_by_name_and_a_folder_recursively(tmp_path: Path) -> None:
    root = tmp_path / "site"
    (root / "guide" / "deep").mkdir(parents=True)
    (root / ".git").mkdir()
    files = {
        "b.md": b"b",
        "a.html": b"a",
        "guide/deep/z.txt": b"z",
        "guide/intro.htm": b"i",
        "LICENSE": b"l",
        "image.png": b"\x89PNG",
        ".hidden.md": b"h",
        ".git/config.txt": b"c",
    }
    for name, data in files.items():
        (root / name).write_bytes(data)
    single = tmp_path / "single.markdown"
    single.write_bytes(b"s")

    read = list(iter_paths([single, root]))

    assert read == [
        ("single.markdown", b"s"),
        ("LICENSE", b"l"),
        ("a.html", b"a"),
        ("b.md", b"b"),
        ("guide/deep/z.txt", b"z"),
        ("guide/intro.htm", b"i"),
    ]


def test_iter_paths_refuses_a_missing_path_before_reading_anything(tmp_path: Path) -> None:
    present = tmp_path / "present.md"
    present.write_text("# Present\n")

    with pytest.raises(IngestError, match=r"missing\.md"):
        iter_paths([present, tmp_path / "missing.md"])


# -- real-shaped AsciiDoc pages ---------------------------------------------------


@pytest.fixture
def fixture_index(embedder: HashingEmbedder, index: SqliteVectorIndex) -> SqliteVectorIndex:
    report = ingest(iter_paths([FIXTURES]), embedder=embedder, index=index)
    assert report.documents == 3 and not report.failures
    return index


def test_fixture_pages_are_indexed_with_manual_page_titles(
    fixture_index: SqliteVectorIndex,
) -> None:
    chunks = fixture_index.fetch(sorted(fixture_index.list_ids()))

    assert {c.source: c.title for c in chunks} == {
        "kite-config.html": "kite-config(1)",
        "kite-push.html": "kite-push(1)",
        "kite-tutorial.html": "A First Flight with Kite",
    }
    text = "\n".join(c.text for c in chunks)
    for furniture in ("must never reach the index", "Last updated", "Table of Contents", "Home"):
        assert furniture not in text


def test_an_option_is_found_by_keyword(fixture_index: SqliteVectorIndex) -> None:
    hits = fixture_index.keyword("--guarded", top_k=3)

    assert hits
    assert hits[0].chunk.source == "kite-push.html"
    assert "--guarded[=<kite>[:<expect>]]" in hits[0].chunk.heading + hits[0].chunk.text


def test_every_passage_of_a_long_option_names_the_option(
    fixture_index: SqliteVectorIndex,
) -> None:
    chunks = fixture_index.fetch(sorted(fixture_index.list_ids(doc_prefix("kite-push.html"))))
    term = "--guarded[=<kite>[:<expect>]]"
    parts = [c for c in chunks if "remote-watching record" in c.text]

    assert len(parts) >= 2
    # By its heading path, or, where the passage's tail holds other options too, by
    # a line of its own right above the text.
    assert all(c.heading.endswith(term) or c.text.startswith(f"{term}\n") for c in parts)
    joined = "\n".join(c.text for c in parts)
    assert "$ kite push --guarded=red-box:tension-7 origin red-box\n$ kite push" in joined


def test_a_question_finds_its_page_by_dense_search(
    embedder: HashingEmbedder, fixture_index: SqliteVectorIndex
) -> None:
    question = embedder.embed(["how many loose lines before the automatic winch coils them"])[0]

    hits = fixture_index.dense(question, top_k=1)

    assert hits[0].chunk.source == "kite-config.html"


def test_the_page_and_chunk_limits_are_the_same_in_settings_and_in_the_pipeline() -> None:
    # A caller that passes no settings (a new ingest path) gets the same limits.
    from candor.ingest.reading import Chunking
    from candor.settings import Settings

    settings, chunking = Settings(), Chunking()
    assert (settings.ingest_max_pdf_pages, settings.ingest_max_chunks) == (
        chunking.max_pdf_pages,
        chunking.max_chunks,
    )
