"""A document's catalogue record, and how a store keeps it (compressed JSON).

The record holds what a question about the documents can ask for: the document's
title, address, size and when it last changed; its headings, each with its level,
its parent heading and the chunk it starts in (what a citation of it names); and
its entries, the terms of its definition lists and the first cells of its tables'
rows, each with the heading it stands under.

A record is bounded, so that any document fits one item of any store (DynamoDB
takes 400 KB): at most MAX_HEADINGS headings and MAX_ENTRIES entries, each cut at
MAX_TERM_CHARS, and at most MAX_RECORD_BYTES compressed, fewer entries kept until
it fits. The totals before the cut are kept, so that an answer can say "712
variables; the first 60: ..." rather than pass a cut list off as whole.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field, replace
from typing import Any, Literal

# Bumped when what a record holds changes: a record of another version is stale,
# and the next ingest of its document writes it again (no embedding).
VERSION = 1
MAX_HEADINGS = 2_000
MAX_ENTRIES = 5_000
MAX_TERM_CHARS = 200
# Compressed; DynamoDB's item limit (400 KB) with room for the key and stamp.
MAX_RECORD_BYTES = 300_000

EntryKind = Literal["term", "row"]
ELLIPSIS = "\u2026"


def cut(text: str, limit: int = MAX_TERM_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + ELLIPSIS


@dataclass(frozen=True, slots=True)
class Heading:
    """A heading of the document: its level (1-6), its text, the index of its parent
    heading in the record (-1: none), and the chunk it starts in."""

    level: int
    text: str
    parent: int = -1
    chunk: int = 0


@dataclass(frozen=True, slots=True)
class Entry:
    """A term of a definition list ("term") or the first cell of a table row ("row"),
    and the index of the heading it stands under (-1: before any heading)."""

    term: str
    heading: int
    kind: EntryKind = "term"


@dataclass(frozen=True, slots=True)
class DocumentRecord:
    source: str
    title: str
    url: str | None
    size: int  # bytes of the document as ingested
    chars: int  # characters of its text as loaded (without markup, scripts, SVG)
    changed_at: float  # epoch seconds: when ingest first saw this version of its bytes
    fingerprint: str  # the ingest fingerprint of that version (candor.ingest.reading)
    headings: tuple[Heading, ...] = ()
    entries: tuple[Entry, ...] = ()
    # Before the caps: how many headings and entries the document holds.
    headings_total: int = 0
    entries_total: int = 0
    version: int = VERSION
    # Derived on load: each heading's path from the top, as chunks name it.
    paths: tuple[tuple[str, ...], ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if not self.paths and self.headings:
            object.__setattr__(self, "paths", _paths(self.headings))

    @property
    def complete(self) -> bool:
        """Whether every heading and entry of the document is in the record."""
        return self.headings_total <= len(self.headings) and self.entries_total <= len(self.entries)

    def path(self, heading: int) -> tuple[str, ...]:
        return self.paths[heading] if heading >= 0 else ()

    def to_json(self) -> dict[str, Any]:
        return {
            "v": self.version,
            "source": self.source,
            "title": self.title,
            "url": self.url,
            "size": self.size,
            "chars": self.chars,
            "changed_at": self.changed_at,
            "fingerprint": self.fingerprint,
            "h": [[h.level, h.text, h.parent, h.chunk] for h in self.headings],
            "e": [[e.term, e.heading, e.kind] for e in self.entries],
            "ht": self.headings_total,
            "et": self.entries_total,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DocumentRecord:
        return cls(
            source=str(data["source"]),
            title=str(data["title"]),
            url=data.get("url") or None,
            size=int(data["size"]),
            chars=int(data["chars"]),
            changed_at=float(data["changed_at"]),
            fingerprint=str(data["fingerprint"]),
            headings=tuple(Heading(int(a), str(b), int(c), int(d)) for a, b, c, d in data["h"]),
            entries=tuple(
                Entry(str(term), int(heading), "row" if kind == "row" else "term")
                for term, heading, kind in data["e"]
            ),
            headings_total=int(data["ht"]),
            entries_total=int(data["et"]),
            version=int(data["v"]),
        )


def _paths(headings: tuple[Heading, ...]) -> tuple[tuple[str, ...], ...]:
    paths: list[tuple[str, ...]] = []
    for heading in headings:
        parent = paths[heading.parent] if 0 <= heading.parent < len(paths) else ()
        paths.append((*parent, heading.text))
    return tuple(paths)


def encode(record: DocumentRecord) -> bytes:
    """The record as a store keeps it: compressed JSON of at most MAX_RECORD_BYTES.

    A record over the bound keeps the first half of its entries, then of its
    headings, until it fits (its totals stay as they were).
    """
    while True:
        body = zlib.compress(
            json.dumps(record.to_json(), ensure_ascii=False, separators=(",", ":")).encode(),
            level=9,
        )
        if len(body) <= MAX_RECORD_BYTES:
            return body
        if record.entries:
            record = replace(record, entries=record.entries[: len(record.entries) // 2])
        elif record.headings:
            kept = len(record.headings) // 2
            record = replace(record, headings=record.headings[:kept], paths=())
        else:
            raise ValueError(f"{record.source}: its catalogue record cannot fit a store's item")


def decode(body: bytes) -> DocumentRecord | None:
    """The record in `body`; None for one of another version or one that cannot be
    read (the next ingest of its document writes it again)."""
    try:
        data = json.loads(zlib.decompress(body))
        if data.get("v") != VERSION:
            return None
        return DocumentRecord.from_json(data)
    except (ValueError, KeyError, TypeError, zlib.error):
        return None


@dataclass(frozen=True, slots=True)
class Stamp:
    """What says a stored record is current, kept beside it so that an ingest can
    check it without reading the record: the version, the document's fingerprint,
    its address, and when that version was first seen (kept when only the address
    changes)."""

    fingerprint: str
    url: str | None
    changed_at: float
    version: int = VERSION

    def to_text(self) -> str:
        return json.dumps(
            {"v": self.version, "f": self.fingerprint, "u": self.url, "t": self.changed_at},
            separators=(",", ":"),
        )

    @classmethod
    def from_text(cls, text: str | None) -> Stamp | None:
        if not text:
            return None
        try:
            data = json.loads(text)
            return cls(str(data["f"]), data.get("u") or None, float(data["t"]), int(data["v"]))
        except (ValueError, KeyError, TypeError):
            return None
