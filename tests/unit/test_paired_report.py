"""Paired tables: two runs of the same questions (`candor compare --before --after`),
and candor against its references within one run (report.md, `candor compare`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from candor.evaluation.compare import paired_runs, side_by_side
from candor.evaluation.report import to_markdown, write_report

pytestmark = pytest.mark.unit


def answers(n: int, correct: int, prefix: str) -> list[dict[str, Any]]:
    """n factual questions answered, the first `correct` of them with every keyword."""
    return [
        {
            "id": f"{prefix}-{i}",
            "kind": "factual",
            "seconds": 30.0,
            "decision": "answered",
            "answer_correct": i < correct,
            "cited_sources": ["a.html"],
            "citations_valid": 1,
            "model_calls": 3,
            "tokens_in": 1200,
            "unsupported_left": [],
        }
        for i in range(n)
    ]


def ranks(n: int, found: int, prefix: str) -> dict[str, int | None]:
    return {f"{prefix}-{i}": 1 if i < found else None for i in range(n)}


def report(
    questions_file: str, *, correct: int, found: int, plain_found: int, prefix: str
) -> dict[str, Any]:
    return {
        "meta": {
            "date": "2026-12-02T10:00:00+00:00",
            "questions_file": questions_file,
            "questions": 28,
            "corpus": "docs",
            "documents": 2,
            "chunks": 7,
            "embedder": "hashing",
            "index": "eval-0123",
        },
        "retrieval": {},
        "retrieval_ranks": {
            "hybrid": ranks(28, found, prefix),
            "plain": ranks(28, plain_found, prefix),
        },
        "retrieval_context": {
            "hybrid": {f"{prefix}-{i}": i < found for i in range(28)},
            "plain": {f"{prefix}-{i}": i < plain_found for i in range(28)},
        },
        "agent_questions": answers(28, correct, prefix),
    }


def row(text: str, figure: str) -> str:
    (line,) = [line for line in text.splitlines() if line.startswith(f"| {figure} |")]
    return line


def test_ten_more_answers_right_on_both_sets_is_kept() -> None:
    before = [
        (
            "old/dev",
            report("eval/git-doc-questions.jsonl", correct=5, found=20, plain_found=20, prefix="g"),
        ),
        (
            "old/val",
            report(
                "eval/sqlite-doc-questions.jsonl", correct=6, found=20, plain_found=20, prefix="s"
            ),
        ),
    ]
    after = [
        (
            "new/dev",
            report(
                "eval/git-doc-questions.jsonl", correct=15, found=20, plain_found=20, prefix="g"
            ),
        ),
        (
            "new/val",
            report(
                "eval/sqlite-doc-questions.jsonl", correct=16, found=20, plain_found=20, prefix="s"
            ),
        ),
    ]
    text = paired_runs(before, after)
    assert "- git-doc: before `old/dev`" in text and "- sqlite-doc: before `old/val`" in text
    line = row(text, "answers with every keyword")
    assert "0.179 → 0.536 (n=28)" in line  # git-doc: 5 then 15 of 28
    assert "10 better, 0 worse" in line
    assert line.endswith("| **helps** |")
    # Nothing else moved.
    assert row(text, "hybrid Recall@5").endswith("| no difference |")


def test_a_run_that_loses_on_one_set_beyond_its_interval_is_not_kept() -> None:
    before = [
        ("dev", report("git-doc-questions.jsonl", correct=0, found=20, plain_found=20, prefix="g")),
        (
            "val",
            report("sqlite-doc-questions.jsonl", correct=12, found=20, plain_found=20, prefix="s"),
        ),
    ]
    after = [
        (
            "dev",
            report("git-doc-questions.jsonl", correct=24, found=20, plain_found=20, prefix="g"),
        ),
        (
            "val",
            report("sqlite-doc-questions.jsonl", correct=2, found=20, plain_found=20, prefix="s"),
        ),
    ]
    line = row(paired_runs(before, after), "answers with every keyword")
    assert line.endswith("| loses on sqlite-doc |")


def test_runs_of_different_question_files_are_paired_on_the_questions_both_hold() -> None:
    before = [
        ("a", report("git-doc-questions.jsonl", correct=5, found=9, plain_found=9, prefix="g"))
    ]
    after = [("b", report("other-questions.jsonl", correct=5, found=9, plain_found=9, prefix="g"))]
    text = paired_runs(before, after)
    assert "different question files" in text


def test_paired_runs_refuse_unmatched_sets() -> None:
    one = ("a", report("git-doc-questions.jsonl", correct=1, found=1, plain_found=1, prefix="g"))
    with pytest.raises(ValueError, match="2 runs before and 1 after"):
        paired_runs([one, one], [one])


def test_report_md_pairs_hybrid_with_plain_per_question() -> None:
    text = to_markdown(
        report("git-doc-questions.jsonl", correct=1, found=20, plain_found=8, prefix="g")
    )
    assert "## Paired: candor against its references" in text
    assert "### hybrid against plain (retrieval)" in text
    line = row(text, "Recall@1")
    assert "0.286 → 0.714 (n=28)" in line and "12 better, 0 worse" in line
    assert line.endswith("| **helps** |")
    assert "plain_rag" not in text  # the reference is not in this report: no section


def test_the_agent_is_paired_with_plain_rag_when_the_report_has_it() -> None:
    data = report("git-doc-questions.jsonl", correct=4, found=9, plain_found=9, prefix="g")
    data["plain_rag_questions"] = answers(28, 14, "g")
    text = to_markdown(data)
    assert "### the agent against plain_rag (one answer call)" in text
    line = row(text, "answers with every keyword")
    assert "0.500 → 0.143 (n=28)" in line  # plain_rag 14 of 28, candor 4
    assert line.endswith("| loses |")


def test_report_json_keeps_its_keys_and_adds_the_paired_figures(tmp_path: Path) -> None:
    data = report("git-doc-questions.jsonl", correct=4, found=20, plain_found=8, prefix="g")
    data["retrieval"] = {}
    data.pop("agent_questions")
    write_report(data, tmp_path)
    written = json.loads((tmp_path / "report.json").read_text())
    assert {"meta", "retrieval", "retrieval_ranks", "retrieval_context"} <= set(written)
    (arm,) = written["paired"]
    assert (arm["before"], arm["after"]) == ("plain", "hybrid")
    recall = next(f for f in arm["figures"] if f["figure"] == "Recall@1")
    assert recall["kept"] and recall["sets"]["git-doc"]["better"] == 12


def test_side_by_side_pools_both_sets_against_the_plain_reference() -> None:
    reports = {
        "dev": report("git-doc-questions.jsonl", correct=1, found=20, plain_found=20, prefix="g"),
        "validation": report(
            "sqlite-doc-questions.jsonl", correct=1, found=10, plain_found=20, prefix="s"
        ),
    }
    text = side_by_side(reports)
    assert "## Paired: hybrid against plain (retrieval)" in text
    assert "| figure | better | dev: plain → hybrid | dev: hybrid − plain [95%] |" in text
    assert row(text, "Recall@1").endswith("| loses on validation |")
