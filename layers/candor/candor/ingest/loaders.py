"""Loaders: a document's bytes and source name in, a Document of headed sections out.

A loader knows nothing of files, S3 or the index. The caller passes the bytes and
the name that the document is cited by, so a local folder and an S3 event share
this code. Every problem with the input becomes an IngestError with a reason,
because one bad upload must not stop the rest of a batch.
"""

from __future__ import annotations

import codecs
import re
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

from candor.errors import IngestError

if TYPE_CHECKING:
    from bs4 import Tag

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


@dataclass(frozen=True, slots=True)
class Section:
    """A heading and the text under it, up to the next heading.

    `level` is 1-6 for headings (h1 or `#`), one below the enclosing heading for
    the entries of an HTML definition list, and 0 for text before any heading.
    `heading` is "" for untitled text.
    """

    heading: str
    text: str
    level: int


@dataclass(frozen=True, slots=True)
class Document:
    """A loaded document. `pages` holds the text of each page of a paged format
    (PDF; page N is pages[N - 1]), from which the sections were cut; () otherwise."""

    source: str
    title: str
    sections: list[Section]
    pages: tuple[str, ...] = ()


def is_supported(name: str) -> bool:
    """Whether a file of this name has a loader (by extension; no extension is text)."""
    return PurePosixPath(name).suffix.lower() in _KIND_BY_EXTENSION


def load_document(data: bytes, source: str, *, media_type: str | None = None) -> Document:
    """Parse a document. A recognised `media_type` wins over the extension of `source`."""
    kind = _kind(source, media_type)
    stem = PurePosixPath(source).stem or source
    if kind == "pdf":
        return _load_pdf(data, source, stem)
    text = _decode(data, source)
    match kind:
        case "markdown":
            return _load_markdown(text, source, stem)
        case "text":
            body = _tidy(text)
            return Document(source, stem, [Section("", body, 0)] if body else [])
        case "html":
            return _load_html(text, source, stem)


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


def _tidy(text: str) -> str:
    """Trailing spaces off every line, at most one blank line in a row, no blank ends."""
    lines = [line.rstrip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")


# -- Markdown -------------------------------------------------------------------

# CommonMark ATX headings: up to 3 spaces, 1-6 '#', then a space or the end of the
# line ("#hashtag" is text), and an optional closing run of '#'.
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _load_markdown(text: str, source: str, stem: str) -> Document:
    sections: list[Section] = []
    heading, level, lines = "", 0, list[str]()
    fence = ""  # the opening run of the code block we are in, or ""
    for line in text.split("\n"):
        opening = _FENCE.match(line)
        if fence:
            # A fence closes with a run of the same character, at least as long.
            run = opening.group(1) if opening else ""
            if run[:1] == fence[0] and len(run) >= len(fence) and not line.strip().strip(run[0]):
                fence = ""
        elif opening:
            fence = opening.group(1)
        elif match := _ATX.match(line):
            _add_section(sections, heading, level, lines)
            heading, level, lines = (match.group(2) or "").strip(), len(match.group(1)), []
            continue
        lines.append(line)
    _add_section(sections, heading, level, lines)
    title = next((s.heading for s in sections if s.level == 1 and s.heading), stem)
    return Document(source, title, sections)


def _add_section(sections: list[Section], heading: str, level: int, lines: list[str]) -> None:
    text = _tidy("\n".join(lines))
    # A heading with no text is kept: its subsections need it for their heading path.
    if text or heading:
        sections.append(Section(heading, text, level))


# -- HTML -----------------------------------------------------------------------

# Page furniture, not content.
_DROP_TAGS = frozenset(
    {"script", "style", "nav", "header", "footer", "aside", "form"}
    | {"noscript", "template", "svg", "button", "iframe"}
)
# Matched as whole words of an id or class, so that AsciiDoc's content blocks
# "sidebarblock" and "footnotes" stay ("headerlink" is the pilcrow that Sphinx and
# MkDocs put in every heading). "header" is deliberately absent: AsciiDoc
# puts the NAME line ("git-push - Update remote refs...") in <div id="header">.
_BOILERPLATE = re.compile(
    r"(?:^|[-_])(?:nav|navbar|navigation|menu|menubar|sidebar|footer|breadcrumbs?|toc"
    r"|table-of-contents|headerlink)(?:$|[-_])",
    re.IGNORECASE,
)
_SECTION_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4}
_BLOCK_TAGS = frozenset(
    {"address", "article", "blockquote", "body", "caption", "center", "details", "dialog"}
    | {"div", "dd", "dt", "fieldset", "figcaption", "figure", "hr", "html", "li", "main"}
    | {"p", "section", "summary", "tbody", "tfoot", "thead"}
)


