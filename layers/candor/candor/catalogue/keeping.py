"""Keeping the catalogue in step with the index, at ingest (candor.ingest.pipeline).

Each ingest of a document makes sure its catalogue record describes the version
of its bytes (and the address) that the index holds: a changed document gets a
new record after its chunks are written; an unchanged one whose record is
missing, stale or of an older catalogue version gets one without any embedding
(its bytes are read again); a deleted one loses its record. A record's stamp says
which version it describes (candor.catalogue.records.Stamp), so the check costs
one small read.

When a version was first seen is kept across re-ingests of the same bytes and
across a change of address only: that is what "when it last changed" means here.
It is the time candor first saw those bytes, not a file's modification time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from candor.catalogue import records
from candor.catalogue.extract import record_of
from candor.catalogue.records import Stamp
from candor.ingest.document import Document
from candor.ports import CatalogueStore
from candor.types import Chunk


@dataclass(frozen=True, slots=True)
class DocumentCatalogue:
    """The catalogue records of one index, in a CatalogueStore."""

    store: CatalogueStore
    index_name: str
    clock: Callable[[], float] = field(default=time.time)

    def stamp(self, source: str) -> Stamp | None:
        return Stamp.from_text(self.store.catalogue_stamp(self.index_name, source))

    def current(self, source: str, fingerprint: str, url: str | None) -> bool:
        """Whether the document's record describes this version at this address."""
        stamp = self.stamp(source)
        return (
            stamp is not None
            and stamp.version == records.VERSION
            and stamp.fingerprint == fingerprint
            and stamp.url == url
        )

    def write(
        self,
        document: Document,
        chunks: Sequence[Chunk],
        *,
        size: int,
        fingerprint: str,
        url: str | None,
    ) -> None:
        """Record the document as loaded, with the chunks the index holds for it."""
        before = self.stamp(document.source)
        seen = before.changed_at if before and before.fingerprint == fingerprint else self.clock()
        record = record_of(
            document, chunks, url=url, size=size, fingerprint=fingerprint, changed_at=seen
        )
        stamp = Stamp(fingerprint, url, seen)
        self.store.put_catalogue(
            self.index_name, document.source, stamp.to_text(), records.encode(record)
        )

    def remove(self, source: str) -> None:
        self.store.delete_catalogue(self.index_name, source)
