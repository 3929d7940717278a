"""Loaders: a document's bytes and source name in, a Document of headed sections out.

A loader knows nothing of files, S3 or the index. The caller passes the bytes and
the name that the document is cited by, so a local folder and an S3 event share
this code. Every problem with the input becomes an IngestError with a reason,
because one bad upload must not stop the rest of a batch.

This module picks the loader (by media type, else extension) and decodes text;
each format family has its own: markdown_loader, html_loader, pdf_loader.
"""

from __future__ import annotations

import codecs
from pathlib import PurePosixPath
from typing import Literal

from candor.errors import IngestError
from candor.ingest.document import Document, Section, tidy
from candor.ingest.html_loader import load_html
from candor.ingest.markdown_loader import load_markdown
from candor.ingest.pdf_loader import load_pdf

Kind = Literal["markdown", "text", "html", "pdf"]

_KIND_BY_EXTENSION: dict[str, Kind] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    "": "text",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
SUPPORTED_EXTENSIONS: tuple[str, ...] = tuple(ext for ext in _KIND_BY_EXTENSION if ext)

# Generic types (S3's default binary/octet-stream) say nothing, so they are absent
# here and the extension decides.
_KIND_BY_MEDIA_TYPE: dict[str, Kind] = {
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/plain": "text",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/pdf": "pdf",
}


def is_supported(name: str) -> bool:
    """Whether a file of this name has a loader (by extension; no extension is text)."""
    return PurePosixPath(name).suffix.lower() in _KIND_BY_EXTENSION


def load_document(
    data: bytes, source: str, *, media_type: str | None = None, max_pdf_pages: int | None = None
) -> Document:
    """Parse a document. A recognised `media_type` wins over the extension of `source`.

    A PDF of more than `max_pdf_pages` pages is an IngestError, raised before any
    page's text is extracted.
    """
    kind = _kind(source, media_type)
    stem = PurePosixPath(source).stem or source
    if kind == "pdf":
        return load_pdf(data, source, stem, max_pages=max_pdf_pages)
    text = _decode(data, source)
    match kind:
        case "markdown":
            return load_markdown(text, source, stem)
        case "text":
            body = tidy(text)
            return Document(source, stem, [Section("", body, 0)] if body else [])
        case "html":
            return load_html(text, source, stem)


def document_kind(source: str, media_type: str | None = None) -> Kind:
    """The loader for a document, or an IngestError naming what is supported.

    Callers that fetch documents (S3) ask before reading the bytes.
    """
    return _kind(source, media_type)


def _kind(source: str, media_type: str | None) -> Kind:
    if media_type:
        essence = media_type.split(";", 1)[0].strip().lower()
        if essence in _KIND_BY_MEDIA_TYPE:
            return _KIND_BY_MEDIA_TYPE[essence]
    suffix = PurePosixPath(source).suffix.lower()
    if suffix in _KIND_BY_EXTENSION:
        return _KIND_BY_EXTENSION[suffix]
    supported = ", ".join(SUPPORTED_EXTENSIONS)
    raise IngestError(
        f"{source}: unsupported file type {suffix!r}; supported: {supported} and no extension"
    )


def _decode(data: bytes, source: str) -> str:
    # A UTF-16 BOM is how Windows editors mark "Unicode" text; anything else must
    # be UTF-8, with or without a BOM ("utf-8-sig" drops one if present).
    encoding = "utf-16" if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) else ""
    try:
        text = data.decode(encoding or "utf-8-sig")
    except UnicodeDecodeError as e:
        expected = "UTF-16" if encoding else "UTF-8"
        raise IngestError(
            f"{source}: not {expected} text (undecodable byte 0x{data[e.start]:02x} at offset "
            f"{e.start}); save it as UTF-8"
        ) from None
    # Valid UTF-8 can still be a binary file; NUL never occurs in text worth indexing.
    if "\x00" in text:
        raise IngestError(f"{source}: contains NUL characters; it looks like a binary file")
    return text.replace("\r\n", "\n").replace("\r", "\n")
