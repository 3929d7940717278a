"""The suite's hand-written question sets (data/eval/suite) are true of their corpora as
candor reads them: every expected page exists, every keyword stands in an expected
page with its spaces as written, every multi-page question needs each of its pages,
and no unanswerable question's absent pattern is in the corpus (verify_suite.py).

An edit to a set, or to a corpus recipe, that makes a question wrong fails here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.eval_smoke import corpus_from_env

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "data" / "eval" / "suite"
SETS = {
    "flask-doc": ("CANDOR_TEST_FLASK_CORPUS", "config.html", "Flask pages"),
    "manpages": ("CANDOR_TEST_MANPAGES_CORPUS", "tcp.7.txt", "man pages as text"),
    "debian-reference": (
        "CANDOR_TEST_DEBIAN_REFERENCE_CORPUS",
        "debian-reference.en.pdf",
        "the Debian Reference PDF",
    ),
}


@pytest.mark.parametrize("name", sorted(SETS))
def test_a_hand_written_suite_set_is_true_of_its_corpus(name: str) -> None:
    variable, page, what = SETS[name]
    corpus = corpus_from_env(variable, page, what=what, hint=" (make suite-corpora)")
    questions = SUITE / f"{name}-questions.jsonl"
    checked = subprocess.run(
        [sys.executable, str(SUITE / "verify_suite.py"), str(questions), str(corpus)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "RESULT: OK" in checked.stdout
