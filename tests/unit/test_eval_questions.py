"""The question file is checked before anything runs; problems name their line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from candor.cli import main
from candor.evaluation.questions import QuestionFileError, load_questions

pytestmark = pytest.mark.unit

GOOD = {
    "id": "q1",
    "question": "What does --guarded do?",
    "kind": "factual",
    "expected_sources": ["kite-push.html"],
    "answer_keywords": ["guarded"],
}


def write(tmp_path: Path, *rows: object) -> Path:
    path = tmp_path / "questions.jsonl"
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_valid_file_loads_with_its_fields(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD, "", {"id": "q2", "question": "Hi!", "kind": "greeting"})
    questions = load_questions(path, sources={"kite-push.html"})
    assert [q.id for q in questions] == ["q1", "q2"]
    assert questions[0].expected_sources == ("kite-push.html",)
    assert questions[0].answerable and not questions[1].answerable


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("{not json", ":1: not valid JSON"),
        ([1, 2], "not a JSON object"),
        (GOOD | {"id": ""}, "'id' must be a non-empty string"),
        (GOOD | {"kind": "trivia"}, "unknown kind 'trivia'"),
        (GOOD | {"expected_sources": "kite-push.html"}, "must be a list of non-empty strings"),
        (GOOD | {"expected_sources": []}, "a factual question needs 'expected_sources'"),
        (GOOD | {"kind": "multi_hop"}, "needs at least two 'expected_sources'"),
        (GOOD | {"expected_sources": ["nope.html"]}, "not in the corpus: nope.html"),
    ],
)
def test_each_problem_is_named_with_its_line(tmp_path: Path, row: object, message: str) -> None:
    path = write(tmp_path, row)
    with pytest.raises(QuestionFileError, match=r"questions\.jsonl:1: ") as raised:
        load_questions(path, sources={"kite-push.html"})
    assert message in str(raised.value)


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD, GOOD, GOOD | {"id": "q3", "kind": "trivia"})
    with pytest.raises(QuestionFileError) as raised:
        load_questions(path)
    text = str(raised.value)
    assert ":2: duplicate id 'q1'" in text and ":3: unknown kind" in text


def test_an_empty_or_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(QuestionFileError, match="holds no questions"):
        load_questions(write(tmp_path, ""))
    with pytest.raises(QuestionFileError, match="cannot read"):
        load_questions(tmp_path / "absent.jsonl")


def test_cli_exits_2_with_the_reason_on_a_bad_question_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CANDOR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CANDOR_EMBEDDER_BACKEND", "hashing")
    corpus = Path(__file__).resolve().parents[1] / "fixtures" / "docs"
    path = write(tmp_path, GOOD | {"expected_sources": ["git-push.html"]})

    code = main(["eval", "--corpus", str(corpus), "--questions", str(path), "--retrieval-only"])

    assert code == 2
    err = capsys.readouterr().err
    assert "the question file is not valid" in err
    assert "expected sources not in the corpus: git-push.html" in err
    assert not (tmp_path / "data").exists()  # nothing was built


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--strategies", "dense,bm25"], "unknown strategies bm25"),
        (["--limit", "0"], "--limit must be at least 1"),
    ],
)
def test_cli_exits_2_on_bad_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    path = write(tmp_path, GOOD)
    code = main(["eval", "--corpus", str(tmp_path), "--questions", str(path), *extra])
    assert code == 2
    assert message in capsys.readouterr().err
