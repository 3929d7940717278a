"""The docs site the sync's tests serve, and a local sync of it into a SQLite index.

The site has what a real docs site has and what the sync must cope with: a
robots.txt with a disallowed folder, a crawl delay and a `Sitemap:` line; a
sitemap index naming a plain sitemap and a nested gzipped one; pages that link
to each other and off the site; and a URL on another host in a sitemap.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.backends.sqlite_sync import SqliteSyncStore
from candor.ingest.records import CompletionRecords
from candor.sync.addresses import Resolver, system_resolver
from candor.sync.engine import SiteSync, SyncOptions, SyncSummary
from candor.sync.sinks import IndexSink
from candor.types import Chunk
from tests.support.embedders import CountingEmbedder
from tests.support.site_server import SiteServer

INDEX = "site-test"
# Enough words that each page is a few passages of its own.
TOPICS = {
    "/": ("Kite docs", "Kite is a command-line tool that flies documentation kites."),
    "/guide.html": ("Guide", "To launch a kite, run kite launch with the --wind flag set."),
    "/install.html": ("Install", "Install kite with the package manager: apt install kite."),
    "/faq.html": ("FAQ", "Kites tangle when two strings cross; untangle with kite sort."),
    "/api.html": ("API", "The kite API returns the altitude in metres as an integer."),
    "/reference/config.html": ("Config", "The config key kite.maxAltitude defaults to 120."),
    "/reference/cli.html": ("CLI", "kite land brings every kite down within ten seconds."),
}
PRIVATE = "/private/secret.html"
OFF_SITE = "http://other.example/elsewhere.html"


def html(title: str, text: str, links: tuple[str, ...] = ()) -> str:
    anchors = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    paragraphs = "".join(f"<p>{text} Paragraph {i} repeats it.</p>" for i in range(3))
    return (
        f"<!doctype html><html><head><title>{title}</title></head><body>"
        f"<nav><ul>{anchors}</ul></nav><main><h1>{title}</h1>{paragraphs}</main></body></html>"
    )


def build_site(site: SiteServer, *, crawl_delay: float = 0.01) -> None:
    """The fixture site: robots.txt, a sitemap index, a nested gzipped sitemap, pages."""
    site.page(
        "/robots.txt",
        "User-agent: *\n"
        f"Disallow: /private/\nCrawl-delay: {crawl_delay}\n"
        f"Sitemap: {site.absolute('/sitemap_index.xml')}\n",
        content_type="text/plain",
    )
    for path, (title, text) in TOPICS.items():
        site.page(path, html(title, text, ("/guide.html", "/faq.html", OFF_SITE)))
    site.page(PRIVATE, html("Secret", "The launch codes are 0000."))
    site.sitemap_index("/sitemap_index.xml", ["/sitemaps/pages.xml", "/sitemaps/more.xml.gz"])
    site.sitemap("/sitemaps/pages.xml", ["/", "/guide.html", "/install.html", "/faq.html"])
    site.sitemap(
        "/sitemaps/more.xml.gz",
        ["/api.html", "/reference/config.html", "/reference/cli.html", PRIVATE, OFF_SITE],
        gzipped=True,
    )


def listed_pages() -> list[str]:
    return list(TOPICS)


def drop_from_sitemap(site: SiteServer, path: str) -> None:
    first = [p for p in ["/", "/guide.html", "/install.html", "/faq.html"] if p != path]
    more = [p for p in ["/api.html", "/reference/config.html", "/reference/cli.html"] if p != path]
    site.sitemap("/sitemaps/pages.xml", first)
    site.sitemap("/sitemaps/more.xml.gz", [*more, PRIVATE, OFF_SITE], gzipped=True)


@dataclass
class LocalSync:
    """The embedded default's parts, kept across several syncs of one site."""

    index: SqliteVectorIndex
    state: SqliteStateStore
    store: SqliteSyncStore
    embedder: CountingEmbedder
    sinks: list[IndexSink]

    def run(
        self,
        url: str,
        *,
        accept_removals: bool = False,
        resolver: Resolver = system_resolver,
        **options: object,
    ) -> SyncSummary:
        sink = IndexSink(self.embedder, self.index, CompletionRecords(self.state, INDEX))
        self.sinks.append(sink)
        settings = SyncOptions(
            user_agent="candor/test (+https://docs.example.com/contact)",
            token="candor",
            delay_seconds=0,
            accept_removals=accept_removals,
            **options,  # type: ignore[arg-type]
        )
        with SiteSync(
            url, settings, store=self.store, sink=sink, index_name=INDEX, resolver=resolver
        ) as sync:
            return sync.sync()

    def chunks(self) -> list[Chunk]:
        return self.index.fetch(list(self.index.list_ids()))

    def urls(self) -> set[str]:
        return {str(chunk.metadata.get("url")) for chunk in self.chunks()}

    def sources(self) -> set[str]:
        return {chunk.source for chunk in self.chunks()}


@contextmanager
def local_sync(tmp_path: Path) -> Iterator[LocalSync]:
    embedder = CountingEmbedder()
    index = SqliteVectorIndex(
        tmp_path / "index.sqlite3", embedder.dimensions, embedder=embedder.name
    )
    state = SqliteStateStore(tmp_path / "state.sqlite3")
    store = SqliteSyncStore(tmp_path / "state.sqlite3")
    try:
        yield LocalSync(index, state, store, embedder, [])
    finally:
        index.close()
        state.close()
        store.close()


@pytest.fixture
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse any connection to an address that is not loopback, whatever the code
    under test decides: a sync test that got past the guard fails here instead of
    sending a packet off the machine."""
    real = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> None:
        host = address[0] if isinstance(address, tuple) else address
        if not ipaddress.ip_address(str(host).split("%", 1)[0]).is_loopback:
            raise OSError(f"the test refused a connection to {host}")
        real(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)


def counting(resolver: Callable[[str, int], list[str]]) -> tuple[Resolver, list[str]]:
    """A resolver that notes every host it is asked for."""
    asked: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return resolver(host, port)

    return resolve, asked
