"""Chunking: a Document's sections into passages of at most `max_chars` characters.

The section is the unit, because a passage that stays under one heading says one
thing and can be cited by that heading. A section that fits is kept whole (with
its subsections); small sections share a passage with the siblings after them,
each with its heading as a line above its text, under their parent's heading.
Only a section too long for one passage is split: on paragraphs, then sentences,
then anywhere, carrying about `overlap` characters into the next passage so that
a sentence cut at a boundary is still readable on both sides. Every part of a
split section carries its heading, so a long option's description is never cut
off from the option's name.

A passage's text holds neither the document title nor its own heading path: those
are separate fields of the Chunk, which the index ranks and the embedder sees.
Both are capped in UTF-8 bytes, as the text is capped at `max_chars`, so that a
chunk's stored fields stay far below Pinecone's 40 KB of metadata per vector
whatever the document holds: a 50 KB heading line is cut, not refused.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from candor.ingest.document import Document
from candor.ingest.pages import with_pages
from candor.types import Chunk

HEADING_SEPARATOR = " > "
# A real title or heading path is well under these; a longer one is an accident of
# the source (a whole paragraph marked up as a heading) and is cut with an ellipsis.
MAX_TITLE_BYTES = 512
MAX_HEADING_BYTES = 1024
ELLIPSIS = "\u2026"

_PARAGRAPH = re.compile(r"\n(?:[ \t]*\n)+")
# After sentence punctuation, or at a line break (lines of code or of a list).
# The indentation after a line break stays with its line: it is code.
_SENTENCE = re.compile(r"(?<=[.!?])[ \t]+|[ \t]*\n")
# Where an overlap may start: a capital after sentence punctuation ("$? = 255"
# is not a sentence), or a new line.
_SENTENCE_START = re.compile(r"[.!?][\"')\]]?\s+(?=[A-Z])|\n")


def doc_prefix(source: str) -> str:
    """The prefix every chunk id of `source` starts with.

    The trailing "-" matters: it stops one document's prefix matching another's ids.
    """
    return hashlib.md5(source.encode("utf-8"), usedforsecurity=False).hexdigest() + "-"


def chunk_id(source: str, index: int) -> str:
    """`md5(source)-index`: stable across runs, so re-ingesting overwrites in place."""
    return f"{doc_prefix(source)}{index}"


def chunk_document(doc: Document, *, max_chars: int = 800, overlap: int = 100) -> list[Chunk]:
    """The document's passages in document order, ids numbered from 0; a PDF's with
    the page each starts on (`Chunk.page`)."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be positive, not {max_chars}")
    if not 0 <= overlap < max_chars:
        raise ValueError(f"overlap must be in [0, max_chars), not {overlap}")
    packer = _Packer(max_chars, overlap)
    passage, _ = packer.siblings((), _Open(), _tree(doc))
    packer.close(passage)
    title = cap_bytes(doc.title, MAX_TITLE_BYTES)
    chunks = [
        Chunk(
            id=chunk_id(doc.source, index),
            text=text,
            source=doc.source,
            title=title,
            heading=cap_bytes(HEADING_SEPARATOR.join(path), MAX_HEADING_BYTES),
        )
        for index, (path, text) in enumerate(packer.passages)
    ]
    # A PDF's chunks name the page they start on, for citations that open it there.
    return with_pages(chunks, doc.pages) if doc.pages else chunks


def cap_bytes(text: str, limit: int) -> str:
    """`text` if its UTF-8 encoding fits in `limit` bytes, else its longest prefix
    that fits with an ellipsis after it (cut between characters, never inside one)."""
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    room = limit - len(ELLIPSIS.encode("utf-8"))
    if room <= 0:
        raise ValueError(f"a limit of {limit} bytes leaves no room for text")
    # errors="ignore" drops the partial character a byte cut may leave at the end.
    return encoded[:room].decode("utf-8", errors="ignore").rstrip() + ELLIPSIS


