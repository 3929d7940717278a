"""A regression guard in `make test`: hybrid Recall@5 on the dev set's nine
exact-identifier questions (git-001..git-009), with the local ONNX embedder.

Cheap by construction: the corpus is only the pages those questions expect plus 20
distractor pages (every ninth of the rest, sorted by name), and the index lives in
.candor/test-eval under the name `candor eval` derives from the files, so every
run after the first reuses it. git-config.html (432 chunks, most of the build) is
left out; each question that lists it also lists the command's own page.
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
QUESTIONS = ROOT.parent / "shared/eval/git-doc-questions.jsonl"
IDS = {f"git-00{i}" for i in range(1, 10)}
LEFT_OUT = {"git-config.html"}
DISTRACTORS = 20
# Measured 2026-11-29: 9/9 (1.0) for hybrid and keyword alike. One miss (0.89)
# still passes; two (0.78) fail the suite.
MIN_HYBRID_RECALL_AT_5 = 0.85


def corpus_dir() -> Path:
    configured = os.environ.get("CANDOR_TEST_CORPUS")
    if not configured:
        pytest.skip("CANDOR_TEST_CORPUS is not set; `make test` sets it (`make corpus`)")
    folder = Path(configured)
    if not folder.is_absolute():
        folder = ROOT / folder
    if not (folder / "git-push.html").is_file():
        pytest.fail(f"CANDOR_TEST_CORPUS={configured} holds no Git pages; run `make corpus`")
    return folder


def test_hybrid_recall_at_5_on_exact_identifier_questions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = corpus_dir()
    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    rows = [row for row in rows if row["id"] in IDS]
    assert len(rows) == len(IDS)
    for row in rows:
        row["expected_sources"] = [s for s in row["expected_sources"] if s not in LEFT_OUT]
    needed = {source for row in rows for source in row["expected_sources"]}
    others = sorted(p.name for p in corpus.glob("*.html") if p.name not in needed | LEFT_OUT)
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
    code = main([*argv, "--retrieval-only", "--strategies", "keyword,hybrid"])

    assert code == 0, capsys.readouterr().err
    report = json.loads((out / "report.json").read_text())
    hybrid = report["retrieval"]["hybrid"]
    assert hybrid["n"] == len(IDS)
    assert hybrid["recall@5"] >= MIN_HYBRID_RECALL_AT_5, report["retrieval_ranks"]
