"""The grounding gate alone on a question set, over an index that is already built.

    python -m scripts.gate_only --corpus .candor/corpus/git-doc \\
        --questions data/eval/git-doc-questions.jsonl \\
        --index .candor/indexes/eval-87001ce77f39beeb.sqlite3

`candor eval` measures the same (the "Grounding gate" section of its report), but
first builds the index named by the corpus hash, which includes the ingest
pipeline's version: after a bump that changed nothing for HTML, it embeds the
whole corpus again. This reads an existing index instead, after checking that it
holds exactly the corpus's pages, and needs no chat model. Prints the report
section; --json FILE writes the summary and every question's findings.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

from candor.backends.sqlite_index import SqliteVectorIndex
from candor.evaluation import gate_metrics
from candor.evaluation.corpus import read_corpus
from candor.evaluation.questions import load_questions
from candor.evaluation.runner import prepare_settings
from candor.factory import build_embedder, build_reranker
from candor.settings import Settings


def index_sources(path: Path) -> set[str]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return {row[0] for row in conn.execute("SELECT DISTINCT source FROM chunks")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True, help="an eval index .sqlite3 file")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE")
    args = parser.parse_args(argv)

    documents = read_corpus(args.corpus)
    sources = {source for source, _ in documents}
    held = index_sources(args.index)
    if held != sources:
        print(
            f"{args.index} is not an index of {args.corpus}: {len(held - sources)} pages "
            f"only in the index, {len(sources - held)} only in the corpus",
            file=sys.stderr,
        )
        return 2
    questions = load_questions(args.questions, sources=sources)
    settings = prepare_settings(Settings(), args.index.stem)
    embedder = build_embedder(settings)
    index = SqliteVectorIndex(args.index, embedder.dimensions, embedder=embedder.name)
    records = gate_metrics.evaluate_gate(
        questions,
        embedder=embedder,
        index=index,
        reranker=build_reranker(settings),
        settings=settings,
    )
    summary = gate_metrics.summarise(records)
    print(f"{len(questions)} questions from {args.questions} over {args.index.name}")
    print("\n".join(gate_metrics.markdown(summary)))
    if args.json is not None:
        body = {"gate": summary, "gate_questions": [r.to_json() for r in records]}
        args.json.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
