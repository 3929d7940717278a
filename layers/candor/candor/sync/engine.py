"""One sync of one site: list its pages, fetch each conditionally, write what changed,
and remove what the site removed, unless that is too much to be believed.

The same engine runs `candor sync` (documents go into the local index through the
ingest pipeline, candor.sync.sinks.IndexSink) and the sync function on AWS (they go
into the documents bucket, where S3 events ingest them, candor.sync.sinks.S3Sink).
A sync is three steps, so that the function can stop between invocations and go
on from a saved cursor (`Run`):

1. start: read robots.txt (must be readable: a 5xx or no answer stops the sync,
   RFC 9309's "complete disallow"), then the sitemaps (robots.txt's `Sitemap:`
   lines, else `sitemap.xml` beside the start URL and at the root); a site with
   no sitemap is crawled from the start URL instead, its links followed within
   the site's hosts and folder.
2. work: fetch the pages still to do, a few at a time (the per-host pace and
   concurrency), each with the ETag and Last-Modified its last fetch gave, so an
   unchanged page is a 304 with no body. A page whose bytes hash as before is
   unchanged too. A new or changed page is written to the sink alone. A page that
   answers 404 or 410 is marked gone. Limits on pages, bytes and time stop the
   run early, with a message saying which.
3. finish: a page that a complete listing did not name has been missing for one
   more sync; one missing for CANDOR_SYNC_GRACE syncs, or gone, is removed,
   unless more than CANDOR_SYNC_MAX_REMOVAL_SHARE of the site's known pages would
   go at once: then nothing is removed and the run says so (`held`), until a run
   with `accept_removals`. A listing cut short by a limit or a failed sitemap
   counts nobody as missing: a site that is down or a broken sitemap cannot
   empty the index.

Records are written only when something changed: a second sync of an unchanged
site writes no page record and no document, and embeds nothing.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import httpcore

from candor.sync.addresses import AddressGuard, RefusedAddress, Resolver, system_resolver
from candor.sync.content import HTML, Document, NotADocument, document_of, links_of
from candor.sync.errors import SyncError
from candor.sync.fetch import BlockedAddress, Budget, Fetched, FetchError, SiteClient
from candor.sync.polite import HostPacer, RobotsBook
from candor.sync.records import PageRecord, SiteRecord, SyncStore
from candor.sync.scope import Scope, is_sitemap_url, source_of
from candor.sync.sitemaps import read_sitemaps

logger = logging.getLogger(__name__)

# Failures kept by name in a run's summary; the rest are counted.
MAX_LISTED_FAILURES = 50
CURSOR_VERSION = 1


class SyncStopped(SyncError):
    """The sync cannot go on at all (robots.txt unreadable, the start URL refused)."""


class DocumentRefused(SyncError):
    """The sink would not take a document for the document's own sake (no text in it,
    a PDF that cannot be read): the same bytes would fail again."""


class Sink(Protocol):
    """Where a sync's documents go: the local index, or the documents bucket."""

    def write(self, source: str, url: str, document: Document) -> None:
        """Write one page's document; DocumentRefused for the document's own fault,
        any other exception for a failure that a later sync may get past."""
        ...

    def remove(self, source: str) -> None: ...

    def commit(self) -> set[str]:
        """Make the writes and removals so far final; the sources that now are. A
        source missing from it failed: its page record is left as it was."""
        ...


@dataclass(frozen=True)
class SyncOptions:
    """What a sync may do, from the CANDOR_SYNC_* settings."""

    user_agent: str  # the header
    token: str  # the product token robots.txt is matched against
    delay_seconds: float = 0.5
    concurrency: int = 2
    timeout_seconds: float = 30.0
    max_pages: int = 10_000
    max_page_bytes: int = 10 * 1024 * 1024
    max_total_bytes: int = 1024 * 1024 * 1024
    max_seconds: float = 4 * 3600.0
    grace: int = 2
    max_removal_share: float = 0.3
    hosts: tuple[str, ...] = ()
    accept_removals: bool = False


COUNTS = ("fetched", "unchanged", "changed", "new", "removed", "robots", "refused", "failed")


