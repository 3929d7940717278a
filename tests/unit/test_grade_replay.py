"""Grade prompts replayed on a run's own passages: what each model grade saw, and
where each variant's verdict lands in the confusion matrix."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from candor.backends.sqlite_index import SqliteVectorIndex
from candor.evaluation.grade_replay import VARIANTS, model_grades, replay
from candor.evaluation.questions import Question
from candor.graph.state import GradeRecord
from candor.traces import Trace
from candor.types import Chunk
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

GC = Chunk("gc-0", "gc.auto defaults to 6700; 0 disables it.", "git-gc.html", "git-gc(1)")
LOG = Chunk("log-0", "git log shows commits.", "git-log.html", "git-log(1)")
ASKED = Question("q1", "What is the default of gc.auto?", "factual", ("git-gc.html",), ("6700",))
UNANSWERABLE = Question("q2", "What does core.autoCompactHistory do?", "unanswerable")


@pytest.fixture
def index(tmp_path: Path) -> SqliteVectorIndex:
    index = SqliteVectorIndex(tmp_path / "index.sqlite3", 2)
    index.upsert([GC, LOG], np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32))
    return index


def trace(question: str, *grades: GradeRecord) -> Trace:
    return Trace("t", "s", 0.0, "declined", "", question, grades=grades)


def grade(ids: tuple[str, ...], answerable: bool, by: str = "model") -> GradeRecord:
    return GradeRecord(attempt=1, passage_ids=ids, answerable=answerable, by=by)  # type: ignore[arg-type]


def test_only_model_grades_are_replayed_with_the_passages_they_judged(
    index: SqliteVectorIndex,
) -> None:
    traces = [
        trace(ASKED.question, grade(("log-0", "gc-0"), False)),
        trace(UNANSWERABLE.question, grade((), False, by="gate")),
        trace("a question of another set", grade(("gc-0",), True)),
    ]
    (item,) = model_grades(traces, index, [ASKED, UNANSWERABLE], passage_chars=600)
    assert item.question == ASKED
    assert [hit.chunk.id for hit in item.passages] == ["log-0", "gc-0"]
    assert item.recorded is False


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_each_variant_is_asked_of_the_passages_and_its_verdict_fills_the_matrix(
    index: SqliteVectorIndex, variant: str
) -> None:
    items = model_grades(
        [
            trace(ASKED.question, grade(("gc-0",), True)),
            trace(UNANSWERABLE.question, grade(("log-0",), False)),
        ],
        index,
        [ASKED, UNANSWERABLE],
        passage_chars=600,
    )
    schema = VARIANTS[variant].schema.__name__
    verdicts = [{"passage": 0, "answerable": False}, {"passage": 1, "answerable": True}]
    chat = ScriptedChatModel({schema: verdicts})
    outcomes, _ = asyncio.run(replay(chat, items, VARIANTS[variant], passage_chars=600))
    assert [(o.context, o.answerable) for o in outcomes] == [
        ("has_keywords", False),
        ("unanswerable", True),
    ]
    first = chat.calls[0].messages[-1]["content"]
    assert "gc.auto defaults to 6700" in first and ASKED.question in first