def _load_html(text: str, source: str, stem: str) -> Document:
    # Imported here: only HTML needs them (they cost cold start to a function that
    # never reads HTML).
    try:
        from bs4 import BeautifulSoup, FeatureNotFound, XMLParsedAsHTMLWarning
    except ImportError:
        raise IngestError(f"{source}: HTML needs beautifulsoup4 and lxml") from None
    try:
        with warnings.catch_warnings():
            # XHTML pages (the Git docs open with <?xml ...?>) trigger this; the HTML
            # parser reads them correctly and forgives the broken markup XML would not.
            warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
            soup = BeautifulSoup(text, "lxml")
    except FeatureNotFound:
        raise IngestError(f"{source}: HTML needs lxml") from None
    reader = _HtmlReader()
    try:
        reader.read(soup.body or soup)
    except RecursionError:
        raise IngestError(f"{source}: HTML is nested too deeply to read") from None
    sections = reader.sections
    title_tag = (soup.head or soup).find("title")
    title = _collapse(title_tag.get_text()) if title_tag is not None else ""
    title = title or next((s.heading for s in sections if s.level == 1 and s.heading), stem)
    return Document(source, title, sections)


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _is_boilerplate(tag: Tag) -> bool:
    if tag.name in _DROP_TAGS or tag.get("role") in ("navigation", "menu", "menubar"):
        return True
    names = tag.get_attribute_list("class") + tag.get_attribute_list("id")
    return any(isinstance(name, str) and _BOILERPLATE.search(name) for name in names)


def _pre_text(tag: Tag) -> str:
    lines = [line.rstrip() for line in tag.get_text().split("\n")]
    return "\n".join(lines).strip("\n")


def _definition_items(dl: Tag) -> Iterator[Tag]:
    # HTML allows <div> wrappers around dt/dd groups inside a dl.
    for child in dl.find_all(True, recursive=False):
        if child.name == "div":
            yield from _definition_items(child)
        elif child.name in ("dt", "dd"):
            yield child


def _definition_entries(dl: Tag, text: Callable[[Tag], str]) -> list[tuple[str, list[Tag]]]:
    """(terms, descriptions) pairs: consecutive dt ("-f", "--force") share one dd."""
    entries: list[tuple[list[str], list[Tag]]] = []
    for item in _definition_items(dl):
        if item.name == "dt":
            term = text(item)
            if entries and not entries[-1][1]:
                entries[-1][0].append(term)
            else:
                entries.append(([term], []))
        elif entries:
            entries[-1][1].append(item)
        else:
            entries.append(([], [item]))
    return [(", ".join(t for t in terms if t), descs) for terms, descs in entries]


