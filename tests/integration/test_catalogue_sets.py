"""The catalogue question sets hold only entries their corpora hold (verify_catalogue.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.eval_smoke import corpus_from_env

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("questions", "variable", "page"),
    [
        ("git-doc-catalogue.jsonl", "CANDOR_TEST_CORPUS", "git-push.html"),
        ("sqlite-doc-catalogue.jsonl", "CANDOR_TEST_VALIDATION_CORPUS", "cli.html"),
    ],
)
def test_every_entry_of_the_set_is_in_its_corpus(questions: str, variable: str, page: str) -> None:
    corpus = corpus_from_env(variable, page, what="its corpus", hint=" (`make test`)")

    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "data/eval/verify_catalogue.py"),
            str(ROOT / "data/eval" / questions),
            str(corpus),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )

    assert done.returncode == 0, done.stdout
    assert done.stdout.rstrip().endswith("RESULT: OK")
