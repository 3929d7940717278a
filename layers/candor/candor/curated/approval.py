"""A visitor's better answer, approved by the owner, kept as a curated answer.

Visitor text never becomes a curated answer by itself: `candor feedback review
--approve KEY --as-answer` records the owner's approval of the exact rating they
read (candor.review: one conditional write, refused if the visitor rated again
since), and only then keeps the text, as the owner edited it if they did.
"""

from __future__ import annotations

from dataclasses import dataclass

from candor import review
from candor.curated import library
from candor.curated.library import Curation
from candor.curated.records import CuratedAnswer
from candor.errors import CuratedAnswerError
from candor.ports import Embedder, StateStore
from candor.traces import Trace


@dataclass(frozen=True, slots=True)
class Proposal:
    """What approving a rating as an answer would keep: the visitor's, or the owner's edit."""

    key: str
    question: str | None
    answer: str | None


def proposal(state: StateStore, key: str, *, now: float) -> Proposal | None:
    """The question and better answer of the rating listed under `key`; None when the
    key names no live rating."""
    trace_id, _, _ = key.partition(".")
    stored = state.get_trace(trace_id, now=now) if len(trace_id) == 32 else None
    if stored is None or stored.feedback is None:
        return None
    trace = Trace.from_stored(stored)
    assert trace.feedback is not None
    return Proposal(key, trace.question, trace.feedback.better_answer)


def approve_as_answer(
    state: StateStore,
    curation: Curation,
    embedder: Embedder,
    key: str,
    *,
    question: str | None = None,
    answer: str | None = None,
    url: str | None = None,
    now: float,
) -> tuple[review.Outcome, CuratedAnswer | None]:
    """Approve the rating under `key`, then keep its better answer (or `answer`, the
    owner's edit) as the curated answer to its question (or `question`).

    The texts are checked before anything is written: a rating without a stored
    question or better answer needs the owner's own.
    """
    found = proposal(state, key, now=now)
    if found is None:
        return "unknown", None
    asked = question if question is not None else found.question
    said = answer if answer is not None else found.answer
    if asked is None:
        raise CuratedAnswerError("the question was not stored: give it with --question")
    if said is None:
        raise CuratedAnswerError("the visitor wrote no better answer: give one with --answer")
    library.checked(asked, said, url)
    outcome = review.decide(state, key, "approved", now=now)
    if outcome != "approved":
        return outcome, None
    origin = f"feedback:{key.partition('.')[0]}"
    return outcome, library.add(curation, embedder, asked, said, url=url, origin=origin, now=now)
