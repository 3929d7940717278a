"""`candor sync` of a manual served on loopback, against `candor ingest` of the same files.

    python bench/bench_sync.py CORPUS [--questions FILE] [--out DIR]

1. Serves CORPUS from an HTTP server in this process, on 127.0.0.1: Python's
   http.server (Last-Modified, and 304 for If-Modified-Since), with a robots.txt and a
   sitemap.xml listing every file `candor ingest` reads there.
2. Syncs it into a fresh index with the local embedder as `candor sync` does (its
   settings, its chunking), twice: the first sync, then an unchanged re-sync. For
   each: pages, bytes, chunks embedded and written, seconds, pages a second. No
   delay between requests (the owner's own site on loopback): the figures are the
   sync's own pace, not CANDOR_SYNC_DELAY_SECONDS'. Seconds measured on a shared
   machine are upper bounds.
3. With --questions: ingests the same files into another fresh index as `candor
   ingest` does; compares the two indexes passage by passage (each file's chunks
   against its page's: text, title, heading); measures retrieval (every strategy of
   `candor eval`) and the answer context on both, the questions' expected files
   read as the pages they were served as; and pairs the two per question
   (candor.evaluation.paired): the difference sync - ingest of Recall@5, MRR and
   answer context, with its 95% interval.

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
from urllib.parse import quote
from xml.sax.saxutils import escape

from candor import retrieval
from candor.backends.model_files import local_embedding_model
from candor.backends.onnx_embedder import OnnxEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.backends.sqlite_sync import SqliteSyncStore
from candor.evaluation import retrieval_metrics
from candor.evaluation.paired import paired
from candor.evaluation.questions import Question, load_questions
from candor.evaluation.runner import evaluate_retrieval, measured_strategies, prepare_settings
from candor.ingest.chunking import doc_prefix
from candor.ingest.files import iter_paths
from candor.ingest.pipeline import ingest
from candor.ingest.reading import Chunking
from candor.ingest.records import CompletionRecords
from candor.ports import Embedder
from candor.settings import Settings
from candor.sync.engine import SiteSync
from candor.sync.scope import normalise, source_of
from candor.sync.setup import options_from
from candor.sync.sinks import IndexSink

INDEX = "bench"


def page_url(base: str, path: str) -> str:
    return base + quote(path)


@contextmanager
def serve(folder: Path, paths: Sequence[str]) -> Iterator[str]:
    """`folder` on http://127.0.0.1:PORT/, with robots.txt and a sitemap of `paths`."""

    class Handler(SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/robots.txt":
                self._send(b"User-agent: *\nDisallow:\n", "text/plain")
            elif self.path == "/sitemap.xml":
                base = f"http://127.0.0.1:{self.server.server_address[1]!s}/"  # type: ignore[index]
                entries = "".join(
                    f"<url><loc>{escape(page_url(base, p))}</loc></url>" for p in paths
                )
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


def chunking_of(settings: Settings) -> Chunking:
    """What `candor ingest` and `candor sync` chunk by."""
    return Chunking(
        max_chars=settings.chunk_chars,
        overlap=settings.chunk_overlap,
        max_bytes=settings.ingest_max_bytes,
    )


def sync_once(
    url: str, embedder: Embedder, index: SqliteVectorIndex, data: Path, settings: Settings
) -> dict[str, Any]:
    state = SqliteStateStore(data / "state.sqlite3")
    store = SqliteSyncStore(data / "state.sqlite3")
    sink = IndexSink(embedder, index, CompletionRecords(state, INDEX), chunking_of(settings))
    # `candor sync`'s options, but no delay: the owner's own site on loopback, and
    # the figure wanted is the sync's pace, not the politeness delay's.
    options = dataclasses.replace(options_from(settings), delay_seconds=0)
    started = time.perf_counter()
    with SiteSync(url, options, store=store, sink=sink, index_name=INDEX) as sync:
        summary = sync.sync()
    seconds = time.perf_counter() - started
    state.close()
    store.close()
    report = sink.report
    return {
        **summary.counts,
        "pages": summary.pages,
        "bytes": summary.bytes_read,
        "embedded": report.chunks_embedded,
        "upserted": report.chunks_upserted,
        "deleted": report.chunks_deleted,
        "corpus_version": report.corpus_version,
        "complete": summary.complete,
        "stopped": summary.stopped,
        "seconds": round(seconds, 2),
        "pages_per_second": round(summary.counts["fetched"] / seconds, 1) if seconds else None,
    }


def compare_passages(
    ingested: SqliteVectorIndex, synced: SqliteVectorIndex, sources: dict[str, str]
) -> dict[str, Any]:
    """Each file's passages against its page's: the same text, title and heading, in order."""

    def passages(index: SqliteVectorIndex, source: str) -> list[tuple[str, str, str]]:
        chunks = index.fetch(sorted(index.list_ids(doc_prefix(source))))
        chunks.sort(key=lambda c: int(c.id.rsplit("-", 1)[1]))
        return [(c.text, c.title, c.heading) for c in chunks]

    differ = [
        path
        for path, source in sources.items()
        if passages(ingested, path) != passages(synced, source)
    ]
    return {"documents": len(sources), "differ": len(differ), "differing": differ[:20]}


def served_as(questions: Sequence[Question], sources: dict[str, str]) -> list[Question]:
    """The questions, their expected files named as the synced pages' documents."""
    return [
        dataclasses.replace(
            q, expected_sources=tuple(sources.get(s, s) for s in q.expected_sources)
        )
        for q in questions
    ]


def per_question(
    ranks: dict[str, int | None], contexts: dict[str, bool]
) -> dict[str, dict[str, float | bool]]:
    return {
        "recall@5": {q: r is not None and r <= 5 for q, r in ranks.items()},
        "mrr": {q: (1.0 / r if r else 0.0) for q, r in ranks.items()},
        "answer_context": dict(contexts),
    }


def markdown(report: dict[str, Any]) -> str:
    """The report to read: the two syncs, then sync against ingest per strategy."""
    lines = [
        f"# candor sync of {report['corpus']} ({report['files']} files) on loopback",
        "",
        "| | fetched | unchanged | new | changed | removed | failed | bytes "
        "| chunks embedded | chunks written | seconds | pages/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in ("first_sync", "resync"):
        r = report[name]
        lines.append(
            f"| {name.replace('_', ' ')} | {r['fetched']} | {r['unchanged']} | {r['new']} "
            f"| {r['changed']} | {r['removed']} | {r['failed']} | {r['bytes']:,} "
            f"| {r['embedded']} | {r['upserted']} | {r['seconds']} | {r['pages_per_second']} |"
        )
    lines += ["", f"Chunks in the synced index: {report['synced_chunks']}."]
    if "paired" not in report:
        return "\n".join(lines) + "\n"
    same = report["passages"]
    lines += [
        f"Chunks in the ingested index: {report['ingested_chunks']} "
        f"(`candor ingest` took {report['ingest_seconds']} s).",
        f"Documents whose passages differ (text, title, heading): {same['differ']} "
        f"of {same['documents']}.",
        "",
        "Sync - ingest, paired per question, 95% interval:",
        "",
        "| strategy | figure | n | ingest | sync | sync - ingest [95%] | better | worse |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for strategy, figures in report["paired"].items():
        for figure, p in figures.items():
            lines.append(
                f"| {strategy} | {figure} | {p['n']} | {p['before']} | {p['after']} "
                f"| {p['difference']} [{p['low']}, {p['high']}] | {p['better']} | {p['worse']} |"
            )
    return "\n".join(lines) + "\n"


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
        # Each file's document once synced: `site/127.0.0.1:PORT/<path>`.
        sources = {p: source_of(normalise(page_url(url, p))) for p in paths}
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
            chunking = chunking_of(settings)
            started = time.perf_counter()
            ingest(
                documents,
                embedder=embedder,
                index=ingested,
                max_chars=chunking.max_chars,
                overlap=chunking.overlap,
                max_bytes=chunking.max_bytes,
            )
            report["ingest_seconds"] = round(time.perf_counter() - started, 2)
            report["ingested_chunks"] = ingested.count()
            report["passages"] = compare_passages(ingested, synced, sources)
            questions = load_questions(args.questions)
            measured = prepare_settings(settings, INDEX)
            figures: dict[str, Any] = {}
            runs = {}
            for name, index, asked in (
                ("ingest", ingested, questions),
                ("sync", synced, served_as(questions, sources)),
            ):
                summaries, ranks, contexts = evaluate_retrieval(
                    asked,
                    # As `candor eval` without a reranker: hybrid_rerank would be hybrid.
                    measured_strategies(retrieval.STRATEGIES, None),
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
                    figure: paired(
                        runs["ingest"][strategy][figure],
                        runs["sync"][strategy][figure],
                        higher_is_better=True,
                    ).to_json()
                    for figure in ("recall@5", "mrr", "answer_context")
                }
                for strategy in runs["ingest"]
            }
            report["ks"] = list(retrieval_metrics.KS)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        (args.out / "report.md").write_text(markdown(report))
    print("BENCH " + json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
