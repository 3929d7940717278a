"""A curated answer, and the store that keeps them.

The store is the record of truth: the curated index (a VectorIndex of its own, apart
from the documents', so that no ingest or sync touches it) only finds candidates,
and a candidate the store no longer holds is never served.

Every add or remove moves the index's curated generation. The answer cache is keyed
on it (candor.service), so that a change retires every cached answer it could change.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

# An id as `candor answers list` shows it and `candor answers remove` takes it.
ID_PATTERN = re.compile(r"^a[0-9a-f]{12}$")
QUESTION_MAX_CHARS = 500
ANSWER_MAX_CHARS = 4000
URL_MAX_CHARS = 2000
# What a served answer's one citation says, and its id prefix (the widget shows the
# title as the chip; the stale-citation report skips these: no document to change).
CHIP_TITLE = "From the site owner"
CITATION_PREFIX = "curated:"


def new_id() -> str:
    return "a" + uuid.uuid4().hex[:12]


@dataclass(frozen=True, slots=True)
class CuratedAnswer:
    """The owner's answer to one question, with the address it may point to.

    `origin` says where the text came from: "owner" (`candor answers add`) or
    "feedback:<trace id>" (a visitor's better answer the owner approved).
    """

    id: str
    question: str
    answer: str
    url: str | None
    created_at: float
    origin: str = "owner"

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> CuratedAnswer:
        return cls(**json.loads(text))


@dataclass(frozen=True, slots=True)
class CuratedState:
    """How many curated answers an index has, and its generation (0: never changed)."""

    generation: int = 0
    count: int = 0


@runtime_checkable
class CuratedAnswers(Protocol):
    """Curated answers per index name, in the state store's file or table.

    Each write is atomic with the generation and count it moves, so that a reader
    never sees an answer without the generation that retired the cache for it.
    """

    def put_curated(self, index_name: str, answer: CuratedAnswer) -> CuratedState:
        """Store a new answer (its id must be new); returns the state after it."""
        ...

    def get_curated(self, index_name: str, answer_id: str) -> CuratedAnswer | None: ...

    def list_curated(self, index_name: str) -> list[CuratedAnswer]:
        """Every answer of the index, oldest first."""
        ...

    def remove_curated(self, index_name: str, answer_id: str) -> CuratedState | None:
        """Remove an answer; the state after it, or None when there was no such answer."""
        ...

    def curated_state(self, index_name: str) -> CuratedState:
        """One read: the count and generation (a never-written index: 0 and 0)."""
        ...
