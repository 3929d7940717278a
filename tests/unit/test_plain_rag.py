"""The `plain_rag` reference: the plain retrieval and one answer call, counted like the graph."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.evaluation import agent_metrics, plain, plain_rag
from candor.evaluation.questions import Question
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

BISECT = (
    b"<h1>git-bisect</h1><p>If the script exits with code 125, the current revision "
    b"is skipped. Any other code from 1 to 127 marks it bad.</p>"
)
PUSH = (
    b"<h1>git-push</h1><p>--force-with-lease refuses the push unless the remote ref "
    b"is as expected.</p>"
)


@pytest.fixture
def plain_index(tmp_path: Path) -> SqliteVectorIndex:
    embedder = HashingEmbedder()
    documents = [("git-bisect.html", BISECT), ("git-push.html", PUSH)]
    index = plain.open_index(plain.index_path(tmp_path, documents, embedder), embedder)
    plain.fill(index, plain.chunks_of(documents), embedder)
    return index


def ask(
    index: SqliteVectorIndex, reply: str, *, kind: str = "factual"
) -> tuple[agent_metrics.AgentRecord, ScriptedChatModel]:
    chat = ScriptedChatModel({"text": [reply]})
    question = Question(
        id="q1",
        question="Which exit code skips a commit in git bisect run?",
        kind=kind,
        expected_sources=("git-bisect.html",) if kind != "unanswerable" else (),
        answer_keywords=("125",) if kind != "unanswerable" else (),
    )
    record = asyncio.run(
        plain_rag.answer_one(
            question,
            chat=chat,
            embedder=HashingEmbedder(),
            index=index,
            budget=1200,
            candidates=10,
            passage_chars=600,
            max_tokens=200,
        )
    )
    return record, chat


@pytest.mark.parametrize(
    "answer",
    [
        "I don't know.",
        "I do not know the answer to that.",
        "The context does not contain information about branch protection.",
        "The provided passages do not mention Litestream.",
        "",
    ],
)
def test_a_reply_that_says_it_does_not_know_is_a_decline(answer: str) -> None:
    assert plain_rag.declines(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "Exit with code 125 and the commit is skipped [1].",
        # A long answer that mentions in passing what a passage does not say answers.
        "Use git push --force-with-lease [1]. It refuses the push when the remote ref "
        "moved since you fetched; the context does not mention any other safety option, "
        "but this one protects work that others pushed in the meantime, which a plain "
        "--force would overwrite without asking anything at all of you or of them [1].",
    ],
)
def test_an_answer_is_not_a_decline(answer: str) -> None:
    assert not plain_rag.declines(answer)


def test_one_call_sees_the_numbered_passages_and_the_question(
    plain_index: SqliteVectorIndex,
) -> None:
    record, chat = ask(plain_index, "Exit with 125 to skip it [1].")

    assert chat.kinds() == ["text"]
    prompt = chat.calls[0].messages[-1]["content"]
    assert "[1] " in prompt and "exits with code 125" in prompt
    assert prompt.endswith("Question: Which exit code skips a commit in git bisect run?")
    assert record.decision == "answered" and record.model_calls == 1
    assert record.keywords_present() and record.tokens_in > 0
    assert record.tokens_evaluated == record.tokens_in  # the scripted model reports no cache


def test_a_marker_naming_no_passage_counts_against_citation_validity(
    plain_index: SqliteVectorIndex,
) -> None:
    record, _ = ask(plain_index, "Exit with 125 [1][7].")

    assert record.citations_valid == 1
    assert len(record.cited_sources) == 2 and "" in record.cited_sources


def test_an_invented_specific_is_counted_but_left_in_the_answer(
    plain_index: SqliteVectorIndex,
) -> None:
    answer = "Exit with 125 [1]. Since Git 2.51 you can also exit with 99 [1]."
    record, _ = ask(plain_index, answer)

    assert record.answer == answer  # the reference is never trimmed
    assert set(record.unsupported_left) == {"2.51", "99"}


def test_a_declined_unanswerable_question_counts_as_declined(
    plain_index: SqliteVectorIndex,
) -> None:
    record, _ = ask(plain_index, "I don't know.", kind="unanswerable")

    summary = agent_metrics.summarise([record])
    assert record.decision == "declined" and summary["decline_recall"] == 1.0


def row(decision: str, seconds: float, sent: int, evaluated: int, calls: int) -> dict[str, Any]:
    return {
        "decision": decision,
        "seconds": seconds,
        "tokens_in": sent,
        "tokens_evaluated": evaluated,
        "model_calls": calls,
    }


def test_the_cost_ratio_compares_what_each_answered_question_cost() -> None:
    graph = [row("answered", 30.0, 1500, 600, 3), row("declined", 5.0, 100, 100, 1)]
    reference = [row("answered", 10.0, 500, 400, 1), row("answered", 20.0, 700, 400, 1)]
    ratios = agent_metrics.cost_ratios(graph, reference)

    assert ratios["seconds"] == {"graph": 30.0, "reference": 15.0, "ratio": 2.0}
    assert ratios["tokens_in"] == {"graph": 1500.0, "reference": 600.0, "ratio": 2.5}
    assert ratios["tokens_evaluated"] == {"graph": 600.0, "reference": 400.0, "ratio": 1.5}
    assert ratios["model_calls"]["ratio"] == 3.0
    assert ratios["n"] == {"graph": 1, "reference": 2}


def test_a_report_written_before_evaluated_tokens_were_counted_has_no_ratio_of_them() -> None:
    older = {"decision": "answered", "seconds": 30.0, "tokens_in": 1500, "model_calls": 3}

    ratios = agent_metrics.cost_ratios([older], [row("answered", 10.0, 500, 400, 1)])

    assert ratios["tokens_evaluated"] == {"graph": None, "reference": 400.0, "ratio": None}
    assert ratios["tokens_in"]["ratio"] == 3.0