# -- the section tree -------------------------------------------------------------


@dataclass
class _Node:
    heading: str
    text: str
    path: tuple[str, ...]
    children: list[_Node] = field(default_factory=list)

    def body(self) -> str:
        """Own text, then each subsection with its heading as a line of its own."""
        parts = [self.text, *(child.inline() for child in self.children)]
        return "\n\n".join(part for part in parts if part)

    def inline(self) -> str:
        body = self.body()
        return f"{self.heading}\n{body}" if body and self.heading else body


def _tree(doc: Document) -> list[_Node]:
    """Nest the flat sections by level; return the top-level nodes."""
    # The heading that names the whole document adds nothing to a path: the title
    # field says it already ("git-push(1) Manual Page" on the page titled git-push(1)).
    firsts = [s for s in doc.sections if s.level == 1 and s.heading.strip()]
    title = doc.title.strip().casefold()
    title_headings = {
        id(s) for s in firsts if len(firsts) == 1 or s.heading.strip().casefold() == title
    }
    root = _Node("", "", ())
    stack: list[tuple[int, _Node]] = [(-1, root)]
    for section in doc.sections:
        heading = section.heading.strip()
        while stack[-1][0] >= section.level and len(stack) > 1:
            stack.pop()
        parent = stack[-1][1]
        named = heading and id(section) not in title_headings
        path = (*parent.path, heading) if named else parent.path
        node = _Node(heading, section.text.strip(), path)
        parent.children.append(node)
        # Untitled text (a preamble, text after a definition list) is never a parent:
        # the headings after it are its siblings, not its subsections.
        if heading:
            stack.append((section.level, node))
    return root.children


# -- packing ----------------------------------------------------------------------


@dataclass
class _Open:
    """The passage being filled."""

    path: tuple[str, ...] = ()
    text: str = ""
    # While the passage holds a single section (whole, or the last part of one),
    # its heading: when another section joins, this heading moves into the text
    # and the passage takes their parent's heading, which is true of both.
    heading: str | None = None


class _Packer:
    def __init__(self, max_chars: int, overlap: int) -> None:
        self.max_chars = max_chars
        self.overlap = overlap
        self.passages: list[tuple[tuple[str, ...], str]] = []

    def _add(self, path: tuple[str, ...], text: str) -> None:
        text = text.strip()
        if text:
            self.passages.append((path, text))

    def close(self, passage: _Open) -> None:
        self._add(passage.path, passage.text)

    def siblings(
        self, parent: tuple[str, ...], passage: _Open, nodes: list[_Node]
    ) -> tuple[_Open, bool]:
        """Pack the subsections of `parent` in order, after the open passage.

        Returns the passage still open at the end, and whether it is the one that
        was passed in (grown, never closed): only then may the parent's next
        sibling join it, because only then is that sibling a sibling of its start.
        """
        same = True
        for node in nodes:
            body = node.body()
            if not body:
                continue
            if len(body) <= self.max_chars:
                joined = self._join(parent, passage, node) if passage.text else None
                if joined is None:
                    self.close(passage)
                    joined, same = _Open(node.path, body, node.heading), False
                passage = joined
                continue
            # Too long to keep whole: its own text is split, and the last part stays
            # open for the subsections, which the passage's heading (node.path) covers.
            self.close(passage)
            same = False
            parts = self.split(node.text) or [""]
            for part in parts[:-1]:
                self._add(node.path, part)
            lead = _Open(node.path, parts[-1], "")
            passage, grown = self.siblings(node.path, lead, node.children)
            if grown:
                passage.heading = node.heading
            else:
                self.close(passage)
                passage = _Open()
        return passage, same

    def _join(self, parent: tuple[str, ...], passage: _Open, node: _Node) -> _Open | None:
        """The open passage with `node` added, or None when that is too long."""
        path, text = passage.path, passage.text
        if passage.heading is not None:
            path = parent
            if passage.heading:
                text = f"{passage.heading}\n{text}"
        text = f"{text}\n\n{node.inline()}"
        return _Open(path, text) if len(text) <= self.max_chars else None

    def split(self, text: str) -> list[str]:
        """Cut a long text into passages, each after the first opening with an overlap.

        A passage ends at the last paragraph break that leaves it at least half
        full; failing that, at the last sentence that fits.
        """
        units = list(_pieces(text, self.max_chars))
        parts: list[str] = []
        carried = ""
        i = 0
        while i < len(units):
            joiner, piece = units[i]
            current = carried + joiner + piece if carried else piece
            paragraph_end = 0  # length of `current` at its last paragraph break
            i += 1
            while i < len(units):
                joiner, piece = units[i]
                if len(current) + len(joiner) + len(piece) > self.max_chars:
                    break
                if joiner == "\n\n":
                    paragraph_end = len(current)
                current += joiner + piece
                i += 1
            if i < len(units) and units[i][0] != "\n\n" and paragraph_end >= self.max_chars // 2:
                # Back up to the paragraph break; the units after it start the next passage.
                i -= _count_units_after(units, i, len(current) - paragraph_end)
                current = current[:paragraph_end]
            parts.append(current)
            if i < len(units):
                joiner, piece = units[i]
                room = self.max_chars - len(joiner) - len(piece)
                carried = _tail(current, min(self.overlap, room))
        return parts


