"""Adding, listing and removing curated answers: the store and the curated index in step.

The store is written first and is the record of truth; the curated index (a
VectorIndex of its own: a SQLite file beside the documents' index, or a Pinecone
namespace of its own) holds each curated question's vector and words, so that a
visitor's question finds its candidates by the same dense and keyword search as
passages, apart from the documents: no ingest, sync or document delete lists or
deletes its ids. An add whose index write fails is taken back out of the store; a
remove whose index delete fails leaves a vector whose answer the store no longer
holds, which is never served and which `reindex` deletes.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from candor.curated.records import (
    ANSWER_MAX_CHARS,
    CITATION_PREFIX,
    QUESTION_MAX_CHARS,
    URL_MAX_CHARS,
    CuratedAnswer,
    CuratedAnswers,
    CuratedState,
    new_id,
)
from candor.errors import CuratedAnswerError
from candor.ports import Embedder, VectorIndex
from candor.types import Chunk
from candor.urls import is_public_url

# Control characters other than tab, newline and carriage return: a terminal or the
# widget would act on them or hide them.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class Curation:
    """The curated answers of one index: their store and their own vector index."""

    store: CuratedAnswers
    index: VectorIndex
    index_name: str

    def state(self) -> CuratedState:
        return self.store.curated_state(self.index_name)


def chunk_of(answer: CuratedAnswer) -> Chunk:
    """What the curated index holds for an answer: its question, found by meaning and words."""
    return Chunk(id=answer.id, text=answer.question, source=f"{CITATION_PREFIX}{answer.id}")


def _checked(field: str, value: str, limit: int) -> str:
    text = value.strip()
    if not text:
        raise CuratedAnswerError(f"the {field} is empty")
    if len(text) > limit:
        raise CuratedAnswerError(f"the {field} has {len(text)} characters; at most {limit}")
    found = _CONTROL.search(text)
    if found is not None:
        raise CuratedAnswerError(
            f"the {field} holds a control character (U+{ord(found.group()):04X})"
        )
    return text


def checked(question: str, answer: str, url: str | None) -> tuple[str, str, str | None]:
    """The three as they would be kept; CuratedAnswerError when one cannot be."""
    question = _checked("question", question, QUESTION_MAX_CHARS)
    answer = _checked("answer", answer, ANSWER_MAX_CHARS)
    if url is not None:
        url = url.strip() or None
    if url is not None and (len(url) > URL_MAX_CHARS or not is_public_url(url)):
        raise CuratedAnswerError("the URL must be an absolute http(s) address")
    return question, answer, url


def add(
    curation: Curation,
    embedder: Embedder,
    question: str,
    answer: str,
    *,
    url: str | None = None,
    origin: str = "owner",
    now: float | None = None,
) -> CuratedAnswer:
    """Keep the owner's `answer` to `question`; it is served from the next request on."""
    question, answer, url = checked(question, answer, url)
    record = CuratedAnswer(
        id=new_id(),
        question=question,
        answer=answer,
        url=url,
        created_at=time.time() if now is None else now,
        origin=origin,
    )
    curation.store.put_curated(curation.index_name, record)
    try:
        curation.index.upsert([chunk_of(record)], embedder.embed([record.question]))
    except BaseException:
        # Not findable, so not kept: the owner sees the error and adds it again.
        curation.store.remove_curated(curation.index_name, record.id)
        raise
    return record


def remove(curation: Curation, answer_id: str) -> bool:
    """Forget one curated answer; False when there was none by that id."""
    if curation.store.remove_curated(curation.index_name, answer_id) is None:
        return False
    curation.index.delete([answer_id])
    return True


@dataclass(frozen=True, slots=True)
class Reindexed:
    written: int
    deleted: int


def reindex(curation: Curation, embedder: Embedder) -> Reindexed:
    """Make the curated index hold exactly the store's answers, embedded by `embedder`
    (after a change of embedder, or a remove whose index delete failed)."""
    answers = curation.store.list_curated(curation.index_name)
    written = 0
    for start in range(0, len(answers), 64):
        batch = answers[start : start + 64]
        written += curation.index.upsert(
            [chunk_of(a) for a in batch], embedder.embed([a.question for a in batch])
        )
    kept = {a.id for a in answers}
    stale = [cid for cid in curation.index.list_ids() if cid not in kept]
    return Reindexed(written, curation.index.delete(stale) if stale else 0)
