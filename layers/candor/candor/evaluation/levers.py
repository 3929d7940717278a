"""`python -m candor.evaluation.levers`: candor's retrieval with one lever moved at a time.

Each lever is a change of settings, BM25 field weights, chunking or what is
embedded; each is measured by the harness's own retrieval evaluation
(candor.evaluation.runner.evaluate_retrieval) on the same questions, so that its
row compares with the `default` row and with `candor eval`'s report. Indexes are
built once and reused: the candor index by its chunking (as `candor eval` names
it), the others by a hash of what they hold.

Each row after `default`'s carries its paired difference from `default` on the
same strategy, question by question, with a 95% bootstrap interval
(candor.evaluation.paired); `--out` keeps each question's rank and answer context,
so that the runs of two sets can be pooled into one verdict per lever. Usage:

    python -m candor.evaluation.levers --corpus DIR --questions FILE [--levers a,b] [--out F]
    python -m candor.evaluation.levers --pool DEV.json VALIDATION.json [--md F]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from candor.backends.sqlite_index import SqliteVectorIndex
from candor.evaluation import paired, paired_report, plain
from candor.evaluation.corpus import corpus_digest, index_name, read_corpus
from candor.evaluation.question_figures import RETRIEVAL_FIGURES, Figure, Values, strategy_values
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
BASELINE = "default"


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
    baselines: dict[str, dict[str, Any]] = {}  # the default lever's row, per strategy
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
        summaries, ranks, contexts = evaluate_retrieval(
            questions,
            STRATEGIES,
            embedder=embedder,
            index=index,
            reranker=None,  # STRATEGIES leave hybrid_rerank out
            settings=settings,
            bar=False,
            plain_index=plain_index if lever.name == BASELINE else None,
        )
        for strategy, summary in summaries.items():
            row = {"lever": lever.name, "strategy": strategy, **summary}
            row |= {"ranks": ranks[strategy], "context": contexts[strategy]}
            if lever.name == BASELINE:
                baselines[strategy] = row
            elif strategy in baselines:
                row["paired"] = versus_default(baselines[strategy], row)
            rows.append(row)
            _say(row_line(row))
    return rows


def _values(row: Mapping[str, Any]) -> dict[Figure, Values]:
    return strategy_values(row["ranks"], row["context"])


def versus_default(baseline: Mapping[str, Any], row: Mapping[str, Any]) -> dict[str, Any]:
    """Per figure: the row's paired difference from `default` on the same questions."""
    before, after = _values(baseline), _values(row)
    found: dict[str, Any] = {}
    for figure in RETRIEVAL_FIGURES:
        result = paired.paired(
            before[figure], after[figure], higher_is_better=figure.higher_is_better
        )
        judged = paired.verdict_of_one(result, higher_is_better=figure.higher_is_better)
        found[figure.name] = result.to_json() | {"verdict": judged.reason}
    return found


def pool(runs: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """Markdown: each lever against `default` per strategy, the sets' runs pooled.

    `runs` maps a set's name to the rows `--out` wrote for it; a lever or strategy
    missing from a set is pooled over the sets that have it.
    """
    keyed = {
        name: {(row["lever"], row["strategy"]): row for row in rows if "ranks" in row}
        for name, rows in runs.items()
    }
    order = list(dict.fromkeys(key for rows in keyed.values() for key in rows))
    lines: list[str] = []
    for lever, strategy in order:
        if lever == BASELINE:
            continue
        arms = {
            name: (_values(rows[(BASELINE, strategy)]), _values(rows[(lever, strategy)]))
            for name, rows in keyed.items()
            if (lever, strategy) in rows and (BASELINE, strategy) in rows
        }
        if not arms:
            continue
        lines += ["", f"### {lever} ({strategy}) against {BASELINE}", ""]
        comparisons = paired_report.compare(arms)
        lines += paired_report.table(comparisons, list(arms), before=BASELINE, after="lever")
    if lines:
        lines += ["", paired_report.RULE]
    return lines


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _interval(row: Mapping[str, Any], figure: str) -> str:
    found = row.get("paired", {}).get(figure)
    if found is None or found["difference"] is None:
        return "–"
    return f"{found['difference']:+.3f} [{found['low']:+.3f}, {found['high']:+.3f}]"


def row_line(row: Mapping[str, Any]) -> str:
    cells = [row["lever"], row["strategy"], str(row["n"])]
    cells += ["–" if row[c] is None else f"{row[c]:.3f}" for c in COLUMNS]
    cells += [_interval(row, figure.name) for figure in RETRIEVAL_FIGURES]
    return "| " + " | ".join(cells) + " |"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m candor.evaluation.levers")
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--questions", type=Path)
    parser.add_argument("--levers", default="", help="comma-separated names; all by default")
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON")
    parser.add_argument("--no-plain", action="store_true", help="skip the plain reference")
    parser.add_argument(
        "--pool",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="pool the --out files of several sets into one verdict per lever",
    )
    parser.add_argument("--md", type=Path, default=None, help="with --pool: write the tables")
    args = parser.parse_args(argv)
    if args.pool:
        runs = {path.stem: json.loads(path.read_text()) for path in args.pool}
        text = "\n".join(["# Levers against default, paired per question", *pool(runs)]) + "\n"
        _say(text.rstrip("\n"))
        if args.md is not None:
            args.md.write_text(text)
        return 0
    if args.corpus is None or args.questions is None:
        parser.error("--corpus and --questions are required (or --pool FILE...)")
    wanted = [name.strip() for name in args.levers.split(",") if name.strip()]
    by_name = {lever.name: lever for lever in LEVERS}
    unknown = [name for name in wanted if name not in by_name]
    if unknown:
        sys.stderr.write(f"unknown levers: {unknown}; known: {list(by_name)}\n")
        return 2
    # Every lever is paired with default, so default is measured first.
    if wanted:
        wanted = [BASELINE, *(name for name in wanted if name != BASELINE)]
    levers = [by_name[name] for name in wanted] if wanted else list(LEVERS)
    paired_columns = [f"{figure.name} vs default [95%]" for figure in RETRIEVAL_FIGURES]
    _say("| lever | strategy | n | " + " | ".join([*COLUMNS, *paired_columns]) + " |")
    _say("|---" * (3 + len(COLUMNS) + len(paired_columns)) + "|")
    rows = measure(args.corpus, args.questions, levers, Settings(), with_plain=not args.no_plain)
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
