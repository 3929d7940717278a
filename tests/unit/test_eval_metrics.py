"""The evaluation metrics on hand-made rankings and records: exact values."""

from __future__ import annotations

import pytest

from candor.evaluation.agent_metrics import AgentRecord, summarise, summarise_by_kind
from candor.evaluation.questions import Question, stratified
from candor.evaluation.retrieval_metrics import hit_rank, percentile
from candor.evaluation.retrieval_metrics import summarise as summarise_retrieval

pytestmark = pytest.mark.unit


def test_hit_rank_is_the_first_chunk_from_any_expected_page() -> None:
    ranking = ["a.html", "b.html", "c.html", "b.html"]
    assert hit_rank(ranking, ["b.html", "c.html"], all_needed=False) == 2
    assert hit_rank(ranking, ["a.html"], all_needed=False) == 1
    assert hit_rank(ranking, ["z.html"], all_needed=False) is None


def test_multi_hop_rank_is_where_the_last_needed_page_first_appears() -> None:
    ranking = ["a.html", "a.html", "b.html", "x.html", "c.html"]
    assert hit_rank(ranking, ["a.html", "c.html"], all_needed=True) == 5
    assert hit_rank(ranking, ["b.html", "a.html"], all_needed=True) == 3
    # One page missing: never fully recalled, however early the other one is.
    assert hit_rank(ranking, ["a.html", "z.html"], all_needed=True) is None


def test_hit_rank_refuses_a_question_without_sources() -> None:
    with pytest.raises(ValueError, match="no retrieval rank"):
        hit_rank(["a.html"], [], all_needed=False)


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([], 50) is None
    assert percentile([7.0], 95) == 7.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 95) == pytest.approx(4.8)


def test_retrieval_summary_on_hand_made_ranks() -> None:
    ranks = [1, 3, 7, None]
    summary = summarise_retrieval(ranks, [10.0, 20.0, 30.0, 40.0])
    assert summary == {
        "n": 4,
        "recall@1": 0.25,
        "recall@5": 0.5,
        "recall@10": 0.75,
        # (1 + 1/3 + 1/7 + 0) / 4
        "mrr": round((1 + 1 / 3 + 1 / 7) / 4, 4),
        "p50_ms": 25.0,
        "p95_ms": 38.5,
    }


def test_retrieval_summary_of_nothing_has_n_zero_and_no_rates() -> None:
    summary = summarise_retrieval([], [])
    assert summary["n"] == 0
    assert summary["recall@5"] is None and summary["mrr"] is None and summary["p50_ms"] is None


def record(
    id: str, kind: str, decision: str, seconds: float = 1.0, **fields: object
) -> AgentRecord:
    return AgentRecord(id=id, kind=kind, seconds=seconds, decision=decision, **fields)  # type: ignore[arg-type]


RECORDS = [
    # Answered, with all keywords and a citation of an expected page; one rewrite.
    record(
        "f1",
        "factual",
        "answered",
        seconds=4.0,
        answer="Use --force-with-lease: it checks the Remote-Tracking ref.",
        answer_keywords=("--force-with-lease", "remote-tracking"),
        expected_sources=("git-push.html",),
        cited_sources=("git-push.html",),
        citations_valid=1,
        model_calls=4,
        tokens_in=900,
        tokens_evaluated=300,
        tokens_out=100,
        cost_usd=0.002,
        attempts=2,
        rewrites=1,
    ),
    # Answered, missing a keyword, citing another page; one of two citations invalid.
    record(
        "f2",
        "factual",
        "answered",
        seconds=2.0,
        answer="It is 6700.",
        answer_keywords=("gc.auto", "6700"),
        expected_sources=("git-gc.html",),
        cited_sources=("git-config.html", "git-log.html"),
        citations_valid=1,
        model_calls=3,
        tokens_in=500,
        tokens_evaluated=200,
        tokens_out=50,
        attempts=1,
    ),
    # An answerable question declined.
    record(
        "m1",
        "multi_hop",
        "declined",
        seconds=3.0,
        answer_keywords=("tag",),
        expected_sources=("git-tag.html", "git-describe.html"),
        model_calls=5,
        attempts=2,
        rewrites=1,
    ),
    record("u1", "unanswerable", "declined", seconds=3.0, model_calls=5, attempts=2, rewrites=1),
    record("u2", "unanswerable", "answered", seconds=3.0, model_calls=3, attempts=1),
    record("g1", "greeting", "smalltalk", seconds=1.0, model_calls=2),
    record("c1", "code_request", "answered", seconds=1.0, model_calls=3, attempts=1),
    record("a1", "abusive", "warned", seconds=1.0, model_calls=2),
    AgentRecord(id="a2", kind="abusive", seconds=0.5, error="ModelError: timed out"),
]


