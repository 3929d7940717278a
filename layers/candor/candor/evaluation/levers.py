"""`python -m candor.evaluation.levers`: candor's retrieval with one lever moved at a time.

Each lever is a change of settings, BM25 field weights, chunking or what is
embedded; each is measured by the harness's own retrieval evaluation
(candor.evaluation.runner.evaluate_retrieval) on the same questions, so that its
row compares with the `default` row and with `candor eval`'s report. Indexes are
built once and reused: the candor index by its chunking (as `candor eval` names
it), the others by a hash of what they hold. Usage:

    python -m candor.evaluation.levers --corpus DIR --questions FILE [--levers a,b] [--out F]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from candor.backends.sqlite_index import SqliteVectorIndex
from candor.evaluation import plain
from candor.evaluation.corpus import corpus_digest, index_name, read_corpus
from candor.evaluation.questions import load_questions
from candor.evaluation.runner import build_index, build_plain_index, evaluate_retrieval
from candor.ingest.chunking import chunk_document
from candor.ingest.loaders import load_document
from candor.ports import Embedder
from candor.settings import Settings
from candor.text import FIELD_WEIGHTS
from candor.types import Chunk


@dataclass(frozen=True)
class Lever:
    name: str
    settings: dict[str, Any] = field(default_factory=dict)
    field_weights: tuple[float, float, float] = FIELD_WEIGHTS
    # "title — heading" above the text, as the pipeline embeds it; False: the text alone.
    embed_context: bool = True


LEVERS: tuple[Lever, ...] = (
    Lever("default"),
    Lever("cap off", {"max_per_source": 0}),
    Lever("cap 2", {"max_per_source": 2}),
    Lever("rrf keyword x0.5", {"keyword_weight": 0.5}),
    Lever("rrf keyword x1.5", {"keyword_weight": 1.5}),
    Lever("rrf keyword x2", {"keyword_weight": 2.0}),
    Lever("rrf k 20", {"rrf_k": 20}),
    Lever("rrf k 20 keyword x2", {"rrf_k": 20, "keyword_weight": 2.0}),
    Lever("rrf keyword x2 + cap off", {"keyword_weight": 2.0, "max_per_source": 0}),
    Lever("candidates 40", {"candidates": 40}),
    Lever("score", {"fusion": "score"}),
    Lever("score keyword x0.5", {"fusion": "score", "keyword_weight": 0.5}),
    Lever("score keyword x2", {"fusion": "score", "keyword_weight": 2.0}),
    Lever("score + cap off", {"fusion": "score", "max_per_source": 0}),
    Lever("fields 1/1/1", field_weights=(1.0, 1.0, 1.0)),
    Lever("fields 0/0/1 (BM25 on text only)", field_weights=(0.0, 0.0, 1.0)),
    Lever("fields 4/2/1", field_weights=(4.0, 2.0, 1.0)),
    Lever("embed text only", embed_context=False),
    Lever("widen", {"widen_passages": True}),
    # The best of each family on the git dev set, together.
    Lever(
        "together: keyword x2 + fields 1/1/1 + widen",
        {"keyword_weight": 2.0, "widen_passages": True},
        field_weights=(1.0, 1.0, 1.0),
    ),
    Lever("chunks 400/50", {"chunk_chars": 400, "chunk_overlap": 50}),
    Lever(
        "chunks 400/50 + widen", {"chunk_chars": 400, "chunk_overlap": 50, "widen_passages": True}
    ),
)
STRATEGIES = ("dense", "keyword", "hybrid")
COLUMNS = ("recall@1", "recall@5", "recall@10", "mrr", "answer_context")


def _textonly_index(
    settings: Settings, embedder: Embedder, documents: Sequence[tuple[str, bytes]]
) -> SqliteVectorIndex:
    """candor's chunks with the text alone embedded, for the `embed text only` lever."""
    chunks: list[Chunk] = []
    for source, data in documents:
        try:
            document = load_document(data, source)
        except Exception:  # the pipeline records and skips it; so does this
            continue
        chunks.extend(
            chunk_document(document, max_chars=settings.chunk_chars, overlap=settings.chunk_overlap)
        )
    digest = corpus_digest(
        documents, embedder, "textonly", settings.chunk_chars, settings.chunk_overlap
    )
    index = plain.open_index(
        settings.data_dir / "indexes" / f"textonly-{digest[:16]}.sqlite3", embedder
    )
    plain.fill(index, plain.missing(index, chunks), embedder)
    return index


def measure(
    corpus: Path,
    questions_file: Path,
    levers: Sequence[Lever],
    base: Settings,
    *,
    with_plain: bool = True,
) -> list[dict[str, Any]]:
    from candor.evaluation.runner import prepare_settings
    from candor.factory import build_embedder

    documents = read_corpus(corpus)
    questions = load_questions(questions_file, sources={source for source, _ in documents})
    embedder = build_embedder(base)
    rows: list[dict[str, Any]] = []
    plain_index = build_plain_index(base, embedder, documents, bar=True) if with_plain else None
    for lever in levers:
        settings = base.model_copy(update=lever.settings)
        chunking = (settings.chunk_chars, settings.chunk_overlap)
        settings = prepare_settings(settings, index_name(documents, embedder, chunking))
        index, _ = build_index(settings, embedder, documents, bar=True)
        if lever.field_weights != FIELD_WEIGHTS:
            index = SqliteVectorIndex(
                settings.index_path, embedder.dimensions, field_weights=lever.field_weights
            )
        if not lever.embed_context:
            index = _textonly_index(settings, embedder, documents)
        summaries, _, _ = evaluate_retrieval(
            questions,
            STRATEGIES,
            embedder=embedder,
            index=index,
            reranker=None,  # STRATEGIES leave hybrid_rerank out
            settings=settings,
            bar=False,
            plain_index=plain_index if lever.name == "default" else None,
        )
        for strategy, summary in summaries.items():
            rows.append({"lever": lever.name, "strategy": strategy, **summary})
            _say(_line(rows[-1]))
    return rows


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _line(row: dict[str, Any]) -> str:
    cells = [row["lever"], row["strategy"], str(row["n"])]
    cells += ["–" if row[c] is None else f"{row[c]:.3f}" for c in COLUMNS]
    return "| " + " | ".join(cells) + " |"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m candor.evaluation.levers")
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--levers", default="", help="comma-separated names; all by default")
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON")
    parser.add_argument("--no-plain", action="store_true", help="skip the plain reference")
    args = parser.parse_args(argv)
    wanted = [name.strip() for name in args.levers.split(",") if name.strip()]
    by_name = {lever.name: lever for lever in LEVERS}
    unknown = [name for name in wanted if name not in by_name]
    if unknown:
        sys.stderr.write(f"unknown levers: {unknown}; known: {list(by_name)}\n")
        return 2
    levers = [by_name[name] for name in wanted] if wanted else list(LEVERS)
    _say("| lever | strategy | n | " + " | ".join(COLUMNS) + " |")
    _say("|---" * (3 + len(COLUMNS)) + "|")
    rows = measure(args.corpus, args.questions, levers, Settings(), with_plain=not args.no_plain)
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
