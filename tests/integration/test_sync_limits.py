"""Every limit of a sync stops what it bounds, with a message that names it.

A huge page and a gzip bomb are refused at the per-page limit (the bomb before it
is expanded past it); the total bytes, the page count and the time of a sync stop
the run, and a run stopped early counts no page as missing.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from candor.sync.addresses import AddressGuard
from candor.sync.fetch import Budget, SiteClient, TooLarge
from candor.sync.polite import HostPacer
from candor.sync.scope import Scope
from tests.support.site_server import SiteServer
from tests.support.sites import INDEX, LocalSync, html, local_sync, loopback_only

__all__ = ["loopback_only"]

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("loopback_only")]

PAGES = [f"/p{i}.html" for i in range(6)]


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalSync]:
    with local_sync(tmp_path) as parts:
        yield parts


@pytest.fixture
def site() -> Iterator[SiteServer]:
    with SiteServer() as server:
        server.page("/robots.txt", "", content_type="text/plain")
        for path in PAGES:
            server.page(path, html(path, f"Kite page {path} says something about kites."))
        server.sitemap("/sitemap.xml", PAGES)
        yield server


def reason_for(summary_failures: list[dict[str, str]], path: str) -> str:
    (found,) = [f["reason"] for f in summary_failures if f["url"].endswith(path)]
    return found


def test_a_page_over_the_byte_limit_is_refused_unread(site: SiteServer, local: LocalSync) -> None:
    site.page("/huge.html", html("Huge", "kite " * 200_000))
    site.sitemap("/sitemap.xml", [*PAGES, "/huge.html"])

    summary = local.run(site.url, max_page_bytes=100_000)

    assert "over the limit of 100000" in reason_for(summary.failures, "/huge.html")
    assert summary.counts["new"] == len(PAGES)
    assert summary.bytes_read < 100_000 * 2


def test_a_gzip_bomb_is_refused_at_the_byte_limit_not_expanded(
    site: SiteServer, local: LocalSync
) -> None:
    bomb = gzip.compress(b"<html>" + b" " * (20 * 1024 * 1024), compresslevel=9)
    site.page("/bomb.html", b"", raw=bomb)
    site.sitemap("/sitemap.xml", [*PAGES, "/bomb.html"])

    summary = local.run(site.url, max_page_bytes=1_000_000)

    assert "more than 1000000 bytes" in reason_for(summary.failures, "/bomb.html")
    assert summary.counts["new"] == len(PAGES)


def test_the_total_bytes_limit_stops_the_sync_and_counts_no_page_missing(
    site: SiteServer, local: LocalSync
) -> None:
    local.run(site.url)
    for path in PAGES:  # every page changed: each is a whole body again
        site.page(path, html(path, f"Kite page {path} now says something else."))
    one_page = max(len(r.body) for r in site.resources.values())

    summary = local.run(site.url, max_total_bytes=one_page, grace=1, accept_removals=True)

    assert summary.stopped is not None and "CANDOR_SYNC_MAX_TOTAL_BYTES" in summary.stopped
    assert not summary.ok
    assert summary.counts["removed"] == 0
    assert len(local.urls()) == len(PAGES)


def test_the_page_limit_cuts_the_listing_and_counts_no_page_missing(
    site: SiteServer, local: LocalSync
) -> None:
    local.run(site.url)

    summary = local.run(site.url, max_pages=2, grace=1, accept_removals=True)

    assert any("more than 2 pages" in note for note in summary.notes)
    assert summary.counts["fetched"] == 2
    assert summary.counts["removed"] == 0
    assert all(r.missing == 0 for r in local.store.pages(INDEX, site.url))


def test_the_time_limit_stops_the_sync(site: SiteServer, local: LocalSync) -> None:
    summary = local.run(site.url, max_seconds=0.0)

    assert summary.stopped is not None and "CANDOR_SYNC_MAX_SECONDS" in summary.stopped
    assert summary.counts["fetched"] == 0


def test_a_server_that_drips_its_body_is_cut_at_the_deadline() -> None:
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    stop = threading.Event()

    def drip() -> None:
        connection, _ = listener.accept()
        connection.recv(4096)
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n")
        while not stop.is_set():
            try:
                connection.sendall(b"<")
            except OSError:
                break
            time.sleep(0.05)
        connection.close()

    thread = threading.Thread(target=drip, daemon=True)
    thread.start()
    scope = Scope.of(f"http://127.0.0.1:{port}/")
    try:
        with SiteClient(
            scope,
            guard=AddressGuard.for_site("127.0.0.1"),
            user_agent="candor/test",
            pacer=HostPacer(0, 1),
            timeout=0.5,
        ) as client:
            started = time.monotonic()
            with pytest.raises(Exception, match="deadline"):
                client.get(f"http://127.0.0.1:{port}/", Budget(10_000_000, 1.0))
            assert time.monotonic() - started < 5
    finally:
        stop.set()
        listener.close()


def test_a_declared_length_over_the_limit_is_refused_before_the_body(site: SiteServer) -> None:
    site.page("/big.html", b"x" * 50_000)
    scope = Scope.of(site.url)
    with (
        SiteClient(
            scope,
            guard=AddressGuard.for_site("127.0.0.1"),
            user_agent="candor/test",
            pacer=HostPacer(0, 1),
        ) as client,
        pytest.raises(TooLarge, match="50000 bytes"),
    ):
        client.get(site.absolute("/big.html"), Budget(10_000, 10.0))
