"""The CatalogueStore contract: SQLite and DynamoDB (Local) pass it unchanged.

The document catalogue (candor.catalogue) keeps one record per (index, document)
beside the state store's records: the same SQLite file, the same DynamoDB table.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from candor.backends.dynamodb_catalogue import DynamoDBCatalogueStore
from candor.backends.sqlite_catalogue import SqliteCatalogueStore
from candor.backends.sqlite_state import SqliteStateStore
from candor.catalogue.records import MAX_RECORD_BYTES
from candor.ports import CatalogueStore
from tests.contract.conftest import StateBacking

pytestmark = pytest.mark.integration

Opener = Callable[[], CatalogueStore]


@pytest.fixture
def open_store(state_backing: StateBacking) -> Opener:
    """Opens stores on one shared backing (a SQLite state file, a DynamoDB table)."""

    def opened() -> CatalogueStore:
        if state_backing.kind == "sqlite":
            return state_backing.closing(SqliteCatalogueStore(state_backing.path))
        return DynamoDBCatalogueStore(state_backing.table, client=state_backing.client())

    return opened


def test_a_document_without_a_record_has_no_stamp(open_store: Opener) -> None:
    assert open_store().catalogue_stamp("site", "guide.md") is None
    assert open_store().catalogue("site") == []


def test_a_record_is_read_back_with_its_stamp_by_another_store(open_store: Opener) -> None:
    open_store().put_catalogue("site", "guide.md", "stamp-1", b"\x00record\xff")

    reader = open_store()
    assert reader.catalogue_stamp("site", "guide.md") == "stamp-1"
    assert reader.catalogue("site") == [b"\x00record\xff"]


def test_a_new_record_replaces_the_old_one(open_store: Opener) -> None:
    store = open_store()
    store.put_catalogue("site", "guide.md", "stamp-1", b"old")
    store.put_catalogue("site", "guide.md", "stamp-2", b"new")

    assert store.catalogue_stamp("site", "guide.md") == "stamp-2"
    assert store.catalogue("site") == [b"new"]


def test_every_document_of_an_index_is_listed_and_no_other_index(open_store: Opener) -> None:
    store = open_store()
    for number in range(5):
        store.put_catalogue("site", f"page-{number}.md", "s", f"record {number}".encode())
    store.put_catalogue("other-site", "page-0.md", "s", b"not this index")

    assert sorted(store.catalogue("site")) == [f"record {n}".encode() for n in range(5)]
    assert store.catalogue("other-site") == [b"not this index"]


def test_a_deleted_record_is_gone_and_deleting_twice_is_harmless(open_store: Opener) -> None:
    store = open_store()
    store.put_catalogue("site", "a.md", "s", b"a")
    store.put_catalogue("site", "b.md", "s", b"b")

    store.delete_catalogue("site", "a.md")
    store.delete_catalogue("site", "a.md")
    store.delete_catalogue("site", "never-written.md")

    assert store.catalogue_stamp("site", "a.md") is None
    assert store.catalogue("site") == [b"b"]


def test_a_record_of_the_largest_size_is_kept_whole(open_store: Opener) -> None:
    body = os.urandom(MAX_RECORD_BYTES)  # incompressible: as large as a record can be
    long_source = "docs/" + "x" * 1000 + ".md"  # an S3 key may be 1024 bytes
    store = open_store()
    store.put_catalogue("site", long_source, "s", body)

    assert store.catalogue_stamp("site", long_source) == "s"
    assert store.catalogue("site") == [body]


def test_the_catalogue_of_many_documents_is_read_past_one_page_of_results(
    open_store: Opener,
) -> None:
    # DynamoDB returns at most 1 MB a page: 8 records of 300 KB take three pages.
    bodies = [os.urandom(MAX_RECORD_BYTES) for _ in range(8)]
    store = open_store()
    for number, body in enumerate(bodies):
        store.put_catalogue("site", f"page-{number}.md", "s", body)

    assert sorted(store.catalogue("site")) == sorted(bodies)


def test_the_sqlite_catalogue_shares_the_state_file(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    state = SqliteStateStore(path)
    catalogue = SqliteCatalogueStore(path)
    try:
        catalogue.put_catalogue("site", "a.md", "s", b"a")
        state.set_ingest_record("site", "a.md", "fingerprint")
        tables = {row[0] for row in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")}
    finally:
        catalogue.close()
        state.close()
    assert {"catalogue", "ingest_records"} <= tables
