"""The grade measured against what it judged: a confusion matrix per kind of question.

The grade decides whether the model may answer. Whether the passages it was
shown could support an answer is measured independently by the answer-context
test (they contain every expected keyword: candor.evaluation.retrieval_metrics).
Each grade of a run is one cell: its verdict against the context it judged. On
an answerable question a grade of "not answerable" on passages holding every
keyword is a false decline; on an unanswerable one, "answerable" is a false
accept. Grades the grounding gate made, or that had no passages, are counted
beside the matrix: no model judged them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from candor.evaluation.retrieval_metrics import has_all_keywords
from candor.graph import prompts
from candor.graph.state import GradeRecord
from candor.types import Chunk, Hit, Message

CONTEXTS = ("has_keywords", "lacks_keywords", "unanswerable")


@dataclass(frozen=True, slots=True)
class GradeOutcome:
    """One grade of a run: its verdict, who made it, the context it judged, and the
    model's probability that the passages answer (None when no model judged)."""

    answerable: bool
    by: str
    context: str  # one of CONTEXTS
    score: float | None = None
    # The share of the judge's first token on "yes" and "no" (None: no model judged).
    option_mass: float | None = None

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "answerable": self.answerable,
            "by": self.by,
            "context": self.context,
        }
        if self.score is not None:
            row["score"] = self.score
        if self.option_mass is not None:
            row["option_mass"] = self.option_mass
        return row


def context_of(
    passages: Sequence[Hit], keywords: Collection[str], *, answerable_kind: bool, passage_chars: int
) -> str:
    """The answer context of passages as the model is shown them: one of CONTEXTS."""
    shown = "\n".join(prompts.passage_text(hit, passage_chars) for hit in passages)
    return context_of_text(shown, keywords, answerable_kind=answerable_kind)


def context_of_text(text: str, keywords: Collection[str], *, answerable_kind: bool) -> str:
    """The answer context of a text the model was shown: one of CONTEXTS."""
    if not answerable_kind:
        return "unanswerable"
    return "has_keywords" if has_all_keywords(text, keywords) else "lacks_keywords"


def documents_of(messages: Sequence[Message]) -> str:
    """What a grade prompt showed of the documents: the text inside its <documents> fence."""
    user = "\n".join(m["content"] for m in messages if m["role"] == "user")
    start, end = user.find("<documents>"), user.rfind("</documents>")
    return user[start:end] if start >= 0 and end > start else ""


def outcomes(
    grades: Sequence[GradeRecord],
    judged: Sequence[str],
    chunks: Mapping[str, Chunk],
    keywords: Collection[str],
    *,
    answerable_kind: bool,
    passage_chars: int,
) -> tuple[GradeOutcome, ...]:
    """Each grade with the answer-context verdict on what it judged.

    `judged` holds, in order, the documents each model grade was shown (the
    excerpts as its prompt had them: documents_of); a grade no model made is
    measured on its passages' chunks (`chunks`, every chunk the run's index
    queries returned, by id).
    """
    shown = iter(judged)
    found: list[GradeOutcome] = []
    for grade in grades:
        if grade.by == "model":
            text = next(shown, "")
            context = context_of_text(text, keywords, answerable_kind=answerable_kind)
        else:
            context = context_of(
                [Hit(chunks[cid], 0.0) for cid in grade.passage_ids if cid in chunks],
                keywords,
                answerable_kind=answerable_kind,
                passage_chars=passage_chars,
            )
        found.append(
            GradeOutcome(grade.answerable, grade.by, context, grade.score, grade.option_mass)
        )
    return tuple(found)


def confusion(grades: Sequence[GradeOutcome]) -> dict[str, Any]:
    """Grades per context: the model's verdicts, and those the names settled without a
    model; then the grades the gate declined and those that had no passages."""

    def count(context: str, by: str, answerable: bool) -> int:
        return sum(
            1 for g in grades if g.by == by and g.context == context and g.answerable is answerable
        )

    matrix = {
        context: {
            "answerable": count(context, "model", True),
            "not_answerable": count(context, "model", False),
            "names": count(context, "names", True),
        }
        for context in CONTEXTS
    }
    return {
        "model": {context: cells for context, cells in matrix.items() if any(cells.values())},
        "gate_declined": sum(1 for g in grades if g.by == "gate"),
        "no_passages": sum(1 for g in grades if g.by == "no_passages"),
        "n": len(grades),
    }


def grade_rates(grades: Sequence[GradeOutcome]) -> dict[str, Any]:
    """How often the model's grade agrees with the context it judged, with n."""
    model = [g for g in grades if g.by == "model"]
    with_context = [g for g in model if g.context == "has_keywords"]
    unanswerable = [g for g in model if g.context == "unanswerable"]

    def rate(hits: int, n: int) -> float | None:
        return round(hits / n, 4) if n else None

    return {
        "answerable_when_context_has_keywords": rate(
            sum(g.answerable for g in with_context), len(with_context)
        ),
        "answerable_when_context_has_keywords_n": len(with_context),
        "not_answerable_on_unanswerable": rate(
            sum(not g.answerable for g in unanswerable), len(unanswerable)
        ),
        "not_answerable_on_unanswerable_n": len(unanswerable),
    }
