"""The eval's view of the checks: the grade against its answer context, the
grounding gate's declines and the support check's verdicts, and dev beside validation."""

from __future__ import annotations

from typing import Any

import pytest

from candor.evaluation import grading
from candor.evaluation.agent_metrics import AgentRecord, summarise, summarise_by_kind
from candor.evaluation.compare import side_by_side
from candor.evaluation.grading import GradeOutcome, confusion, grade_rates, outcomes
from candor.evaluation.report import to_markdown
from candor.graph import prompts
from candor.graph.state import GradeRecord
from candor.types import Chunk, Hit

pytestmark = pytest.mark.unit

CHUNKS = {
    "gc-0": Chunk("gc-0", "gc.auto defaults to 6700; 0 disables it.", "git-gc.html", "git-gc(1)"),
    "log-0": Chunk("log-0", "git log shows commits.", "git-log.html", "git-log(1)"),
}


def grade(ids: tuple[str, ...], answerable: bool, by: str = "model") -> GradeRecord:
    return GradeRecord(attempt=1, passage_ids=ids, answerable=answerable, by=by)  # type: ignore[arg-type]


def test_each_model_grade_is_judged_against_the_documents_its_prompt_showed() -> None:
    # The excerpts a grade read, as its prompt held them (documents_of), not whole chunks.
    shown = [
        grading.documents_of(prompts.grade(prompts.format_passages([hit], 600), "q"))
        for hit in (Hit(CHUNKS["log-0"], 0.0), Hit(CHUNKS["gc-0"], 0.0))
    ]
    graded = outcomes(
        [grade(("log-0",), False), grade(("gc-0", "log-0"), False)],
        shown,
        CHUNKS,
        ("6700", "disables"),
        answerable_kind=True,
        passage_chars=600,
    )
    assert [g.context for g in graded] == ["lacks_keywords", "has_keywords"]


def test_a_grade_whose_prompt_showed_an_excerpt_lacks_what_the_chunk_holds() -> None:
    excerpt = Chunk("gc-0", "gc.auto defaults to 6700.", "git-gc.html", "git-gc(1)")
    shown = grading.documents_of(
        prompts.grade(prompts.format_passages([Hit(excerpt, 0.0)], 600), "q")
    )
    (graded,) = outcomes(
        [grade(("gc-0",), True)],
        [shown],
        CHUNKS,
        ("disables",),
        answerable_kind=True,
        passage_chars=600,
    )
    assert graded.context == "lacks_keywords"


def test_a_grade_the_gate_made_is_judged_on_its_passages_shown_part() -> None:
    (graded,) = outcomes(
        [grade(("gc-0",), False, by="gate")],
        [],
        CHUNKS,
        ("disables",),
        answerable_kind=True,
        passage_chars=20,
    )
    assert graded.context == "lacks_keywords"


def test_grades_of_unanswerable_questions_have_no_keyword_context() -> None:
    (graded,) = outcomes(
        [grade(("gc-0",), True)], ["gc.auto"], CHUNKS, (), answerable_kind=False, passage_chars=600
    )
    assert graded.context == "unanswerable"


def test_the_question_in_a_grade_prompt_is_not_documents() -> None:
    messages = prompts.grade(prompts.format_passages([Hit(CHUNKS["log-0"], 0.0)], 600), "gc.auto?")
    assert "gc.auto" not in grading.documents_of(messages)


GRADES = [
    GradeOutcome(True, "model", "has_keywords"),
    GradeOutcome(False, "model", "has_keywords"),  # a false decline
    GradeOutcome(False, "model", "lacks_keywords"),
    GradeOutcome(True, "model", "unanswerable"),  # a false accept
    GradeOutcome(False, "model", "unanswerable"),
    GradeOutcome(False, "model", "unanswerable"),
    GradeOutcome(False, "gate", "unanswerable"),
    GradeOutcome(False, "no_passages", "lacks_keywords"),
    GradeOutcome(True, "names", "has_keywords"),
    GradeOutcome(True, "names", "unanswerable"),  # a false accept no model made
]


def test_the_confusion_matrix_counts_model_grades_and_the_gates_apart() -> None:
    matrix = confusion(GRADES)
    assert matrix["model"] == {
        "has_keywords": {"answerable": 1, "not_answerable": 1, "names": 1},
        "lacks_keywords": {"answerable": 0, "not_answerable": 1, "names": 0},
        "unanswerable": {"answerable": 1, "not_answerable": 2, "names": 1},
    }
    assert matrix["gate_declined"] == 1 and matrix["no_passages"] == 1 and matrix["n"] == 10


