"""The sync's HTTP client: conditional GETs of one site, bounded in time and bytes.

httpx makes the requests (timeouts per phase, a connection pool, streamed bodies,
HTTP/1.1 and TLS done right); what it is not trusted to decide is decided here:

- Where: every connection goes through candor.sync.addresses.GuardedBackend,
  which checks each address a host resolves to. Redirects are followed by hand,
  at most MAX_REDIRECTS, and only to the site's own hosts (candor.sync.scope):
  a redirect to another host is refused, not followed. No proxy from the
  environment, no .netrc, no cookies kept or sent, no credentials in a URL.
- How much: a body over the limit is refused before it is read when its
  Content-Length says so, and as soon as it passes the limit otherwise. A
  compressed body (Content-Encoding gzip or deflate) is expanded here, a bounded
  piece at a time, so a gzip bomb stops at the limit instead of filling memory.
- How long: each request has connect and read timeouts, and the whole response
  (every redirect and every byte of the body) a deadline, so a server that drips
  a byte at a time cannot hold a sync.
- How often: each request waits for its turn at its host (candor.sync.polite).
"""

from __future__ import annotations

import http.cookiejar
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

import httpcore
import httpx

from candor.sync.addresses import AddressGuard, GuardedBackend, RefusedAddress
from candor.sync.errors import SyncError
from candor.sync.scope import Scope, normalise

MAX_REDIRECTS = 5
REDIRECTS = frozenset({301, 302, 303, 307, 308})
ACCEPT = "text/html,application/xhtml+xml,text/markdown,text/plain,application/pdf;q=0.9,*/*;q=0.1"
# What a page's body may be compressed with; anything else is refused unread.
_DECODERS = {"gzip": 31, "x-gzip": 31, "deflate": 47}


class FetchError(SyncError):
    """A page that could not be fetched; `kind` says how it counts in a sync."""

    kind = "failed"


class Refused(FetchError):
    """A request the sync must not make (another host, a private address, a scheme)."""

    kind = "refused"


class BlockedAddress(Refused):
    """The host resolves to an address the sync may not connect to (SSRF)."""


class Disallowed(FetchError):
    """robots.txt disallows the URL for candor's user agent."""

    kind = "robots"


class TooLarge(FetchError):
    """A body over the limit (its Content-Length, or as read and expanded)."""

    kind = "failed"


@dataclass(frozen=True, slots=True)
class Fetched:
    """One response, after redirects: the final URL, and the body as expanded."""

    url: str
    status: int
    body: bytes = b""
    content_type: str | None = None
    etag: str | None = None
    last_modified: str | None = None

    @property
    def not_modified(self) -> bool:
        return self.status == 304


class Pacer(Protocol):
    """What decides when a request to a host may start (candor.sync.polite.HostPacer)."""

    def turn(self, host: str) -> AbstractContextManager[None]: ...


def no_robots(url: str) -> bool:
    return True


@dataclass(frozen=True)
class Budget:
    """What one response may take: its body's bytes (expanded) and its seconds."""

    max_bytes: int
    seconds: float


