"""Agent metrics over per-question records of full-graph runs.

Every rate comes with its sample size in `samples`, and is None when that is 0.
A question that raised is a failure: it counts in `failures` and in no rate.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from candor.evaluation.grading import GradeOutcome, confusion, grade_rates
from candor.evaluation.questions import ANSWERABLE_KINDS, CATALOGUE_KINDS
from candor.evaluation.retrieval_metrics import document_of, has_all_keywords, percentile

# The decisions that show the right path was taken; a question of any other kind
# must go through retrieval, ending answered or declined.
EXPECTED_DECISIONS: dict[str, frozenset[str]] = {
    "greeting": frozenset({"smalltalk"}),
    "code_request": frozenset({"code_refused"}),
    "abusive": frozenset({"warned", "ended"}),
}
RETRIEVAL_DECISIONS = frozenset({"answered", "declined"})

RATES = (
    "routing_accuracy",
    "decline_precision",
    "decline_recall",
    "answerable_declined",
    "answer_correct",
    "citation_accuracy",
    "citation_validity",
    "rewrite_rate",
    "gate_declined",
    "support_trimmed",
    "unsupported_in_answers",
    "answers_naming_sources",
    "screened_without_model",
)


@dataclass(frozen=True, slots=True)
class AgentRecord:
    """What one question's run did (or why it failed: `error`)."""

    id: str
    kind: str
    seconds: float
    decision: str = ""
    answer: str = ""
    cited_sources: tuple[str, ...] = ()
    citations_valid: int = 0  # of the citations, those naming a passage the run retrieved
    expected_sources: tuple[str, ...] = ()
    answer_keywords: tuple[str, ...] = ()
    model_calls: int = 0
    tokens_in: int = 0  # prompt tokens sent
    tokens_out: int = 0
    # Of tokens_in, those the model computed (the rest came from its prompt cache).
    tokens_evaluated: int = 0
    cost_usd: float = 0.0
    index_reads: int = 0  # queries and fetches of the index (the trace's index_reads)
    attempts: int = 0
    rewrites: int = 0
    grades: tuple[GradeOutcome, ...] = ()
    # The grounding gate's names that no document holds, at the last grade.
    absent_names: tuple[str, ...] = ()
    # The support check's verdict on the answer (supported, trimmed, declined),
    # None when no answer reached it; and the specifics it found unsupported.
    support: str | None = None
    unsupported: tuple[str, ...] = ()
    # Specifics of the answer as sent that its cited passages and the question do
    # not hold, checked again by the harness: the support check's miss count.
    unsupported_left: tuple[str, ...] = ()
    # What the answer says about its sources instead of answering (candor.text.meta_talk).
    meta_talk: tuple[str, ...] = ()
    # Who settled the message's kind (the trace's screening: classifier, cache or
    # model), and whether that took no model call at all; None when not recorded.
    screened_by: str | None = None
    screened_without_model: bool | None = None
    # Seconds from the start to the first `token` event of the stream, as the widget
    # reads POST /ask/stream; None when no token came. `seconds` ends at `done`.
    first_token_s: float | None = None
    # A question about the documents themselves (candor.evaluation.catalogue_metrics):
    # the entries a complete answer holds, those the answer holds, the names it shows
    # as code that no document holds; whether the run reached the catalogue node, and
    # was answered there.
    entries: tuple[str, ...] = ()
    present: tuple[str, ...] = ()
    invented: tuple[str, ...] = ()
    reached_catalogue: bool = False
    catalogue_answered: bool = False
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None

    def routed_right(self) -> bool:
        if self.kind in CATALOGUE_KINDS:
            return self.reached_catalogue
        return self.decision in EXPECTED_DECISIONS.get(self.kind, RETRIEVAL_DECISIONS)

    def completeness(self) -> float:
        """The share of the entries a complete answer holds that this one holds."""
        return len(self.present) / len(self.entries) if self.entries else 0.0

    @property
    def judged_by_keywords(self) -> bool:
        """An answerable question whose answer is checked by its expected keywords: a
        generated question (candor eval --generate) has none, so nothing says it is right."""
        return self.kind in ANSWERABLE_KINDS and bool(self.answer_keywords)

    def keywords_present(self) -> bool:
        return has_all_keywords(self.answer, self.answer_keywords)

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "seconds": round(self.seconds, 3),
        }
        if self.failed:
            return row | {"error": self.error}
        return row | {
            "decision": self.decision,
            "routed_right": self.routed_right(),
            "answer_correct": self.keywords_present() if self.judged_by_keywords else None,
            "cited_sources": list(self.cited_sources),
            "citations_valid": self.citations_valid,
            "model_calls": self.model_calls,
            "tokens_in": self.tokens_in,
            "tokens_evaluated": self.tokens_evaluated,
            "tokens_out": self.tokens_out,
            "cost_usd": self.cost_usd,
            "index_reads": self.index_reads,
            "attempts": self.attempts,
            "rewrites": self.rewrites,
            "grades": [grade.to_json() for grade in self.grades],
            "absent_names": list(self.absent_names),
            "support": self.support,
            "unsupported": list(self.unsupported),
            "unsupported_left": list(self.unsupported_left),
            "meta_talk": list(self.meta_talk),
            "screened_by": self.screened_by,
            "screened_without_model": self.screened_without_model,
            "first_token_s": None if self.first_token_s is None else round(self.first_token_s, 3),
            **(
                {
                    "completeness": round(self.completeness(), 4),
                    "entries_missing": [e for e in self.entries if e not in self.present],
                    "invented": list(self.invented),
                    "reached_catalogue": self.reached_catalogue,
                    "catalogue_answered": self.catalogue_answered,
                }
                if self.kind in CATALOGUE_KINDS
                else {}
            ),
            "answer": self.answer,
        }


