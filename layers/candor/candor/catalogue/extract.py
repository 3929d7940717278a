"""A document's catalogue record, read from what its loader made of it and its chunks."""

from __future__ import annotations

from collections.abc import Sequence

from candor.catalogue.records import (
    MAX_ENTRIES,
    MAX_HEADINGS,
    DocumentRecord,
    Entry,
    Heading,
    cut,
)
from candor.ingest.chunking import HEADING_SEPARATOR
from candor.ingest.document import Document, Section
from candor.types import Chunk


def record_of(
    document: Document,
    chunks: Sequence[Chunk],
    *,
    url: str | None,
    size: int,
    fingerprint: str,
    changed_at: float,
) -> DocumentRecord:
    """The catalogue record of a loaded document whose chunks are `chunks`.

    Headings nest as the chunker nests them (candor.ingest.chunking): by level, the
    heading that names the whole document left out (the title says it). A definition
    list's terms are entries of the heading above them, and so are the first cells
    of the tables in a heading's text; a table inside a term's description describes
    that term, and is not read.
    """
    headings: list[Heading] = []
    paths: list[tuple[str, ...]] = []
    entries: list[Entry] = []
    headings_total = entries_total = 0
    titles = _title_headings(document)
    # Open headings: (level, index in `headings` or -1 for a term or a dropped one).
    stack: list[tuple[int, int]] = []
    for section in document.sections:
        text = section.heading.strip()
        while stack and stack[-1][0] >= section.level:
            stack.pop()
        parent = next((index for _, index in reversed(stack) if index >= 0), -1)
        if section.entry and text:
            entries_total += 1
            if len(entries) < MAX_ENTRIES:
                entries.append(Entry(cut(text), parent, "term"))
            stack.append((section.level, -1))
            continue
        owner = parent
        if text and id(section) not in titles:
            headings_total += 1
            if len(headings) < MAX_HEADINGS:
                path = (*(paths[parent] if parent >= 0 else ()), text)
                chunk = _chunk_of(path, text, chunks)
                headings.append(Heading(section.level, cut(text), parent, chunk))
                paths.append(path)
                owner = len(headings) - 1
            stack.append((section.level, owner))
        elif text:
            stack.append((section.level, -1))
        for row in section.rows:
            if not row.strip():
                continue
            entries_total += 1
            if len(entries) < MAX_ENTRIES:
                entries.append(Entry(cut(row), owner, "row"))
    return DocumentRecord(
        source=document.source,
        title=cut(document.title) or document.source,
        url=url,
        size=size,
        chars=sum(len(s.heading) + len(s.text) for s in document.sections),
        changed_at=changed_at,
        fingerprint=fingerprint,
        headings=tuple(headings),
        entries=tuple(entries),
        headings_total=headings_total,
        entries_total=entries_total,
    )


def _title_headings(document: Document) -> set[int]:
    """The sections whose heading names the whole document (as the chunker finds them)."""
    firsts: list[Section] = [s for s in document.sections if s.level == 1 and s.heading.strip()]
    title = document.title.strip().casefold()
    return {
        id(s)
        for s in firsts
        if not s.entry and (len(firsts) == 1 or s.heading.strip().casefold() == title)
    }


def _chunk_of(path: tuple[str, ...], text: str, chunks: Sequence[Chunk]) -> int:
    """The index of the first chunk under the heading `path`; else of the first chunk of
    a heading above it whose text holds the heading's line (small sections share a
    chunk under their parent's heading); else 0."""
    joined = HEADING_SEPARATOR.join(path)
    below = joined + HEADING_SEPARATOR
    for number, chunk in enumerate(chunks):
        if chunk.heading == joined or chunk.heading.startswith(below):
            return number
    for number, chunk in enumerate(chunks):
        above = not chunk.heading or below.startswith(chunk.heading + HEADING_SEPARATOR)
        if above and text in chunk.text:
            return number
    return 0