class SiteClient:
    """GETs within one site's scope; thread-safe (httpx's pool is)."""

    def __init__(
        self,
        scope: Scope,
        *,
        guard: AddressGuard,
        user_agent: str,
        pacer: Pacer,
        timeout: float = 30.0,
        allowed: Callable[[str], bool] = no_robots,
        connections: int = 4,
    ) -> None:
        self.scope = scope
        self.pacer = pacer
        self.timeout = timeout
        self.allowed = allowed
        self.backend = GuardedBackend(guard)
        transport = httpx.HTTPTransport(trust_env=False, retries=0)
        # httpx takes no network backend of its own: the pool it would build is
        # replaced by the same pool on the guarded backend.
        transport._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=connections,
            max_keepalive_connections=connections,
            keepalive_expiry=30.0,
            network_backend=self.backend,
        )
        self._client = httpx.Client(
            transport=transport,
            trust_env=False,
            follow_redirects=False,
            cookies=_NoCookies(),
            timeout=httpx.Timeout(min(10.0, timeout), read=timeout, pool=timeout),
            headers={"user-agent": user_agent, "accept": ACCEPT},
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> SiteClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(
        self,
        url: str,
        budget: Budget,
        *,
        etag: str | None = None,
        last_modified: str | None = None,
        robots: bool = True,
    ) -> Fetched:
        """GET `url`, following same-site redirects; a FetchError says why not.

        With `etag` or `last_modified`, the request is conditional and an unchanged
        page answers 304 with no body. `robots=False` only for robots.txt itself.
        """
        deadline = time.monotonic() + budget.seconds
        headers = {"accept-encoding": ", ".join(_DECODERS)}
        if etag:
            headers["if-none-match"] = etag
        if last_modified:
            headers["if-modified-since"] = last_modified
        current = url
        for _ in range(MAX_REDIRECTS + 1):
            if not self.scope.on_site(current):
                raise Refused(f"{current}: not on the site's hosts ({', '.join(self.scope.hosts)})")
            if robots and not self.allowed(current):
                raise Disallowed(f"{current}: disallowed by robots.txt")
            host = httpx.URL(current).host
            with self.pacer.turn(host):
                fetched = self._one(current, headers, budget, deadline)
            if fetched.status not in REDIRECTS:
                return fetched
            if fetched.url == "":
                raise FetchError(f"{current}: HTTP {fetched.status} without a Location")
            current = fetched.url
        raise FetchError(f"{url}: more than {MAX_REDIRECTS} redirects")

    def _one(self, url: str, headers: dict[str, str], budget: Budget, deadline: float) -> Fetched:
        try:
            with self._client.stream("GET", url, headers=headers) as response:
                if response.status_code in REDIRECTS:
                    location = response.headers.get("location")
                    target = _redirect_target(url, location)
                    return Fetched(target, response.status_code)
                body = b""
                if response.status_code == 200:
                    body = _read(response, url, budget, deadline)
                return Fetched(
                    url,
                    response.status_code,
                    body,
                    response.headers.get("content-type"),
                    response.headers.get("etag"),
                    response.headers.get("last-modified"),
                )
        except RefusedAddress as error:
            raise BlockedAddress(f"{url}: {error}") from None
        except httpx.TimeoutException as error:
            raise FetchError(f"{url}: timed out ({type(error).__name__})") from None
        except httpx.HTTPError as error:
            raise FetchError(f"{url}: {type(error).__name__}: {error}") from None


def _redirect_target(url: str, location: str | None) -> str:
    if not location:
        return ""
    try:
        return normalise(str(httpx.URL(url).join(location)))
    except (ValueError, httpx.InvalidURL) as error:
        raise Refused(f"{url}: redirects to {location[:200]!r}, {error}") from None


def _read(response: httpx.Response, url: str, budget: Budget, deadline: float) -> bytes:
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > budget.max_bytes:
        raise TooLarge(f"{url}: {declared} bytes, over the limit of {budget.max_bytes}")
    encoding = response.headers.get("content-encoding", "").strip().lower()
    expand = _expander(encoding, url, budget.max_bytes)
    parts: list[bytes] = []
    for piece in _pieces(response.iter_raw(), url, deadline):
        parts.append(expand(piece))
    return b"".join(parts) + expand(b"", final=True)


def _pieces(raw: Iterator[bytes], url: str, deadline: float) -> Iterator[bytes]:
    for piece in raw:
        if time.monotonic() > deadline:
            raise FetchError(f"{url}: the response took longer than its deadline")
        yield piece


class _Expand:
    """A body's bytes as sent -> as meant, never more than `limit` in all."""

    def __init__(self, wbits: int | None, url: str, limit: int) -> None:
        self._inflater = zlib.decompressobj(wbits) if wbits is not None else None
        self._url = url
        self._limit = limit
        self._produced = 0

    def __call__(self, data: bytes, *, final: bool = False) -> bytes:
        if self._inflater is None:
            return self._count(data)
        out: list[bytes] = []
        pending = data
        try:
            while pending:
                room = self._limit - self._produced
                out.append(self._count(self._inflater.decompress(pending, room + 1)))
                pending = self._inflater.unconsumed_tail
            if final:
                out.append(self._count(self._inflater.flush()))
                if not self._inflater.eof:
                    raise zlib.error("the compressed data ends before its end")
        except zlib.error as error:
            reason = f"a compressed body that cannot be expanded: {error}"
            raise FetchError(f"{self._url}: {reason}") from None
        return b"".join(out)

    def _count(self, data: bytes) -> bytes:
        self._produced += len(data)
        if self._produced > self._limit:
            raise TooLarge(f"{self._url}: more than {self._limit} bytes")
        return data


def _expander(encoding: str, url: str, limit: int) -> _Expand:
    if encoding in ("", "identity"):
        return _Expand(None, url, limit)
    if encoding not in _DECODERS:
        raise FetchError(f"{url}: Content-Encoding {encoding!r} is not one candor reads")
    return _Expand(_DECODERS[encoding], url, limit)


def expand_gzip(data: bytes, limit: int, what: str) -> bytes:
    """A gzip file's content (a sitemap.xml.gz), refused past `limit` bytes expanded."""
    expand = _Expand(31, what, limit)
    return expand(data, final=True)


class _NoCookies(http.cookiejar.CookieJar):
    """A jar that keeps nothing, so no request carries a cookie a site set."""

    def __init__(self) -> None:
        super().__init__(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
