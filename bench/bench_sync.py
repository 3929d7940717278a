"""`candor sync` of a manual served on loopback, against `candor ingest` of the same files.

    python bench/bench_sync.py CORPUS [--questions FILE] [--out DIR]

1. Serves CORPUS from an HTTP server in this process, on 127.0.0.1: Python's
   http.server (Last-Modified, and 304 for If-Modified-Since), with a robots.txt and a
   sitemap.xml listing every file `candor ingest` reads there.
2. Syncs it into a fresh index with the local embedder, twice: the first sync, then
   an unchanged re-sync. For each: pages, bytes, chunks embedded, seconds, pages a
   second (seconds measured on a shared machine are upper bounds).
3. With --questions: ingests the same files into another fresh index as `candor
   ingest` does, measures retrieval (every strategy of `candor eval`) and the answer
   context on both, the synced index's sources read as the file paths they were
   served from, and pairs the two per question (candor.evaluation.paired): the
   difference sync - ingest of Recall@5, MRR and answer context, with its 95%
   interval.

Prints `BENCH {json}` and, with --out, writes report.json there. Heavy (it embeds
the manual once per index): run it under the CPU lock.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from candor import retrieval
from candor.backends.model_files import local_embedding_model
from candor.backends.onnx_embedder import OnnxEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.backends.sqlite_sync import SqliteSyncStore
from candor.evaluation import retrieval_metrics
from candor.evaluation.paired import paired
from candor.evaluation.questions import load_questions
from candor.evaluation.runner import evaluate_retrieval, prepare_settings
from candor.ingest.files import iter_paths
from candor.ingest.pipeline import ingest
from candor.ingest.records import CompletionRecords
from candor.ports import Embedder, VectorIndex
from candor.settings import Settings
from candor.sync.engine import SiteSync, SyncOptions
from candor.sync.sinks import IndexSink
from candor.types import Chunk, Hit, Rankings

INDEX = "bench"


@contextmanager
def serve(folder: Path, paths: Sequence[str]) -> Iterator[str]:
    """`folder` on http://127.0.0.1:PORT/, with robots.txt and a sitemap of `paths`."""

    class Handler(SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/robots.txt":
                self._send(b"User-agent: *\nDisallow:\n", "text/plain")
            elif self.path == "/sitemap.xml":
                base = f"http://127.0.0.1:{self.server.server_address[1]!s}/"  # type: ignore[index]
                entries = "".join(f"<url><loc>{escape(base + p)}</loc></url>" for p in paths)
                body = (
                    '<?xml version="1.0" encoding="UTF-8"?><urlset '
                    f'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
                )
                self._send(body.encode(), "application/xml")
            else:
                super().do_GET()

        def _send(self, body: bytes, kind: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(folder))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class FilePaths:
    """The synced index, its chunks' sources read as the paths they were served from
    (`site/127.0.0.1:PORT/git-push.html` -> `git-push.html`), as the questions name them."""

    def __init__(self, inner: VectorIndex, prefix: str) -> None:
        self.inner = inner
        self.prefix = prefix

    def _chunk(self, chunk: Chunk) -> Chunk:
        return dataclasses.replace(chunk, source=chunk.source.removeprefix(self.prefix))

    def query(self, **kwargs: Any) -> Rankings:
        found = self.inner.query(**kwargs)
        return Rankings(
            [Hit(self._chunk(h.chunk), h.score) for h in found.dense],
            [Hit(self._chunk(h.chunk), h.score) for h in found.keyword],
        )

    def fetch(self, ids: Sequence[str]) -> list[Chunk]:
        return [self._chunk(c) for c in self.inner.fetch(ids)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def sync_once(
    url: str, embedder: Embedder, index: SqliteVectorIndex, data: Path, settings: Settings
) -> dict[str, Any]:
    state = SqliteStateStore(data / "state.sqlite3")
    store = SqliteSyncStore(data / "state.sqlite3")
    sink = IndexSink(embedder, index, CompletionRecords(state, INDEX))
    # The owner's own site on loopback: no delay between requests is needed.
    options = SyncOptions(
        user_agent="candor-bench",
        token="candor",
        delay_seconds=0,
        concurrency=settings.sync_concurrency,
    )
    started = time.perf_counter()
    with SiteSync(url, options, store=store, sink=sink, index_name=INDEX) as sync:
        summary = sync.sync()
    seconds = time.perf_counter() - started
    state.close()
    store.close()
    return {
        **{k: summary.counts[k] for k in ("fetched", "unchanged", "changed", "new", "removed")},
        "failed": summary.counts["failed"],
        "pages": summary.pages,
        "bytes": summary.bytes_read,
        "embedded": sink.report.chunks_embedded,
        "seconds": round(seconds, 2),
        "pages_per_second": round(summary.counts["fetched"] / seconds, 1) if seconds else None,
    }


def per_question(
    ranks: dict[str, int | None], contexts: dict[str, bool]
) -> dict[str, dict[str, float | bool]]:
    return {
        "recall@5": {q: r is not None and r <= 5 for q, r in ranks.items()},
        "mrr": {q: (1.0 / r if r else 0.0) for q, r in ranks.items()},
        "answer_context": dict(contexts),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--questions", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    settings = Settings()
    documents = list(iter_paths([args.corpus]))
    paths = [source for source, _ in documents]
    embedder = OnnxEmbedder(model=local_embedding_model(settings.model_cache_dir))
    report: dict[str, Any] = {"corpus": str(args.corpus), "files": len(paths)}
    with tempfile.TemporaryDirectory() as tmp, serve(args.corpus, paths) as url:
        work = Path(tmp)
        synced = SqliteVectorIndex(
            work / "sync.sqlite3", embedder.dimensions, embedder=embedder.name
        )
        report["first_sync"] = sync_once(url, embedder, synced, work, settings)
        report["resync"] = sync_once(url, embedder, synced, work, settings)
        report["synced_chunks"] = synced.count()
        print(json.dumps(report), file=sys.stderr)
        if args.questions is not None:
            ingested = SqliteVectorIndex(
                work / "ingest.sqlite3", embedder.dimensions, embedder=embedder.name
            )
            started = time.perf_counter()
            ingest(documents, embedder=embedder, index=ingested)
            report["ingest_seconds"] = round(time.perf_counter() - started, 2)
            report["ingested_chunks"] = ingested.count()
            questions = load_questions(args.questions)
            measured = prepare_settings(settings, INDEX)
            prefix = f"site/{url.split('://', 1)[1]}"
            figures: dict[str, Any] = {}
            runs = {}
            for name, index in (("ingest", ingested), ("sync", FilePaths(synced, prefix))):
                summaries, ranks, contexts = evaluate_retrieval(
                    questions,
                    retrieval.STRATEGIES,
                    embedder=embedder,
                    index=index,
                    reranker=None,
                    settings=measured,
                    bar=False,
                )
                figures[name] = {
                    s: {k: v for k, v in row.items() if not k.endswith("_ms")}
                    for s, row in summaries.items()
                }
                runs[name] = {s: per_question(ranks[s], contexts[s]) for s in ranks}
            report["retrieval"] = figures
            report["paired"] = {
                strategy: {
                    figure: dataclasses.asdict(
                        paired(
                            runs["ingest"][strategy][figure],
                            runs["sync"][strategy][figure],
                            higher_is_better=True,
                        )
                    )
                    for figure in ("recall@5", "mrr", "answer_context")
                }
                for strategy in runs["ingest"]
            }
            report["ks"] = list(retrieval_metrics.KS)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    print("BENCH " + json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
