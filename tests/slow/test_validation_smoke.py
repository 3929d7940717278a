"""A regression guard on the validation set (SQLite's manual, never tuned on):
hybrid Recall@5 on its nine exact-identifier questions (sqlite-001..sqlite-009),
and the grounding gate finding every name those questions use, with the local
ONNX embedder and no chat model.

Cheap like tests/slow/test_eval_smoke.py: the corpus is the pages those questions
expect plus 20 distractor pages (every ninth of the rest, sorted by name), and
the index in .candor/test-eval is reused from the second run on.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from candor.cli import main
from tests.conftest import clear_candor_env

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = ROOT.parent / "shared/eval/sqlite-doc-questions.jsonl"
IDS = {f"sqlite-00{i}" for i in range(1, 10)}
DISTRACTORS = 20
# Measured 2026-12-01: 9/9 (1.0), each page first. One miss (0.89) still passes;
# two (0.78) fail the suite. The threshold guards; it was not tuned toward.
MIN_HYBRID_RECALL_AT_5 = 0.85


def corpus_dir() -> Path:
    configured = os.environ.get("CANDOR_TEST_VALIDATION_CORPUS")
    if not configured:
        pytest.skip("CANDOR_TEST_VALIDATION_CORPUS is not set; `make test` sets it")
    folder = Path(configured)
    if not folder.is_absolute():
        folder = ROOT / folder
    if not (folder / "cli.html").is_file():
        pytest.fail(f"CANDOR_TEST_VALIDATION_CORPUS={configured} holds no SQLite pages")
    return folder


def test_validation_identifier_questions_are_found_and_pass_the_grounding_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = corpus_dir()
    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    rows = [row for row in rows if row["id"] in IDS]
    assert len(rows) == len(IDS)
    needed = {source for row in rows for source in row["expected_sources"]}
    others = sorted(p.name for p in corpus.glob("*.html") if p.name not in needed)
    distractors = others[:: max(1, len(others) // DISTRACTORS)][:DISTRACTORS]
    pages = tmp_path / "pages"
    pages.mkdir()
    for name in sorted(needed) + distractors:
        shutil.copy(corpus / name, pages / name)
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(row) + "\n" for row in rows))

    clear_candor_env(monkeypatch)
    monkeypatch.setenv("CANDOR_DATA_DIR", str(ROOT / ".candor" / "test-eval"))
    out = tmp_path / "out"
    argv = ["eval", "--corpus", str(pages), "--questions", str(questions), "--out", str(out)]
    code = main([*argv, "--retrieval-only", "--strategies", "hybrid"])

    assert code == 0, capsys.readouterr().err
    report = json.loads((out / "report.json").read_text())
    hybrid = report["retrieval"]["hybrid"]
    assert hybrid["n"] == len(IDS)
    assert hybrid["recall@5"] >= MIN_HYBRID_RECALL_AT_5, report["retrieval_ranks"]

    # No answerable question may be declined for a name the documents do hold
    # (the report's gate section: each question's first grade, as the graph makes it).
    assert report["gate"]["answerable_declined"] == [], report["gate_questions"]
    assert report["gate"]["all"]["n"] == len(IDS)
