"""A regression guard on the validation set (SQLite's manual, never tuned on):
hybrid Recall@5 on its nine exact-identifier questions (sqlite-001..sqlite-009),
and the grounding gate finding every name those questions use, with the local
ONNX embedder and no chat model.

Cheap like tests/slow/test_eval_smoke.py: the corpus is the pages those questions
expect plus 20 distractor pages (every ninth of the rest, sorted by name), and
the index in .candor/test-eval is reused from the second run on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.eval_smoke import corpus_from_env, smoke_report

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = ROOT / "data/eval/sqlite-doc-questions.jsonl"
IDS = {f"sqlite-00{i}" for i in range(1, 10)}
DISTRACTORS = 20
# Measured 2026-12-01: 9/9 (1.0), each page first. One miss (0.89) still passes;
# two (0.78) fail the suite. The threshold guards; it was not tuned toward.
MIN_HYBRID_RECALL_AT_5 = 0.85


def corpus_dir() -> Path:
    return corpus_from_env(
        "CANDOR_TEST_VALIDATION_CORPUS", "cli.html", what="SQLite pages", hint=""
    )


def test_validation_identifier_questions_are_found_and_pass_the_grounding_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = smoke_report(
        corpus_dir(),
        QUESTIONS,
        IDS,
        strategies="hybrid",
        distractors=DISTRACTORS,
        tmp_path=tmp_path,
        monkeypatch=monkeypatch,
    )
    hybrid = report["retrieval"]["hybrid"]
    assert hybrid["n"] == len(IDS)
    assert hybrid["recall@5"] >= MIN_HYBRID_RECALL_AT_5, report["retrieval_ranks"]

    # No answerable question may be declined for a name the documents do hold
    # (the report's gate section: each question's first grade, as the graph makes it).
    assert report["gate"]["answerable_declined"] == [], report["gate_questions"]
    assert report["gate"]["all"]["n"] == len(IDS)
