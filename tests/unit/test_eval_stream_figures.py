"""The figures every eval report gives beside the cost (issue 20 item 6): the share of
messages screened without the model, and the seconds to the first streamed token and
to done, each with n, for the graph and for the plain_rag reference.

The graph runs for real on the test index with a scripted model; a script without a
Triage item proves that the screen settled the message.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from candor import service
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.evaluation import plain, plain_rag, question_figures
from candor.evaluation.agent_metrics import AgentRecord, stream_ratios, summarise
from candor.evaluation.compare import side_by_side
from candor.evaluation.instruments import CountingChatModel, RecordingIndex
from candor.evaluation.paired_report import against_references
from candor.evaluation.questions import Question
from candor.evaluation.report import AGENT_ROWS, reference_lines, to_markdown
from candor.evaluation.runner import EVAL_OVERRIDES, evaluate_agent
from candor.screening import policy
from candor.screening.classifier import shipped
from candor.settings import Settings
from tests.support.fakes import ScriptedChatModel, Stall, Streamed

pytestmark = pytest.mark.unit

SURE_QUESTION = "What does --force-with-lease do?"
UNSURE_QUESTION = "what about the pricing?"
UNKNOWN_QUESTION = "How do I configure kerberos for ssh?"  # no passage names kerberos
INSULT = "you useless bot"
LEVEL = Settings.model_fields["screening_confidence"].default
# Two sentences, streamed a piece at a time: the first leaves the cleaner when it
# ends, the second a gap later. The model starts writing after a stall.
STALL_S = 0.2
GAP_S = 0.1
PIECES = (
    "It refuses the push ",
    "unless the remote ref is as expected [1]. ",
    "It checks the ",
    "remote-tracking ",
    "branch first [1].",
)


def premise(message: str, expected: policy.Outcome) -> None:
    screen = shipped().screen(message)
    assert policy.outcome(screen, LEVEL) == expected, f"premise: {message!r} -> {screen}"


def eval_deps(settings: Settings, index: SqliteVectorIndex, state: SqliteStateStore) -> Any:
    """What `candor eval` runs the graph with, the screen on, one retrieval attempt."""
    tuned = settings.model_copy(update={**EVAL_OVERRIDES, "screening": True, "max_attempts": 1})

    def make(chat: ScriptedChatModel) -> Deps:
        return Deps(
            tuned, CountingChatModel(chat), HashingEmbedder(), RecordingIndex(index), None, state
        )

    return make


def test_a_message_the_screen_settles_counts_as_screened_without_the_model_others_do_not(
    settings: Settings, index: SqliteVectorIndex, state: SqliteStateStore
) -> None:
    # Given a question the classifier is sure of, one it is unsure of, and an insult
    premise(SURE_QUESTION, "sure")
    premise(UNSURE_QUESTION, "unsure")
    premise(INSULT, "flagged")
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],  # the unsure one's only
            "Moderation": [{"insulting": True}],
            "judge": [True, False],
            "text": ["It refuses the push unless the remote ref is as expected [1]."],
        }
    )
    questions = [
        Question("sure", SURE_QUESTION, "factual", ("git-push.html",)),
        Question("unsure", UNSURE_QUESTION, "unanswerable"),
        Question("insult", INSULT, "abusive"),
    ]

    # When the eval runs them
    records = evaluate_agent(
        questions, eval_deps(settings, index, state)(chat), bar=False, timeout=60
    )

    # Then only the one the classifier settled counts as screened without the model:
    # the unsure one cost a triage call, the insult the moderation call
    assert [r.error for r in records] == [None, None, None]
    assert [r.decision for r in records] == ["answered", "declined", "warned"]
    assert [r.screened_by for r in records] == ["classifier", "model", "classifier"]
    assert [r.screened_without_model for r in records] == [True, False, False]
    assert chat.kinds().count("Triage") == 1
    summary = summarise(records)
    assert summary["screened_without_model"] == pytest.approx(1 / 3, abs=1e-4)
    assert summary["samples"]["screened_without_model"] == 3
    assert [row["screened_without_model"] for row in (r.to_json() for r in records)] == [
        True,
        False,
        False,
    ]
    # And report.md's agent table gives the share with its n
    label = dict(AGENT_ROWS)["screened_without_model"]
    report = {
        "meta": {
            "date": "2026-12-03",
            "questions_file": "q.jsonl",
            "questions": 3,
            "documents": 3,
            "chunks": 3,
            "corpus": "docs",
            "embedder": "hashing",
            "index": "eval-test",
        },
        "retrieval": {},
        "agent": summary,
    }
    assert f"| {label} | 0.333 | 3 |" in to_markdown(report)


def test_a_streamed_answer_has_its_first_token_before_done_and_other_replies_have_none(
    settings: Settings, index: SqliteVectorIndex, state: SqliteStateStore
) -> None:
    # Given an answer the model starts after a stall and writes in two sentences, a
    # question it declines and an insult it warns (no Triage in the script: the
    # classifier settles the first two)
    premise(SURE_QUESTION, "sure")
    premise(UNKNOWN_QUESTION, "sure")
    chat = ScriptedChatModel(
        {
            "Moderation": [{"insulting": True}],
            "judge": [True, False],
            "text": [Stall(STALL_S, Streamed(PIECES, gap=GAP_S))],
        }
    )
    questions = [
        Question("answered", SURE_QUESTION, "factual", ("git-push.html",)),
        Question("declined", UNKNOWN_QUESTION, "unanswerable"),
        Question("warned", INSULT, "abusive"),
    ]

    records = evaluate_agent(
        questions, eval_deps(settings, index, state)(chat), bar=False, timeout=60
    )

    answered, declined, warned = records
    assert [r.decision for r in records] == ["answered", "declined", "warned"], [
        r.error for r in records
    ]
    # Then the first token came once the model had started and its first sentence
    # had ended, and done a sentence later; a reply with no streamed text has none
    assert answered.first_token_s is not None
    assert answered.first_token_s >= STALL_S + GAP_S  # the first sentence took two pieces
    assert answered.first_token_s + 2 * GAP_S <= answered.seconds
    assert declined.first_token_s is None and warned.first_token_s is None
    summary = summarise(records)
    assert summary["first_token_p50_s"] == round(answered.first_token_s, 3)
    assert summary["done_p50_s"] == round(answered.seconds, 3)
    assert summary["samples"]["first_token_p50_s"] == summary["samples"]["done_p50_s"] == 1


def test_the_streamed_eval_answers_exactly_as_ask_does(
    settings: Settings, index: SqliteVectorIndex, state: SqliteStateStore, tmp_path: Path
) -> None:
    # Given the same script twice: one run through the eval (streamed), one through ask
    def script() -> ScriptedChatModel:
        return ScriptedChatModel({"judge": [True], "text": [Streamed(PIECES)]}, cost_per_call=0.001)

    make = eval_deps(settings, index, state)
    question = Question("q", SURE_QUESTION, "factual", ("git-push.html",))
    (streamed,) = evaluate_agent([question], make(script()), bar=False, timeout=60)
    whole_state = SqliteStateStore(tmp_path / "whole.sqlite3")
    try:
        whole = asyncio.run(
            service.ask(dataclasses.replace(make(script()), state=whole_state), SURE_QUESTION)
        )
    finally:
        whole_state.close()

    # Then decision, answer, citations and tokens are the same
    assert streamed.decision == whole.decision == "answered"
    assert streamed.answer == whole.answer
    assert streamed.cited_sources == tuple(c.source for c in whole.citations)
    assert streamed.tokens_in == sum(step.tokens_in for step in whole.trace)
    assert streamed.tokens_out == sum(step.tokens_out for step in whole.trace)
    assert streamed.cost_usd == pytest.approx(sum(step.cost_usd for step in whole.trace))


def answered_row(qid: str, seconds: float, first_token: float | None) -> dict[str, Any]:
    record = AgentRecord(qid, "factual", seconds, decision="answered", first_token_s=first_token)
    return record.to_json()


def test_first_token_and_done_percentiles_cover_answered_questions_only() -> None:
    records = [
        AgentRecord("a", "factual", 4.0, decision="answered", first_token_s=1.0),
        AgentRecord("b", "factual", 6.0, decision="answered", first_token_s=3.0),
        AgentRecord("c", "factual", 5.0, decision="answered", first_token_s=2.0),
        AgentRecord("d", "unanswerable", 9.0, decision="declined", first_token_s=8.0),
        AgentRecord("e", "factual", 60.0, error="timed out after 60 s"),
    ]

    summary = summarise(records)

    assert (summary["first_token_p50_s"], summary["first_token_p90_s"]) == (2.0, 2.8)
    assert (summary["done_p50_s"], summary["done_p90_s"]) == (5.0, 5.8)
    assert summary["samples"]["first_token_p90_s"] == 3
    assert summary["samples"]["done_p90_s"] == 3


def test_the_graphs_streamed_seconds_are_a_ratio_to_plain_rags_with_n() -> None:
    graph = [answered_row("a", 8.0, 4.0), answered_row("b", 12.0, 6.0)]
    # A reference row written before first tokens were recorded counts in done only.
    reference = [answered_row("a", 4.0, 1.0), answered_row("b", 6.0, None)]

    ratios = stream_ratios(graph, reference)

    assert ratios["first_token_p50_s"] == {
        "graph": 5.0,
        "graph_n": 2,
        "reference": 1.0,
        "reference_n": 1,
        "ratio": 5.0,
    }
    assert ratios["done_p50_s"]["ratio"] == 2.0 and ratios["done_p50_s"]["reference_n"] == 2
    lines = reference_lines(
        summarise([]), summarise([]) | {"graph_ratio": {}, "graph_stream_ratio": ratios}
    )
    assert "| seconds to the first token per answered question, p50 | 5.000 | 2 | 1.000 | 1 |" in (
        lines
    )
    assert lines[-1].startswith(
        "Streamed, per answered question, the graph's seconds are plain_rag's times: "
        "first token p50 5.000x, first token p90 "
    )


def test_plain_rags_answer_streams_and_records_its_first_visible_piece(tmp_path: Path) -> None:
    embedder = HashingEmbedder()
    documents = [("git-bisect.html", b"<p>Exit code 125 skips the commit.</p>")]
    index = plain.open_index(plain.index_path(tmp_path, documents, embedder), embedder)
    plain.fill(index, plain.chunks_of(documents), embedder)
    chat = ScriptedChatModel(
        {"text": [Stall(STALL_S, Streamed((" ", "Code 125 ", "skips it [1]."), gap=GAP_S))]}
    )
    question = Question("q", "Which exit code skips a commit?", "factual", ("git-bisect.html",))

    record = asyncio.run(
        plain_rag.answer_one(
            question,
            chat=chat,
            embedder=embedder,
            index=index,
            budget=1200,
            candidates=10,
            passage_chars=600,
            max_tokens=200,
        )
    )
    index.close()

    # The blank first piece shows nothing: the first token is the one after it
    assert record.answer == "Code 125 skips it [1]."
    assert record.first_token_s is not None
    assert STALL_S + GAP_S <= record.first_token_s <= record.seconds - GAP_S
    assert record.to_json()["first_token_s"] == round(record.first_token_s, 3)


def test_the_plain_rag_arm_pairs_first_tokens_but_not_a_screening_it_never_does() -> None:
    graph = [
        answered_row("a", 8.0, 4.0) | {"screened_without_model": True},
        answered_row("b", 9.0, 5.0) | {"screened_without_model": False},
    ]
    reference = [answered_row("a", 4.0, 1.0), answered_row("b", 5.0, 2.0)]
    for rows in (graph, reference):
        for row in rows:
            row.update(answer_correct=True, model_calls=1, tokens_in=10)
    report = {
        "meta": {"questions_file": "dev-questions.jsonl"},
        "agent_questions": graph,
        "plain_rag_questions": reference,
    }

    (arm,) = against_references({"dev": report})

    figures = {c.figure.name: c for c in arm.comparisons}
    first = figures["seconds to the first token per answered question"]
    assert (first.pool.n, first.pool.before, first.pool.after) == (2, 1.5, 4.5)
    assert "messages screened without the model" not in figures
    values = question_figures.agent_values(graph)
    screened = [f for f in values if f.name == "messages screened without the model"]
    assert values[screened[0]] == {"a": True, "b": False}


def test_compare_gives_the_streamed_seconds_and_the_screened_share_side_by_side() -> None:
    records = [
        AgentRecord(
            "a",
            "factual",
            5.0,
            decision="answered",
            first_token_s=2.0,
            screened_by="classifier",
            screened_without_model=True,
        ),
        AgentRecord(
            "b",
            "factual",
            7.0,
            decision="declined",
            screened_by="model",
            screened_without_model=False,
        ),
    ]
    summary = summarise(records)
    reports = {
        name: {
            "meta": {
                "questions": 2,
                "questions_file": f"{name}-questions.jsonl",
                "corpus": name,
                "date": "2026-12-03",
            },
            "retrieval": {},
            "agent": summary,
        }
        for name in ("dev", "validation")
    }

    text = side_by_side(reports)

    assert "| seconds to the first token per answered question, p50 | 2.000 (n=1) |" in text
    assert "| seconds to done per answered question, p50 | 5.000 (n=1) |" in text
    assert "| messages screened without the model | 0.500 (n=2) | 0.500 (n=2) |" in text
