"""The committed generated question sets (data/eval/generated, `make generated-questions`)
are what the generator makes: valid question files of the corpora they were written
from, each question passing today's filters against the excerpt it was written from,
and each excerpt standing on the page the question expects first.

A set edited by hand, or filters changed without writing the sets again, fails here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from candor.evaluation import generate
from candor.evaluation.corpus import read_corpus
from candor.evaluation.questions import load_questions
from tests.support.eval_smoke import corpus_from_env

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "data/eval/generated"
SETS = {
    "git-doc": ("CANDOR_TEST_CORPUS", "git-log.html", "Git pages"),
    "sqlite-doc": ("CANDOR_TEST_VALIDATION_CORPUS", "cli.html", "SQLite pages"),
}
# What issue 19 asks of a set: enough questions to tell two retrievals apart.
AT_LEAST = 150


@pytest.mark.parametrize("name", sorted(SETS))
def test_a_committed_generated_set_is_what_the_generator_makes_of_its_corpus(name: str) -> None:
    variable, page, what = SETS[name]
    corpus = corpus_from_env(variable, page, what=what, hint="")
    documents = read_corpus(corpus)
    path = GENERATED / f"{name}-questions.jsonl"
    questions = load_questions(path, sources={source for source, _ in documents})
    assert len(questions) >= AT_LEAST
    texts = {
        source: " ".join(generate._text_of(source, data).split()) for source, data in documents
    }
    seen: set[str] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        assert generate.rejection(row["question"], row["excerpt"], seen) is None, row["id"]
        seen.add(" ".join(generate.words(row["question"])))
        assert " ".join(row["excerpt"].split()) in texts[row["expected_sources"][0]], row["id"]
    about = json.loads((GENERATED / f"{name}-questions.json").read_text(encoding="utf-8"))
    assert about["kept"] == len(questions) and about["attempts"] <= about["max_attempts"]