def _count_units_after(units: list[tuple[str, str]], end: int, length: int) -> int:
    """How many units before index `end` make up the last `length` characters."""
    count = 0
    while length > 0:
        count += 1
        joiner, piece = units[end - count]
        length -= len(joiner) + len(piece)
    return count


def _pieces(text: str, limit: int) -> Iterator[tuple[str, str]]:
    """(joiner, piece) pairs: the sentences (or lines, or cuts) of each paragraph.

    The joiner is the separator the piece had before it ("\n\n" starts a
    paragraph), so joining pieces gives the original text, whitespace normalised.
    """
    first = True
    for joiner, paragraph in _split(text, _PARAGRAPH, ""):
        for sep, sentence in _split(paragraph, _SENTENCE, joiner):
            for cut_sep, cut in _hard_cuts(sentence, limit, sep):
                yield ("" if first else cut_sep), cut
                first = False


def _split(text: str, pattern: re.Pattern[str], first_joiner: str) -> Iterator[tuple[str, str]]:
    joiner, start = first_joiner, 0
    for match in pattern.finditer(text):
        piece = text[start : match.start()]
        if piece.strip():
            yield joiner, piece
            joiner = _normalise(match.group())
        start = match.end()
    piece = text[start:]
    if piece.strip():
        yield joiner, piece


def _normalise(separator: str) -> str:
    newlines = separator.count("\n")
    return "\n\n" if newlines > 1 else "\n" if newlines else " "


def _hard_cuts(text: str, limit: int, joiner: str) -> Iterator[tuple[str, str]]:
    """Cut a piece longer than `limit` at the last space that leaves half or more, else anywhere."""
    while len(text) > limit:
        space = text.rfind(" ", 0, limit + 1)
        if space >= limit // 2:
            yield joiner, text[:space]
            text, joiner = text[space + 1 :], " "
        else:
            yield joiner, text[:limit]
            text, joiner = text[limit:], ""
    if text.strip():
        yield joiner, text


def _tail(text: str, size: int) -> str:
    """At most the last `size` characters of `text`: from a sentence start if that
    keeps a third of them or more, else from the first whole word."""
    if size <= 0 or len(text) <= size:
        return ""
    start = len(text) - size
    window = text[start:]
    boundary = _SENTENCE_START.search(window)
    if boundary is not None and len(window) - boundary.end() >= size // 3:
        return window[boundary.end() :].strip()
    if text[start - 1].isspace():
        return window.strip()
    space = re.search(r"\s", window)
    return "" if space is None else window[space.end() :].strip()