@dataclass
class Run:
    """A sync in progress, all of it that must outlive an invocation (the cursor)."""

    site: str
    started_at: float
    mode: str = "sitemap"  # or "crawl"
    todo: deque[str] = field(default_factory=deque)
    seen: set[str] = field(default_factory=set)
    complete: bool = True  # the listing (sitemaps or crawl) named every page
    known: int = 0  # the pages with documents when the run started
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    skipped: int = 0  # fetched, but not a document candor reads
    bytes_read: int = 0
    failures: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stopped: str | None = None  # the limit that ended the run early

    def count(self, what: str, url: str | None = None, reason: str | None = None) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1
        if reason is not None and len(self.failures) < MAX_LISTED_FAILURES:
            self.failures.append({"url": url or "", "what": what, "reason": reason[:300]})

    def incomplete(self, why: str) -> None:
        self.complete = False
        self.notes.append(why)

    def to_bytes(self) -> bytes:
        data = {
            "v": CURSOR_VERSION,
            "site": self.site,
            "started_at": self.started_at,
            "mode": self.mode,
            "todo": list(self.todo),
            "seen": sorted(self.seen),
            "complete": self.complete,
            "known": self.known,
            "counts": self.counts,
            "skipped": self.skipped,
            "bytes": self.bytes_read,
            "failures": self.failures,
            "notes": self.notes,
            "stopped": self.stopped,
        }
        return gzip.compress(json.dumps(data).encode(), mtime=0)

    @classmethod
    def from_bytes(cls, blob: bytes) -> Run:
        data = json.loads(gzip.decompress(blob))
        if data.get("v") != CURSOR_VERSION:
            raise ValueError(f"a sync cursor of version {data.get('v')}")
        return cls(
            site=data["site"],
            started_at=data["started_at"],
            mode=data["mode"],
            todo=deque(data["todo"]),
            seen=set(data["seen"]),
            complete=data["complete"],
            known=data["known"],
            counts=data["counts"],
            skipped=data["skipped"],
            bytes_read=data["bytes"],
            failures=data["failures"],
            notes=data["notes"],
            stopped=data["stopped"],
        )


