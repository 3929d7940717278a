"""Politeness: robots.txt for candor's user agent, and a pace per host.

robots.txt is read as RFC 9309 says, by protego (a parser that follows it: the
longest match wins, Allow beats Disallow on a tie, `*` and `$` in paths, groups
merged per user agent): a 2xx is parsed, a 4xx means no rules, and a 5xx or no
answer means the whole host is disallowed until it can be read. Its
`Crawl-delay` (or `Request-rate`) slows candor's requests to that host when it
asks for more time between them than CANDOR_SYNC_DELAY_SECONDS.

The pace: at most CANDOR_SYNC_CONCURRENCY requests in flight to one host, and
their starts at least the delay apart, whatever the number of threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from protego import Protego

from candor.sync.errors import SyncError
from candor.sync.fetch import BlockedAddress, Budget, FetchError, Refused, SiteClient

# RFC 9309 2.5: a crawler must read at least 500 KiB of a robots.txt.
ROBOTS_BYTES = 512 * 1024
ROBOTS_SECONDS = 30.0
# A Crawl-delay above this is taken as this: a site asking for an hour between
# requests would never be synced, and the owner is the one who asked for it.
MAX_CRAWL_DELAY = 60.0


class RobotsUnreachable(SyncError):
    """The start host's robots.txt answered 5xx or not at all: nothing may be fetched."""


class HostPacer:
    """Requests to one host: at most `concurrency` at once, starts `interval` apart."""

    def __init__(
        self,
        interval: float,
        concurrency: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.interval = interval
        self.concurrency = max(1, concurrency)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._next: dict[str, float] = {}
        self._slots: dict[str, threading.Semaphore] = {}
        self._intervals: dict[str, float] = {}

    def slow_down(self, host: str, seconds: float) -> None:
        """At least `seconds` between the starts of requests to `host` (its Crawl-delay)."""
        with self._lock:
            self._intervals[host] = max(self.interval, min(seconds, MAX_CRAWL_DELAY))

    def interval_of(self, host: str) -> float:
        return self._intervals.get(host, self.interval)

    @contextmanager
    def turn(self, host: str) -> Iterator[None]:
        with self._lock:
            slots = self._slots.setdefault(host, threading.Semaphore(self.concurrency))
        with slots:
            with self._lock:
                now = self._clock()
                start = max(now, self._next.get(host, now))
                self._next[host] = start + self.interval_of(host)
            if start > now:
                self._sleep(start - now)
            yield


@dataclass
class Robots:
    """One host's robots.txt, as it applies to candor's product token."""

    token: str
    rules: Protego | None = None  # None: no rules (a 4xx), everything allowed
    disallow_all: bool = False

    def allows(self, url: str) -> bool:
        if self.disallow_all:
            return False
        return self.rules is None or self.rules.can_fetch(url, self.token)

    def delay(self) -> float | None:
        """Seconds between requests the host asks of candor, if it asks."""
        if self.rules is None:
            return None
        delays = []
        crawl_delay = self.rules.crawl_delay(self.token)
        if crawl_delay:
            delays.append(float(crawl_delay))
        rate = self.rules.request_rate(self.token)
        if rate is not None and rate.requests:
            delays.append(rate.seconds / rate.requests)
        return max(delays) if delays else None

    def sitemaps(self) -> list[str]:
        return list(self.rules.sitemaps) if self.rules is not None else []


def read_robots(client: SiteClient, origin: str, token: str) -> Robots:
    """The robots.txt of `origin`; RobotsUnreachable when it answers 5xx or not at all."""
    url = f"{origin}/robots.txt"
    try:
        fetched = client.get(url, Budget(ROBOTS_BYTES, ROBOTS_SECONDS), robots=False)
    except BlockedAddress:
        raise
    except Refused:
        # A redirect off the site: as if there were none to read (RFC 9309 2.3.1.2
        # lets a crawler take an unfollowable redirect as "unavailable").
        return Robots(token)
    except FetchError as error:
        raise RobotsUnreachable(f"{url} cannot be read ({error}): nothing is fetched") from None
    if 200 <= fetched.status < 300:
        text = fetched.body.decode("utf-8", errors="replace")
        return Robots(token, Protego.parse(text))
    if 400 <= fetched.status < 500:
        return Robots(token)
    raise RobotsUnreachable(f"{url} answered HTTP {fetched.status}: nothing is fetched")


@dataclass
class RobotsBook:
    """robots.txt per origin of a site, each read once, before the first URL there.

    The start URL's is read first and must be readable (RobotsUnreachable ends
    the sync); another origin's that cannot be read disallows that origin alone.
    """

    client: SiteClient
    token: str
    pacer: HostPacer
    _origins: dict[str, Robots] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def of(self, origin: str, *, required: bool = False) -> Robots:
        with self._lock:
            known = self._origins.get(origin)
        if known is not None:
            return known
        try:
            robots = read_robots(self.client, origin, self.token)
        except RobotsUnreachable:
            if required:
                raise
            robots = Robots(self.token, disallow_all=True)
        delay = robots.delay()
        if delay is not None:
            self.pacer.slow_down(urlsplit(origin).hostname or "", delay)
        with self._lock:
            return self._origins.setdefault(origin, robots)

    def allows(self, url: str) -> bool:
        parts = urlsplit(url)
        return self.of(f"{parts.scheme}://{parts.netloc}").allows(url)
