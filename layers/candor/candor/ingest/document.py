"""What a loader makes of a document: a title and its headed sections.

The leaf of ingestion: loaders (loaders, markdown_loader, html_loader,
pdf_loader) produce it and chunking reads it, so none of them imports another.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Section:
    """A heading and the text under it, up to the next heading.

    `level` is 1-6 for headings (h1 or `#`), one below the enclosing heading for
    the entries of an HTML definition list, and 0 for text before any heading.
    `heading` is "" for untitled text.

    Two things the document catalogue reads (candor.catalogue), which chunking does
    not: `entry` is true for a section that is the term of a definition list (an
    option, a setting) rather than a heading, and `rows` holds the first cell of
    each body row of the tables in the section's own text, in order.
    """

    heading: str
    text: str
    level: int
    entry: bool = False
    rows: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Document:
    """A loaded document. `pages` holds the text of each page of a paged format
    (PDF; page N is pages[N - 1]), from which the sections were cut; () otherwise."""

    source: str
    title: str
    sections: list[Section]
    pages: tuple[str, ...] = ()


def tidy(text: str) -> str:
    """Trailing spaces off every line, at most one blank line in a row, no blank ends."""
    lines = [line.rstrip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")


def collapse(text: str) -> str:
    """Every run of whitespace as one space, none at the ends."""
    return " ".join(text.split())
