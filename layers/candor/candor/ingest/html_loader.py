"""HTML: the page's content without its furniture, cut into sections at h1-h4.

Definition lists (a manual's options) become one section per entry, one level
below their heading, so that an option's text is found under its own name.

What the page hides from its readers is dropped too: the `hidden` attribute,
`aria-hidden="true"`, and an inline style of `display: none` or `visibility: hidden`.
Indexed, such text would be quoted to visitors as what the page says, and it is
where an injected instruction or a forgotten secret hides. Hiding by a style
sheet's class (`.hidden { display: none }`) is not seen: the loader reads no CSS.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from candor.errors import IngestError
from candor.ingest.document import Document, Section, collapse

if TYPE_CHECKING:
    from bs4 import Tag

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
# An inline style that hides the element: display none, or visibility hidden or
# collapse, as a whole declaration (with or without !important).
_HIDING_STYLE = re.compile(
    r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*(?:hidden|collapse))"
    r"\s*(?:!\s*important\s*)?(?:;|$)",
    re.IGNORECASE,
)
_SECTION_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4}
# The fewest body rows that make a table's first column a list of entries.
MIN_TABLE_ROWS = 2
_BLOCK_TAGS = frozenset(
    {"address", "article", "blockquote", "body", "caption", "center", "details", "dialog"}
    | {"div", "dd", "dt", "fieldset", "figcaption", "figure", "hr", "html", "li", "main"}
    | {"p", "section", "summary", "tbody", "tfoot", "thead"}
)


def load_html(text: str, source: str, stem: str) -> Document:
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
    title = collapse(title_tag.get_text()) if title_tag is not None else ""
    title = title or next((s.heading for s in sections if s.level == 1 and s.heading), stem)
    return Document(source, title, sections)


def _not_content(tag: Tag) -> bool:
    """Page furniture, or hidden from the page's readers."""
    if tag.name in _DROP_TAGS or tag.get("role") in ("navigation", "menu", "menubar"):
        return True
    if _is_hidden(tag):
        return True
    names = tag.get_attribute_list("class") + tag.get_attribute_list("id")
    return any(isinstance(name, str) and _BOILERPLATE.search(name) for name in names)


def _is_hidden(tag: Tag) -> bool:
    # hidden="until-found" is content that find-in-page reveals: readers can reach it.
    hidden = tag.get("hidden")
    if hidden is not None and str(hidden).strip().lower() != "until-found":
        return True
    if str(tag.get("aria-hidden", "")).strip().lower() == "true":
        return True
    style = tag.get("style")
    return isinstance(style, str) and _HIDING_STYLE.search(style) is not None


def _pre_text(tag: Tag) -> str:
    lines = [line.rstrip() for line in tag.get_text().split("\n")]
    return "\n".join(lines).strip("\n")


def _definition_items(dl: Tag) -> Iterator[Tag]:
    # HTML allows <div> wrappers around dt/dd groups inside a dl.
    for child in dl.find_all(True, recursive=False):
        if _not_content(child):
            continue
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
        self._entry = False  # the open section is a definition list's term
        self._rows: list[str] = []  # first cells of the open section's table rows
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
        line = collapse("".join(self._words))
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

    def _start_section(self, heading: str, level: int, *, entry: bool = False) -> None:
        self._end_block()
        text = "\n\n".join(self._blocks)
        # A heading without text still goes in: its subsections need it for their path.
        if text or self._heading:
            rows = tuple(self._rows)
            self.sections.append(Section(self._heading, text, self._level, self._entry, rows))
        self._heading, self._level, self._entry = heading, level, entry
        self._blocks, self._prefix, self._glue, self._rows = [], "", False, []

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
        if _not_content(tag):
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
                    if not _not_content(child):
                        collect(child)
                elif isinstance(child, self._string) and not isinstance(child, self._not_text):
                    strings.append(str(child))

        collect(tag)
        return collapse("".join(strings))

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
            if _not_content(item):
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
        rows = [
            row
            for row in tag.find_all("tr")
            if row.find_parent("table") is tag and not _not_content(row)
        ]
        firsts: list[str] = []
        for number, row in enumerate(rows):
            tags = [
                cell
                for cell in row.find_all(["td", "th"], recursive=False)
                if not _not_content(cell)
            ]
            cells = [self._line_text(cell) for cell in tags]
            self._glue = number > 0
            self._emit(" | ".join(cell for cell in cells if cell))
            # A row of header cells names the columns, not an entry.
            if cells and cells[0] and any(cell.name == "td" for cell in tags):
                firsts.append(cells[0])
        self._glue = False
        # One row is a layout box (an admonition's "Note" beside its text), not a list.
        if len(firsts) >= MIN_TABLE_ROWS:
            self._rows.extend(firsts)

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
            self._start_section(term, level, entry=bool(term))
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
