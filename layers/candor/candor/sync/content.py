"""What a fetched page is: one of the documents candor reads, or something to skip.

Kept: HTML, Markdown, plain text and PDF, decided by the Content-Type and checked
against the bytes: a "PDF" that does not start as one, or "HTML" full of NUL bytes,
is not read as what it claims; a generic type (application/octet-stream, none at
all) is decided by the bytes (`%PDF-`, an HTML start) or, for text, by the URL's
extension. Images, scripts, style sheets, archives and feeds are skipped. Text in
another declared charset is re-encoded as UTF-8, which the loaders read.

For a crawl, the links of an HTML page are the `<a href>`s, read with the page's
`<base href>`.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from bs4 import BeautifulSoup, Tag

HTML = "text/html"
MARKDOWN = "text/markdown"
TEXT = "text/plain"
PDF = "application/pdf"

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown"})
_GENERIC = frozenset({"", "application/octet-stream", "binary/octet-stream"})
_HTML_START = re.compile(rb"^\s*(?:<!doctype\s+html|<html|<head|<body|<!--)", re.IGNORECASE)
_MARKDOWN_EXTENSIONS = (".md", ".markdown")
# Links kept per page: a page with more is an index that a sitemap should list.
MAX_LINKS = 2000


@dataclass(frozen=True, slots=True)
class Document:
    media_type: str
    data: bytes


class NotADocument(Exception):
    """A page candor does not read; the message says what it is."""


def document_of(url: str, body: bytes, content_type: str | None) -> Document:
    """The page as a document the ingest pipeline reads, or NotADocument."""
    essence, charset = _parse_type(content_type)
    head = body[:1024]
    path = urlsplit(url).path.lower()
    if essence == PDF or (essence in _GENERIC and head.startswith(b"%PDF-")):
        if not head.startswith(b"%PDF-"):
            raise NotADocument("served as a PDF but is not one")
        return Document(PDF, body)
    if essence in _HTML_TYPES or (essence in _GENERIC and _HTML_START.match(head)):
        if b"\x00" in head:
            raise NotADocument("served as HTML but holds binary data")
        return Document(HTML, _utf8(body, charset))
    if essence in _MARKDOWN_TYPES or (
        essence in (TEXT, *_GENERIC) and path.endswith(_MARKDOWN_EXTENSIONS)
    ):
        return Document(MARKDOWN, _utf8(body, charset))
    if essence == TEXT or (essence in _GENERIC and path.endswith(".txt")):
        return Document(TEXT, _utf8(body, charset))
    raise NotADocument(f"a {essence or 'untyped'} file, not HTML, Markdown, text or PDF")


def _parse_type(content_type: str | None) -> tuple[str, str | None]:
    if not content_type:
        return "", None
    essence, _, params = content_type.partition(";")
    charset = None
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip('"').lower() or None
    return essence.strip().lower(), charset


def _utf8(body: bytes, charset: str | None) -> bytes:
    if charset is None:
        return body
    try:
        codec = codecs.lookup(charset).name
    except LookupError:
        raise NotADocument(f"in an unknown charset {charset!r}") from None
    if codec in ("utf-8", "ascii"):
        return body
    try:
        return body.decode(codec).encode("utf-8")
    except UnicodeDecodeError:
        raise NotADocument(f"not valid {charset} text") from None


def links_of(url: str, html: bytes) -> list[str]:
    """The targets of a page's `<a href>` links, absolute, in page order (unchecked)."""
    soup = BeautifulSoup(html, "lxml")
    base_tag = soup.find("base", href=True)
    base = urljoin(url, str(base_tag["href"])) if isinstance(base_tag, Tag) else url
    found: list[str] = []
    for anchor in soup.find_all("a", href=True):
        href = str(anchor["href"]).strip()
        if not href or href.startswith(("#", "mailto:", "javascript:", "tel:", "data:")):
            continue
        found.append(urljoin(base, href))
        if len(found) >= MAX_LINKS:
            break
    return found
