"""Each question's value of a figure, as read from a report's per-question records."""

from __future__ import annotations

from typing import Any

import pytest

from candor.evaluation.question_figures import (
    ANSWER_CONTEXT,
    MRR,
    RECALL_1,
    RECALL_5,
    Figure,
    agent_values,
    retrieval_values,
)

pytestmark = pytest.mark.unit


def record(qid: str, kind: str, decision: str, **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": qid,
        "kind": kind,
        "seconds": 10.0,
        "decision": decision,
        "answer_correct": None,
        "cited_sources": [],
        "citations_valid": 0,
        "model_calls": 2,
        "tokens_in": 900,
        "unsupported_left": [],
    }
    return row | extra


RECORDS = [
    record(
        "f1",
        "factual",
        "answered",
        answer_correct=True,
        cited_sources=["a", "b"],
        citations_valid=1,
    ),
    record("f2", "factual", "declined", answer_correct=False),
    record("u1", "unanswerable", "declined"),
    record(
        "u2",
        "unanswerable",
        "answered",
        cited_sources=["a"],
        citations_valid=1,
        unsupported_left=["v9"],
    ),
    record("g1", "greeting", "smalltalk"),
    {"id": "f3", "kind": "factual", "seconds": 600.0, "error": "timed out after 600 s"},
]


def by_name(values: dict[Figure, Any]) -> dict[str, Any]:
    return {figure.name: found for figure, found in values.items()}


def test_answer_figures_hold_only_the_answerable_questions_that_ran() -> None:
    values = by_name(agent_values(RECORDS))
    assert values["answers with every keyword"] == {"f1": True, "f2": False}
    assert values["answerable declined"] == {"f1": False, "f2": True}
    assert values["unanswerable declined"] == {"u1": True, "u2": False}


def test_a_question_without_expected_keywords_has_no_keyword_figure() -> None:
    # A generated question's record (no keywords: answer_correct None) is not counted
    # as an answer without its keywords, but its decline still counts.
    generated = record("gen-1", "factual", "answered", answer_correct=None)
    values = by_name(agent_values([*RECORDS, generated]))
    assert values["answers with every keyword"] == {"f1": True, "f2": False}
    assert values["answerable declined"]["gen-1"] is False


def test_unsupported_specifics_and_citations_are_figures_of_answers_only() -> None:
    values = by_name(agent_values(RECORDS))
    assert values["answers with an unsupported specific left"] == {"f1": False, "u2": True}
    assert values["citations naming a retrieved passage (share per answer)"] == {
        "f1": 0.5,
        "u2": 1.0,
    }


def test_a_failed_question_has_no_value_in_any_figure() -> None:
    for found in agent_values(RECORDS).values():
        assert "f3" not in found
    assert by_name(agent_values(RECORDS))["seconds per question"]["g1"] == 10.0


def test_lower_is_better_for_declines_specifics_and_costs() -> None:
    lower = {f.name for f in agent_values(RECORDS) if not f.higher_is_better}
    assert lower == {
        "answerable declined",
        "answers with an unsupported specific left",
        "answers naming a passage, tag or instruction",
        "model calls per question",
        "prompt tokens per question",
        "prompt tokens evaluated per question",
        "seconds per question",
        "seconds to the first token per answered question",
    }


def test_prompt_tokens_evaluated_come_from_records_that_counted_them() -> None:
    # Given one record written after evaluated tokens were counted, the rest before
    rows = [record("f1", "factual", "answered", tokens_evaluated=240), *RECORDS[1:]]

    values = by_name(agent_values(rows))

    assert values["prompt tokens evaluated per question"] == {"f1": 240}
    assert values["prompt tokens per question"]["f1"] == 900


def test_retrieval_figures_of_a_question_come_from_its_rank() -> None:
    report = {
        "retrieval_ranks": {"hybrid": {"a": 1, "b": 4, "c": None}},
        "retrieval_context": {"hybrid": {"a": True, "b": False}},
    }
    values = retrieval_values(report, "hybrid")
    assert values[RECALL_1] == {"a": True, "b": False, "c": False}
    assert values[RECALL_5] == {"a": True, "b": True, "c": False}
    assert values[MRR] == {"a": 1.0, "b": 0.25, "c": 0.0}
    assert values[ANSWER_CONTEXT] == {"a": True, "b": False}


def test_a_report_without_per_question_context_has_the_rank_figures_alone() -> None:
    report = {"retrieval_ranks": {"hybrid": {"a": 2}}}
    assert set(retrieval_values(report, "hybrid")) == {RECALL_1, RECALL_5, MRR}
    assert retrieval_values(report, "plain") == {}


def test_an_answer_from_a_report_that_did_not_count_passage_talk_is_read_by_todays_rule() -> None:
    # Reports from before 2026-12-02 hold the answers but no `meta_talk`: pairing such
    # a release with this one left the figure "not measured" for both sides.
    rows = [
        record("f1", "factual", "answered", answer="The passage in <passage 1> says `-x` [1]."),
        record("f2", "factual", "answered", answer="Use `git cherry-pick -x` [1]."),
        record("f3", "factual", "answered", answer="Use it [1].", meta_talk=["stored"]),
        record("f4", "factual", "declined", answer="I could not find this."),
    ]

    values = by_name(agent_values(rows))

    assert values["answers naming a passage, tag or instruction"] == {
        "f1": True,
        "f2": False,
        "f3": True,
    }
