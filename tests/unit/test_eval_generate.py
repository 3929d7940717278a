"""`candor eval --generate`: questions written from the corpus, filtered, bounded."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from candor import cli
from candor.evaluation import generate
from candor.evaluation.questions import load_questions
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit


def prose(topic: str, n: int) -> str:
    """A paragraph of `n` sentences about `topic`, long enough to be a window."""
    return " ".join(
        f"The {topic} setting number {i} decides how the server treats incoming requests "
        f"when the queue is full and the operator has asked for gentle handling."
        for i in range(n)
    )


def page(title: str, *paragraphs: str) -> bytes:
    return (f"# {title}\n\n" + "\n\n".join(paragraphs) + "\n").encode()


DOCUMENTS = [
    ("alpha.md", page("Alpha", prose("alpha", 3), prose("alpine", 3), prose("alder", 3))),
    ("beta.md", page("Beta", prose("beta", 3), prose("bravo", 3))),
    ("gamma.md", page("Gamma", prose("gamma", 3))),
]


def test_the_sample_spreads_over_the_documents_before_taking_a_second_window_of_one() -> None:
    windows = generate.sample_windows(DOCUMENTS, 3, seed=7)
    assert sorted(w.source for w in windows) == ["alpha.md", "beta.md", "gamma.md"]


def test_the_same_seed_samples_the_same_windows() -> None:
    first = generate.sample_windows(DOCUMENTS, 5, seed=3)
    assert first == generate.sample_windows(DOCUMENTS, 5, seed=3)
    assert len(first) == 5 and len({w.text for w in first}) == 5


def test_code_and_tables_are_not_sampled() -> None:
    code = "```\n" + "\n".join(f"run --flag-{i} --other={i}" for i in range(30)) + "\n```"
    table = "| a | b |\n|---|---|\n" + "\n".join(f"| {i} | {i * 2} |" for i in range(40))
    assert generate.windows_of("code.md", page("Code", code, table)) == []


def test_copied_run_counts_words_in_the_same_order() -> None:
    excerpt = "Use git stash to put away changes in the working tree."
    assert generate.copied_run("How do I put away changes quickly?", excerpt) == 3
    assert generate.copied_run("Can I put away changes in the tree?", excerpt) == 5
    assert generate.copied_run("Where do changes go?", excerpt) == 1


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("What does the excerpt say about alpha?", "speaks of the text"),
        ("Tell me about the alpha setting", "not one question"),
        ("Why? And how?", "not one question"),
        ("Alpha?", "too short or too long"),
        ("When the queue is full and the operator is away, what then?", "copies the page"),
    ],
)
def test_a_question_that_reads_like_the_page_or_about_it_is_rejected(
    reply: str, reason: str
) -> None:
    excerpt = prose("alpha", 2)
    assert generate.rejection(generate.clean_question(reply), excerpt, set()) == reason


def test_a_reply_is_cleaned_to_the_question_it_holds() -> None:
    reply = 'Question 1: "How can my web app cope with a flood of visitors?"\n\nThis asks ...'
    assert generate.clean_question(reply) == "How can my web app cope with a flood of visitors?"


def test_kept_questions_expect_their_page_and_load_as_a_question_file(tmp_path: Path) -> None:
    chat = ScriptedChatModel(
        script={
            "text": [
                "Question: What happens to my visitors when everything is busy?",
                "What does the excerpt cover?",
                "What happens to my visitors when everything is busy?",  # a duplicate
                "How can I make the service gentler with crowds?",
            ]
        }
    )
    result = asyncio.run(generate.generate(DOCUMENTS, chat, 2, seed=1))
    assert [row["question"] for row in result.rows] == [
        "What happens to my visitors when everything is busy?",
        "How can I make the service gentler with crowds?",
    ]
    assert result.rejected == {"speaks of the text": 1, "duplicate": 1}
    assert result.attempts == 4
    for row, call in zip(result.rows, [chat.calls[0], chat.calls[3]], strict=True):
        # The page a question expects is the page whose excerpt the model read.
        assert row["excerpt"] in call.messages[-1]["content"]
        assert row["expected_sources"][0] in {source for source, _ in DOCUMENTS}
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in result.rows))
    loaded = load_questions(path, sources={source for source, _ in DOCUMENTS})
    assert [q.kind for q in loaded] == ["factual", "factual"]


def test_a_model_that_never_writes_a_usable_question_is_stopped_at_twice_the_number_asked() -> None:
    chat = ScriptedChatModel(script={"text": ["Tell me about it"] * 20})
    result = asyncio.run(generate.generate(DOCUMENTS, chat, 3, seed=0))
    assert result.rows == []
    assert len(chat.calls) == result.attempts == 6


def test_a_page_holding_the_same_sentence_is_expected_too() -> None:
    shared = prose("shared", 3)
    documents = [
        ("one.md", page("One", shared)),
        ("two.md", page("Two", prose("other", 3), shared)),
        ("three.md", page("Three", prose("third", 3))),
    ]
    flat = [(s, " ".join(generate._text_of(s, d).split())) for s, d in documents]
    window = generate.windows_of("one.md", documents[0][1])[0]
    assert generate.also_expected(window, flat) == ["two.md"]


@pytest.mark.parametrize(
    "extra",
    [["--generate", "0"], ["--generate", "5", "--questions", "q.jsonl"], []],
)
def test_eval_needs_exactly_one_question_source_and_a_sane_number(
    extra: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "doc.md").write_bytes(DOCUMENTS[0][1])
    with pytest.raises(SystemExit) as stopped:
        raise SystemExit(cli.main(["eval", "--corpus", str(tmp_path), *extra]))
    assert stopped.value.code == 2
    assert "--generate" in capsys.readouterr().err