def test_agent_summary_on_hand_made_records() -> None:
    summary = summarise(RECORDS)

    assert summary["n"] == 9
    assert summary["failures"] == 1
    # 8 ran; c1 was answered instead of refused.
    assert summary["routing_accuracy"] == 0.875
    assert summary["samples"]["routing_accuracy"] == 8
    # Declined: m1 (answerable) and u1 (unanswerable).
    assert summary["decline_precision"] == 0.5
    assert summary["samples"]["decline_precision"] == 2
    assert summary["decline_recall"] == 0.5  # u1 of u1, u2
    assert summary["samples"]["decline_recall"] == 2
    assert summary["answerable_declined"] == round(1 / 3, 4)  # m1 of f1, f2, m1
    assert summary["answer_correct"] == round(1 / 3, 4)  # f1 only
    assert summary["samples"]["answer_correct"] == 3
    assert summary["citation_accuracy"] == 0.5  # f1 of the answered f1, f2
    assert summary["samples"]["citation_accuracy"] == 2
    # Citations of every answered question: f1 1/1, f2 1/2, u2 0, c1 0.
    assert summary["citation_validity"] == round(2 / 3, 4)
    assert summary["samples"]["citation_validity"] == 3
    # Questions that retrieved (attempts > 0): f1, f2, m1, u1, u2, c1; rewrote: f1, m1, u1.
    assert summary["rewrite_rate"] == 0.5
    assert summary["samples"]["rewrite_rate"] == 6
    assert summary["model_calls_per_question"] == round((4 + 3 + 5 + 5 + 3 + 2 + 3 + 2) / 8, 3)
    assert summary["model_calls_per_answered"] == round((4 + 3 + 3 + 3) / 4, 3)
    assert summary["tokens_per_question"] == round((1000 + 550) / 8, 1)
    assert summary["tokens_in_per_question"] == round((900 + 500) / 8, 1)
    assert summary["tokens_out_per_question"] == round((100 + 50) / 8, 1)
    assert summary["cost_per_question_usd"] == round(0.002 / 8, 8)
    assert summary["p50_s"] == 2.5  # of 4, 2, 3, 3, 3, 1, 1, 1
    assert summary["p95_s"] == 3.65


def test_what_an_answered_question_costs_is_a_mean_over_the_answered_ones() -> None:
    summary = summarise(RECORDS)

    # Answered: f1 (900 sent, 300 evaluated, 4 s), f2 (500, 200, 2 s), u2 and c1 (none, 3 s, 1 s)
    assert summary["tokens_in_per_answered"] == 350.0
    assert summary["tokens_evaluated_per_answered"] == 125.0
    assert summary["seconds_per_answered"] == 2.5
    for figure in ("tokens_in_per_answered", "tokens_evaluated_per_answered"):
        assert summary["samples"][figure] == 4
    assert summary["samples"]["seconds_per_answered"] == 4
    # Over the 8 questions that ran, what the cache spared counts too
    assert summary["tokens_evaluated_per_question"] == 62.5


def test_agent_summary_by_kind_counts_each_kind_and_its_failures() -> None:
    by_kind = summarise_by_kind(RECORDS)

    assert sorted(by_kind) == [
        "abusive",
        "code_request",
        "factual",
        "greeting",
        "multi_hop",
        "unanswerable",
    ]
    assert (by_kind["abusive"]["n"], by_kind["abusive"]["failures"]) == (2, 1)
    assert by_kind["abusive"]["routing_accuracy"] == 1.0
    assert by_kind["abusive"]["samples"]["routing_accuracy"] == 1
    assert by_kind["greeting"]["decline_recall"] is None
    assert by_kind["greeting"]["samples"]["decline_recall"] == 0
    assert by_kind["factual"]["answer_correct"] == 0.5


def test_a_record_counts_keywords_case_insensitively() -> None:
    assert RECORDS[0].keywords_present()
    assert not RECORDS[1].keywords_present()
    assert RECORDS[-1].to_json() == {
        "id": "a2",
        "kind": "abusive",
        "seconds": 0.5,
        "error": "ModelError: timed out",
    }


def test_stratified_takes_kinds_round_robin_in_file_order() -> None:
    questions = [
        Question(f"{kind}{i}", "?", kind)
        for kind, count in (("factual", 4), ("greeting", 1), ("abusive", 2))
        for i in range(count)
    ]
    assert [q.id for q in stratified(questions, 4)] == [
        "factual0",
        "factual1",
        "greeting0",
        "abusive0",
    ]
    assert stratified(questions, None) == questions
    assert stratified(questions, 100) == questions


def test_cost_at_api_prices_prices_the_runs_tokens_at_the_configured_chat_model() -> None:
    from candor.evaluation.runner import cost_at_api_prices
    from candor.settings import Settings

    # gpt-4o-mini: $0.15 per million input tokens, $0.60 per million output tokens
    estimate = cost_at_api_prices(Settings(chat_model="gpt-4o-mini"), RECORDS)

    expected = ((900 + 500) * 0.15 + (100 + 50) * 0.60) / 1e6 / 8  # 8 questions ran
    assert estimate["model"] == "gpt-4o-mini"
    assert estimate["usd_per_question"] == pytest.approx(expected)
    assert estimate["n"] == 8


def test_cost_at_api_prices_is_unknown_for_a_model_without_a_price() -> None:
    from candor.evaluation.runner import cost_at_api_prices
    from candor.settings import Settings

    estimate = cost_at_api_prices(Settings(chat_model="some-new-model"), RECORDS)

    assert estimate["usd_per_question"] is None


def test_has_all_keywords_needs_every_keyword_in_the_shown_passages_in_any_case() -> None:
    from candor.evaluation.retrieval_metrics import has_all_keywords

    shown = [
        "git-gc(1) - CONFIGURATION\nThe default of gc.auto is 6700.",
        "Set it to 0 to Disable.",
    ]
    assert has_all_keywords("\n".join(shown), ("gc.auto", "6700", "disable"))
    assert not has_all_keywords(shown[0], ("gc.auto", "6700", "disable"))


def test_an_answer_to_a_question_without_expected_keywords_is_not_counted_correct() -> None:
    # A generated question (candor eval --generate) expects a page and no keywords:
    # nothing says whether its answer is right, so it is left out of answer_correct.
    generated = [
        record("gen-1", "factual", "answered", answer="Any words.", expected_sources=("a.md",)),
        record("gen-2", "factual", "declined", expected_sources=("b.md",)),
        RECORDS[0],
    ]
    summary = summarise(generated)
    assert summary["answer_correct"] == 1.0
    assert summary["samples"]["answer_correct"] == 1
    assert summary["samples"]["answerable_declined"] == 3
    assert generated[0].to_json()["answer_correct"] is None
