"""A regression guard in `make test`: hybrid Recall@5 on the dev set's nine
exact-identifier questions (git-001..git-009), with the local ONNX embedder.

Cheap by construction: the corpus is only the pages those questions expect plus 20
distractor pages (every ninth of the rest, sorted by name), and the index lives in
.candor/test-eval under the name `candor eval` derives from the files, so every
run after the first reuses it. git-config.html (432 chunks, most of the build) is
left out; each question that lists it also lists the command's own page.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.eval_smoke import corpus_from_env, smoke_report

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = ROOT / "data/eval/git-doc-questions.jsonl"
IDS = {f"git-00{i}" for i in range(1, 10)}
LEFT_OUT = {"git-config.html"}
DISTRACTORS = 20
# Measured 2026-11-29: 9/9 (1.0) for hybrid and keyword alike. One miss (0.89)
# still passes; two (0.78) fail the suite.
MIN_HYBRID_RECALL_AT_5 = 0.85


def corpus_dir() -> Path:
    return corpus_from_env(
        "CANDOR_TEST_CORPUS",
        "git-push.html",
        what="Git pages; run `make corpus`",
        hint=" (`make corpus`)",
    )


def test_hybrid_recall_at_5_on_exact_identifier_questions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = smoke_report(
        corpus_dir(),
        QUESTIONS,
        IDS,
        strategies="keyword,hybrid",
        left_out=LEFT_OUT,
        distractors=DISTRACTORS,
        tmp_path=tmp_path,
        monkeypatch=monkeypatch,
    )
    hybrid = report["retrieval"]["hybrid"]
    assert hybrid["n"] == len(IDS)
    assert hybrid["recall@5"] >= MIN_HYBRID_RECALL_AT_5, report["retrieval_ranks"]
