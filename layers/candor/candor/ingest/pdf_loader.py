"""PDF: one section per outline entry (bookmark), else the pages' text, page by page."""

from __future__ import annotations

import re
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

from candor.errors import IngestError
from candor.ingest.document import Document, Section, collapse, tidy

# PDFium (through pypdfium2) keeps the words of a page apart where pypdf glued them
# together ("Tryallfollowingcommands..." on the Debian Reference) and reads that
# 261-page file about ten times faster. It is not thread-safe: one document at a
# time per process.
_PDFIUM_LOCK = threading.Lock()
# A running header or footer is the first or last line of at least this share of
# the pages (of at least _RUNNING_MIN_PAGES), once its numbers are set aside.
_RUNNING_SHARE = 0.5
_RUNNING_MIN_PAGES = 3
# Lines a heading may carry besides its outline title: "1.1.3", "Chapter 2", "A.1".
_HEADING_NUMBER = re.compile(
    r"(?:(?:chapter|appendix|part|section)\s+)?(?:[0-9]+|[A-Z])(?:\.[0-9]+)*\.?", re.IGNORECASE
)
_ROMAN = re.compile(r"[ivxlcdm]+")


@dataclass(frozen=True, slots=True)
class _Mark:
    """Where an outline entry's heading line starts, and where its text starts after it:
    (page index, offset in that page's text)."""

    heading: str
    level: int
    start: tuple[int, int]
    body: tuple[int, int]


def load_pdf(data: bytes, source: str, stem: str, *, max_pages: int | None = None) -> Document:
    """One section per outline entry when the PDF has an outline (bookmarks), else
    the pages' text as untitled sections, which the chunker packs together. The
    document keeps each page's text, so that every chunk can name its page.

    A PDF of scanned pages has no text to extract: that is an IngestError, not an
    empty document, because nothing would ever be found in it. So is a PDF of more
    than `max_pages` pages, found before any text is extracted.
    """
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_raw

    with _PDFIUM_LOCK:
        try:
            pdf = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as e:
            if getattr(e, "err_code", None) == pdfium_raw.FPDF_ERR_PASSWORD:
                raise IngestError(f"{source}: the PDF is encrypted with a password") from None
            raise IngestError(f"{source}: not a readable PDF ({e})") from None
        try:
            if max_pages is not None and len(pdf) > max_pages:
                raise IngestError(
                    f"{source}: {len(pdf)} pages is over the limit of {max_pages} "
                    "(CANDOR_INGEST_MAX_PDF_PAGES); split the PDF or raise the limit"
                )
            raw_pages = [_page_text(pdf, number) for number in range(len(pdf))]
            title = collapse(pdf.get_metadata_value("Title"))
            outline = _pdf_outline(pdf, len(raw_pages))
        except pdfium.PdfiumError as e:
            raise IngestError(f"{source}: not a readable PDF ({e})") from None
        finally:
            pdf.close()
    pages = _without_running_lines(raw_pages)
    if not any(pages):
        raise IngestError(
            f"{source}: the PDF has no extractable text (scanned pages need OCR first)"
        )
    return Document(source, title or stem, _pdf_sections(pages, outline), tuple(pages))


def _page_text(pdf: Any, number: int) -> str:
    page = pdf[number]
    try:
        textpage = page.get_textpage()
        try:
            raw: str = textpage.get_text_range()
        finally:
            textpage.close()
    finally:
        page.close()
    # PDFium ends lines with CRLF and marks a word hyphenated across a line break
    # with U+FFFE ("adminis\ufffetration"): the word is whole again without it.
    text = raw.replace("\r\n", "\n").replace("\r", "\n")
    text = re.sub("\ufffe\n?", "", text).replace("\xa0", " ")
    return tidy(text)


