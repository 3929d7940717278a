"""The catalogue as the graph reads it: every record of one index, held per corpus version.

Every ingest that changes a document's record also bumps the index's corpus
version (candor.ingest.pipeline), so the records read once serve every question
until the version moves: a catalogue question costs one read of the version (a
GetItem on DynamoDB) and, after an ingest, one read of the records (a Query).
"""

from __future__ import annotations

import logging
import threading

from candor.catalogue import records
from candor.catalogue.records import DocumentRecord
from candor.ports import CatalogueStore

logger = logging.getLogger(__name__)


class Catalogue:
    def __init__(self, store: CatalogueStore, index_name: str) -> None:
        self.store = store
        self.index_name = index_name
        self._lock = threading.Lock()
        self._held: tuple[int, tuple[DocumentRecord, ...]] | None = None

    def documents(self, version: int) -> tuple[DocumentRecord, ...]:
        """The records of the index at corpus version `version` (blocking)."""
        with self._lock:
            if self._held is not None and self._held[0] == version:
                return self._held[1]
        bodies = self.store.catalogue(self.index_name)
        decoded = [records.decode(body) for body in bodies]
        unread = sum(1 for record in decoded if record is None)
        if unread:
            # Of another catalogue version: the next ingest of each writes it again.
            logger.warning("%d catalogue records of %s are not current", unread, self.index_name)
        found = tuple(sorted((r for r in decoded if r is not None), key=lambda r: r.source))
        with self._lock:
            self._held = (version, found)
        return found
