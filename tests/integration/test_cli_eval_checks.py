"""`candor eval` records what the checks did; `--only` picks kinds; `candor compare`
puts two runs side by side."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.cli import main
from candor.deps import Deps
from candor.evaluation.instruments import CountingChatModel, RecordingIndex
from candor.evaluation.questions import Question
from candor.evaluation.runner import evaluate_agent, prepare_settings
from candor.settings import DEFAULT_PRICES, Settings
from tests.conftest import PASSAGES, clear_candor_env
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
QUESTION = {"abusive": False, "kind": "question"}


@pytest.fixture
def deps(tmp_path: Path) -> Iterator[Deps]:
    settings = prepare_settings(
        Settings(
            data_dir=tmp_path / "data",
            embedder_backend="hashing",
            max_attempts=1,
            prices={**DEFAULT_PRICES, "scripted": DEFAULT_PRICES["gpt-4o-mini"]},
            # The scripts start each question with its triage call, as screening off.
            screening=False,
        ),
        "eval-checks",
    )
    embedder = HashingEmbedder()
    index = SqliteVectorIndex(settings.index_path, embedder.dimensions)
    index.upsert(PASSAGES, embedder.embed([c.text for c in PASSAGES]))
    state = SqliteStateStore(tmp_path / "state.sqlite3")
    chat = ScriptedChatModel(
        {
            "Triage": [QUESTION, QUESTION],
            "judge": [True],
            "text": ["Exit code 125 skips the commit [1]. It retries 3 times [1]."],
        }
    )
    yield Deps(settings, CountingChatModel(chat), embedder, RecordingIndex(index), None, state)
    index.close()
    state.close()


def test_agent_records_hold_the_grades_the_gate_and_the_support_verdict(deps: Deps) -> None:
    questions = [
        Question(
            "q1",
            "Which exit code makes git bisect run skip a commit?",
            "factual",
            ("git-bisect.html",),
            ("125", "skip"),
        ),
        Question("q2", "What does `git push --force-if-newer` do?", "unanswerable"),
    ]

    answered, declined = evaluate_agent(questions, deps, bar=False, timeout=60)

    assert answered.decision == "answered", answered.error
    assert answered.support == "trimmed" and answered.unsupported == ("3 times",)
    assert answered.unsupported_left == ()  # the answer as sent holds nothing unsupported
    assert [(g.by, g.answerable) for g in answered.grades] == [("model", True)]
    assert answered.grades[0].context in ("has_keywords", "lacks_keywords")
    assert declined.decision == "declined" and declined.model_calls == 1  # the triage only
    assert declined.absent_names == ("--force-if-newer",)
    assert [(g.by, g.context) for g in declined.grades] == [("gate", "unanswerable")]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    clear_candor_env(monkeypatch)
    monkeypatch.setenv("CANDOR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CANDOR_EMBEDDER_BACKEND", "hashing")
    return tmp_path


def eval_argv(out: Path, *extra: str) -> list[str]:
    questions = FIXTURES / "kite-questions.jsonl"
    argv = ["eval", "--corpus", str(FIXTURES / "docs"), "--questions", str(questions)]
    return [*argv, "--out", str(out), "--retrieval-only", "--strategies", "hybrid", *extra]


def test_only_measures_the_questions_of_the_kinds_named(env: Path) -> None:
    assert main(eval_argv(env / "out", "--only", "factual,unanswerable")) == 0
    report = json.loads((env / "out" / "report.json").read_text())
    assert report["meta"]["questions"] == 2
    assert report["meta"]["kinds"] == ["factual", "unanswerable"]
    assert report["retrieval"]["hybrid"]["n"] == 1  # kite-1; kite-3 has no expected page


def test_only_refuses_an_unknown_kind(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(eval_argv(env / "out", "--only", "facts")) == 2
    assert "--only takes kinds from" in capsys.readouterr().err


def test_a_retrieval_only_run_reports_what_the_grounding_gate_does(env: Path) -> None:
    # The gate needs no model, so even --retrieval-only measures it per kind.
    assert main(eval_argv(env / "out")) == 0
    report = json.loads((env / "out" / "report.json").read_text())
    gate = report["gate"]
    assert gate["all"]["n"] == 4
    # kite-1 names --guarded and --force, both on the kite-push page.
    assert gate["by_kind"]["factual"]["with_names"] == 1
    assert gate["by_kind"]["factual"]["declined"] == 0
    assert gate["answerable_declined"] == []
    first = next(q for q in report["gate_questions"] if q["id"] == "kite-1")
    assert first["names"] == ["--guarded", "--force"] and first["absent"] == []
    assert "## Grounding gate (no model)" in (env / "out" / "report.md").read_text()


def test_compare_writes_two_runs_side_by_side(env: Path) -> None:
    assert main(eval_argv(env / "dev")) == 0
    assert main(eval_argv(env / "validation", "--only", "factual")) == 0
    argv = ["compare", str(env / "dev"), str(env / "validation"), "--out", str(env / "r.md")]
    assert main(argv) == 0
    text = (env / "r.md").read_text()
    assert "| figure | dev | validation |" in text
    assert "| hybrid Recall@5 |" in text


def test_compare_refuses_a_folder_without_a_report(env: Path) -> None:
    assert main(["compare", str(env), "--out", str(env / "r.md")]) == 2


def test_compare_pairs_two_runs_of_the_same_questions(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(eval_argv(env / "before")) == 0
    assert main(eval_argv(env / "after")) == 0
    capsys.readouterr()
    argv = ["compare", "--before", str(env / "before"), "--after", str(env / "after")]
    assert main([*argv, "--out", str(env / "paired.md")]) == 0
    printed = capsys.readouterr().out
    text = (env / "paired.md").read_text()
    assert text in printed  # the table is printed as well as written
    # The same index and questions twice: retrieval did not move.
    assert "| hybrid Recall@5 | higher |" in text
    assert "| no difference |" in text
    assert "## Paired: hybrid against plain (retrieval), in the runs after" in text


@pytest.mark.parametrize(
    "argv",
    [
        ["compare", "--out", "r.md"],  # nothing to compare
        ["compare", "dev", "--before", "a", "--after", "b", "--out", "r.md"],  # both modes
        ["compare", "--before", "a", "b", "--after", "c", "--out", "r.md"],  # unmatched sets
        ["compare", "--before", "a", "--out", "r.md"],  # no after
    ],
)
def test_compare_refuses_a_mix_of_its_two_modes(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert "candor: " in capsys.readouterr().err
