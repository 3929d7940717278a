"""The `plain` reference of `candor eval`: LangChain-style chunks, text-only, no cap."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from candor.backends.hashing_embedder import HashingEmbedder
from candor.evaluation import plain
from candor.evaluation.retrieval_metrics import chunk_rank
from candor.ingest.document import Document, Section
from tests.support.pdfs import make_pdf

pytestmark = pytest.mark.unit

TEXT = (
    "Kite flying\n\nA kite needs wind. Strong wind lifts it high above the trees.\n"
    "Hold the line tight.\n\n"
    "Supercalifragilisticexpialidociousnessisaverylongwordindeed yes"
)


def test_the_splitter_cuts_as_langchains_recursive_character_text_splitter() -> None:
    # Expected: RecursiveCharacterTextSplitter(chunk_size=40, chunk_overlap=10)
    # .split_text(TEXT) from langchain-text-splitters 1.1.3.
    assert plain.split_text(TEXT, chunk_size=40, chunk_overlap=10) == [
        "Kite flying",
        "A kite needs wind. Strong wind lifts it",
        "lifts it high above the trees.",
        "Hold the line tight.",
        "Supercalifragilisticexpialidociousnessi",
        "ciousnessisaverylongwordindeed",
        "yes",
    ]


def test_chunks_stay_within_the_size_and_overlap_their_neighbours() -> None:
    text = " ".join(f"word{n}" for n in range(400))
    chunks = plain.split_text(text)
    assert all(len(chunk) <= plain.CHUNK_SIZE for chunk in chunks)
    assert len(chunks) > 2
    for first, second in itertools.pairwise(chunks):
        assert first.split()[-1] in second.split()[:20]


def test_a_document_is_its_headings_and_sections_as_one_text() -> None:
    doc = Document("a.html", "A", [Section("", "Intro.", 0), Section("Usage", "Run it.", 1)])
    assert plain.document_text(doc) == "Intro.\n\nUsage\n\nRun it."


def test_the_index_is_built_once_and_searched_without_a_cap(tmp_path: Path) -> None:
    # Given one long page about kites and a short one about winches
    kites = ("<h1>Kites</h1>" + "<p>Kites fly in wind. " * 80 + "</p>").encode()
    winch = b"<h1>Winch</h1><p>A winch pulls the kite line back in.</p>"
    documents = [("kites.html", kites), ("winch.html", winch)]
    embedder = HashingEmbedder()
    path = plain.index_path(tmp_path, documents, embedder)

    # When the plain index is built, then built again
    index = plain.open_index(path, embedder)
    todo = plain.missing(index, plain.chunks_of(documents))
    plain.fill(index, todo, embedder)
    again = plain.missing(index, plain.chunks_of(documents))

    # Then the rebuild embeds nothing, and the long page may fill every rank
    assert len(todo) == index.count() > 3 and again == []
    hits = plain.search("kites wind", embedder=embedder, index=index, top_k=3, candidates=10)
    assert [hit.chunk.source for hit in hits] == ["kites.html"] * 3
    assert all(hit.chunk.title == "" and hit.chunk.heading == "" for hit in hits)
    index.close()


def test_plain_passages_of_a_pdf_name_the_page_they_start_on() -> None:
    # A question about a PDF expects a page (`manual.pdf#page=2`); plain's passages
    # carried no page, so plain could never meet one, and on the suite's Debian
    # Reference it scored 0.000 on every retrieval figure where its excerpts held
    # the answers.
    first = ["Kites need wind to fly above the trees."] * 40
    second = ["Gliders ride the rising air over the warm hills."] * 40
    chunks = plain.chunks_of([("manual.pdf", make_pdf([first, second]))])

    assert chunks[0].page == 1
    assert chunks[-1].page == 2
    assert chunk_rank(chunks[-1:], ["manual.pdf#page=2"], all_needed=False) == 1
