"""The support check's rules replayed on a report's answers, against whole cited pages.

    python -m scripts.support_replay --report results/2026-12-01-retry/report.json \\
        --corpus .candor/corpus/git-doc --questions data/eval/git-doc-questions.jsonl

A report keeps each answer and the pages it cites, not the passages shown. So the
evidence here is the question and the whole text of every cited page: more than
the model was shown, an upper bound. A sentence this removes would be removed in
the graph too; one it keeps might still go there. What counts is the sentences
that lose only for the kinds of specific the checks read since issue 19 (a number
with what it counts, whose digits alone the evidence has; a code of letters and
digits; a product name): those answers the new rules would newly trim. Prints
each such sentence with what it lacks; --json FILE writes them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from candor.graph import citations, grounding, support
from candor.graph.support import Specific
from candor.ingest.loaders import load_document

# The kinds the checks read before issue 19: a sentence that lacks one of them lost
# it then too.
_EARLIER_KINDS = {"number", "quoted", "name"}


def page_text(corpus: Path, source: str) -> str:
    document = load_document((corpus / source).read_bytes(), source)
    sections = (f"{section.heading}\n{section.text}" for section in document.sections)
    return "\n".join([document.title, *sections])


def newly_missing(specific: Specific, evidence: str) -> bool:
    """Whether the earlier rules held this specific while the new ones do not."""
    if specific.kind in _EARLIER_KINDS:
        return False
    if specific.quantity is not None:
        return grounding.mentions(evidence, specific.quantity.number)
    return True  # codes and product names were not read before


def replay(report: dict[str, Any], corpus: Path, questions: dict[str, str]) -> dict[str, Any]:
    answered = [q for q in report["agent_questions"] if q["decision"] == "answered"]
    trimmed: list[dict[str, Any]] = []
    kinds: dict[str, int] = {}
    for record in answered:
        pages = [page_text(corpus, source) for source in dict.fromkeys(record["cited_sources"])]
        evidence = "\n".join([questions[record["id"]], *pages])
        lost: list[dict[str, Any]] = []
        for sentence in citations.sentences(record["answer"]):
            found = support.read_specifics(sentence)
            missing = [s for s in found if not s.supported_by(evidence)]
            if missing and all(newly_missing(s, evidence) for s in missing):
                lost.append(
                    {
                        "sentence": sentence.strip(),
                        "missing": [f"{s.kind}: {s.text}" for s in missing],
                    }
                )
                for s in missing:
                    kinds[s.kind] = kinds.get(s.kind, 0) + 1
        if lost:
            trimmed.append({"id": record["id"], "sentences": lost})
    return {"answered": len(answered), "newly_trimmed": trimmed, "by_kind": kinds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--json", type=Path, default=None, metavar="FILE")
    args = parser.parse_args(argv)
    report = json.loads(args.report.read_text())
    with args.questions.open() as lines:
        questions = {q["id"]: q["question"] for q in map(json.loads, lines)}
    result = replay(report, args.corpus, questions)
    trimmed = result["newly_trimmed"]
    print(
        f"{args.report}: {result['answered']} answered, {len(trimmed)} would newly lose a "
        f"sentence (missing by kind: {result['by_kind'] or 'none'})",
        file=sys.stdout,
    )
    for answer in trimmed:
        for lost in answer["sentences"]:
            print(f"- {answer['id']}: {'; '.join(lost['missing'])}\n    {lost['sentence']}")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