def test_grade_rates_come_with_their_n() -> None:
    rates = grade_rates(GRADES)
    assert rates["answerable_when_context_has_keywords"] == 0.5
    assert rates["answerable_when_context_has_keywords_n"] == 2
    assert rates["not_answerable_on_unanswerable"] == pytest.approx(2 / 3, abs=1e-4)
    assert rates["not_answerable_on_unanswerable_n"] == 3


RECORDS = [
    AgentRecord(
        "f1",
        "factual",
        1.0,
        decision="answered",
        attempts=1,
        grades=(GradeOutcome(True, "model", "has_keywords"),),
        support="trimmed",
        unsupported=("9000",),
    ),
    AgentRecord(
        "f2",
        "factual",
        1.0,
        decision="answered",
        attempts=1,
        grades=(GradeOutcome(True, "model", "has_keywords"),),
        support="supported",
        unsupported_left=("42",),  # the harness found one the check missed
    ),
    AgentRecord(
        "f3",
        "factual",
        1.0,
        decision="declined",
        attempts=1,
        grades=(GradeOutcome(True, "model", "has_keywords"),),
        support="declined",
    ),
    AgentRecord(
        "u1",
        "unanswerable",
        1.0,
        decision="declined",
        attempts=1,
        grades=(GradeOutcome(False, "gate", "unanswerable"),),
        absent_names=("core.autoCompactHistory",),
    ),
    AgentRecord("g1", "greeting", 1.0, decision="smalltalk"),
]


def test_the_agent_summary_reports_the_checks_with_their_n() -> None:
    summary = summarise(RECORDS)
    assert summary["gate_declined"] == 0.25 and summary["samples"]["gate_declined"] == 4
    assert summary["support_trimmed"] == pytest.approx(2 / 3, abs=1e-4)
    assert summary["samples"]["support_trimmed"] == 3
    assert summary["unsupported_in_answers"] == 0.5
    assert summary["samples"]["unsupported_in_answers"] == 2
    assert summary["grading"]["confusion"]["gate_declined"] == 1


def test_a_record_writes_its_checks_to_json() -> None:
    row = RECORDS[0].to_json()
    assert row["support"] == "trimmed" and row["unsupported"] == ["9000"]
    assert row["grades"] == [{"answerable": True, "by": "model", "context": "has_keywords"}]


def agent_report(records: list[AgentRecord], corpus: str) -> dict[str, Any]:
    agent = summarise(records) | {"by_kind": summarise_by_kind(records), "config": {}}
    hybrid = {
        "n": 2,
        "recall@1": 0.5,
        "recall@5": 1.0,
        "recall@10": 1.0,
        "mrr": 0.75,
        "answer_context": 0.5,
        "answer_context_n": 2,
        "answer_context_k": 3,
        "p50_ms": 1.0,
        "p95_ms": 2.0,
    }
    meta = {
        "date": "2026-12-01T00:00:00+00:00",
        "questions_file": f"{corpus}.jsonl",
        "questions": len(records),
        "documents": 2,
        "chunks": 2,
        "corpus": corpus,
        "embedder": "hashing",
        "index": "eval-x",
    }
    return {"meta": meta, "retrieval": {"hybrid": hybrid}, "agent": agent}


def test_the_markdown_report_has_the_grading_matrix_per_kind() -> None:
    text = to_markdown(agent_report(RECORDS, "docs"))
    assert "### Grading" in text
    assert "| factual | passages hold every keyword | 3 | 0 | 0 | 0 | 0 |" in text
    assert "| unanswerable | – | 0 | 0 | 0 | 1 | 0 |" in text
    assert "| Unsupported specifics left in answers | 0.500 | 2 |" in text


def test_dev_and_validation_are_reported_side_by_side() -> None:
    reports = {
        "dev": agent_report(RECORDS, "git-doc"),
        "validation": agent_report(RECORDS[:2], "sqlite-doc"),
    }
    text = side_by_side(reports)
    assert "| figure | dev | validation |" in text
    assert "| unsupported specifics left in answers | 0.500 (n=2) | 0.500 (n=2) |" in text
    assert "| routing: greeting | 1.000 (n=1) | – |" in text
