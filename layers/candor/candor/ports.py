"""The ports: small Protocols that every backend implements.

Chat models are async (a network round trip or seconds of local compute);
the others are plain calls that the graph runs in a worker thread.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel

from candor.types import Chunk, Message, Metadata, Rankings, Usage

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T", bound=BaseModel)
Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class Structured(Generic[T]):
    value: T
    usage: Usage


@dataclass(frozen=True, slots=True)
class Text:
    text: str
    usage: Usage


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: a constrained structured call and a free-text call."""

    name: str

    async def structured(
        self, messages: Sequence[Message], schema: type[M], *, max_tokens: int = 128
    ) -> Structured[M]:
        """Return an instance of `schema`; the output is constrained so it always parses."""
        ...

    async def text(self, messages: Sequence[Message], *, max_tokens: int = 256) -> Text:
        """Return free text."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """Texts to unit-length vectors (rows of a float32 matrix)."""

    name: str
    dimensions: int

    def embed(self, texts: Sequence[str]) -> Vectors: ...


@runtime_checkable
class VectorIndex(Protocol):
    """Chunks with their vectors, searchable by vector and by keywords."""

    def upsert(self, chunks: Sequence[Chunk], vectors: Vectors) -> int:
        """Insert or overwrite by id; returns how many were written."""
        ...

    def query(
        self,
        *,
        vector: Vectors | None,
        keywords: str | None,
        top_k: int,
        where: Metadata | None = None,
    ) -> Rankings:
        """Rank by vector similarity and by keyword relevance (BM25), separately.

        `where` keeps chunks whose metadata (or `source`) equals every given value.
        """
        ...

    def fetch(self, ids: Sequence[str]) -> list[Chunk]: ...

    def delete(self, ids: Sequence[str]) -> int: ...

    def list_ids(self, prefix: str = "") -> Iterator[str]: ...

    def count(self) -> int: ...


@runtime_checkable
class Reranker(Protocol):
    """Scores passages against a query; higher is more relevant."""

    name: str

    def rerank(self, query: str, passages: Sequence[Chunk]) -> list[float]: ...


SessionStatus = Literal["active", "warned", "ended"]


@dataclass(frozen=True, slots=True)
class Turn:
    question: str
    answer: str
    decision: str


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    status: SessionStatus = "active"
    history: list[Turn] = field(default_factory=list)


@runtime_checkable
class StateStore(Protocol):
    """Server-side state that must survive restarts and concurrent requests."""

    def get_session(self, session_id: str) -> Session:
        """The session, or a new active one with no history."""
        ...

    def record_offence(self, session_id: str) -> SessionStatus:
        """Atomically move active -> warned, warned -> ended; return the new status."""
        ...

    def append_turn(self, session_id: str, turn: Turn, *, keep: int) -> None:
        """Add a turn to the session history, keeping only the last `keep` turns."""
        ...
