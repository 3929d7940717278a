#!/usr/bin/env python3
"""Verify a question set of the suite against its corpus as candor reads it.

Usage: .venv/bin/python data/eval/suite/verify_suite.py QUESTIONS.jsonl CORPUS_DIR

verify_questions.py (beside the two first sets) reads HTML and text with the
standard library; it cannot read a PDF, and it folds whitespace, which candor's
keyword check does not. This one reads every document with candor's own loaders,
so a PDF's pages are the pages candor cites, and checks:
  * the file loads as a question file of this corpus (candor.evaluation.questions):
    every expected source is a document of it, or a page of one (`file.pdf#page=N`);
  * every answer keyword stands, case-insensitively, in the text of an expected
    source as candor loads it (a page's own text for `#page=N`), with its spaces as
    written: the same test as the answer context (retrieval_metrics.has_all_keywords);
  * for a multi_hop question, every expected source holds a keyword no other does;
  * each `absent_patterns` regex of an unanswerable question matches nothing in the
    whole corpus (case-insensitive).
Prints what it checked and exits 1 on any failure.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from candor.evaluation.corpus import read_corpus
from candor.evaluation.questions import load_questions
from candor.evaluation.retrieval_metrics import PAGE_MARK, document_of
from candor.ingest.loaders import load_document


def texts_of(corpus: Path) -> dict[str, str]:
    """Each document's text, and each page of a paged one as `source#page=N`."""
    found: dict[str, str] = {}
    for source, data in read_corpus(corpus):
        document = load_document(data, source)
        found[source] = "\n".join(section.text for section in document.sections)
        for number, page in enumerate(document.pages, start=1):
            found[f"{source}{PAGE_MARK}{number}"] = page
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    path, corpus = Path(argv[1]), Path(argv[2])
    texts = texts_of(corpus)
    questions = load_questions(path, sources={s for s in texts if PAGE_MARK not in s})
    rows = {row["id"]: row for row in map(json.loads, path.read_text().splitlines())}
    whole = "\n".join(text for source, text in texts.items() if PAGE_MARK not in source)
    failures: list[str] = []
    keywords = patterns = 0
    for question in questions:
        folded = {s: texts[s].casefold() for s in question.expected_sources}
        for keyword in question.answer_keywords:
            keywords += 1
            if not any(keyword.casefold() in text for text in folded.values()):
                failures.append(f"{question.id}: {keyword!r} is in none of its expected sources")
        if question.all_sources_needed:
            for source, text in folded.items():
                others = [t for s, t in folded.items() if s != source]
                own = [
                    k
                    for k in question.answer_keywords
                    if k.casefold() in text and not any(k.casefold() in t for t in others)
                ]
                if not own:
                    failures.append(f"{question.id}: {source} adds no keyword of its own")
        for pattern in rows[question.id].get("absent_patterns", []):
            patterns += 1
            match = re.search(pattern, whole, re.IGNORECASE)
            if match:
                failures.append(f"{question.id}: {pattern!r} matches {match.group(0)!r}")
    documents = {document_of(s) for s in texts}
    print(
        f"{path.name}: {len(questions)} questions, {keywords} keywords, {patterns} absent "
        f"patterns checked over {len(documents)} documents ({len(texts) - len(documents)} pages)"
    )
    for failure in failures:
        print(f"FAIL {failure}")
    print("RESULT: " + ("OK" if not failures else f"FAIL ({len(failures)} problems)"))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
