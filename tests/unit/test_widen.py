"""Small-to-big: a matched passage shown with its neighbours in the same section."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.ingest.chunking import chunk_document, chunk_id
from candor.ingest.document import Document, Section
from candor.retrieval import widen
from candor.types import Chunk, Hit

pytestmark = pytest.mark.unit

SENTENCES = [f"Sentence {n} of the long option says something new." for n in range(12)]
DOC = Document(
    "push.html",
    "git-push(1)",
    [
        Section("--force-with-lease", " ".join(SENTENCES), 2),
        Section("--verbose", "Run verbosely and say what is pushed.", 2),
    ],
)


@pytest.fixture
def chunks() -> list[Chunk]:
    # Passages of about 200 characters: the long option's text takes several
    return chunk_document(DOC, max_chars=200, overlap=60)


@pytest.fixture
def index(tmp_path: Path, chunks: list[Chunk]) -> Iterator[SqliteVectorIndex]:
    embedder = HashingEmbedder(16)
    with SqliteVectorIndex(tmp_path / "i.sqlite3", 16) as index:
        index.upsert(chunks, embedder.embed([c.text for c in chunks]))
        yield index


def test_a_passage_grows_with_its_neighbours_in_the_same_section(
    index: SqliteVectorIndex, chunks: list[Chunk]
) -> None:
    # Given a hit in the middle of the long option's text
    middle = chunks[2]
    assert chunks[1].heading == middle.heading == chunks[3].heading

    # When it is widened to 600 characters
    (wide,) = widen([Hit(middle, 0.5)], index, chars=600)

    # Then it holds its own text and its neighbours', each sentence once, in order
    assert middle.text in wide.chunk.text and len(middle.text) < len(wide.chunk.text) <= 600
    found = [s for s in SENTENCES if s in wide.chunk.text]
    assert found == SENTENCES[SENTENCES.index(found[0]) : SENTENCES.index(found[-1]) + 1]
    assert all(wide.chunk.text.count(s) == 1 for s in found)
    assert (wide.chunk.id, wide.score, wide.chunk.heading) == (middle.id, 0.5, middle.heading)


def test_a_neighbour_under_another_heading_is_left_out(
    index: SqliteVectorIndex, chunks: list[Chunk]
) -> None:
    last = [c for c in chunks if c.heading == chunks[0].heading][-1]
    (wide,) = widen([Hit(last, 0.0)], index, chars=2000)
    assert "Run verbosely" not in wide.chunk.text
    assert SENTENCES[0] in wide.chunk.text  # it grew backwards instead


def test_a_passage_already_at_the_budget_is_shown_as_it_is(
    index: SqliteVectorIndex, chunks: list[Chunk]
) -> None:
    hit = Hit(chunks[1], 0.0)
    assert widen([hit], index, chars=len(chunks[1].text)) == [hit]


def test_a_neighbour_that_is_a_hit_itself_is_not_shown_twice(
    index: SqliteVectorIndex, chunks: list[Chunk]
) -> None:
    hits = [Hit(chunks[1], 0.0), Hit(chunks[2], 0.0)]
    first, second = widen(hits, index, chars=600)
    assert chunks[2].text not in first.chunk.text
    assert chunks[1].text not in second.chunk.text


def test_a_chunk_whose_id_is_not_candors_is_left_as_it_is(index: SqliteVectorIndex) -> None:
    other = Hit(Chunk("not-an-index", "Short.", "push.html"), 0.0)
    assert widen([other], index, chars=600) == [other]
    assert chunk_id("push.html", 0).endswith("-0")
