"""candor.insights and candor.dpo on traces built by hand."""

from __future__ import annotations

import pytest

from candor.backends.hashing_embedder import HashingEmbedder
from candor.dpo import preference_pairs
from candor.graph.state import TraceStep
from candor.insights import gaps, percentile, report, to_markdown
from candor.traces import Feedback, Trace
from candor.types import Message

pytestmark = pytest.mark.unit

DAY = 1_796_083_200.0  # 2026-12-01 00:00 UTC
PROMPT: tuple[Message, ...] = ({"role": "user", "content": "Passages: ... Question: q"},)


def trace(
    n: int,
    question: str | None,
    decision: str = "answered",
    *,
    feedback: Feedback | None = None,
    answer: str = "an answer",
    at: float = DAY + 60,
    seconds: float = 1.0,
    cached: bool = False,
    steps: tuple[TraceStep, ...] = (),
) -> Trace:
    return Trace(
        trace_id=f"{n:032x}",
        session_id="s" * 16,
        created_at=at,
        decision=decision,  # type: ignore[arg-type]
        answer=answer,
        question=question,
        prompt=PROMPT if question else (),
        seconds=seconds,
        cached=cached,
        feedback=feedback,
        steps=steps,
    )


def test_declined_questions_group_by_normalised_text_most_frequent_first() -> None:
    found = gaps(["Git LFS?", "git  lfs", "GIT LFS.", "branch protection?"], embedder=None)
    assert [(g.count, g.variants) for g in found] == [(3, ["git lfs"]), (1, ["branch protection"])]
    assert found[0].example in {"Git LFS?", "git  lfs", "GIT LFS."}


def test_declined_questions_that_mean_the_same_are_merged() -> None:
    questions = ["how do I set up git lfs", "set up git lfs how do I please", "what is a rebase"]
    found = gaps(questions, embedder=HashingEmbedder())
    assert [g.count for g in found] == [2, 1]
    assert found[1].example == "what is a rebase"


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.0
    assert percentile([float(n) for n in range(1, 21)], 95) == 19.0


def test_report_counts_days_decisions_cache_and_feedback() -> None:
    traces = [
        trace(1, "q1", cached=True, seconds=0.1),
        trace(2, "lfs?", "declined", at=DAY + 86_400 + 5, seconds=3.0),
        trace(3, None, "declined", at=DAY + 86_400 + 6),
        trace(4, "hi", "smalltalk", feedback=Feedback(1)),
        trace(5, "code", "code_refused", feedback=Feedback(-1, "wrong", "rude")),
    ]
    data = report(traces, days=3, now=DAY + 86_400 + 10)
    assert [row["day"] for row in data["per_day"]] == ["2026-11-30", "2026-12-01", "2026-12-02"]
    assert [row["questions"] for row in data["per_day"]] == [0, 3, 2]
    assert [row["declined"] for row in data["per_day"]] == [0, 0, 2]
    assert data["decisions"]["refused"] == 1 and data["decisions"]["declined"] == 2
    assert data["missing"] == [{"example": "lfs?", "count": 1, "variants": ["lfs"]}]
    assert data["declined_without_question"] == 1
    assert data["feedback"] == {"up": 1, "down": 1}
    assert data["negative"][0]["comment"] == "rude"
    assert data["cache_hit_rate"] == 0.2
    assert (data["p50_s"], data["p95_s"]) == (1.0, 3.0)


def test_report_counts_the_prompt_tokens_sent_and_those_the_model_evaluated() -> None:
    # Given a question whose grade and answer read the system prompts from a cache, and
    # a trace stored before evaluated tokens were recorded (all of its sent ones count)
    cached = (
        TraceStep("moderate", 900.0, 210, 14, 0.0, tokens_evaluated=18),
        TraceStep("grade", 4000.0, 600, 1, 0.0, tokens_evaluated=500),
        TraceStep("generate", 9000.0, 640, 60, 0.0, tokens_evaluated=40),
    )
    older = (TraceStep("moderate", 900.0, 200, 14, 0.0),)
    traces = [trace(1, "q1", steps=cached), trace(2, "q2", steps=older)]

    data = report(traces, days=1, now=DAY + 600)

    assert (data["tokens_in"], data["tokens_evaluated"]) == (1_650, 758)
    assert "prompt tokens 1,650 sent, 758 evaluated" in to_markdown(data)


def test_an_approved_better_answer_is_chosen_over_the_rated_one() -> None:
    approved = Feedback(-1, better_answer="better", review="approved")
    down = trace(1, "Q?", feedback=approved, answer="bad")
    (pair,) = preference_pairs([down]).pairs
    assert pair["prompt"] == [dict(m) for m in PROMPT]
    assert pair["chosen"][0]["content"] == "better"
    assert pair["rejected"][0]["content"] == "bad"


def test_a_liked_answer_to_the_same_question_is_chosen_when_none_was_written() -> None:
    liked = trace(1, "what is x", feedback=Feedback(1), answer="good")
    down = trace(2, "What is X?", feedback=Feedback(-1), answer="bad")
    lonely = trace(3, "what is y", feedback=Feedback(-1), answer="bad")
    unstored = trace(4, None, feedback=Feedback(-1, better_answer="b"))

    export = preference_pairs([liked, down, lonely, unstored])

    assert [p["chosen"][0]["content"] for p in export.pairs] == ["good"]
    assert (export.rated_down, export.without_chosen, export.without_prompt) == (3, 1, 1)
