"""Which URLs belong to a synced site, in one spelling each, and the document each becomes.

A site is its start URL. A page belongs to it when it is http(s) on the start
URL's host (or a host the owner lists), on the start URL's port or the scheme's
default one, and under the start URL's folder: `https://example.com/docs/` syncs
`/docs/...`, not the blog beside it. The scheme is not part of a page's identity,
so a site that moved to https keeps its pages.

Each page is a document whose source (its S3 key on AWS) is
`site/<host>[:port]/<path>`: readable in a listing, and the same for the same
page whatever its scheme. A path that ends in "/" becomes ".../index.html", as a
web server serves it, so `/guide/` and `/guide/index.html` are one document; a
query string is kept as a short hash, since a key has no room for any query.
"""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import dataclass
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

from candor.sync.errors import SyncError
from candor.urls import MAX_URL_CHARS

SOURCE_PREFIX = "site/"
DEFAULT_PORTS = {"http": 80, "https": 443}
# S3 keys are at most 1024 bytes; a longer page path is cut and given a hash.
MAX_SOURCE_BYTES = 900
# Characters a path keeps as they are; anything else is percent-encoded once.
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"


class BadSiteUrl(SyncError):
    """A start URL candor cannot sync (not http(s), no host, credentials in it)."""


def normalise(url: str) -> str:
    """One spelling per URL: lower-case scheme and host, no default port, no fragment,
    no userinfo, `..` resolved, the path's escapes made uniform. Raises ValueError."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise ValueError(f"not an http(s) URL: {url[:200]!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"a URL with credentials in it is never fetched: {_redacted(url)}")
    host = (parts.hostname or "").lower().rstrip(".")
    if not host:
        raise ValueError(f"no host in {url[:200]!r}")
    if not host.isascii():
        # An internationalised name in its ASCII form, as DNS and S3 metadata take it.
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise ValueError(f"not a host name: {host[:100]!r}") from None
    port = parts.port  # raises ValueError for a bad port
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != DEFAULT_PORTS[scheme]:
        netloc = f"{netloc}:{port}"
    path = parts.path or "/"
    trailing = path.endswith("/")
    path = "/" + posixpath.normpath(path).lstrip("/")
    if trailing and path != "/":
        path += "/"
    # Existing escapes are kept as they are ("%2F" is not a "/"); spaces and other
    # characters a URL cannot hold are escaped.
    path = quote(path, safe=_PATH_SAFE)
    query = quote(parts.query, safe=_PATH_SAFE + "?")
    normal = urlunsplit((scheme, netloc, path, query, ""))
    if len(normal) > MAX_URL_CHARS:
        raise ValueError(f"a URL longer than {MAX_URL_CHARS} characters: {normal[:200]}...")
    return normal


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    return urlunsplit((parts.scheme, host, parts.path, "", ""))[:200]


def source_of(url: str) -> str:
    """The document source (S3 key) of a normalised page URL."""
    parts = urlsplit(url)
    path = parts.path or "/"
    if path.endswith("/"):
        path += "index.html"
    source = f"{SOURCE_PREFIX}{parts.netloc}{path}"
    if parts.query:
        source += f"~q{hashlib.sha256(parts.query.encode()).hexdigest()[:12]}"
    if len(source.encode()) > MAX_SOURCE_BYTES:
        digest = hashlib.sha256(url.encode()).hexdigest()[:16]
        source = source.encode()[: MAX_SOURCE_BYTES - 20].decode(errors="ignore") + f"~{digest}"
    return source


@dataclass(frozen=True)
class Scope:
    """The start URL, and the hosts, port and folder its pages live in."""

    start: str
    hosts: frozenset[str]
    prefix: str

    @classmethod
    def of(cls, start_url: str, extra_hosts: tuple[str, ...] = ()) -> Scope:
        try:
            start = normalise(start_url)
        except ValueError as error:
            raise BadSiteUrl(str(error)) from None
        parts = urlsplit(start)
        prefix = parts.path if parts.path.endswith("/") else posixpath.dirname(parts.path) + "/"
        if is_sitemap_url(start):
            prefix = "/"
        hosts = {parts.hostname or ""} | {h.strip().lower().rstrip(".") for h in extra_hosts}
        return cls(start, frozenset(h for h in hosts if h), prefix)

    @property
    def host(self) -> str:
        return urlsplit(self.start).hostname or ""

    @property
    def origin(self) -> str:
        parts = urlsplit(self.start)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def port(self) -> int:
        parts = urlsplit(self.start)
        return parts.port or DEFAULT_PORTS[parts.scheme]

    def on_site(self, url: str) -> bool:
        """Whether a request to `url` may be made at all: http(s), a site host, its port."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            return False
        scheme = parts.scheme.lower()
        if scheme not in DEFAULT_PORTS or parts.username is not None:
            return False
        host = (parts.hostname or "").lower().rstrip(".")
        if host not in self.hosts:
            return False
        effective = port or DEFAULT_PORTS[scheme]
        return effective == DEFAULT_PORTS[scheme] or (host == self.host and effective == self.port)

    def in_site(self, url: str) -> bool:
        """Whether `url` is one of the site's pages: on the site and under its folder."""
        return self.on_site(url) and (urlsplit(url).path or "/").startswith(self.prefix)

    def resolve(self, base: str, link: str) -> str | None:
        """A link on page `base` as a normalised URL, or None if it is not a fetchable URL."""
        try:
            return normalise(urljoin(base, link.strip()))
        except ValueError:
            return None


def is_sitemap_url(url: str) -> bool:
    path = urlsplit(url).path.lower()
    return path.endswith((".xml", ".xml.gz"))