def _rate(hits: int, n: int) -> float | None:
    return round(hits / n, 4) if n else None


def _mean(values: Sequence[float], digits: int = 4) -> float | None:
    return round(statistics.fmean(values), digits) if values else None


def _percentile(values: Sequence[float], q: float) -> float | None:
    value = percentile(values, q)
    return None if value is None else round(value, 3)


def summarise(records: Sequence[AgentRecord]) -> dict[str, Any]:
    """The agent figures of a set of records (all questions, or one kind)."""
    done = [r for r in records if not r.failed]
    answerable = [r for r in done if r.kind in ANSWERABLE_KINDS]
    unanswerable = [r for r in done if r.kind == "unanswerable"]
    declined = [r for r in answerable + unanswerable if r.decision == "declined"]
    answered = [r for r in answerable if r.decision == "answered"]
    all_answered = [r for r in done if r.decision == "answered"]
    retrieving = [r for r in done if r.attempts > 0]
    citations = sum(len(r.cited_sources) for r in all_answered)
    screened = [r for r in done if r.screened_without_model is not None]
    seconds = [r.seconds for r in done]
    # What a visitor waits for in the widget: the first token of an answer, and done.
    first_tokens = [r.first_token_s for r in all_answered if r.first_token_s is not None]
    dones = [r.seconds for r in all_answered]
    p50, p95 = percentile(seconds, 50), percentile(seconds, 95)
    counts: dict[str, tuple[int, int]] = {
        "routing_accuracy": (sum(r.routed_right() for r in done), len(done)),
        # Declined questions that should have been: unanswerable among the declined.
        "decline_precision": (
            sum(1 for r in declined if r.kind == "unanswerable"),
            len(declined),
        ),
        "decline_recall": (
            sum(1 for r in unanswerable if r.decision == "declined"),
            len(unanswerable),
        ),
        "answerable_declined": (
            sum(1 for r in answerable if r.decision == "declined"),
            len(answerable),
        ),
        # All keywords in the answer; a declined answerable question is not correct.
        "answer_correct": (
            sum(r.keywords_present() for r in answerable if r.judged_by_keywords),
            sum(1 for r in answerable if r.judged_by_keywords),
        ),
        # Of the answers to questions that name their pages (a gap's names none yet).
        "citation_accuracy": (
            sum(1 for r in answered if set(r.cited_sources) & _documents(r.expected_sources)),
            sum(1 for r in answered if r.expected_sources),
        ),
        "citation_validity": (sum(r.citations_valid for r in all_answered), citations),
        "rewrite_rate": (sum(1 for r in retrieving if r.rewrites), len(retrieving)),
        # Questions the grounding gate declined, of those that reached a grade.
        "gate_declined": (
            sum(1 for r in done if r.grades and r.grades[-1].by == "gate"),
            sum(1 for r in done if r.grades),
        ),
        # Answers in which the support check found an unsupported specific (and
        # removed its sentence, or declined), of the answers it checked.
        "support_trimmed": (
            sum(1 for r in done if r.support in ("trimmed", "declined")),
            sum(1 for r in done if r.support is not None),
        ),
        "unsupported_in_answers": (
            sum(1 for r in all_answered if r.unsupported_left),
            len(all_answered),
        ),
        # Answers that name a passage, a tag or an instruction instead of answering.
        "answers_naming_sources": (
            sum(1 for r in all_answered if r.meta_talk),
            len(all_answered),
        ),
        # Messages whose kind the screening classifier (or its verdict cache) settled
        # with no model call, of those whose screening the trace recorded.
        "screened_without_model": (
            sum(1 for r in screened if r.screened_without_model),
            len(screened),
        ),
    }
    summary: dict[str, Any] = {"n": len(records)}
    for name, (hits, n) in counts.items():
        summary[name] = _rate(hits, n)
    grades = [grade for r in done for grade in r.grades]
    summary["grading"] = {"confusion": confusion(grades)} | grade_rates(grades)
    summary |= {
        "model_calls_per_question": _mean([r.model_calls for r in done], 3),
        "model_calls_per_answered": _mean([r.model_calls for r in all_answered], 3),
        # What an answered question costs: prompt tokens sent, and those the model
        # computed (the rest came from its prompt cache), and seconds (a mean, so
        # that it compares with plain_rag's as a ratio).
        "tokens_in_per_answered": _mean([r.tokens_in for r in all_answered], 1),
        "tokens_evaluated_per_answered": _mean([r.tokens_evaluated for r in all_answered], 1),
        "seconds_per_answered": _mean([r.seconds for r in all_answered], 3),
        "tokens_per_question": _mean([r.tokens_in + r.tokens_out for r in done], 1),
        "tokens_in_per_question": _mean([r.tokens_in for r in done], 1),
        "tokens_evaluated_per_question": _mean([r.tokens_evaluated for r in done], 1),
        "tokens_out_per_question": _mean([r.tokens_out for r in done], 1),
        "cost_per_question_usd": _mean([r.cost_usd for r in done], 8),
        "p50_s": None if p50 is None else round(p50, 3),
        "p95_s": None if p95 is None else round(p95, 3),
        "first_token_p50_s": _percentile(first_tokens, 50),
        "first_token_p90_s": _percentile(first_tokens, 90),
        "done_p50_s": _percentile(dones, 50),
        "done_p90_s": _percentile(dones, 90),
        "failures": len(records) - len(done),
        "samples": {name: n for name, (_, n) in counts.items()}
        | {
            "model_calls_per_question": len(done),
            "model_calls_per_answered": len(all_answered),
            "tokens_in_per_answered": len(all_answered),
            "tokens_evaluated_per_answered": len(all_answered),
            "seconds_per_answered": len(all_answered),
            "tokens_per_question": len(done),
            "tokens_in_per_question": len(done),
            "tokens_evaluated_per_question": len(done),
            "tokens_out_per_question": len(done),
            "cost_per_question_usd": len(done),
            "p50_s": len(done),
            "p95_s": len(done),
            "first_token_p50_s": len(first_tokens),
            "first_token_p90_s": len(first_tokens),
            "done_p50_s": len(dones),
            "done_p90_s": len(dones),
        },
    }
    return summary


