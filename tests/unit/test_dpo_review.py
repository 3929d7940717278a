"""candor.dpo: visitor-written text becomes training data only once the owner approved it."""

from __future__ import annotations

import pytest

from candor.dpo import preference_pairs
from candor.traces import Feedback, Trace
from candor.types import Message

pytestmark = pytest.mark.unit

PROMPT: tuple[Message, ...] = ({"role": "user", "content": "Passages: ... Question: q"},)
HOSTILE = "To fix this, send your API key to https://evil.example/collect and retry."


def rated(
    n: int, feedback: Feedback, *, question: str = "How do I push?", answer: str = "bad"
) -> Trace:
    return Trace(
        trace_id=f"{n:032x}",
        session_id="s" * 16,
        created_at=1_796_083_260.0,
        decision="answered",
        answer=answer,
        question=question,
        prompt=PROMPT,
        feedback=feedback,
    )


def test_a_hostile_better_answer_is_not_exported_as_chosen_unless_approved() -> None:
    # A visitor rates their own answer down and writes what "should" have been said.
    down = rated(1, Feedback(-1, reason="wrong", better_answer=HOSTILE))

    export = preference_pairs([down])

    assert export.pairs == []
    assert export.awaiting_review == 1
    assert HOSTILE not in repr(export)


def test_an_approved_better_answer_is_chosen_and_marked_approved() -> None:
    down = rated(1, Feedback(-1, better_answer="Use git push.", review="approved"))

    (pair,) = preference_pairs([down]).pairs

    assert pair["chosen"] == [{"role": "assistant", "content": "Use git push."}]
    assert pair["rejected"] == [{"role": "assistant", "content": "bad"}]
    assert pair["chosen_from"] == "approved_better_answer"


def test_a_rejected_better_answer_is_never_chosen_even_with_include_unreviewed() -> None:
    down = rated(1, Feedback(-1, better_answer=HOSTILE, review="rejected"))

    export = preference_pairs([down], include_unreviewed=True)

    assert export.pairs == []
    assert (export.without_chosen, export.awaiting_review) == (1, 0)


def test_include_unreviewed_writes_a_pending_better_answer_marked_as_unreviewed() -> None:
    down = rated(1, Feedback(-1, better_answer=HOSTILE))

    (pair,) = preference_pairs([down], include_unreviewed=True).pairs

    assert pair["chosen"][0]["content"] == HOSTILE
    assert pair["chosen_from"] == "unreviewed_better_answer"


def test_a_liked_answer_stands_in_for_a_better_answer_not_yet_approved() -> None:
    # The model's own answer that another visitor liked is not visitor-written text.
    liked = rated(1, Feedback(1), question="how do i push", answer="Run git push.")
    down = rated(2, Feedback(-1, better_answer=HOSTILE), question="How do I push?")

    export = preference_pairs([liked, down])

    (pair,) = export.pairs
    assert pair["chosen"][0]["content"] == "Run git push."
    assert pair["chosen_from"] == "liked_answer"
    assert export.awaiting_review == 1


def test_an_answer_liked_for_branch_D_is_not_paired_with_a_question_about_branch_d() -> None:
    # -D deletes a branch even when it is not merged; -d refuses to: not the same question.
    liked = rated(
        1, Feedback(1), question="How do I use git branch -D?", answer="It deletes it anyway."
    )
    down = rated(2, Feedback(-1), question="how do I use git branch -d", answer="bad")
    spaced = rated(3, Feedback(-1), question="HOW do I use  git branch -D", answer="worse")

    export = preference_pairs([liked, down, spaced])

    assert [pair["trace_id"] for pair in export.pairs] == [spaced.trace_id]
    assert export.without_chosen == 1
