"""What a fetched page is, by its Content-Type and its bytes; and a crawled page's links."""

from __future__ import annotations

import pytest

from candor.sync.content import (
    HTML,
    MARKDOWN,
    PDF,
    TEXT,
    NotADocument,
    document_of,
    links_of,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("url", "body", "content_type", "kind"),
    [
        ("https://d.example/a", b"<!doctype html><p>x</p>", "text/html; charset=utf-8", HTML),
        ("https://d.example/a", b"<html><p>x</p>", None, HTML),
        ("https://d.example/a", b"<html><p>x</p>", "application/octet-stream", HTML),
        ("https://d.example/a", b"%PDF-1.7 ...", "application/pdf", PDF),
        ("https://d.example/a", b"%PDF-1.7 ...", "binary/octet-stream", PDF),
        ("https://d.example/a.md", b"# T", "text/plain", MARKDOWN),
        ("https://d.example/a", b"# T", "text/markdown", MARKDOWN),
        ("https://d.example/a.txt", b"plain", "text/plain", TEXT),
        ("https://d.example/a.txt", b"plain", None, TEXT),
    ],
)
def test_documents_candor_reads_are_kept(
    url: str, body: bytes, content_type: str | None, kind: str
) -> None:
    assert document_of(url, body, content_type).media_type == kind


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"\x89PNG\r\n", "image/png"),
        (b"alert(1)", "application/javascript"),
        (b"{}", "application/json"),
        (b"body{}", "text/css"),
        (b"PK\x03\x04", "application/zip"),
        (b"not a pdf", "application/pdf"),  # says PDF, is not one
        (b"<html>\x00\x00\x00", "text/html"),  # says HTML, is binary
        (b"\x00\x01\x02", None),
    ],
)
def test_anything_else_is_skipped(body: bytes, content_type: str | None) -> None:
    with pytest.raises(NotADocument):
        document_of("https://d.example/file", body, content_type)


def test_text_in_another_charset_becomes_utf8() -> None:
    body = "<p>Cr\u00e8me</p>".encode("latin-1")
    document = document_of("https://d.example/a", body, "text/html; charset=ISO-8859-1")
    assert document.data == "<p>Cr\u00e8me</p>".encode()


def test_an_unknown_charset_is_skipped() -> None:
    with pytest.raises(NotADocument):
        document_of("https://d.example/a", b"<p>x</p>", "text/html; charset=x-klingon")


def test_links_are_absolute_and_follow_the_base() -> None:
    page = (
        b'<html><head><base href="/docs/v2/"></head><body>'
        b'<a href="a.html">a</a><a href="#top">top</a><a href="mailto:x@y">m</a>'
        b'<a href="https://other.example/x">o</a><a href="../b.html">b</a></body></html>'
    )
    assert links_of("https://d.example/index.html", page) == [
        "https://d.example/docs/v2/a.html",
        "https://other.example/x",
        "https://d.example/docs/b.html",
    ]
