"""Ingest keeps each document's catalogue record in step with what the index holds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from candor.backends.sqlite_catalogue import SqliteCatalogueStore
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.catalogue import records as catalogue_records
from candor.catalogue.keeping import DocumentCatalogue
from candor.catalogue.reader import Catalogue
from candor.catalogue.records import DocumentRecord
from candor.errors import StateStoreError
from candor.ingest.chunking import chunk_id
from candor.ingest.pipeline import delete_document, ingest
from candor.ingest.records import PENDING, CompletionRecords
from tests.support.embedders import CountingEmbedder

pytestmark = pytest.mark.integration

GUIDE = b"""# Guide

## Settings

| name | default |
|---|---|
| `TIMEOUT` | 30 |
| `RETRIES` | 3 |

## Deploying

Run the deploy command.
"""
GUIDE_V2 = GUIDE.replace(b"| `RETRIES` | 3 |", b"| `RETRIES` | 3 |\n| `REGION` | eu |")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Setup:
    def __init__(self, tmp_path: Path) -> None:
        self.embedder = CountingEmbedder()
        self.index = SqliteVectorIndex(
            tmp_path / "index.sqlite3", self.embedder.dimensions, embedder=self.embedder.name
        )
        self.state = SqliteStateStore(tmp_path / "state.sqlite3")
        self.store = SqliteCatalogueStore(tmp_path / "state.sqlite3")
        self.clock = Clock()
        self.catalogue = DocumentCatalogue(self.store, "site", clock=self.clock)
        self.records = CompletionRecords(self.state, "site")

    def ingest(self, *documents: tuple[str, bytes], catalogue: bool = True, base: str = "") -> None:
        report = ingest(
            list(documents),
            embedder=self.embedder,
            index=self.index,
            records=self.records,
            catalogue=self.catalogue if catalogue else None,
            source_base_url=base or None,
        )
        assert not report.failures, report.failures

    def documents(self) -> dict[str, DocumentRecord]:
        bodies = self.store.catalogue("site")
        decoded = [catalogue_records.decode(body) for body in bodies]
        return {r.source: r for r in decoded if r is not None}


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    made = Setup(tmp_path)
    yield made
    made.index.close()
    made.state.close()
    made.store.close()


def test_an_ingested_document_has_a_record_of_its_headings_and_table(setup: Setup) -> None:
    setup.ingest(("guide.md", GUIDE))

    record = setup.documents()["guide.md"]
    assert record.title == "Guide"
    assert [h.text for h in record.headings] == ["Settings", "Deploying"]
    assert [e.term for e in record.entries] == ["TIMEOUT", "RETRIES"]
    assert (record.size, record.changed_at) == (len(GUIDE), 1_000.0)
    # Each heading names a chunk the index holds: what a citation of it opens.
    held = set(setup.index.list_ids())
    assert {chunk_id("guide.md", h.chunk) for h in record.headings} <= held


def test_unchanged_bytes_keep_the_record_and_when_they_first_changed(setup: Setup) -> None:
    setup.ingest(("guide.md", GUIDE))
    setup.clock.now = 2_000.0
    setup.embedder.reset()

    setup.ingest(("guide.md", GUIDE))

    assert setup.embedder.texts == 0
    assert setup.documents()["guide.md"].changed_at == 1_000.0


def test_a_changed_document_gets_a_new_record_with_the_time_it_changed(setup: Setup) -> None:
    setup.ingest(("guide.md", GUIDE))
    setup.clock.now = 2_000.0

    setup.ingest(("guide.md", GUIDE_V2))

    record = setup.documents()["guide.md"]
    assert [e.term for e in record.entries] == ["TIMEOUT", "RETRIES", "REGION"]
    assert record.changed_at == 2_000.0


def test_an_index_built_before_the_catalogue_gets_records_without_embedding_again(
    setup: Setup,
) -> None:
    setup.ingest(("guide.md", GUIDE), catalogue=False)
    version = setup.state.corpus_version("site")
    setup.embedder.reset()

    setup.ingest(("guide.md", GUIDE))

    assert setup.embedder.texts == 0
    assert [e.term for e in setup.documents()["guide.md"].entries] == ["TIMEOUT", "RETRIES"]
    # A reader holding the old catalogue sees the corpus version move, and reads again.
    assert setup.state.corpus_version("site") == version + 1


def test_a_record_that_is_current_costs_no_write_and_no_bump(setup: Setup) -> None:
    setup.ingest(("guide.md", GUIDE))
    version = setup.state.corpus_version("site")

    setup.ingest(("guide.md", GUIDE))

    assert setup.state.corpus_version("site") == version


def test_a_new_address_is_recorded_and_the_change_time_is_kept(setup: Setup) -> None:
    setup.ingest(("guide.md", GUIDE))
    setup.clock.now = 2_000.0

    setup.ingest(("guide.md", GUIDE), base="https://docs.example.com/")

    record = setup.documents()["guide.md"]
    assert record.url == "https://docs.example.com/guide.md"
    assert record.changed_at == 1_000.0


def test_a_deleted_document_loses_its_record(setup: Setup) -> None:
    setup.ingest(("guide.md", GUIDE), ("other.md", b"# Other\n\n## Part\n\ntext"))

    outcome = delete_document(
        "guide.md", index=setup.index, records=setup.records, catalogue=setup.catalogue
    )

    assert outcome.status == "deleted"
    assert set(setup.documents()) == {"other.md"}


def test_a_catalogue_that_cannot_be_written_fails_the_document_for_a_retry(
    setup: Setup,
) -> None:
    class Broken(SqliteCatalogueStore):
        def put_catalogue(self, index_name: str, source: str, stamp: str, body: bytes) -> None:
            raise StateStoreError("disk full (test)")

    broken = Broken(setup.store.path)
    try:
        report = ingest(
            [("guide.md", GUIDE)],
            embedder=setup.embedder,
            index=setup.index,
            records=setup.records,
            catalogue=DocumentCatalogue(broken, "site"),
        )
    finally:
        broken.close()

    assert [source for source, _ in report.failures] == ["guide.md"]
    # Not recorded as complete: the next delivery redoes it, record included.
    assert setup.records.record("guide.md") == PENDING
    setup.ingest(("guide.md", GUIDE))
    assert "guide.md" in setup.documents()


def test_the_reader_reads_again_only_when_the_corpus_version_moves(setup: Setup) -> None:
    setup.ingest(("guide.md", GUIDE))
    reader = Catalogue(setup.store, "site")
    version = setup.state.corpus_version("site")
    assert [r.source for r in reader.documents(version)] == ["guide.md"]

    setup.ingest(("other.md", b"# Other\n\n## Part\n\ntext"))

    assert [r.source for r in reader.documents(version)] == ["guide.md"]  # held
    moved = setup.state.corpus_version("site")
    assert moved > version
    assert [r.source for r in reader.documents(moved)] == ["guide.md", "other.md"]
