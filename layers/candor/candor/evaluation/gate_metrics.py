"""The grounding gate alone, without a chat model: what it does to each question.

Each question is retrieved as the graph's retrieve node does on its first
attempt (the question as the query, the settings' top_k, hybrid search), and
the gate checks its names against those passages and the index. That is
exactly the gate's first grade in the graph, minus the model: so it says, for
every question and at the cost of a search, whether the gate would decline it
outright, whether it would bring in a passage by keyword, and whether an
answerable question would be declined for a name the documents do not hold
(a false decline no model can undo).

The graph routes greetings, code requests and abuse away before retrieval; they
are measured too, as what the gate would do to one the triage took for a question.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from candor import retrieval
from candor.evaluation.questions import Question
from candor.evaluation.retrieval_metrics import has_all_keywords
from candor.graph import grounding, limits, prompts
from candor.ports import Embedder, Reranker, VectorIndex
from candor.settings import Settings
from candor.types import Hit


@dataclass(frozen=True, slots=True)
class GateRecord:
    """One question: the gate's findings, and the answer context before and after it."""

    id: str
    kind: str
    answerable: bool
    names: tuple[str, ...]
    absent: tuple[str, ...]
    in_index: tuple[str, ...]
    unchecked: tuple[str, ...]
    added: tuple[str, ...]
    products: tuple[str, ...] = ()  # which names are product or project names
    # Whether the passages shown hold every expected keyword (answerable kinds only).
    context_before: bool | None = None
    context_after: bool | None = None

    @property
    def declined(self) -> bool:
        return bool(self.absent)

    @property
    def targeted(self) -> bool:
        """The keyword-targeted retrieval ran and changed the passages."""
        return bool(self.added)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "names": list(self.names),
            "absent": list(self.absent),
            "in_index": list(self.in_index),
            "unchecked": list(self.unchecked),
            "added": list(self.added),
            "products": list(self.products),
            "context_before": self.context_before,
            "context_after": self.context_after,
        }


def _context(hits: Sequence[Hit], question: Question, settings: Settings) -> bool | None:
    if not question.answer_keywords:
        return None
    shown = "\n".join(
        prompts.passage_text(hit, settings.passage_chars) for hit in prompts.shown(hits)
    )
    return has_all_keywords(shown, question.answer_keywords)


def evaluate_gate(
    questions: Sequence[Question],
    *,
    embedder: Embedder,
    index: VectorIndex,
    reranker: Reranker | None,
    settings: Settings,
) -> list[GateRecord]:
    """The gate's first grade for each question, as the graph would make it."""
    records: list[GateRecord] = []
    for question in questions:
        hits = retrieval.configured_search(
            question.question[: limits.QUERY_CHARS],
            settings,
            embedder=embedder,
            index=index,
            reranker=reranker,
            top_k=settings.top_k,
        )
        check, passages, _ = asyncio.run(
            grounding.check(
                question.question,
                hits,
                index,
                passage_chars=settings.passage_chars,
                top_k=settings.top_k,
            )
        )
        answerable = question.answerable
        records.append(
            GateRecord(
                id=question.id,
                kind=question.kind,
                answerable=answerable,
                names=check.names,
                absent=check.absent,
                in_index=check.in_index,
                unchecked=check.unchecked,
                added=check.added,
                products=check.products,
                context_before=_context(hits, question, settings) if answerable else None,
                context_after=_context(passages, question, settings) if answerable else None,
            )
        )
    return records


def _share(values: Sequence[bool | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(sum(known) / len(known), 4) if known else None


def summarise(records: Sequence[GateRecord]) -> dict[str, Any]:
    """Per kind and in all: questions, with names, declined, targeted; the false declines."""

    def row(group: Sequence[GateRecord]) -> dict[str, Any]:
        return {
            "n": len(group),
            "with_names": sum(1 for r in group if r.names),
            "declined": sum(1 for r in group if r.declined),
            "targeted": sum(1 for r in group if r.targeted),
            "unchecked": sum(1 for r in group if r.unchecked),
            "context_before": _share([r.context_before for r in group]),
            "context_after": _share([r.context_after for r in group]),
        }

    kinds: dict[str, list[GateRecord]] = {}
    for record in records:
        kinds.setdefault(record.kind, []).append(record)
    return {
        "by_kind": {kind: row(group) for kind, group in kinds.items()},
        "all": row(records),
        # An answerable question the gate declines: the documents hold the answer,
        # and no model is asked. Each is listed with the names it found nowhere.
        "answerable_declined": [
            {"id": r.id, "kind": r.kind, "absent": list(r.absent)}
            for r in records
            if r.answerable and r.declined
        ],
        "declined": [
            {"id": r.id, "kind": r.kind, "absent": list(r.absent)} for r in records if r.declined
        ],
    }


def markdown(gate: Mapping[str, Any]) -> list[str]:
    """The gate section of report.md."""
    lines = [
        "",
        "## Grounding gate (no model)",
        "",
        "Each question retrieved as the graph's first attempt does, then checked by the "
        "grounding gate: declined (a name no document holds), targeted (a name only the "
        "index held brought its passage in). Answer context before and after the gate, on "
        "answerable kinds. Greetings, code requests and abuse are routed away before "
        "retrieval in the graph; their row is what the gate would do to one taken for a "
        "question.",
        "",
        "| kind | n | with names | declined | targeted | unchecked | context before | "
        "context after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows = {**gate["by_kind"], "all": gate["all"]}
    for kind, row in rows.items():
        cells = [
            row[k]
            for k in (
                "n",
                "with_names",
                "declined",
                "targeted",
                "unchecked",
                "context_before",
                "context_after",
            )
        ]
        lines.append(
            f"| {kind} | " + " | ".join("–" if c is None else str(c) for c in cells) + " |"
        )
    wrong = gate["answerable_declined"]
    lines += ["", f"Answerable questions declined by the gate: {len(wrong)}."]
    lines += [f"- {r['id']} ({r['kind']}): {', '.join(r['absent'])}" for r in wrong]
    return lines
