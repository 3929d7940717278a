"""A gap: questions the documents did not answer, kept until they do.

Each group of questions `candor insights` finds missing from the documents (declined,
or rated down with a reason) is a gap with an id, its questions and a status, in the
state store (backends/sqlite_gaps.py, backends/dynamodb_gaps.py). `candor gaps check`
asks an open gap's questions again and closes it once every one is answered with
valid citations and no unsupported specifics, naming the documents (or the owner's
curated answer) that answered them. A closed gap whose question is asked and
declined again later opens again.

A gap is written whole, conditioned on the version it was read at: the owner's
`candor insights` and a check after an ingest can run at the same moment, and the
second writer re-reads instead of losing the first one's questions.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, Protocol, runtime_checkable

GapStatus = Literal["open", "closed"]
Why = Literal["declined", "rated_down"]
# The questions a gap keeps word for word (the most recent), and the trace ids it
# remembers having counted (so that a question is never counted twice).
MAX_QUESTIONS = 30
MAX_TRACE_IDS = 2000


def gap_id(index_name: str, first_question: str) -> str:
    """A gap's id, from its first question as the answer cache normalises it: two
    refreshes racing to open the same gap write the same item, and one of them wins."""
    digest = hashlib.sha256(f"{index_name}\x00{first_question}".encode()).hexdigest()
    return "g" + digest[:10]


@dataclass(frozen=True, slots=True)
class GapQuestion:
    """One visitor question of a gap, and why it counts as missing."""

    question: str
    trace_id: str
    asked_at: float
    why: Why
    # For a rated-down answer: the answer the visitor rated, and their reason.
    rated_answer: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class QuestionCheck:
    """What `candor gaps check` got when it asked one question again."""

    question: str
    answered: bool
    # "answered", or why not: "declined", "unsupported specifics", "no citation",
    # "the same answer as was rated down", "failed: <error type>".
    outcome: str
    sources: tuple[str, ...] = ()  # the documents cited, or "curated:<id>"
    answer: str = ""


@dataclass(frozen=True, slots=True)
class Gap:
    id: str
    index_name: str
    status: GapStatus
    opened_at: float
    questions: tuple[GapQuestion, ...]
    asked: int  # questions counted, also those no longer kept word for word
    trace_ids: tuple[str, ...] = ()
    version: int = 1
    closed_at: float | None = None
    closed_by: tuple[str, ...] = ()
    checked_at: float | None = None
    checks: tuple[QuestionCheck, ...] = ()
    reopened_at: float | None = None

    @property
    def example(self) -> str:
        return self.questions[0].question if self.questions else ""

    @property
    def last_asked_at(self) -> float:
        return max((q.asked_at for q in self.questions), default=self.opened_at)

    def with_questions(self, added: list[GapQuestion]) -> Gap:
        """This gap with `added` counted (those it counted already are skipped)."""
        seen = set(self.trace_ids)
        new = [q for q in added if q.trace_id not in seen]
        if not new:
            return self
        kept = sorted((*self.questions, *new), key=lambda q: q.asked_at)
        # The first question stays (it names the gap); the rest are the most recent.
        questions = (kept[0], *kept[1:][-(MAX_QUESTIONS - 1) :])
        ids = (*self.trace_ids, *(q.trace_id for q in new))[-MAX_TRACE_IDS:]
        return replace(self, questions=questions, asked=self.asked + len(new), trace_ids=ids)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Gap:
        data: dict[str, Any] = json.loads(text)
        return cls(
            **data
            | {
                "questions": tuple(GapQuestion(**q) for q in data["questions"]),
                "trace_ids": tuple(data["trace_ids"]),
                "closed_by": tuple(data["closed_by"]),
                "checks": tuple(
                    QuestionCheck(**c | {"sources": tuple(c["sources"])}) for c in data["checks"]
                ),
            }
        )


@runtime_checkable
class GapStore(Protocol):
    """Gaps per index name, in the state store's file or table."""

    def list_gaps(self, index_name: str) -> list[Gap]:
        """Every gap of the index, oldest first."""
        ...

    def get_gap(self, index_name: str, gap_id: str) -> Gap | None: ...

    def save_gap(self, gap: Gap) -> bool:
        """Write `gap` if the stored one is at `gap.version - 1` (absent, for version 1).

        One conditional write; False, and nothing written, when another writer saved
        it first: read it again and redo the change.
        """
        ...
