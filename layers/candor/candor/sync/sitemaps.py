"""Sitemaps: the URLs a site lists, from sitemap files, indexes of them, gzipped or not.

The format (sitemaps.org) is two documents: a `<urlset>` of `<url><loc>` and a
`<sitemapindex>` of `<sitemap><loc>`, either of them possibly gzipped; a plain text
file of one URL a line is allowed too. It is read here rather than with a sitemap
library because those fetch for themselves (outside the sync's checked, paced and
bounded client) and have expanded a gzip or an entity without a bound (the
ultimate-sitemap-parser advisories GHSA-8823-qg2x-pv9f and GHSA-p5wc-9w9r-m232,
fixed in 2026). The XML is parsed by defusedxml with DTDs forbidden: a sitemap
has no business declaring entities, so a billion-laughs or external-entity
document is refused before anything is expanded. A gzipped file is expanded to at
most MAX_SITEMAP_BYTES (the protocol's own 50 MB), and the body as fetched is
capped the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from xml.etree.ElementTree import Element, ParseError

import defusedxml.ElementTree as SafeTree
from defusedxml import DefusedXmlException

from candor.sync.errors import SyncError
from candor.sync.fetch import Budget, Fetched, FetchError, expand_gzip
from candor.sync.scope import Scope, normalise

logger = logging.getLogger(__name__)

MAX_SITEMAP_BYTES = 50 * 1024 * 1024
SITEMAP_SECONDS = 120.0
# Indexes of indexes are not in the protocol but are found in the wild; deeper
# than this is a loop or a trap.
MAX_DEPTH = 3
MAX_SITEMAPS = 1000


class SitemapError(SyncError):
    """A sitemap that could not be read; the listing it was part of is incomplete."""


@dataclass
class Listing:
    """What the sitemaps of a site list: page URLs (in order, once each), and how
    the reading went. `complete` is False when a sitemap could not be read or a
    limit cut the list short: pages missing from an incomplete listing are not
    counted as missing from the site."""

    urls: list[str] = field(default_factory=list)
    sitemaps: int = 0
    complete: bool = True
    problems: list[str] = field(default_factory=list)
    found: bool = False  # at least one sitemap was read

    def incomplete(self, why: str) -> None:
        self.complete = False
        self.problems.append(why)


def parse(data: bytes, url: str) -> tuple[list[str], list[str]]:
    """(page URLs, sitemap URLs) listed in one sitemap file's bytes (gzipped or not)."""
    if data[:2] == b"\x1f\x8b":
        data = expand_gzip(data, MAX_SITEMAP_BYTES, url)
    stripped = data.lstrip()
    if stripped[:1] != b"<":
        # A text sitemap: one URL a line.
        lines = stripped.decode("utf-8", errors="replace").splitlines()
        return [line.strip() for line in lines if line.strip().startswith("http")], []
    try:
        root: Element = SafeTree.fromstring(data, forbid_dtd=True)
    except (DefusedXmlException, ParseError) as error:
        raise SitemapError(f"{url}: not a sitemap this parser accepts ({error})") from None
    kind = _local(root.tag)
    if kind not in ("urlset", "sitemapindex"):
        raise SitemapError(f"{url}: a <{kind}> document, not a sitemap")
    item = "url" if kind == "urlset" else "sitemap"
    locations = [
        (loc.text or "").strip()
        for child in root
        if _local(child.tag) == item
        for loc in child
        if _local(loc.tag) == "loc"
    ]
    locations = [loc for loc in locations if loc]
    return (locations, []) if kind == "urlset" else ([], locations)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def read_sitemaps(
    roots: list[str],
    fetch: Callable[[str, Budget], Fetched],
    scope: Scope,
    *,
    max_pages: int,
    refused: Callable[[str, str], None],
) -> Listing:
    """The page URLs listed by the sitemaps at `roots`, indexes followed.

    `fetch` GETs a URL within a budget (the site's client). A listed URL on another
    host (a page or a sitemap) is given to `refused` with the reason and not
    fetched; a page of the site's host outside its folder is left out. At most
    `max_pages` URLs.
    """
    listing = Listing()
    seen_pages: set[str] = set()
    seen_maps: set[str] = set()
    todo = [(url, 0) for url in roots]
    while todo:
        url, depth = todo.pop(0)
        if url in seen_maps:
            continue
        seen_maps.add(url)
        if len(seen_maps) > MAX_SITEMAPS:
            listing.incomplete(f"more than {MAX_SITEMAPS} sitemaps; the rest not read")
            break
        try:
            fetched = fetch(url, Budget(MAX_SITEMAP_BYTES, SITEMAP_SECONDS))
        except FetchError as error:
            listing.incomplete(f"sitemap {url}: {error}")
            continue
        if fetched.status != 200:
            # A root that is not there is a site without that sitemap; a listed one
            # that is not there leaves the listing incomplete.
            if not 400 <= fetched.status < 500 or depth > 0:
                listing.incomplete(f"sitemap {url}: HTTP {fetched.status}")
            continue
        try:
            pages, children = parse(fetched.body, url)
        except (SitemapError, FetchError) as error:
            listing.incomplete(str(error))
            continue
        listing.found = True
        listing.sitemaps += 1
        for child in children:
            normal = _normal(child)
            if normal is None or not scope.on_site(normal):
                refused(child, "a sitemap on another host")
            elif depth + 1 > MAX_DEPTH:
                listing.incomplete(f"sitemap {child}: nested deeper than {MAX_DEPTH}")
            else:
                todo.append((normal, depth + 1))
        for page in pages:
            normal = _normal(page)
            if normal is None or not scope.on_site(normal):
                refused(page, "listed by a sitemap, on another host")
                continue
            if not scope.in_site(normal) or normal in seen_pages:
                continue
            if len(listing.urls) >= max_pages:
                listing.incomplete(f"the sitemaps list more than {max_pages} pages")
                return listing
            seen_pages.add(normal)
            listing.urls.append(normal)
    return listing


def _normal(url: str) -> str | None:
    try:
        return normalise(url)
    except ValueError:
        return None
