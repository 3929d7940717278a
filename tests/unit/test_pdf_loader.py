"""The PDF loader: pages or outline entries in, sections out, and the page each chunk
starts on; no text is a failure. A real PDF from a Debian package keeps its words."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from candor.errors import IngestError
from candor.ingest import chunk_document, load_document
from candor.types import Chunk
from tests.support import local_models
from tests.support.pdfs import make_pdf

pytestmark = pytest.mark.unit


def test_a_pdf_without_an_outline_gives_its_pages_text_and_its_title() -> None:
    data = make_pdf([["Kite manual", "Fly it high."], ["Land it slowly."]], title="Kite Handbook")

    doc = load_document(data, "docs/kite.pdf")

    assert doc.title == "Kite Handbook"
    assert [(s.heading, s.text) for s in doc.sections] == [
        ("", "Kite manual\nFly it high."),
        ("", "Land it slowly."),
    ]


def test_outline_entries_become_headed_sections() -> None:
    data = make_pdf(
        [["Preface text."], ["Winch text."], ["More winch text."], ["Appendix text."]],
        outline=[("Winch", 1), ("Appendix", 3)],
    )

    doc = load_document(data, "kite.pdf")

    assert doc.title == "kite"  # no title in the file: the name
    assert [(s.heading, s.text) for s in doc.sections] == [
        ("", "Preface text."),
        ("Winch", "Winch text.\n\nMore winch text."),
        ("Appendix", "Appendix text."),
    ]
    headings = {c.heading for c in chunk_document(doc, max_chars=20, overlap=0)}
    assert {"Winch", "Appendix"} <= headings


def test_a_pdf_with_no_extractable_text_is_an_error_not_an_empty_document() -> None:
    with pytest.raises(IngestError, match="no extractable text"):
        load_document(make_pdf([[], []]), "scan.pdf")


@pytest.mark.parametrize(
    "data",
    [b"%PDF-1.7", b"not a pdf at all", make_pdf([["Cut short"]])[:120], b""],
    ids=["header-only", "garbage", "truncated", "empty"],
)
def test_a_corrupt_pdf_is_an_ingest_error(data: bytes) -> None:
    with pytest.raises(IngestError, match=r"broken\.pdf"):
        load_document(data, "broken.pdf")


def test_the_media_type_makes_a_key_without_extension_a_pdf() -> None:
    doc = load_document(
        make_pdf([["Typed by header."]]), "uploads/1234", media_type="application/pdf"
    )

    assert doc.sections[0].text == "Typed by header."


def test_every_chunk_names_the_page_its_text_starts_on() -> None:
    # Given three pages of a PDF without an outline, each too long to share a chunk
    pages = [[f"Page {n} line {i} about the kite winch." for i in range(12)] for n in (1, 2, 3)]
    doc = load_document(make_pdf(pages), "kite.pdf")

    # When it is chunked small enough that a page holds several chunks
    chunks = chunk_document(doc, max_chars=200, overlap=0)

    # Then each chunk names the page of its first line, counting from 1
    assert len(chunks) > 3
    for chunk in chunks:
        first_line = chunk.text.split("\n")[0]
        assert chunk.page == int(first_line.split()[1])
    assert len(doc.pages) == 3


def test_documents_without_pages_have_no_page() -> None:
    (chunk,) = chunk_document(load_document(b"# Kite\n\nFly it high.", "kite.md"))

    assert chunk.page is None


def test_outline_entries_on_one_page_each_get_their_own_text() -> None:
    # Given headings on one page, each on a line of its own (numbered on it or above it)
    data = make_pdf(
        [
            ["Preface text."],
            ["Chapter 1", "Winch", "Winch text.", "1.1 Line", "Line text."],
        ],
        outline=[("Winch", 1), ("Line", 1)],
    )

    doc = load_document(data, "kite.pdf")

    assert [(s.heading, s.text) for s in doc.sections] == [
        ("", "Preface text."),
        ("Winch", "Winch text."),
        ("Line", "Line text."),
    ]


def test_running_headers_and_footers_are_not_text() -> None:
    bodies = ["Fly it high.", "Land it slowly.", "Wind the line.", "Store it dry."]
    pages = [[f"Kite Handbook {n} / 4", body, f"- {n} -"] for n, body in enumerate(bodies, start=1)]
    pages[0][0] = "Kite Handbook iv"  # front matter numbers its pages in roman numerals

    doc = load_document(make_pdf(pages), "kite.pdf")

    assert [s.text for s in doc.sections] == bodies


# -- a real PDF ---------------------------------------------------------------------

# The Debian Reference, English (debian-reference-en 2.100, Debian 12): 261 pages,
# an outline of 451 entries, printed page N is PDF page N + 28.
# `make test` fetches it (scripts/fetch-test-pdf.sh) and sets CANDOR_TEST_PDF.


@pytest.fixture(scope="module")
def debian_reference() -> list[Chunk]:
    configured = os.environ.get("CANDOR_TEST_PDF")
    if not configured:
        local_models.unavailable(
            "CANDOR_TEST_PDF is not set; `make test` sets it (scripts/fetch-test-pdf.sh)"
        )
    path = Path(configured)
    if not path.is_file():
        pytest.fail(f"CANDOR_TEST_PDF={configured} is not a file; run scripts/fetch-test-pdf.sh")
    return chunk_document(load_document(path.read_bytes(), "debian-reference.en.pdf"))


def test_words_of_a_real_pdf_stay_apart(debian_reference: list[Chunk]) -> None:
    words = " ".join(chunk.text for chunk in debian_reference).split()
    sentence = "Try all following commands from the non-privileged user account."

    # pypdf gave 7.2 characters per word here: it glued whole sentences into one word
    assert sum(len(word) for word in words) / len(words) < 5.0
    assert any(sentence in " ".join(chunk.text.split()) for chunk in debian_reference)


def test_chunks_of_a_real_pdf_name_the_page_they_start_on(
    debian_reference: list[Chunk],
) -> None:
    def starting(text: str) -> Chunk:
        return next(c for c in debian_reference if " ".join(c.text.split()).startswith(text))

    # Printed pages 1 and 2 (section 1.1.1 and 1.1.3); page 1 of the PDF is blank
    assert starting("Upon starting the system, you are presented").page == 29
    assert starting("The root account is also called superuser").page == 30
    # Section 1.2.5 starts on printed page 23; its chunk runs on to page 24
    assert starting("Let’s learn basic Unix commands.").page == 51
    assert debian_reference[0].page == 2
    assert debian_reference[-1].page == 261
    pages = [chunk.page or 0 for chunk in debian_reference]
    assert pages == sorted(pages)
