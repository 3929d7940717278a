"""Gaps: opened from the traces, checked on the owner's budget, exported for `candor eval`."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from candor import guards
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_curated import SqliteCuratedAnswers
from candor.backends.sqlite_gaps import SqliteGaps
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.curated import library
from candor.curated.library import Curation
from candor.deps import Deps
from candor.evaluation.questions import load_questions
from candor.gaps import checking, opening
from candor.gaps.export import question_lines
from candor.gaps.records import Gap, GapQuestion
from candor.settings import Settings
from candor.traces import Feedback, Trace
from candor.types import Message
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

NOW = 1_796_083_260.0
INDEX = "default"


def trace(
    n: int,
    question: str | None,
    decision: str = "declined",
    *,
    at: float = NOW - 3600,
    feedback: Feedback | None = None,
    answer: str = "no",
) -> Trace:
    return Trace(
        trace_id=f"{n:032x}",
        session_id="s" * 16,
        created_at=at + n,
        decision=decision,  # type: ignore[arg-type]
        answer=answer,
        question=question,
        feedback=feedback,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteGaps]:
    gaps = SqliteGaps(tmp_path / "state.sqlite3")
    yield gaps
    gaps.close()


# Opening.


def test_declined_and_reasoned_down_ratings_are_missing_and_nothing_else_is() -> None:
    traces = [
        trace(1, "How do I set up Git LFS?"),
        trace(2, "What is git push?", "answered", feedback=Feedback(-1, reason="wrong")),
        trace(3, "What is git pull?", "answered", feedback=Feedback(-1)),  # no reason
        trace(4, "What is git fetch?", "answered", feedback=Feedback(1)),
        trace(5, None),  # the question was not stored
        trace(6, "Hi", "smalltalk"),
    ]

    missing = opening.missing_questions(traces)

    assert [(q.question, q.why) for q in missing] == [
        ("How do I set up Git LFS?", "declined"),
        ("What is git push?", "rated_down"),
    ]
    assert missing[1].rated_answer == "no" and missing[1].reason == "wrong"


def test_questions_that_repeat_or_mean_the_same_open_one_gap(store: SqliteGaps) -> None:
    traces = [
        trace(1, "How do I set up Git LFS?"),
        trace(2, "how do I set up git LFS"),
        trace(3, "How do I sign commits with SSH keys?"),
    ]

    done = opening.refresh(store, traces, HashingEmbedder(), INDEX, now=NOW)

    assert len(done.opened) == 2
    by_example = {g.example: g for g in done.gaps}
    lfs = by_example["How do I set up Git LFS?"]
    assert (lfs.asked, lfs.status) == (2, "open")
    assert by_example["How do I sign commits with SSH keys?"].asked == 1


def test_a_question_is_counted_once_however_often_the_traces_are_read(store: SqliteGaps) -> None:
    traces = [trace(1, "How do I set up Git LFS?")]
    opening.refresh(store, traces, HashingEmbedder(), INDEX, now=NOW)

    again = opening.refresh(store, traces, HashingEmbedder(), INDEX, now=NOW)

    assert (again.opened, again.grown) == ([], [])
    (gap,) = again.gaps
    assert (gap.asked, gap.version) == (1, 1)


def test_a_later_question_joins_its_gap(store: SqliteGaps) -> None:
    opening.refresh(store, [trace(1, "How do I set up Git LFS?")], None, INDEX, now=NOW)

    done = opening.refresh(
        store, [trace(2, "How do I set up Git LFS?")], HashingEmbedder(), INDEX, now=NOW
    )

    (gap,) = done.gaps
    assert done.grown == [gap.id] and gap.asked == 2


def closed(store: SqliteGaps, at: float) -> Gap:
    (gap,) = opening.refresh(
        store, [trace(1, "How do I set up Git LFS?")], None, INDEX, now=NOW
    ).gaps
    shut = dataclasses.replace(
        gap, status="closed", closed_at=at, closed_by=("lfs.md",), version=gap.version + 1
    )
    assert store.save_gap(shut)
    return shut


def test_a_closed_gap_asked_again_after_it_closed_opens_again(store: SqliteGaps) -> None:
    shut = closed(store, at=NOW - 1800)

    done = opening.refresh(
        store, [trace(2, "How do I set up Git LFS?", at=NOW - 60)], None, INDEX, now=NOW
    )

    (gap,) = done.gaps
    assert done.reopened == [shut.id]
    assert (gap.status, gap.closed_by, gap.reopened_at) == ("open", (), NOW)


def test_a_question_asked_before_the_gap_closed_does_not_open_it_again(store: SqliteGaps) -> None:
    closed(store, at=NOW)

    done = opening.refresh(
        store, [trace(2, "How do I set up Git LFS?", at=NOW - 600)], None, INDEX, now=NOW
    )

    (gap,) = done.gaps
    assert gap.status == "closed" and gap.asked == 2 and done.reopened == []


class RacedGaps(SqliteGaps):
    """The SQLite gaps, with another writer saving each gap just before this one does."""

    raced = 0

    def save_gap(self, gap: Gap) -> bool:
        if self.raced < 2 and gap.version > 1:
            self.raced += 1
            stored = self.get_gap(gap.index_name, gap.id)
            assert stored is not None
            other = dataclasses.replace(stored, asked=stored.asked + 100, version=gap.version)
            assert super().save_gap(other)
        return super().save_gap(gap)


def test_a_refresh_that_lost_a_race_reads_again_and_keeps_the_other_writers_change(
    tmp_path: Path,
) -> None:
    store = RacedGaps(tmp_path / "raced.sqlite3")
    opening.refresh(store, [trace(1, "How do I set up Git LFS?")], None, INDEX, now=NOW)

    done = opening.refresh(store, [trace(2, "How do I set up Git LFS?")], None, INDEX, now=NOW)

    (gap,) = done.gaps
    assert store.raced == 2
    assert gap.asked == 1 + 100 + 100 + 1  # both raced writes kept, then this one's
    store.close()


# Checking.


@pytest.fixture
def gap_deps(
    settings: Settings, index: SqliteVectorIndex, state: SqliteStateStore, tmp_path: Path
) -> Iterator[tuple[Deps, SqliteGaps]]:
    gaps = SqliteGaps(settings.state_path)
    yield Deps(settings, ScriptedChatModel({}), HashingEmbedder(), index, None, state), gaps
    gaps.close()


def open_gap(store: SqliteGaps, *questions: str, rated: str | None = None) -> Gap:
    traces = [
        trace(
            n,
            q,
            "answered" if rated else "declined",
            answer=rated or "no",
            feedback=Feedback(-1, reason="wrong") if rated else None,
        )
        for n, q in enumerate(questions, 1)
    ]
    (gap,) = opening.refresh(store, traces, None, INDEX, now=NOW).gaps
    return gap


def answers(*texts: str) -> ScriptedChatModel:
    n = len(texts)
    return ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}] * n,
            "judge": [True] * n,
            "text": list(texts),
        }
    )


def test_a_gap_closes_when_every_question_is_answered_and_names_the_documents(
    gap_deps: tuple[Deps, SqliteGaps],
) -> None:
    deps, store = gap_deps
    gap = open_gap(store, "What does --force-with-lease do?")
    deps = dataclasses.replace(
        deps, chat=answers("It refuses to overwrite work you have not seen [1].")
    )

    report = asyncio.run(checking.check(deps, store))

    assert report.closed == [gap.id]
    saved = store.get_gap(INDEX, gap.id)
    assert saved is not None and saved.status == "closed"
    assert saved.closed_by == ("git-push.html",)
    (check,) = saved.checks
    assert (check.answered, check.outcome) == (True, "answered")


def test_a_declined_question_keeps_its_gap_open(gap_deps: tuple[Deps, SqliteGaps]) -> None:
    deps, store = gap_deps
    gap = open_gap(store, "How do I set up Git LFS?")
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [False, False],
            "Rewrite": [{"query": "git lfs"}],
        }
    )

    report = asyncio.run(checking.check(dataclasses.replace(deps, chat=chat), store))

    saved = store.get_gap(INDEX, gap.id)
    assert report.closed == [] and saved is not None and saved.status == "open"
    assert [c.outcome for c in saved.checks] == ["declined"]


def test_the_same_answer_a_visitor_rated_down_does_not_close_the_gap(
    gap_deps: tuple[Deps, SqliteGaps],
) -> None:
    deps, store = gap_deps
    said = "It refuses to overwrite work you have not seen [1]."
    rated_answer = "It refuses to overwrite work you have not seen [1]."
    gap = open_gap(store, "What does --force-with-lease do?", rated=rated_answer)

    asyncio.run(checking.check(dataclasses.replace(deps, chat=answers(said)), store))

    saved = store.get_gap(INDEX, gap.id)
    assert saved is not None and saved.status == "open"
    assert saved.checks[0].outcome == "the same answer as was rated down"


def test_the_owners_curated_answer_closes_a_gap(
    gap_deps: tuple[Deps, SqliteGaps], settings: Settings
) -> None:
    deps, store = gap_deps
    question = "How do I set up Git LFS?"
    gap = open_gap(store, question)
    embedder = HashingEmbedder()
    curation = Curation(
        SqliteCuratedAnswers(settings.state_path),
        SqliteVectorIndex(settings.curated_index_path, embedder.dimensions, embedder=embedder.name),
        INDEX,
    )
    kept = library.add(curation, embedder, question, "Install git-lfs, then run git lfs install.")
    chat = ScriptedChatModel({"Triage": [{"abusive": False, "kind": "question"}]})
    deps = dataclasses.replace(
        deps,
        chat=chat,
        curated=curation,
        settings=settings.model_copy(update={"curated_threshold": 0.8}),
    )

    report = asyncio.run(checking.check(deps, store))

    assert report.closed == [gap.id]
    saved = store.get_gap(INDEX, gap.id)
    assert saved is not None and saved.closed_by == (f"curated:{kept.id}",)


def test_the_check_stops_at_the_owners_budget_and_leaves_the_visitors_untouched(
    gap_deps: tuple[Deps, SqliteGaps],
) -> None:
    deps, store = gap_deps
    first = open_gap(store, "What does --force-with-lease do?")
    per_question = guards.reservation_usd(deps.settings, "scripted", deps.embedder)
    # Room for one question's reservation, not two.
    settings = deps.settings.model_copy(
        update={"owner_budget_usd": per_question * Decimal("1.5"), "gap_questions": 1}
    )
    other = opening.refresh(
        store, [trace(9, "How do I sign commits with SSH keys?")], None, INDEX, now=NOW
    )
    assert len(other.gaps) == 2
    # Each of the question's three calls costs a quarter of what was reserved for it.
    chat = answers("It refuses to overwrite work you have not seen [1].")
    chat.cost_per_call = float(per_question) / 4
    deps = dataclasses.replace(deps, settings=settings, chat=chat)

    report = asyncio.run(checking.check(deps, store))

    assert report.budget_exhausted
    assert len(report.checked) == 1 and len(report.unchecked) == 1
    spent = deps.state.budget_spent(checking.owner_ledger(time.time()))
    assert 0 < spent <= settings.owner_budget_usd
    assert deps.state.budget_spent(guards.daily_ledger(time.time())) == 0
    assert first.id in report.checked + report.unchecked


def test_a_gap_that_grew_during_its_check_is_not_closed_by_it(
    gap_deps: tuple[Deps, SqliteGaps],
) -> None:
    deps, store = gap_deps
    gap = open_gap(store, "What does --force-with-lease do?")

    class GrowsMeanwhile(ScriptedChatModel):
        def _next(self, kind: str, messages: Sequence[Message]) -> Any:
            if kind == "text":  # a visitor's new question lands while it is checked
                opening.refresh(
                    store, [trace(7, "What does --force-with-lease do?")], None, INDEX, now=NOW
                )
            return super()._next(kind, messages)

    chat = GrowsMeanwhile(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": ["It refuses to overwrite work you have not seen [1]."],
        }
    )

    report = asyncio.run(checking.check(dataclasses.replace(deps, chat=chat), store))

    assert report.conflicts == [gap.id] and report.closed == []
    saved = store.get_gap(INDEX, gap.id)
    assert saved is not None and (saved.status, saved.asked) == ("open", 2)


# Export.


def test_open_gaps_export_as_a_question_set_candor_eval_reads(
    store: SqliteGaps, tmp_path: Path
) -> None:
    opening.refresh(
        store,
        [trace(1, "How do I set up Git LFS?"), trace(2, "How do I sign commits with SSH?")],
        None,
        INDEX,
        now=NOW,
    )
    out = tmp_path / "gaps.jsonl"
    out.write_text("\n".join(question_lines(store.list_gaps(INDEX), per_gap=3)) + "\n")

    questions = load_questions(out)

    assert sorted(q.question for q in questions) == [
        "How do I set up Git LFS?",
        "How do I sign commits with SSH?",
    ]
    assert all(q.kind == "factual" and q.expected_sources == () for q in questions)
    assert all(json.loads(line)["gap"].startswith("g") for line in out.read_text().splitlines())


def test_a_question_without_pages_is_still_refused_unless_it_comes_from_a_gap(
    tmp_path: Path,
) -> None:
    from candor.evaluation.questions import QuestionFileError

    out = tmp_path / "q.jsonl"
    out.write_text(json.dumps({"id": "q", "question": "What?", "kind": "factual"}) + "\n")
    with pytest.raises(QuestionFileError, match="needs 'expected_sources'"):
        load_questions(out)


def test_a_closed_gap_exports_with_the_documents_that_closed_it(store: SqliteGaps) -> None:
    shut = closed(store, at=NOW)
    lines = question_lines([shut], per_gap=3, closed=True)
    assert [json.loads(line)["expected_sources"] for line in lines] == [["lfs.md"]]
    assert question_lines([shut], per_gap=3) == []


def test_the_questions_asked_are_the_most_recent_distinct_ones() -> None:
    gap = Gap("g1", INDEX, "open", NOW, (), 0).with_questions(
        [
            GapQuestion("How do I set up LFS?", "a" * 32, NOW - 30, "declined"),
            GapQuestion("how do i set up lfs", "b" * 32, NOW - 20, "declined"),
            GapQuestion("LFS setup?", "c" * 32, NOW - 10, "declined"),
        ]
    )
    assert [q.question for q in checking.questions_to_ask(gap, 2)] == [
        "LFS setup?",
        "how do i set up lfs",
    ]
