"""The PDF loader: pages or outline entries in, sections out; no text is a failure."""

from __future__ import annotations

import pytest

from candor.errors import IngestError
from candor.ingest import chunk_document, load_document
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
