"""The sync function on AWS: a schedule starts each site's sync, SQS carries it on.

The schedule (EventBridge Scheduler, infra/template.yaml) invokes the function with
`{"sync": "start"}`; it sends one message per site of CANDOR_SYNC_SITES to the sync
queue. Each message is one invocation's work on one site:

    {"site": URL, "action": "start" | "continue", "accept_removals": false}

The invocation takes the site's lease (so a second delivery of a message, or a
start while a sync runs, does nothing), loads the sync in progress from its cursor
(candor.sync.engine.Run, in the state table), fetches pages until its time is
nearly up, saves the cursor and sends a "continue" message; the invocation that
fetches the last page finishes the sync (missing pages, removals within the share,
the site's summary, its log line and metrics). Pages go to the documents bucket
under `site/` (candor.sync.sinks.S3Sink), and S3 events ingest them as any upload.

Why a cursor and not a fan-out of one message per page: politeness caps a site at
CANDOR_SYNC_CONCURRENCY requests in flight and one every CANDOR_SYNC_DELAY_SECONDS
however many functions run, and one invocation reaches that rate by itself (at the
default 0.5 s, 10,000 pages are about 85 minutes: seven invocations of 13 minutes).
A fan-out would add no speed to a site, and would spread its sync over messages
that each had to agree on the crawl's frontier, the removal share and when the
sync is over. The cursor keeps all of that in one place, and the same engine runs
`candor sync` on a laptop. The queue's event source runs at most two invocations at
once (two sites); a message that fails three times goes to the dead-letter queue
the ingest function's failures go to. A run that crashed resumes from its last
saved cursor when its message is delivered again (after the lease has run out).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from candor import observability
from candor.errors import ConfigurationError
from candor.settings import Settings
from candor.sync.addresses import Resolver, system_resolver
from candor.sync.engine import Run, SiteSync, SyncStopped, SyncSummary
from candor.sync.errors import SyncError
from candor.sync.records import SyncStore
from candor.sync.scope import BadSiteUrl, Scope
from candor.sync.setup import build_sync_store, options_from
from candor.sync.sinks import S3Sink

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

logger = logging.getLogger(__name__)

# Seconds an invocation keeps for what follows its last fetch: the pages in
# flight (each at most CANDOR_SYNC_TIMEOUT_SECONDS), writing their records, saving
# the cursor, and the finish of the sync (reading every page record).
MARGIN_SECONDS = 120.0
# A lease outlives the invocation that took it by this much, then is nobody's.
LEASE_SLACK_SECONDS = 60.0

Status = Literal["started", "continued", "finished", "busy", "idle", "stopped", "refused"]


@dataclass(frozen=True)
class StepResult:
    site: str
    status: Status
    summary: SyncSummary | None = None
    reason: str = ""
    pages_left: int = 0

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"site": self.site, "status": self.status}
        if self.reason:
            data["reason"] = self.reason
        if self.pages_left:
            data["pages_left"] = self.pages_left
        if self.summary is not None:
            data["summary"] = self.summary.to_json()
        return data


class LeaseLost(SyncError):
    """Another invocation took the site's lease while this one worked; its cursor is
    not saved, and the message is retried."""


@dataclass
class SyncFunction:
    """What the sync function runs, with its clients (made by `build`, or a test's)."""

    settings: Settings
    store: SyncStore
    s3: S3Client
    sqs: SQSClient
    bucket: str
    queue_url: str
    resolver: Resolver = system_resolver
    clock: Callable[[], float] = time.time

    @classmethod
    def build(cls, settings: Settings) -> SyncFunction:
        import boto3

        if not settings.documents_bucket or not settings.sync_queue_url:
            raise ConfigurationError(
                "the sync function needs CANDOR_DOCUMENTS_BUCKET and CANDOR_SYNC_QUEUE_URL"
            )
        return cls(
            settings=settings,
            store=build_sync_store(settings),
            s3=boto3.client("s3", region_name=settings.aws_region),
            sqs=boto3.client("sqs", region_name=settings.aws_region),
            bucket=settings.documents_bucket,
            queue_url=settings.sync_queue_url,
        )

    @property
    def sites(self) -> dict[str, str]:
        """The configured sites, by their normalised start URL."""
        return {Scope.of(url).start: url for url in self.settings.sync_sites}

    def schedule(self, event: Mapping[str, Any]) -> list[str]:
        """Start a sync of each site (the event's `site`, else every configured one)."""
        wanted = event.get("site")
        sites = [wanted] if isinstance(wanted, str) else list(self.settings.sync_sites)
        accept = event.get("accept_removals") is True
        for site in sites:
            self._send(site, "start", accept)
        logger.info("sync started for %d site(s)", len(sites), extra={"sites": sites})
        return sites

    def step(self, message: Mapping[str, Any], *, holder: str, seconds_left: float) -> StepResult:
        """One invocation's work on the site a message names."""
        given = str(message.get("site", ""))
        action = message.get("action", "start")
        accept = message.get("accept_removals") is True
        try:
            site = Scope.of(given).start
        except BadSiteUrl as error:
            return StepResult(given, "refused", reason=str(error))
        if site not in self.sites:
            # Only the owner's sites: a message naming another is not a sync to run.
            return StepResult(site, "refused", reason="not one of CANDOR_SYNC_SITES")
        index = self.settings.index_name
        now = self.clock()
        if not self.store.lease(
            index, site, holder, until=now + seconds_left + LEASE_SLACK_SECONDS, now=now
        ):
            return StepResult(site, "busy", reason="another invocation holds this site's sync")
        working = max(seconds_left - MARGIN_SECONDS, seconds_left / 2)
        try:
            return self._step(site, action, accept, holder, now + working)
        finally:
            self.store.release(index, site, holder)

    def _step(
        self, site: str, action: object, accept: bool, holder: str, until: float
    ) -> StepResult:
        index = self.settings.index_name
        options = options_from(self.settings, accept_removals=accept)
        run = self._run_in_progress(site)
        if action == "start" and run is not None:
            if self.clock() - run.started_at < options.max_seconds + LEASE_SLACK_SECONDS:
                return StepResult(site, "busy", reason="a sync of this site is in progress")
            logger.warning("sync of %s: its last run never finished; starting anew", site)
            run = None
        if action != "start" and run is None:
            return StepResult(site, "idle", reason="no sync of this site is in progress")
        sink = S3Sink(self.s3, self.bucket)
        with SiteSync(
            site,
            options,
            store=self.store,
            sink=sink,
            index_name=index,
            resolver=self.resolver,
            clock=self.clock,
        ) as sync:
            started = run is None
            if run is None:
                try:
                    run = sync.start()
                except SyncError as error:
                    logger.warning("sync of %s not started: %s", site, error)
                    observability.count("sync_stopped")
                    return StepResult(site, "stopped", reason=str(error))
            if not sync.work(run, until=until):
                if not self.store.save_cursor(index, site, holder, run.to_bytes()):
                    raise LeaseLost(f"the lease on {site} was taken while this invocation worked")
                self._send(site, "continue", accept)
                status: Status = "started" if started else "continued"
                logger.info(
                    "sync of %s goes on in the next invocation",
                    site,
                    extra={"pages_left": len(run.todo), **run.counts},
                )
                return StepResult(site, status, pages_left=len(run.todo))
            # Cleared before the finish: a finish that fails is not done twice (that
            # would count its missing pages twice); the next sync sees them again.
            if not self.store.save_cursor(index, site, holder, None):
                raise LeaseLost(f"the lease on {site} was taken while this invocation worked")
            summary = sync.finish(run)
        record(summary, written=sink.written)
        return StepResult(site, "finished", summary)

    def _run_in_progress(self, site: str) -> Run | None:
        blob = self.store.cursor(self.settings.index_name, site)
        if blob is None:
            return None
        try:
            return Run.from_bytes(blob)
        except (ValueError, KeyError, OSError) as error:
            logger.warning("sync of %s: its cursor cannot be read (%s); starting anew", site, error)
            return None

    def _send(self, site: str, action: str, accept: bool) -> None:
        body = {"site": site, "action": action, "accept_removals": accept}
        self.sqs.send_message(QueueUrl=self.queue_url, MessageBody=json.dumps(body))


def record(summary: SyncSummary, *, written: int) -> None:
    """The finished sync's counts: one log line and one EMF metric each."""
    logger.info("sync summary", extra=summary.to_json() | {"objects_written": written})
    for name, value in summary.counts.items():
        observability.count(f"sync_{name}", value)
    observability.count("sync_skipped", summary.skipped)
    observability.count("sync_pages", summary.pages)
    observability.count("sync_removals_held", summary.held)
    if summary.held:
        logger.warning(
            "sync of %s removed nothing: %d pages would have gone at once; invoke the "
            'function with {"sync": "start", "site": "%s", "accept_removals": true} to '
            "remove them",
            summary.site,
            summary.held,
            summary.site,
        )


__all__ = ["StepResult", "SyncFunction", "SyncStopped", "record"]
