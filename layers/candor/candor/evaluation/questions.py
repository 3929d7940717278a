"""The question file: JSONL, one question a line, checked before anything runs."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from candor.evaluation.retrieval_metrics import document_of

# What each kind of question expects of the agent.
ANSWERABLE_KINDS = frozenset({"factual", "multi_hop", "vague"})
# Questions about the documents themselves (candor.catalogue): what they cover
# ("catalogue") and the whole of a list a page holds ("list"). Each names the
# `entries` a complete answer holds; their figures are kept apart from the others'.
CATALOGUE_KINDS = frozenset({"catalogue", "list"})
KINDS = frozenset(
    {*ANSWERABLE_KINDS, *CATALOGUE_KINDS, "unanswerable", "greeting", "code_request", "abusive"}
)


class QuestionFileError(ValueError):
    """The question file cannot be used; the message lists every problem found."""


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    question: str
    kind: str
    expected_sources: tuple[str, ...] = ()
    answer_keywords: tuple[str, ...] = ()
    entries: tuple[str, ...] = ()

    @property
    def answerable(self) -> bool:
        return self.kind in ANSWERABLE_KINDS

    @property
    def all_sources_needed(self) -> bool:
        """multi_hop needs every listed page; for the others any one of them is enough."""
        return self.kind == "multi_hop"


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and v for v in value)


def _check(row: Any, sources: Collection[str] | None) -> list[str]:
    if not isinstance(row, dict):
        return ["not a JSON object"]
    problems: list[str] = []
    for name in ("id", "question", "kind"):
        if not isinstance(row.get(name), str) or not row[name].strip():
            problems.append(f"{name!r} must be a non-empty string")
    for name in ("expected_sources", "answer_keywords", "entries"):
        if name in row and not _strings(row[name]):
            problems.append(f"{name!r} must be a list of non-empty strings")
    if problems:
        return problems
    kind = row["kind"]
    if kind not in KINDS:
        problems.append(f"unknown kind {kind!r}; expected one of {', '.join(sorted(KINDS))}")
    expected = row.get("expected_sources", [])
    if "gap" in row and (not isinstance(row["gap"], str) or not row["gap"]):
        problems.append("'gap' must be a non-empty string")
    # A gap's question (candor gaps export) has no page yet: the documents that will
    # answer it are not known until they do.
    if kind in ANSWERABLE_KINDS and not expected and "gap" not in row:
        problems.append(f"a {kind} question needs 'expected_sources'")
    if kind in CATALOGUE_KINDS and not row.get("entries"):
        problems.append(f"a {kind} question needs 'entries'")
    if kind == "multi_hop" and len(expected) < 2:
        problems.append("a multi_hop question needs at least two 'expected_sources'")
    if sources is not None:
        missing = [s for s in expected if document_of(s) not in sources]
        if missing:
            problems.append(f"expected sources not in the corpus: {', '.join(missing)}")
    return problems


def load_questions(path: Path, *, sources: Collection[str] | None = None) -> list[Question]:
    """Read and validate the question file.

    `sources`, when given, are the corpus's document names: every expected source
    must be one, or a page of one (`manual.pdf#page=41`). Raises QuestionFileError
    naming the line of every problem.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise QuestionFileError(f"{path}: cannot read the question file: {error}") from None
    questions: list[Question] = []
    problems: list[str] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            problems.append(f"{path}:{number}: not valid JSON: {error.msg}")
            continue
        found = _check(row, sources)
        if not found and row["id"] in seen:
            found = [f"duplicate id {row['id']!r}"]
        if found:
            problems.extend(f"{path}:{number}: {p}" for p in found)
            continue
        seen.add(row["id"])
        questions.append(
            Question(
                id=row["id"],
                question=row["question"],
                kind=row["kind"],
                expected_sources=tuple(row.get("expected_sources", ())),
                answer_keywords=tuple(row.get("answer_keywords", ())),
                entries=tuple(row.get("entries", ())),
            )
        )
    if problems:
        shown = problems[:20]
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise QuestionFileError("the question file is not valid:\n  " + "\n  ".join(shown) + more)
    if not questions:
        raise QuestionFileError(f"{path}: the question file holds no questions")
    return questions


def load_question_files(
    paths: Sequence[Path], *, sources: Collection[str] | None = None
) -> list[Question]:
    """The questions of every file, in order; an id may appear in only one of them."""
    questions: list[Question] = []
    for path in paths:
        questions += load_questions(path, sources=sources)
    counts = Counter(q.id for q in questions)
    twice = sorted(qid for qid, n in counts.items() if n > 1)
    if twice:
        raise QuestionFileError(f"ids in more than one question file: {', '.join(twice)}")
    return questions


def stratified(questions: list[Question], limit: int | None) -> list[Question]:
    """At most `limit` questions, taken round-robin across kinds in file order.

    So `--limit 14` on the dev set asks two of every kind rather than 14 factual ones.
    """
    if limit is None or limit >= len(questions):
        return list(questions)
    by_kind: dict[str, list[Question]] = {}
    for question in questions:
        by_kind.setdefault(question.kind, []).append(question)
    chosen: set[str] = set()
    queues = list(by_kind.values())
    depth = 0
    while len(chosen) < limit:
        for queue in queues:
            if depth < len(queue) and len(chosen) < limit:
                chosen.add(queue[depth].id)
        depth += 1
    return [q for q in questions if q.id in chosen]
