"""The questions about the documents themselves in `candor eval`: their files, their
figures (completeness, invented entries, routing) and where the report shows them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from candor.evaluation import catalogue_metrics
from candor.evaluation.agent_metrics import AgentRecord
from candor.evaluation.questions import (
    CATALOGUE_KINDS,
    QuestionFileError,
    load_question_files,
    load_questions,
)
from candor.evaluation.report import catalogue_lines

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SETS = {
    "git": ROOT / "data/eval/git-doc-catalogue.jsonl",
    "sqlite": ROOT / "data/eval/sqlite-doc-catalogue.jsonl",
}


@pytest.mark.parametrize("name", sorted(SETS))
def test_each_catalogue_set_holds_at_least_fifteen_questions_with_entries(name: str) -> None:
    questions = load_questions(SETS[name])

    assert len(questions) >= 15
    assert {q.kind for q in questions} == CATALOGUE_KINDS
    assert all(q.entries for q in questions)


def test_a_catalogue_question_without_entries_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"id": "c1", "question": "List the options.", "kind": "list"}))

    with pytest.raises(QuestionFileError, match="a list question needs 'entries'"):
        load_questions(path)


def test_question_files_asked_together_may_not_share_an_id(tmp_path: Path) -> None:
    row = {"id": "q1", "question": "Hi!", "kind": "greeting"}
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(json.dumps(row))
    second.write_text(json.dumps(row))

    with pytest.raises(QuestionFileError, match="more than one question file: q1"):
        load_question_files([first, second])


def test_the_verifier_refuses_an_entry_the_page_does_not_hold(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "tool.html").write_text(
        "<html><body><dl><dt><code>--all</code></dt><dd>x</dd>"
        "<dt>-n</dt><dt>--dry-run</dt><dd>y</dd></dl></body></html>"
    )
    rows = [
        {
            "id": "c1",
            "question": "What are the options of tool?",
            "kind": "list",
            "expected_sources": ["tool.html"],
            "entries": ["--all", "--dry-run", "2"],
            "count": {"what": "dt", "source": "tool.html"},
            "notes": "",
        },
        {
            "id": "c2",
            "question": "How many pages?",
            "kind": "catalogue",
            "expected_sources": ["tool.html"],
            "entries": ["--force", "3"],
            "count": {"what": "pages"},
            "notes": "",
        },
    ]
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows))

    done = subprocess.run(
        [sys.executable, str(ROOT / "data/eval/verify_catalogue.py"), str(questions), str(corpus)],
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 1
    failures = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    assert failures == [
        "FAIL c2: entry '--force' is in none of ['tool.html']",
        "FAIL c2: {'what': 'pages'} counts 1, not 3",
    ]


def test_completeness_reads_entries_whatever_their_spacing_and_case() -> None:
    present = catalogue_metrics.entries_present(
        "Functions: `ABS(X)`, `char(X1, X2)`.", ["abs(X)", "char(X1,X2)", "zeroblob(N)"]
    )

    assert present == ("abs(X)", "char(X1,X2)")


def test_a_name_shown_as_code_that_no_document_holds_is_invented() -> None:
    corpus = catalogue_metrics.corpus_text(
        [("a.html", b"<p>Use <code>--all</code> or <b>--dry</b>-run.</p>"), ("b.md", b"`GIT_DIR`")]
    )

    found = catalogue_metrics.invented(
        "`--all`, `--dry-run`, `GIT_DIR`, `--force-if-newer`", corpus
    )

    assert found == ("--force-if-newer",)


def test_terms_joined_into_one_entry_are_not_invented_when_each_is_held() -> None:
    # "-n" and "--dry-run" are two terms of one description, kept as the entry
    # "-n, --dry-run": the joined text stands in no document, each term does.
    corpus = catalogue_metrics.corpus_text(
        [("push.html", b"<dl><dt>-n</dt><dt>--dry-run</dt><dd>Report only.</dd></dl>")]
    )

    found = catalogue_metrics.invented("`-n, --dry-run`, `-f, --force`", corpus)

    assert found == ("-f, --force",)


def record(kind: str, **fields: object) -> AgentRecord:
    return AgentRecord(**({"id": "x", "kind": kind, "seconds": 1.0} | fields))  # type: ignore[arg-type]


def test_the_figures_count_routing_answers_and_completeness() -> None:
    records = [
        record(
            "list",
            decision="answered",
            entries=("a", "b"),
            present=("a", "b"),
            reached_catalogue=True,
            catalogue_answered=True,
            cited_sources=("p.html",),
            citations_valid=1,
            expected_sources=("p.html",),
        ),
        record(
            "list",
            decision="answered",
            entries=("a", "b", "c", "d"),
            present=("a",),
            invented=("zz",),
            reached_catalogue=True,
            seconds=9.0,
            model_calls=2,
        ),
        record("catalogue", decision="declined", entries=("204",)),
    ]

    summary = catalogue_metrics.summarise(records)

    assert summary["routed_to_catalogue"] == round(2 / 3, 4)
    assert summary["answered_from_catalogue"] == round(1 / 3, 4)
    assert summary["completeness"] == round((1 + 0.25 + 0) / 3, 4)
    assert summary["list_completeness"] == 0.625
    assert summary["complete"] == round(1 / 3, 4)
    assert summary["answers_with_an_invented_entry"] == 0.5
    assert summary["citation_validity"] == 1.0
    assert summary["seconds_p50"] == 1.0
    assert [r.routed_right() for r in records] == [True, True, False]


def test_the_report_shows_them_beside_plain_rag() -> None:
    graph = catalogue_metrics.summarise(
        [
            record(
                "list", decision="answered", entries=("a",), present=("a",), reached_catalogue=True
            )
        ]
    )
    reference = catalogue_metrics.summarise(
        [record("list", decision="answered", entries=("a", "b"), present=("a",))]
    )

    lines = catalogue_lines(
        {"catalogue": graph, "other_kinds_answered_from_catalogue": []}, {"catalogue": reference}
    )

    text = "\n".join(lines)
    completeness = "| completeness: share of the required entries the answer holds |"
    assert f"{completeness} 1.000 | 1 | 0.500 | 1 |" in text
    assert "| routed to the catalogue | 1.000 | 1 | – | – |" in text
    assert "Questions of the other kinds answered from the catalogue: none." in text
