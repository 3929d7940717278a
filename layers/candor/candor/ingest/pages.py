"""The page each chunk of a paged document (a PDF) starts on.

The chunker packs and splits sections without knowing where pages break, so the
page is found afterwards, from the words: a chunk's first words occur in the
document's text at the place it starts. Chunks come in document order, so each
search starts where the chunk before it started (an overlap begins before the
previous chunk ends, never before it starts). A heading line the chunker put at
the head of a passage may not be in the page text word for word ("Options"
over "1.2 Options"): the probe then starts a few words later.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

from candor.types import PAGE_KEY, Chunk

# Words that must follow each other as on the page: enough to be found once.
PROBE_WORDS = 8
# How far into a chunk the probe may start, past words that are not on the page.
MAX_SKIPPED_WORDS = 24


def with_pages(chunks: Sequence[Chunk], pages: Sequence[str]) -> list[Chunk]:
    """The chunks with `metadata["page"]`: the 1-based page their text starts on.

    A chunk whose words are not found (it should not happen) takes the page of
    the chunk before it.
    """
    text, starts = _flatten(pages)
    cursor, page = 0, 1
    placed: list[Chunk] = []
    for chunk in chunks:
        found = _find(chunk.text.split(), text, cursor)
        if found is not None:
            cursor = found
            page = bisect.bisect_right(starts, found)
        metadata = {**chunk.metadata, PAGE_KEY: page}
        placed.append(
            Chunk(chunk.id, chunk.text, chunk.source, chunk.title, chunk.heading, metadata)
        )
    return placed


def page_finder(pages: Sequence[str]) -> Callable[[str], int | None]:
    """A function giving the 1-based page on which a text of the document starts
    (None when its words are not found on the pages)."""
    text, starts = _flatten(pages)

    def page_of(found: str) -> int | None:
        at = _find(found.split(), text, 0)
        return None if at is None else bisect.bisect_right(starts, at)

    return page_of


def _flatten(pages: Sequence[str]) -> tuple[str, list[int]]:
    """The pages' words joined by single spaces, with a space before each word, and
    the offset at which each page's words begin."""
    parts: list[str] = []
    starts: list[int] = []
    length = 0
    for page in pages:
        starts.append(length)
        words = page.split()
        if words:
            part = " " + " ".join(words)
            parts.append(part)
            length += len(part)
    return "".join(parts), starts


def _find(words: list[str], text: str, cursor: int) -> int | None:
    """Where the chunk starts in `text` (at or after `cursor`), or None."""
    for skip in range(min(MAX_SKIPPED_WORDS, len(words))):
        probe = " " + " ".join(words[skip : skip + PROBE_WORDS])
        found = text.find(probe, cursor)
        if found >= 0:
            return found
    return None
