"""The sync's records (candor.sync.records.SyncStore): SQLite and DynamoDB Local, unchanged.

The lease is what keeps two deliveries of one sync message from working on the same
site at once, so its exclusivity is checked with threads that each hold a store of
their own, as separate Lambda instances would, released together.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from candor.backends.dynamodb_sync import PART_BYTES, DynamoDBSyncStore
from candor.backends.sqlite_sync import SqliteSyncStore
from candor.sync.records import PageRecord, SiteRecord, SyncStore
from tests.contract.conftest import StateBacking
from tests.support.concurrency import together

pytestmark = pytest.mark.integration

SITE = "https://docs.example.com/"
OTHER = "https://other.example.com/docs/"
INDEX = "docs"


@pytest.fixture
def opener(state_backing: StateBacking) -> Callable[[], SyncStore]:
    """Opens stores on one shared backing, each as its own process would."""

    def open_store() -> SyncStore:
        if state_backing.kind == "sqlite":
            return state_backing.closing(SqliteSyncStore(state_backing.path))
        return DynamoDBSyncStore(state_backing.table, client=state_backing.client())

    return open_store


@pytest.fixture
def store(opener: Callable[[], SyncStore]) -> SyncStore:
    return opener()


def page(path: str, **fields: object) -> PageRecord:
    return PageRecord(url=SITE.rstrip("/") + path, source=f"site/docs.example.com{path}", **fields)  # type: ignore[arg-type]


def test_page_records_round_trip_per_site(store: SyncStore) -> None:
    a = page("/a.html", etag='"1"', last_modified="Tue, 01 Dec 2026 10:00:00 GMT")
    b = page("/b.html", content_hash="f" * 64, missing=1, gone=True, links=("https://x/1",))
    store.put_pages(INDEX, SITE, [b, a])
    store.put_pages(INDEX, OTHER, [page("/c.html")])

    assert store.pages(INDEX, SITE) == [a, b]
    assert store.pages("another-index", SITE) == []


def test_a_page_record_is_replaced_whole_and_deleted(store: SyncStore) -> None:
    store.put_pages(INDEX, SITE, [page("/a.html", etag='"1"', content_hash="1" * 64)])
    newer = page("/a.html", etag='"2"', content_hash="2" * 64)

    store.put_pages(INDEX, SITE, [newer])
    assert store.pages(INDEX, SITE) == [newer]

    store.delete_pages(INDEX, SITE, [newer.url, "https://docs.example.com/never.html"])
    assert store.pages(INDEX, SITE) == []


def test_many_pages_are_all_listed(store: SyncStore) -> None:
    # More than one page of a DynamoDB Query (1 MB) with long link lists.
    links = tuple(f"https://docs.example.com/link/{i:04d}" for i in range(400))
    records = [page(f"/p{i:03d}.html", links=links) for i in range(120)]
    store.put_pages(INDEX, SITE, records)

    assert store.pages(INDEX, SITE) == sorted(records, key=lambda r: r.url)


def test_site_records_round_trip_and_list_per_index(store: SyncStore) -> None:
    store.put_site(INDEX, SiteRecord(SITE, 12, 1_765_000_000.5, {"new": 12}))
    store.put_site(INDEX, SiteRecord(OTHER, 3, None, {}))
    store.put_site("another-index", SiteRecord(SITE, 1, 1.0, {}))

    assert store.site(INDEX, SITE) == SiteRecord(SITE, 12, 1_765_000_000.5, {"new": 12})
    assert store.site(INDEX, "https://never.example/") is None
    assert [s.site for s in store.sites(INDEX)] == [SITE, OTHER]


def test_a_lease_is_held_by_one_holder_until_released_or_past_its_time(store: SyncStore) -> None:
    assert store.lease(INDEX, SITE, "a", until=200.0, now=100.0)
    assert store.lease(INDEX, SITE, "a", until=300.0, now=150.0)  # a holder renews
    assert not store.lease(INDEX, SITE, "b", until=400.0, now=250.0)
    assert store.lease(INDEX, SITE, "b", until=500.0, now=300.0)  # a's lease ran out
    store.release(INDEX, SITE, "a")  # no longer a's: changes nothing
    assert not store.lease(INDEX, SITE, "c", until=600.0, now=310.0)
    store.release(INDEX, SITE, "b")
    assert store.lease(INDEX, SITE, "c", until=600.0, now=320.0)


def test_a_lease_leaves_the_sites_summary_alone(store: SyncStore) -> None:
    store.put_site(INDEX, SiteRecord(SITE, 5, 10.0, {"new": 5}))
    store.lease(INDEX, SITE, "a", until=200.0, now=100.0)
    store.release(INDEX, SITE, "a")

    assert store.site(INDEX, SITE) == SiteRecord(SITE, 5, 10.0, {"new": 5})


def test_only_one_of_many_racing_holders_gets_the_lease(
    opener: Callable[[], SyncStore],
) -> None:
    stores = [opener() for _ in range(8)]

    won = together(
        list(enumerate(stores)),
        lambda item: item[1].lease(INDEX, SITE, f"holder-{item[0]}", until=1e12, now=100.0),
    )

    assert sum(won) == 1


def test_a_cursor_is_saved_only_by_the_lease_holder_and_cleared(store: SyncStore) -> None:
    assert store.cursor(INDEX, SITE) is None
    store.lease(INDEX, SITE, "a", until=1e12, now=1.0)

    assert store.save_cursor(INDEX, SITE, "a", b"first")
    assert not store.save_cursor(INDEX, SITE, "b", b"stolen")
    assert store.cursor(INDEX, SITE) == b"first"
    assert store.save_cursor(INDEX, SITE, "a", b"second")
    assert store.cursor(INDEX, SITE) == b"second"
    assert store.save_cursor(INDEX, SITE, "a", None)
    assert store.cursor(INDEX, SITE) is None


def test_a_cursor_larger_than_an_item_round_trips(store: SyncStore) -> None:
    store.lease(INDEX, SITE, "a", until=1e12, now=1.0)
    big = os.urandom(PART_BYTES * 2 + 1000)

    assert store.save_cursor(INDEX, SITE, "a", big)
    assert store.cursor(INDEX, SITE) == big
    smaller = os.urandom(1000)
    assert store.save_cursor(INDEX, SITE, "a", smaller)
    assert store.cursor(INDEX, SITE) == smaller