def _pdf_outline(pdf: Any, page_count: int) -> list[tuple[int, str, int]]:
    """(page index, heading, level) for each outline entry that points at a page, in order."""
    found: list[tuple[int, str, int]] = []
    try:
        for bookmark in pdf.get_toc():
            destination = bookmark.get_dest()
            page = destination.get_index() if destination is not None else None
            heading = collapse(bookmark.get_title() or "")
            if heading and page is not None and 0 <= page < page_count:
                found.append((page, heading, min(bookmark.level + 1, 6)))
    except Exception:  # an unreadable outline costs the headings, not the document
        return []
    # Stable: entries on one page keep the outline's order.
    found.sort(key=lambda entry: entry[0])
    return found


def _running_key(line: str) -> str:
    """A header or footer line with its page number (arabic or roman) set aside."""
    words = re.findall(r"[^\W\d_]+", line.casefold())
    return " ".join(w for w in words if not _ROMAN.fullmatch(w)) or "#"


def _without_running_lines(pages: list[str]) -> list[str]:
    """The pages without the header and footer lines that repeat on most of them
    ("Debian Reference 24 / 233"): in every passage they would only be noise."""
    with_text = [page for page in pages if page]
    if len(with_text) < _RUNNING_MIN_PAGES:
        return pages
    needed = _RUNNING_SHARE * len(with_text)
    running: list[str] = []
    for end in (0, -1):
        keys = Counter(_running_key(page.split("\n")[end]) for page in with_text)
        running.append(next((k for k, n in keys.most_common(1) if n >= needed), ""))
    first, last = running
    cleaned = []
    for page in pages:
        lines = page.split("\n")
        if lines and first and _running_key(lines[0]) == first:
            lines = lines[1:]
        if lines and last and _running_key(lines[-1]) == last:
            lines = lines[:-1]
        cleaned.append(tidy("\n".join(lines)))
    return cleaned


def _heading_line(text: str, heading: str, offset: int) -> tuple[int, int] | None:
    """(start, end) of the first line at or after `offset` that is the heading, with
    at most a section number before it ("1.1.3 The root account") or on the line
    above ("Chapter 1"), or None."""
    wanted = heading.casefold()
    position = offset
    previous: tuple[int, str] | None = None  # the line above: its start and text
    for line in text[offset:].split("\n"):
        end = position + len(line)
        flat = collapse(line).casefold()
        if flat.endswith(wanted):
            prefix = flat[: len(flat) - len(wanted)].strip()
            if not prefix or _HEADING_NUMBER.fullmatch(prefix):
                numbered = previous is not None and _HEADING_NUMBER.fullmatch(previous[1])
                return (previous[0] if previous and numbered else position), end
        previous = (position, collapse(line))
        position = end + 1
    return None


def _between(pages: list[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    """The text from one (page, offset) to another, pages joined by a blank line."""
    parts = []
    for number in range(start[0], min(end[0], len(pages) - 1) + 1):
        text = pages[number]
        low = start[1] if number == start[0] else 0
        high = end[1] if number == end[0] else len(text)
        parts.append(text[low:high].strip())
    return "\n\n".join(part for part in parts if part)


def _pdf_sections(pages: list[str], headings: list[tuple[int, str, int]]) -> list[Section]:
    if not headings:
        return [Section("", text, 0) for text in pages if text]
    # Each heading is looked for on its page after the one before it: found, its
    # line starts the section; not found, the section starts where the last one
    # did (same page) or at the top of its page.
    marks: list[_Mark] = []
    cursor = (0, 0)
    for page, heading, level in headings:
        start = cursor if cursor[0] == page else (page, 0)
        found = _heading_line(pages[page], heading, start[1])
        if found is not None:
            marks.append(_Mark(heading, level, (page, found[0]), (page, found[1])))
        else:
            marks.append(_Mark(heading, level, start, start))
        cursor = marks[-1].body
    sections: list[Section] = []
    before = _between(pages, (0, 0), marks[0].start)
    if before:
        sections.append(Section("", before, 0))
    ends = [mark.start for mark in marks[1:]] + [(len(pages) - 1, len(pages[-1]))]
    for mark, end in zip(marks, ends, strict=True):
        sections.append(Section(mark.heading, _between(pages, mark.body, end), mark.level))
    return sections
