"""Sitemaps are read by a parser made for hostile XML, and expanded within a bound."""

from __future__ import annotations

import gzip

import pytest

from candor.sync.fetch import FetchError, TooLarge, expand_gzip
from candor.sync.sitemaps import SitemapError, parse

pytestmark = pytest.mark.unit

URLSET = (
    b'<?xml version="1.0" encoding="UTF-8"?>'
    b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
    b"<url><loc> https://docs.example.com/a.html </loc><lastmod>2026-01-01</lastmod></url>"
    b"<url><loc>https://docs.example.com/b.html</loc></url></urlset>"
)
BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>&lol9;</loc></url></urlset>"""
EXTERNAL_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE urlset [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>&secret;</loc></url></urlset>"""


def test_a_urlset_lists_its_pages() -> None:
    assert parse(URLSET, "s.xml") == (
        ["https://docs.example.com/a.html", "https://docs.example.com/b.html"],
        [],
    )


def test_an_index_lists_its_sitemaps() -> None:
    index = (
        b'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<sitemap><loc>https://docs.example.com/s1.xml.gz</loc></sitemap></sitemapindex>"
    )
    assert parse(index, "i.xml") == ([], ["https://docs.example.com/s1.xml.gz"])


def test_a_gzipped_sitemap_is_read() -> None:
    assert parse(gzip.compress(URLSET), "s.xml.gz")[0][0] == "https://docs.example.com/a.html"


def test_a_text_sitemap_is_one_url_a_line() -> None:
    text = b"https://docs.example.com/a.html\n\nhttps://docs.example.com/b.html\n"
    assert parse(text, "s.txt")[0] == [
        "https://docs.example.com/a.html",
        "https://docs.example.com/b.html",
    ]


@pytest.mark.parametrize("hostile", [BILLION_LAUGHS, EXTERNAL_ENTITY])
def test_a_sitemap_that_declares_entities_is_refused_unexpanded(hostile: bytes) -> None:
    with pytest.raises(SitemapError):
        parse(hostile, "bomb.xml")


def test_a_document_that_is_not_a_sitemap_is_refused() -> None:
    with pytest.raises(SitemapError):
        parse(b"<html><body>hello</body></html>", "s.xml")


def test_a_gzip_bomb_stops_at_the_limit() -> None:
    bomb = gzip.compress(bytes(50 * 1024 * 1024), compresslevel=9)  # 50 MB of zeros
    assert len(bomb) < 100_000

    with pytest.raises(TooLarge):
        expand_gzip(bomb, 1024 * 1024, "bomb.xml.gz")


def test_a_corrupt_gzip_is_a_failure_not_a_crash() -> None:
    with pytest.raises(FetchError):
        expand_gzip(b"\x1f\x8b\x08\x00garbage", 1024, "bad.gz")
