"""Each question's value of a figure, read from a `candor eval` report.

The one home of these rules, so that `candor compare`, eval's report.md and the
levers pair the same values (candor.evaluation.paired). Each figure declares its
better direction. A question a figure does not apply to (an unanswerable question
for "answers with every keyword", a declined one for the unsupported specifics
left in answers, a failed one for all) has no value and is left out of the pair.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from candor import text
from candor.evaluation.questions import ANSWERABLE_KINDS, CATALOGUE_KINDS
from candor.graph import prompts

Row = Mapping[str, Any]
Values = dict[str, bool | float]


@dataclass(frozen=True, slots=True)
class Figure:
    name: str
    higher_is_better: bool


def _done(row: Row) -> bool:
    return "error" not in row


def _answerable(row: Row) -> bool:
    return _done(row) and row["kind"] in ANSWERABLE_KINDS


def _answered(row: Row) -> bool:
    return _done(row) and row.get("decision") == "answered"


def _citation_share(row: Row) -> float | None:
    cited = row.get("cited_sources") or []
    return row["citations_valid"] / len(cited) if _answered(row) and cited else None


def _names_a_passage(row: Row) -> bool | None:
    """Whether an answer talks about its passages, tags or candor's instructions.

    A report written before the count was stored (2026-12-02) holds the answer but
    not `meta_talk`: its answers are read by today's rule, so that an older release
    pairs with this one on the figure instead of showing it as not measured.
    """
    if not _answered(row):
        return None
    if "meta_talk" in row:
        return bool(row["meta_talk"])
    if "answer" not in row:
        return None
    return bool(text.meta_talk(row["answer"], prompts.ANSWER_INSTRUCTIONS))


AGENT_FIGURES: tuple[tuple[Figure, Callable[[Row], bool | float | None]], ...] = (
    (
        Figure("answers with every keyword", True),
        # None for a question with no expected keywords (a generated one).
        lambda r: (
            bool(r["answer_correct"])
            if _answerable(r) and r.get("answer_correct") is not None
            else None
        ),
    ),
    (
        Figure("answerable declined", False),
        lambda r: r["decision"] == "declined" if _answerable(r) else None,
    ),
    (
        Figure("unanswerable declined", True),
        lambda r: r["decision"] == "declined" if _done(r) and r["kind"] == "unanswerable" else None,
    ),
    (
        Figure("answers with an unsupported specific left", False),
        lambda r: bool(r.get("unsupported_left")) if _answered(r) else None,
    ),
    (Figure("answers naming a passage, tag or instruction", False), _names_a_passage),
    (Figure("citations naming a retrieved passage (share per answer)", True), _citation_share),
    (Figure("model calls per question", False), lambda r: r["model_calls"] if _done(r) else None),
    (Figure("prompt tokens per question", False), lambda r: r["tokens_in"] if _done(r) else None),
    (
        Figure("prompt tokens evaluated per question", False),
        lambda r: r.get("tokens_evaluated") if _done(r) else None,
    ),
    (Figure("seconds per question", False), lambda r: r["seconds"] if _done(r) else None),
    (
        Figure("seconds to the first token per answered question", False),
        lambda r: r.get("first_token_s") if _answered(r) else None,
    ),
    (
        Figure("messages screened without the model", True),
        lambda r: r.get("screened_without_model") if _done(r) else None,
    ),
)

# The questions about the documents themselves have figures of their own: the ones
# above are on the other kinds, comparable with runs before the catalogue.
CATALOGUE_FIGURES: tuple[tuple[Figure, Callable[[Row], bool | float | None]], ...] = (
    (
        Figure("catalogue and list questions: completeness", True),
        lambda r: r.get("completeness") if _done(r) else None,
    ),
    (
        Figure("catalogue and list questions: seconds", False),
        lambda r: r["seconds"] if _done(r) else None,
    ),
)

RECALL_1 = Figure("Recall@1", True)
RECALL_5 = Figure("Recall@5", True)
MRR = Figure("MRR", True)
ANSWER_CONTEXT = Figure("answer context", True)
RETRIEVAL_FIGURES = (RECALL_1, RECALL_5, MRR, ANSWER_CONTEXT)


def agent_values(rows: Sequence[Row]) -> dict[Figure, Values]:
    """Per figure, each question's value, from `agent_questions` (or a reference's rows)."""
    values: dict[Figure, Values] = {}
    for figures, kinds in ((AGENT_FIGURES, False), (CATALOGUE_FIGURES, True)):
        for figure, value_of in figures:
            found: Values = {}
            for row in rows:
                if (row.get("kind") in CATALOGUE_KINDS) != kinds:
                    continue
                value = value_of(row)
                if value is not None:
                    found[row["id"]] = value
            if found or not kinds:  # a run with no catalogue questions shows no such row
                values[figure] = found
    return values


def strategy_values(
    ranks: Mapping[str, int | None], context: Mapping[str, bool] | None = None
) -> dict[Figure, Values]:
    """Recall@1, Recall@5, the reciprocal rank (MRR's term) and, when given, the answer
    context of each question, from one strategy's ranks (None: not in the top 10)."""
    values: dict[Figure, Values] = {
        RECALL_1: {q: rank is not None and rank <= 1 for q, rank in ranks.items()},
        RECALL_5: {q: rank is not None and rank <= 5 for q, rank in ranks.items()},
        MRR: {q: 0.0 if rank is None else 1 / rank for q, rank in ranks.items()},
    }
    if context is not None:
        values[ANSWER_CONTEXT] = dict(context)
    return values


def retrieval_values(report: Mapping[str, Any], strategy: str) -> dict[Figure, Values]:
    """One strategy's per-question retrieval figures; empty when the report lacks them.

    A report written before answer context was stored per question
    (`retrieval_context`) has the ranks alone.
    """
    ranks = report.get("retrieval_ranks", {}).get(strategy)
    if ranks is None:
        return {}
    return strategy_values(ranks, report.get("retrieval_context", {}).get(strategy))
