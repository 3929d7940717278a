"""`candor ingest`, `candor stats` and `candor models`: what the index holds."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from candor.cli.common import EXIT_FAILED, EXIT_USAGE, Commands, settings_or_exit
from candor.progress import progress as show_progress

if TYPE_CHECKING:
    pass


def cmd_ingest(args: argparse.Namespace) -> int:
    from candor.factory import build_embedder, build_index, build_state, document_catalogue
    from candor.ingest.files import iter_paths
    from candor.ingest.pipeline import ingest
    from candor.ingest.records import CompletionRecords

    missing = [p for p in args.paths if not p.exists()]
    if missing:
        print(f"candor: no such file or folder: {', '.join(map(str, missing))}", file=sys.stderr)
        return EXIT_USAGE
    settings = settings_or_exit()
    embedder = build_embedder(settings)
    index = build_index(settings, embedder)
    documents = list(iter_paths(args.paths))
    if not documents:
        print("candor: no supported documents (.md, .txt, .html, .pdf) found", file=sys.stderr)
        return EXIT_USAGE
    state = build_state(settings)
    progress = show_progress(len(documents), "ingest", "doc", enabled=not args.json)
    try:
        report = ingest(
            documents,
            embedder=embedder,
            index=index,
            progress=progress.update,
            max_chars=settings.chunk_chars,
            overlap=settings.chunk_overlap,
            max_bytes=settings.ingest_max_bytes,
            max_pdf_pages=settings.ingest_max_pdf_pages,
            max_chunks=settings.ingest_max_chunks,
            source_base_url=settings.source_base_url,
            # A cached answer belongs to one corpus version: a run that changed the
            # index bumps it (once), which retires them all; then each changed
            # document's completion record is written (candor.ingest.records).
            records=CompletionRecords(state, settings.index_name),
            # What each document is (its headings, lists and tables), for questions
            # about the documents themselves (candor.catalogue).
            catalogue=document_catalogue(settings),
        )
    finally:
        progress.close()
    summary = report.to_json()
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"ingested {summary['documents']} documents into {summary['chunks']} chunks "
            f"in {report.seconds:.1f} s ({settings.index_path}): "
            f"{report.documents_changed} changed, {report.documents_unchanged} unchanged; "
            f"{report.chunks_embedded} chunks embedded, {report.chunks_deleted} deleted; "
            f"{len(report.failures)} failed"
        )
        for source, reason in report.failures:
            print(f"  failed: {source}: {reason}", file=sys.stderr)
    return EXIT_FAILED if report.failures and not report.chunks else 0


def cmd_forget(args: argparse.Namespace) -> int:
    """Remove documents from the index by their source, as `candor ingest` named them."""
    from candor.factory import build_embedder, build_index, build_state
    from candor.ingest.pipeline import complete, delete_document
    from candor.ingest.records import CompletionRecords

    settings = settings_or_exit()
    index = build_index(settings, build_embedder(settings))
    records = CompletionRecords(build_state(settings), settings.index_name)
    outcomes = [delete_document(source, index=index, records=records) for source in args.sources]
    # The corpus version moves once, retiring cached answers that could cite them;
    # each document's record is then cleared (candor.ingest.records).
    done, _ = complete(outcomes, records)
    failed = 0
    for outcome in done:
        match outcome.status:
            case "deleted":
                print(f"{outcome.source}: removed ({outcome.deleted} chunks)")
            case "absent":
                print(f"{outcome.source}: not in the index")
                failed += 1
            case _:
                print(f"{outcome.source}: failed: {outcome.reason}")
                failed += 1
    return EXIT_FAILED if failed else 0


def cmd_stats(args: argparse.Namespace) -> int:
    """What the index holds: documents, chunks, and the corpus version."""
    from candor.factory import build_embedder, build_index, build_state
    from candor.ingest.pipeline import count_documents
    from candor.sync.setup import build_sync_store

    settings = settings_or_exit()
    index = build_index(settings, build_embedder(settings))
    sites = build_sync_store(settings).sites(settings.index_name)
    stats = {
        "index": settings.index_name,
        "backend": settings.index_backend,
        "documents": count_documents(index),
        "chunks": index.count(),
        "corpus_version": build_state(settings).corpus_version(settings.index_name),
        "sites": [
            {"site": s.site, "pages": s.pages, "last_sync": s.last_sync, "summary": s.summary}
            for s in sites
        ],
    }
    if args.json:
        print(json.dumps(stats))
    else:
        print(
            f"{stats['documents']} documents, {stats['chunks']} chunks in index "
            f"{settings.index_name!r} ({settings.index_backend}); "
            f"corpus version {stats['corpus_version']}"
        )
        for site in sites:
            when = "never finished" if site.last_sync is None else _when(site.last_sync)
            print(f"  site {site.site}: {site.pages} pages, last synced {when}")
    return 0


def _when(timestamp: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M UTC")


def cmd_models(args: argparse.Namespace) -> int:
    """Prepare the local models once, so the first question is not slow.

    Joins and verifies the chat model's weights, and converts the embedding
    model for int8 MatMuls (kept only if it agrees with the shipped file).
    """
    from candor.backends.model_files import default_model_path, prepare_embedding_model
    from candor.backends.onnx_embedder import embedder_of

    settings = settings_or_exit()
    path = settings.local_model_path or default_model_path(settings.model_cache_dir)
    print(f"local chat model: {path}")
    embedding = prepare_embedding_model(settings.model_cache_dir, embedder_of)
    print(f"local embedding model: {embedding.path} ({embedding.name})")
    return 0


def register(commands: Commands) -> None:
    ingest = commands.add_parser(
        "ingest", help="add documents (.md, .txt, .html, .pdf) to the index"
    )
    ingest.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    ingest.add_argument("--json", action="store_true", help="print counts as JSON")
    ingest.set_defaults(run=cmd_ingest)

    forget = commands.add_parser(
        "forget", help="remove documents from the index (by source, as ingest named them)"
    )
    forget.add_argument("sources", nargs="+", metavar="SOURCE")
    forget.set_defaults(run=cmd_forget)

    stats = commands.add_parser(
        "stats", help="documents and chunks in the index, and each synced site's pages"
    )
    stats.add_argument("--json", action="store_true", help="print the counts as JSON")
    stats.set_defaults(run=cmd_stats)

    models = commands.add_parser("models", help="prepare and verify the local model weights")
    models.set_defaults(run=cmd_models)