@dataclass
class SyncSummary:
    """What a finished sync did: the counts the owner sees, and whether it held back."""

    site: str
    counts: dict[str, int]
    pages: int  # documents the site has now
    skipped: int = 0
    bytes_read: int = 0
    held: int = 0  # removals held back (over the share), 0 when none
    seconds: float = 0.0
    complete: bool = True
    stopped: str | None = None
    notes: list[str] = field(default_factory=list)
    failures: list[dict[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """False when the owner must look: removals held back, or a limit reached."""
        return not self.held and self.stopped is None

    def to_json(self) -> dict[str, Any]:
        return {
            "site": self.site,
            **self.counts,
            "skipped": self.skipped,
            "pages": self.pages,
            "bytes": self.bytes_read,
            "held": self.held,
            "seconds": round(self.seconds, 3),
            "complete": self.complete,
            "stopped": self.stopped,
            "notes": self.notes,
            "failures": self.failures,
        }

    def line(self) -> str:
        c = self.counts
        text = (
            f"{self.site}: {c['fetched']} fetched, {c['unchanged']} unchanged, "
            f"{c['changed']} changed, {c['new']} new, {c['removed']} removed, "
            f"{c['robots']} skipped by robots, {c['refused']} refused, {c['failed']} failed"
        )
        if self.skipped:
            text += f", {self.skipped} not documents"
        text += f"; {self.pages} pages in {self.seconds:.1f} s"
        return text


@dataclass
class _Result:
    """What fetching one URL gave, handed from a worker thread to the run."""

    url: str
    record: PageRecord | None
    fetched: Fetched | None = None
    error: FetchError | None = None
    document: Document | None = None
    not_document: str | None = None
    links: tuple[str, ...] = ()


class SiteSync:
    """Syncs one site into a sink, keeping its records in a SyncStore."""

    def __init__(
        self,
        start_url: str,
        options: SyncOptions,
        *,
        store: SyncStore,
        sink: Sink,
        index_name: str,
        resolver: Resolver = system_resolver,
        clock: Callable[[], float] = time.time,
        progress: Callable[[Run], None] | None = None,
    ) -> None:
        self.options = options
        self.scope = Scope.of(start_url, options.hosts)
        self.site = self.scope.start
        self.store = store
        self.sink = sink
        self.index_name = index_name
        self.clock = clock
        self.progress = progress
        self.pacer = HostPacer(options.delay_seconds, options.concurrency)
        self.client = SiteClient(
            self.scope,
            guard=AddressGuard.for_site(self.scope.host, resolver=resolver),
            user_agent=options.user_agent,
            pacer=self.pacer,
            timeout=options.timeout_seconds,
            connections=max(2, options.concurrency * 2),
        )
        self.robots = RobotsBook(self.client, options.token, self.pacer)
        self.client.allowed = self.robots.allows
        self._records: dict[str, PageRecord] = {}
        # Record updates to write at the end of `work`: those with a document once
        # the sink has committed it, the others (new validators, a gone mark) as they are.
        self._pending: dict[str, PageRecord] = {}
        self._pending_documents: dict[str, PageRecord] = {}
        self._crawl = False

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> SiteSync:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # 1. start

    def start(self) -> Run:
        """A new run: robots.txt, then the pages the sitemaps list (or the crawl's seed)."""
        self._load_records()
        run = Run(self.site, self.clock())
        run.known = sum(1 for r in self._records.values() if r.indexed)
        try:
            self.client.backend.guard.addresses(self.scope.host, self.scope.port)
        except RefusedAddress as error:
            raise SyncStopped(f"{self.site} is not a public address: {error}") from None
        except httpcore.ConnectError as error:
            raise SyncStopped(f"{self.site} cannot be reached: {error}") from None
        try:
            robots = self.robots.of(self.scope.origin, required=True)
        except BlockedAddress as error:
            raise SyncStopped(str(error)) from None
        if not robots.allows(self.site):
            raise SyncStopped(f"robots.txt disallows {self.site} for {self.options.token!r}")
        roots = self._sitemap_roots(robots.sitemaps())
        listing = read_sitemaps(
            roots,
            lambda url, budget: self.client.get(url, budget),
            self.scope,
            max_pages=self.options.max_pages,
            refused=lambda url, why: run.count("refused", url, why),
        )
        for problem in listing.problems:
            run.incomplete(problem)
        if listing.found:
            run.mode = "sitemap"
            run.todo.extend(listing.urls)
            run.seen.update(listing.urls)
        else:
            # No sitemap: crawl. A sitemap that failed to answer (5xx, no answer) may
            # exist, so the run stays incomplete and counts no page as missing.
            run.mode = "crawl"
            seed = self.site if not is_sitemap_url(self.site) else self.scope.origin + "/"
            run.todo.append(seed)
            run.seen.add(seed)
        logger.info("sync of %s: %s, %d pages to fetch", self.site, run.mode, len(run.todo))
        return run

    def _sitemap_roots(self, declared: Iterable[str]) -> list[str]:
        if is_sitemap_url(self.site):
            return [self.site]
        roots = []
        for url in declared:
            resolved = self.scope.resolve(self.site, url)
            if resolved is not None and self.scope.on_site(resolved):
                roots.append(resolved)
        if roots:
            return roots
        beside = self.scope.origin + self.scope.prefix + "sitemap.xml"
        at_root = self.scope.origin + "/sitemap.xml"
        return list(dict.fromkeys([beside, at_root]))

    # 2. work

    def work(self, run: Run, *, until: float | None = None) -> bool:
        """Fetch pages still to do until none are left (True), or `until` (a clock
        time) comes or a limit stops the run (False only for `until`)."""
        if not self._records:
            self._load_records()
        self._crawl = run.mode == "crawl"
        workers = max(1, self.options.concurrency)
        in_flight: dict[Future[_Result], str] = {}
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sync") as pool:
            submitted = 0
            while run.todo or in_flight:
                # At least one page per call, however late: a chain of invocations
                # always moves on.
                out_of_time = until is not None and self.clock() >= until and submitted > 0
                while run.todo and len(in_flight) < workers * 2 and not out_of_time:
                    if self._limit_reached(run):
                        break
                    url = run.todo.popleft()
                    future = pool.submit(self._fetch, url, self._records.get(url))
                    in_flight[future] = url
                    submitted += 1
                if not in_flight:
                    break
                done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in done:
                    in_flight.pop(future)
                    self._apply(run, future.result())
                    if self.progress is not None:
                        self.progress(run)
        self._commit()
        return not run.todo or run.stopped is not None

    def _limit_reached(self, run: Run) -> bool:
        if run.stopped is not None:
            return True
        o = self.options
        why = None
        if run.bytes_read >= o.max_total_bytes:
            why = f"the total bytes limit ({o.max_total_bytes}, CANDOR_SYNC_MAX_TOTAL_BYTES)"
        elif self.clock() - run.started_at >= o.max_seconds:
            why = f"the time limit ({o.max_seconds:g} s, CANDOR_SYNC_MAX_SECONDS)"
        if why is None:
            return False
        run.stopped = f"stopped at {why}: {len(run.todo)} pages not fetched"
        run.incomplete(run.stopped)
        run.todo.clear()
        return True

    def _fetch(self, url: str, record: PageRecord | None) -> _Result:
        """One page, in a worker thread: the response and what it is; no writes."""
        indexed = record is not None and record.indexed
        result = _Result(url, record)
        try:
            result.fetched = self.client.get(
                url,
                Budget(self.options.max_page_bytes, self.options.timeout_seconds),
                etag=record.etag if indexed and record else None,
                last_modified=record.last_modified if indexed and record else None,
            )
        except FetchError as error:
            result.error = error
            return result
        fetched = result.fetched
        if fetched.status != 200:
            return result
        try:
            result.document = document_of(fetched.url, fetched.body, fetched.content_type)
        except NotADocument as why:
            result.not_document = str(why)
            return result
        if self._crawl and result.document.media_type == HTML:
            result.links = tuple(links_of(fetched.url, result.document.data))
        return result

    def _apply(self, run: Run, result: _Result) -> None:
        """What a fetch means for the run, the records and the sink (the run's thread)."""
        url, record = result.url, result.record
        if result.error is not None:
            kind = result.error.kind
            if kind == "robots" or kind == "refused":
                run.seen.discard(url)
            run.count(kind, url, str(result.error) if kind != "robots" else None)
            if run.mode == "crawl" and record is not None and kind == "failed":
                self._follow(run, url, record.links)
            elif run.mode == "crawl" and kind == "failed":
                run.incomplete(f"{url} failed, so the links on it are unknown")
            return
        fetched = result.fetched
        assert fetched is not None
        run.count("fetched")
        run.bytes_read += len(fetched.body)
        if fetched.status == 304 and record is not None and record.indexed:
            run.count("unchanged")
            self._still_listed(record)
            if run.mode == "crawl":
                self._follow(run, url, record.links)
            return
        if fetched.status in (404, 410):
            if record is not None and record.indexed:
                if not record.gone:
                    self._pending[url] = replace(record, gone=True)
                logger.info("gone: %s (HTTP %d)", url, fetched.status)
            else:
                run.count("failed", url, f"HTTP {fetched.status}")
            return
        if fetched.status != 200:
            run.count("failed", url, f"HTTP {fetched.status}")
            if run.mode == "crawl":
                if record is not None:
                    self._follow(run, url, record.links)
                else:
                    run.incomplete(f"{url} answered HTTP {fetched.status}; its links are unknown")
            return
        if fetched.url != url and fetched.url in run.seen:
            # A redirect to a page the run already has: one document, not two.
            run.seen.discard(url)
            return
        run.seen.add(fetched.url)
        if result.not_document is not None:
            run.skipped += 1
            run.seen.discard(url)
            return
        document = result.document
        assert document is not None
        links = self._follow(run, fetched.url, result.links) if run.mode == "crawl" else ()
        digest = _content_hash(document)
        source = record.source if record is not None else source_of(url)
        updated = PageRecord(
            url=url,
            source=source,
            etag=fetched.etag,
            last_modified=fetched.last_modified,
            content_hash=digest,
            links=links,
        )
        if record is not None and record.content_hash == digest:
            run.count("unchanged")
            if updated != record:
                self._pending[url] = updated
            return
        try:
            self.sink.write(source, fetched.url, document)
        except DocumentRefused as error:
            run.count("failed", url, str(error))
            return
        except Exception as error:  # a backend's failure: the next sync tries again
            logger.exception("not written: %s", url)
            run.count("failed", url, f"{type(error).__name__}: {error}")
            return
        run.count("changed" if record is not None and record.indexed else "new")
        self._pending_documents[url] = updated

    def _still_listed(self, record: PageRecord) -> None:
        if record.missing or record.gone:
            self._pending[record.url] = replace(record, missing=0, gone=False)

    def _follow(self, run: Run, url: str, links: Iterable[str]) -> tuple[str, ...]:
        """Queue a crawled page's on-site links not seen yet; its links, kept."""
        kept: list[str] = []
        for link in links:
            normal = self.scope.resolve(url, link)
            if normal is None or not self.scope.on_site(normal):
                continue
            if not self.scope.in_site(normal):
                continue
            kept.append(normal)
            if normal in run.seen:
                continue
            if len(run.seen) >= self.options.max_pages:
                if run.complete:
                    run.incomplete(f"the crawl found more than {self.options.max_pages} pages")
                continue
            run.seen.add(normal)
            run.todo.append(normal)
        return tuple(dict.fromkeys(kept))

    def _commit(self) -> None:
        committed = self.sink.commit()
        ready = list(self._pending.values())
        ready += [r for r in self._pending_documents.values() if r.source in committed]
        if ready:
            self.store.put_pages(self.index_name, self.site, ready)
            for record in ready:
                self._records[record.url] = record
        self._pending.clear()
        self._pending_documents.clear()

    # 3. finish

    def finish(self, run: Run) -> SyncSummary:
        """Count the missing, remove what is gone or missing too long (within the
        share), and record the site's summary."""
        self._load_records()
        grace = self.options.grace
        updates: list[PageRecord] = []
        stale: list[str] = []
        removals: list[PageRecord] = []
        for record in self._records.values():
            if record.url in run.seen:
                if record.gone and record.indexed:
                    removals.append(record)
                continue
            if not run.complete:
                if record.gone and record.indexed:
                    removals.append(record)
                continue
            missing = replace(record, missing=record.missing + 1)
            if not record.indexed:
                if missing.missing >= grace:
                    stale.append(record.url)
                else:
                    updates.append(missing)
                continue
            updates.append(missing)
            if missing.missing >= grace or record.gone:
                removals.append(missing)
        if updates:
            self.store.put_pages(self.index_name, self.site, updates)
        if stale:
            self.store.delete_pages(self.index_name, self.site, stale)
        held = 0
        share = len(removals) / run.known if run.known else 0.0
        if removals and share > self.options.max_removal_share and not self.options.accept_removals:
            held = len(removals)
            run.notes.append(
                f"{held} of {run.known} pages would be removed ({share:.0%}, over the "
                f"{self.options.max_removal_share:.0%} of CANDOR_SYNC_MAX_REMOVAL_SHARE): "
                "nothing removed; run again with --accept-removals to remove them"
            )
        elif removals:
            self._remove(run, removals)
        pages = sum(1 for r in self.store.pages(self.index_name, self.site) if r.indexed)
        summary = SyncSummary(
            site=self.site,
            counts=dict(run.counts),
            pages=pages,
            skipped=run.skipped,
            bytes_read=run.bytes_read,
            held=held,
            seconds=self.clock() - run.started_at,
            complete=run.complete,
            stopped=run.stopped,
            notes=list(run.notes),
            failures=list(run.failures),
        )
        self.store.put_site(
            self.index_name,
            SiteRecord(self.site, pages, self.clock(), summary.to_json()),
        )
        return summary

    def _remove(self, run: Run, removals: list[PageRecord]) -> None:
        for record in removals:
            try:
                self.sink.remove(record.source)
            except Exception as error:
                logger.exception("not removed: %s", record.url)
                run.count("failed", record.url, f"not removed: {type(error).__name__}: {error}")
        committed = self.sink.commit()
        done = [r.url for r in removals if r.source in committed]
        self.store.delete_pages(self.index_name, self.site, done)
        run.counts["removed"] += len(done)

    def _load_records(self) -> None:
        self._records = {r.url: r for r in self.store.pages(self.index_name, self.site)}

    def sync(self) -> SyncSummary:
        """start, work and finish in one go (`candor sync`)."""
        run = self.start()
        self.work(run)
        return self.finish(run)


def _content_hash(document: Document) -> str:
    digest = hashlib.sha256(document.media_type.encode())
    digest.update(b"\x00")
    digest.update(document.data)
    return digest.hexdigest()
