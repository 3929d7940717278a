"""`candor sync` of a docs site served on loopback, into the embedded default's index.

The site (tests/support/sites.py) has a robots.txt with a disallowed folder, a
crawl delay and a `Sitemap:` line, a sitemap index with a plain and a nested
gzipped sitemap, an off-site URL in a sitemap and an off-site link. Each test
syncs it, changes it as a real site changes, and syncs again.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from candor.api.app import create_app
from candor.backends.hashing_embedder import HashingEmbedder
from candor.deps import Deps
from candor.settings import Settings
from candor.sync.engine import SyncStopped
from candor.sync.polite import RobotsUnreachable
from tests.support.edge import allowing, browser
from tests.support.fakes import ScriptedChatModel
from tests.support.site_server import SiteServer
from tests.support.sites import (
    INDEX,
    OFF_SITE,
    PRIVATE,
    LocalSync,
    build_site,
    drop_from_sitemap,
    html,
    listed_pages,
    local_sync,
    loopback_only,
)

__all__ = ["loopback_only"]

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("loopback_only")]


@pytest.fixture
def site() -> Iterator[SiteServer]:
    with SiteServer() as server:
        build_site(server)
        yield server


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalSync]:
    with local_sync(tmp_path) as parts:
        yield parts


def page_url(site: SiteServer, path: str) -> str:
    return f"{site.url.rstrip('/')}{path}"


def index_writes(local: LocalSync) -> int:
    """Commits to the index file by anyone else, as SQLite counts them for this reader."""
    db = sqlite3.connect(local.index.path)
    try:
        return int(db.execute("PRAGMA data_version").fetchone()[0])
    finally:
        db.close()


def test_a_first_sync_ingests_every_listed_page_with_a_citation_link_to_it(
    site: SiteServer, local: LocalSync
) -> None:
    summary = local.run(site.url)

    # Every page the sitemap index and its nested gzipped sitemap list is in the index,
    # each chunk linking to the page it came from.
    assert local.urls() == {page_url(site, path) for path in listed_pages()}
    assert summary.counts["new"] == len(listed_pages())
    assert summary.pages == len(listed_pages())
    assert site.asked("/sitemaps/more.xml.gz"), "the nested gzipped sitemap was read"
    # robots.txt disallows /private/: never requested; the off-site URL: refused.
    assert site.asked(PRIVATE) == []
    assert summary.counts["robots"] == 1
    assert summary.counts["refused"] == 1
    assert [f["url"] for f in summary.failures if f["what"] == "refused"] == [OFF_SITE]
    # Every request said who candor is.
    assert {r.headers["user-agent"] for r in site.requests} == {
        "candor/test (+https://docs.example.com/contact)"
    }


def test_a_visitors_citation_links_to_the_live_page(
    site: SiteServer, local: LocalSync, settings: Settings
) -> None:
    local.run(site.url)
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": ["Run kite launch with the wind flag [1]."],
        }
    )
    deps = allowing(
        Deps(settings, chat, HashingEmbedder(384), local.index, None, local.state),
        cache_enabled=False,
    )
    http = browser(create_app(lambda: deps))

    answer = http.post("/ask", json={"question": "How do I launch a kite with kite launch?"})

    citations = answer.json()["citations"]
    assert citations, answer.json()
    assert citations[0]["url"] == page_url(site, "/guide.html")


def test_a_second_sync_of_an_unchanged_site_writes_nothing_and_embeds_nothing(
    site: SiteServer, local: LocalSync
) -> None:
    local.run(site.url)
    records = local.store.pages(INDEX, site.url)
    version = local.state.corpus_version(INDEX)
    chunks = sorted(local.index.list_ids())
    local.embedder.reset()
    before = len(site.requests)
    writes = index_writes(local)

    summary = local.run(site.url)

    # Every page was asked for conditionally and answered 304 ...
    page_requests = [r for r in site.requests[before:] if r.path in listed_pages()]
    assert len(page_requests) == len(listed_pages())
    assert all("if-none-match" in r.headers for r in page_requests)
    assert summary.counts["unchanged"] == len(listed_pages())
    assert summary.counts["new"] == summary.counts["changed"] == summary.counts["removed"] == 0
    # ... and nothing was embedded or written: not the index, not the corpus
    # version, not a page record.
    assert local.embedder.texts == 0
    assert index_writes(local) == writes
    assert sorted(local.index.list_ids()) == chunks
    assert local.state.corpus_version(INDEX) == version
    assert local.store.pages(INDEX, site.url) == records


def test_a_changed_page_is_embedded_again_alone(site: SiteServer, local: LocalSync) -> None:
    local.run(site.url)
    others = {c.id: c for c in local.chunks() if not c.source.endswith("/faq.html")}
    local.embedder.reset()
    site.page("/faq.html", html("FAQ", "Kites no longer tangle: strings are now magnetic."))

    summary = local.run(site.url)

    assert summary.counts["changed"] == 1
    assert summary.counts["unchanged"] == len(listed_pages()) - 1
    faq = [c for c in local.chunks() if c.source.endswith("/faq.html")]
    assert "magnetic" in " ".join(c.text for c in faq)
    assert local.embedder.texts == len(faq)
    assert {c.id: c for c in local.chunks() if not c.source.endswith("/faq.html")} == others


def test_a_page_that_turns_404_is_gone_from_the_index_after_the_next_sync(
    site: SiteServer, local: LocalSync
) -> None:
    local.run(site.url)
    site.remove("/faq.html")  # still listed by the sitemap, but not found

    summary = local.run(site.url)

    assert summary.counts["removed"] == 1
    assert page_url(site, "/faq.html") not in local.urls()
    assert len(local.urls()) == len(listed_pages()) - 1
    assert page_url(site, "/faq.html") not in {r.url for r in local.store.pages(INDEX, site.url)}


def test_a_page_that_answers_410_is_removed_at_once(site: SiteServer, local: LocalSync) -> None:
    local.run(site.url)
    site.page("/api.html", "<h1>Gone</h1>", status=410, validators=False)

    local.run(site.url)

    assert page_url(site, "/api.html") not in local.urls()


def test_a_page_dropped_from_the_sitemap_leaves_after_the_grace_syncs(
    site: SiteServer, local: LocalSync
) -> None:
    local.run(site.url)
    drop_from_sitemap(site, "/install.html")  # still served, no longer listed

    first = local.run(site.url, grace=2)
    assert page_url(site, "/install.html") in local.urls()
    assert first.counts["removed"] == 0
    (record,) = [r for r in local.store.pages(INDEX, site.url) if r.url.endswith("/install.html")]
    assert record.missing == 1

    second = local.run(site.url, grace=2)
    assert second.counts["removed"] == 1
    assert page_url(site, "/install.html") not in local.urls()


def test_a_page_listed_again_before_its_grace_ends_stays(
    site: SiteServer, local: LocalSync
) -> None:
    local.run(site.url)
    drop_from_sitemap(site, "/install.html")
    local.run(site.url, grace=2)
    build_site(site)  # listed again

    local.run(site.url, grace=2)
    local.run(site.url, grace=2)

    assert page_url(site, "/install.html") in local.urls()
    (record,) = [r for r in local.store.pages(INDEX, site.url) if r.url.endswith("/install.html")]
    assert record.missing == 0


def test_a_sync_that_would_remove_too_many_pages_removes_none_until_accepted(
    site: SiteServer, local: LocalSync
) -> None:
    local.run(site.url)
    # A broken deploy: the sitemap lists one page, every other page answers 404.
    site.sitemap("/sitemaps/pages.xml", ["/"])
    site.sitemap("/sitemaps/more.xml.gz", [], gzipped=True)
    for path in listed_pages()[1:]:
        site.remove(path)

    held = local.run(site.url, grace=1)

    assert held.held == len(listed_pages()) - 1
    assert held.counts["removed"] == 0
    assert not held.ok
    assert any("--accept-removals" in note for note in held.notes)
    assert len(local.urls()) == len(listed_pages())

    accepted = local.run(site.url, grace=1, accept_removals=True)

    assert accepted.counts["removed"] == len(listed_pages()) - 1
    assert local.urls() == {page_url(site, "/")}


def test_a_site_that_is_down_removes_nothing(site: SiteServer, local: LocalSync) -> None:
    local.run(site.url)
    site.page("/robots.txt", "down for maintenance", status=503, validators=False)

    with pytest.raises(RobotsUnreachable):
        local.run(site.url, grace=1)

    assert len(local.urls()) == len(listed_pages())


def test_a_sitemap_that_fails_counts_no_page_missing(site: SiteServer, local: LocalSync) -> None:
    local.run(site.url)
    site.page("/sitemaps/more.xml.gz", "oops", status=500, validators=False)

    summary = local.run(site.url, grace=1, accept_removals=True)

    assert not summary.complete
    assert summary.counts["removed"] == 0
    assert len(local.urls()) == len(listed_pages())
    assert all(r.missing == 0 for r in local.store.pages(INDEX, site.url))


def test_robots_crawl_delay_spaces_the_requests(local: LocalSync) -> None:
    with SiteServer() as site:
        build_site(site, crawl_delay=0.15)
        began = time.monotonic()
        local.run(site.url)
        arrivals = [r.at for r in site.requests if r.path in listed_pages()]

    # Once robots.txt is read, requests to the host start at least 0.15 s apart (the
    # sitemap index, its two sitemaps, then the pages), so the last page cannot arrive
    # before that many intervals have passed, however the machine's load bunches the
    # arrivals.
    before_pages = 3
    intervals = before_pages + len(listed_pages()) - 1
    assert len(arrivals) == len(listed_pages())
    assert max(arrivals) - began >= 0.15 * intervals


def test_a_site_without_a_sitemap_is_crawled_within_its_folder(local: LocalSync) -> None:
    with SiteServer() as site:
        site.page("/robots.txt", "User-agent: *\nDisallow:\n", content_type="text/plain")
        site.page("/docs/", html("Home", "The kite manual.", ("a.html", "sub/b.html", OFF_SITE)))
        site.page("/docs/a.html", html("A", "Kites fly.", ("/docs/sub/b.html", "/blog/")))
        site.page("/docs/sub/b.html", html("B", "Kites land.", ("../", "#top")))
        site.page("/blog/", html("Blog", "Not the docs."))
        start = page_url(site, "/docs/")

        first = local.run(start)
        before = len(site.requests)
        second = local.run(start)

    docs = {page_url(site, p) for p in ("/docs/", "/docs/a.html", "/docs/sub/b.html")}
    assert local.urls() == docs
    assert first.counts["new"] == 3
    assert not site.asked("/blog/")
    # The second crawl reads the links of unchanged pages from their records.
    assert second.counts["unchanged"] == 3
    assert second.counts["removed"] == 0
    assert {r.path for r in site.requests[before:]} >= {"/docs/", "/docs/a.html"}


def test_only_html_markdown_text_and_pdf_are_kept(local: LocalSync) -> None:
    from tests.support.pdfs import make_pdf

    with SiteServer() as site:
        site.page("/robots.txt", "", content_type="text/plain")
        site.sitemap(
            "/sitemap.xml",
            ["/notes.md", "/readme.txt", "/manual.pdf", "/logo.png", "/app.js", "/page"],
        )
        site.page("/notes.md", "# Notes\n\nKites love *wind*.\n", content_type="text/plain")
        site.page("/readme.txt", "Read me: kites.", content_type="text/plain; charset=utf-8")
        site.page(
            "/manual.pdf",
            make_pdf([["The kite manual in PDF form."]]),
            content_type="application/octet-stream",
        )
        site.page("/logo.png", b"\x89PNG\r\n\x1a\n" + bytes(100), content_type="image/png")
        site.page("/app.js", "alert(1)", content_type="application/javascript")
        site.page("/page", "<!DOCTYPE html><title>T</title><p>Untyped HTML.</p>", content_type=None)

        summary = local.run(site.url)

    kept = {url.rsplit("/", 1)[1] for url in local.urls()}
    assert kept == {"notes.md", "readme.txt", "manual.pdf", "page"}
    assert summary.skipped == 2


def test_a_page_in_another_charset_is_read_as_that_charset(local: LocalSync) -> None:
    with SiteServer() as site:
        site.page("/robots.txt", "", content_type="text/plain")
        site.sitemap("/sitemap.xml", ["/latin.html"])
        body = "<html><title>Caf\u00e9</title><p>Cr\u00e8me br\u00fbl\u00e9e kites.</p></html>"
        site.page("/latin.html", body.encode("latin-1"), content_type="text/html; charset=latin-1")

        local.run(site.url)

    (chunk,) = local.chunks()
    assert "Cr\u00e8me br\u00fbl\u00e9e" in chunk.text


def test_the_start_url_may_be_the_sitemap_itself(site: SiteServer, local: LocalSync) -> None:
    summary = local.run(page_url(site, "/sitemaps/pages.xml"))

    assert summary.counts["new"] == 4


def test_a_start_url_that_is_refused_stops_the_sync(local: LocalSync) -> None:
    with pytest.raises(SyncStopped):
        local.run("http://169.254.169.254.nip.invalid/", resolver=lambda h, p: ["169.254.169.254"])