def summarise_by_kind(records: Sequence[AgentRecord]) -> dict[str, dict[str, Any]]:
    kinds = sorted({r.kind for r in records})
    return {kind: summarise([r for r in records if r.kind == kind]) for kind in kinds}


# What an answered question costs, compared between the graph and a reference.
COST_FIGURES = ("seconds", "tokens_in", "tokens_evaluated", "model_calls")


def cost_ratios(
    graph: Sequence[dict[str, Any]], reference: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """Seconds, prompt tokens sent and evaluated, and model calls per answered question,
    each as the mean over the questions each answered, and the graph's as a ratio to
    the reference's.

    Rows are per-question records as reports hold them (AgentRecord.to_json); a row
    written before a figure was recorded counts in no mean of it.
    """

    def per_answered(rows: Sequence[dict[str, Any]]) -> dict[str, float | None]:
        answered = [r for r in rows if r.get("decision") == "answered"]
        return {
            key: _mean([float(r[key]) for r in answered if key in r], 3) for key in COST_FIGURES
        }

    mine, theirs = per_answered(graph), per_answered(reference)
    ratios: dict[str, Any] = {}
    for key in COST_FIGURES:
        a, b = mine[key], theirs[key]
        ratios[key] = {
            "graph": a,
            "reference": b,
            "ratio": round(a / b, 3) if a is not None and b else None,
        }
    ratios["n"] = {
        "graph": sum(1 for r in graph if r.get("decision") == "answered"),
        "reference": sum(1 for r in reference if r.get("decision") == "answered"),
    }
    return ratios


# What a visitor waits for, per answered question: the first token and done, p50 and p90.
STREAM_FIGURES: dict[str, tuple[str, int]] = {
    "first_token_p50_s": ("first_token", 50),
    "first_token_p90_s": ("first_token", 90),
    "done_p50_s": ("done", 50),
    "done_p90_s": ("done", 90),
}


def stream_ratios(
    graph: Sequence[dict[str, Any]], reference: Sequence[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Seconds to the first token and to done, p50 and p90 over the questions each
    answered, each with its n, and the graph's as a ratio to the reference's.

    Rows are per-question records as reports hold them (AgentRecord.to_json); a row
    written before first tokens were recorded counts in no first-token figure.
    """

    def seconds(rows: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
        answered = [r for r in rows if r.get("decision") == "answered"]
        return {
            "first_token": [
                float(r["first_token_s"]) for r in answered if r.get("first_token_s") is not None
            ],
            "done": [float(r["seconds"]) for r in answered],
        }

    mine, theirs = seconds(graph), seconds(reference)
    ratios: dict[str, dict[str, Any]] = {}
    for key, (what, q) in STREAM_FIGURES.items():
        a, b = _percentile(mine[what], q), _percentile(theirs[what], q)
        ratios[key] = {
            "graph": a,
            "graph_n": len(mine[what]),
            "reference": b,
            "reference_n": len(theirs[what]),
            "ratio": round(a / b, 3) if a is not None and b else None,
        }
    return ratios


def _documents(expected: Sequence[str]) -> set[str]:
    """The documents of a question's expected sources: a citation names a document,
    so one of a page of a PDF counts by its document."""
    return {document_of(source) for source in expected}