class _HtmlReader:
    """Walks the body once, turning headings into sections and the rest into text blocks.

    Blocks are separated by a blank line, which the chunker reads as a paragraph
    boundary; a term and its description, list items and table rows are kept on
    consecutive lines instead, so that they stay together. Whitespace inside a
    block is collapsed, except in <pre>.
    """

    def __init__(self) -> None:
        from bs4 import NavigableString, Tag
        from bs4.element import PreformattedString

        # bs4 is imported lazily (see _load_html), so its classes are kept here for
        # the isinstance checks of the walk.
        self._tag, self._string, self._not_text = Tag, NavigableString, PreformattedString
        self.sections: list[Section] = []
        self._heading = ""
        self._level = 0
        self._heading_level = 0  # of the last h1-h4: definition entries go one below
        self._blocks: list[str] = []
        self._lines: list[str] = []  # finished lines of the current block (<br>)
        self._words: list[str] = []  # strings of the current line
        self._prefix = ""  # a list marker waiting for the item's first block
        self._glue = False  # the next block continues the last one after a line break
        self._nested = 0  # inside li/dd/td, where a definition list stays inline
        self._list_depth = 0

    def read(self, root: Tag) -> None:
        self._walk(root)
        self._start_section("", 0)

    # -- text accumulation -------------------------------------------------------

    def _break_line(self) -> None:
        line = _collapse("".join(self._words))
        self._words = []
        if line:
            self._lines.append(line)

    def _end_block(self) -> None:
        self._break_line()
        if self._lines:
            self._emit("\n".join(self._lines))
            self._lines = []

    def _emit(self, block: str) -> None:
        if not block.strip():
            return
        block = self._prefix + block
        self._prefix = ""
        if self._glue and self._blocks:
            self._blocks[-1] += "\n" + block
        else:
            self._blocks.append(block)
        self._glue = False

    def _start_section(self, heading: str, level: int) -> None:
        self._end_block()
        text = "\n\n".join(self._blocks)
        # A heading without text still goes in: its subsections need it for their path.
        if text or self._heading:
            self.sections.append(Section(self._heading, text, self._level))
        self._heading, self._level = heading, level
        self._blocks, self._prefix, self._glue = [], "", False

    # -- the walk ----------------------------------------------------------------

    def _walk(self, node: Tag) -> None:
        for child in node.children:
            if isinstance(child, self._tag):
                self._element(child)
            # Comments, doctypes and CDATA are PreformattedStrings: not page text.
            elif isinstance(child, self._string) and not isinstance(child, self._not_text):
                self._words.append(str(child))

    def _element(self, tag: Tag) -> None:
        name = tag.name
        if _is_boilerplate(tag):
            return
        if name in _SECTION_HEADINGS:
            level = _SECTION_HEADINGS[name]
            self._start_section(self._line_text(tag), level)
            self._heading_level = level
        elif name in ("h5", "h6"):
            # Too fine to be sections: a heading line that leads the next block.
            self._end_block()
            self._emit(self._line_text(tag))
            self._glue = True
        elif name == "pre":
            self._end_block()
            self._emit(_pre_text(tag))
        elif name == "br":
            self._break_line()
        elif name == "dl":
            self._definition_list(tag)
        elif name in ("ul", "ol"):
            self._list(tag)
        elif name == "table":
            self._table(tag)
        elif name in _BLOCK_TAGS:
            self._end_block()
            self._walk(tag)
            self._end_block()
        else:
            self._walk(tag)

    def _line_text(self, tag: Tag) -> str:
        """The text of a heading, term or cell on one line, without furniture in it."""
        strings: list[str] = []

        def collect(node: Tag) -> None:
            for child in node.children:
                if isinstance(child, self._tag):
                    if child.name == "br" or child.name in _BLOCK_TAGS:
                        strings.append(" ")
                    if not _is_boilerplate(child):
                        collect(child)
                elif isinstance(child, self._string) and not isinstance(child, self._not_text):
                    strings.append(str(child))

        collect(tag)
        return _collapse("".join(strings))

    def _list(self, tag: Tag) -> None:
        self._end_block()
        self._list_depth += 1
        indent = "  " * (self._list_depth - 1)
        start = tag.get("start")
        number = int(start) if isinstance(start, str) and start.isdigit() else 1
        first = True
        for item in tag.find_all(True, recursive=False):
            if item.name != "li":
                self._element(item)
                continue
            self._prefix = f"{indent}{number}. " if tag.name == "ol" else f"{indent}- "
            # One item per line: a list is one paragraph, not one per item.
            self._glue, first = not first, False
            number += 1
            self._nested += 1
            self._walk(item)
            self._end_block()
            self._nested -= 1
            self._prefix = ""
        self._list_depth -= 1

    def _table(self, tag: Tag) -> None:
        """One line per row, cells joined by " | "; the rows of a table form one block."""
        self._end_block()
        caption = tag.find("caption", recursive=False)
        if isinstance(caption, self._tag):
            self._emit(self._line_text(caption))
        rows = [row for row in tag.find_all("tr") if row.find_parent("table") is tag]
        for number, row in enumerate(rows):
            cells = (self._line_text(cell) for cell in row.find_all(["td", "th"], recursive=False))
            self._glue = number > 0
            self._emit(" | ".join(cell for cell in cells if cell))
        self._glue = False

    def _definition_list(self, tag: Tag) -> None:
        """Top-level entries become sections: "OPTIONS > --force-with-lease" then names
        every passage of a long description, so the term is never cut off from it.
        Inside another entry or a list item the list stays inline: term line, then text.
        """
        self._end_block()
        entries = _definition_entries(tag, self._line_text)
        if self._nested:
            for term, descriptions in entries:
                self._end_block()
                self._emit(term)
                self._glue = bool(term)
                self._descriptions(descriptions)
            return
        level = self._heading_level + 1
        for term, descriptions in entries:
            self._start_section(term, level)
            self._descriptions(descriptions)
        # Text after the list belongs to the enclosing heading, not to the last term.
        self._start_section("", level)

    def _descriptions(self, descriptions: list[Tag]) -> None:
        self._nested += 1
        for description in descriptions:
            self._walk(description)
            self._end_block()
        self._nested -= 1
        self._glue = False


# -- PDF ------------------------------------------------------------------------

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


def _load_pdf(data: bytes, source: str, stem: str) -> Document:
    """One section per outline entry when the PDF has an outline (bookmarks), else
    the pages' text as untitled sections, which the chunker packs together. The
    document keeps each page's text, so that every chunk can name its page.

    A PDF of scanned pages has no text to extract: that is an IngestError, not an
    empty document, because nothing would ever be found in it.
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
            raw_pages = [_page_text(pdf, number) for number in range(len(pdf))]
            title = _collapse(pdf.get_metadata_value("Title"))
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
    return _tidy(text)


def _pdf_outline(pdf: Any, page_count: int) -> list[tuple[int, str, int]]:
    """(page index, heading, level) for each outline entry that points at a page, in order."""
    found: list[tuple[int, str, int]] = []
    try:
        for bookmark in pdf.get_toc():
            destination = bookmark.get_dest()
            page = destination.get_index() if destination is not None else None
            heading = _collapse(bookmark.get_title() or "")
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
        cleaned.append(_tidy("\n".join(lines)))
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
        flat = _collapse(line).casefold()
        if flat.endswith(wanted):
            prefix = flat[: len(flat) - len(wanted)].strip()
            if not prefix or _HEADING_NUMBER.fullmatch(prefix):
                numbered = previous is not None and _HEADING_NUMBER.fullmatch(previous[1])
                return (previous[0] if previous and numbered else position), end
        previous = (position, _collapse(line))
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
