"""`candor sync URL`: read a docs site into the local index, and keep it in step.

The pages go through the same pipeline as `candor ingest`; each page's citation
links to the page itself. On a terminal the counts move as pages are fetched;
the last line sums the sync up. It exits 1 when it removed nothing because too
many pages would have gone at once (run again with --accept-removals), when a
limit stopped it, or when it could not start; 2 for a bad URL.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TextIO

from candor.cli.common import EXIT_FAILED, EXIT_USAGE, Commands, settings_or_exit
from candor.sync.engine import Run

# Failures listed by name after the summary; the rest are counted.
SHOWN_FAILURES = 10


class SyncProgress:
    """The run's counts: rewritten in place on a terminal, a line every `interval`
    seconds in a log."""

    def __init__(self, stream: TextIO, *, interval: float = 10.0) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.interval = 0.2 if self.tty else interval
        self._shown = 0.0
        self._last = ""

    def __call__(self, run: Run) -> None:
        now = time.monotonic()
        if now - self._shown < self.interval:
            return
        self._shown = now
        self._show(run)

    def _show(self, run: Run) -> None:
        c = run.counts
        line = (
            f"sync: {c['fetched']} fetched, {c['unchanged']} unchanged, {c['changed']} changed, "
            f"{c['new']} new, {c['robots']} robots, {c['refused']} refused, "
            f"{c['failed']} failed; {len(run.todo)} to go"
        )
        self._last = line
        if self.tty:
            self.stream.write("\r" + line.ljust(100)[:160])
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self._last:
            self.stream.write("\n")
            self.stream.flush()


def cmd_sync(args: argparse.Namespace) -> int:
    from candor.factory import build_embedder, build_index, build_state
    from candor.ingest.reading import Chunking
    from candor.ingest.records import CompletionRecords
    from candor.sync.engine import SiteSync, SyncStopped
    from candor.sync.polite import RobotsUnreachable
    from candor.sync.scope import BadSiteUrl
    from candor.sync.setup import build_sync_store, options_from
    from candor.sync.sinks import IndexSink

    settings = settings_or_exit()
    embedder = build_embedder(settings)
    index = build_index(settings, embedder)
    sink = IndexSink(
        embedder,
        index,
        CompletionRecords(build_state(settings), settings.index_name),
        Chunking(
            max_chars=settings.chunk_chars,
            overlap=settings.chunk_overlap,
            max_bytes=settings.ingest_max_bytes,
        ),
    )
    progress = SyncProgress(sys.stderr) if not args.json else None
    try:
        with SiteSync(
            args.url,
            options_from(settings, accept_removals=args.accept_removals),
            store=build_sync_store(settings),
            sink=sink,
            index_name=settings.index_name,
            progress=progress,
        ) as sync:
            summary = sync.sync()
    except BadSiteUrl as error:
        print(f"candor: {error}", file=sys.stderr)
        return EXIT_USAGE
    except (SyncStopped, RobotsUnreachable) as error:
        print(f"candor: nothing synced: {error}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if progress is not None:
            progress.close()
    report = sink.report
    if args.json:
        print(
            json.dumps(
                summary.to_json()
                | {
                    "embedded": report.chunks_embedded,
                    "chunks_upserted": report.chunks_upserted,
                    "chunks_deleted": report.chunks_deleted,
                    "corpus_version": report.corpus_version,
                }
            )
        )
    else:
        print(f"synced {summary.line()}; {report.chunks_embedded} chunks embedded")
        for note in summary.notes:
            print(f"  note: {note}", file=sys.stderr)
        for failure in summary.failures[:SHOWN_FAILURES]:
            print(f"  {failure['what']}: {failure['url']}: {failure['reason']}", file=sys.stderr)
        more = summary.counts["failed"] + summary.counts["refused"] - SHOWN_FAILURES
        if more > 0 and len(summary.failures) >= SHOWN_FAILURES:
            print(f"  ... and {more} more", file=sys.stderr)
    return 0 if summary.ok else EXIT_FAILED


def register(commands: Commands) -> None:
    sync = commands.add_parser(
        "sync",
        help="read a docs site (its sitemap, or a crawl) into the index, and keep it in step",
    )
    sync.add_argument("url", metavar="URL", help="the site's start URL, or its sitemap's")
    sync.add_argument(
        "--accept-removals",
        action="store_true",
        help="remove pages even when more than CANDOR_SYNC_MAX_REMOVAL_SHARE would go",
    )
    sync.add_argument("--json", action="store_true", help="print the summary as JSON")
    sync.set_defaults(run=cmd_sync)
