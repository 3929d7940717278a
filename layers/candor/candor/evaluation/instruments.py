"""Wrappers around two ports that let the harness see what one question's run did."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TypeVar

from pydantic import BaseModel

from candor.ports import ChatModel, Judged, Structured, Text, TextPiece, VectorIndex, Vectors
from candor.types import Chunk, Message, Metadata, Rankings

M = TypeVar("M", bound=BaseModel)


class CountingChatModel:
    """Counts the calls made to the chat model.

    Counting at the port is exact: it includes moderation's second call on a
    message the triage flags, which a trace step (one per node) cannot show.
    """

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls = 0
        # Every judged call, in order, with the prompt it judged: the harness reads
        # what each grade was shown from it.
        self.judged: list[tuple[list[Message], Judged]] = []

    async def structured(
        self, messages: Sequence[Message], schema: type[M], *, max_tokens: int = 128
    ) -> Structured[M]:
        self.calls += 1
        return await self.inner.structured(messages, schema, max_tokens=max_tokens)

    async def judge(self, messages: Sequence[Message], options: Sequence[str]) -> Judged:
        self.calls += 1
        result = await self.inner.judge(messages, options)
        self.judged.append((list(messages), result))
        return result

    async def text(self, messages: Sequence[Message], *, max_tokens: int = 256) -> Text:
        self.calls += 1
        return await self.inner.text(messages, max_tokens=max_tokens)

    async def stream(
        self, messages: Sequence[Message], *, max_tokens: int = 256
    ) -> AsyncIterator[TextPiece]:
        self.calls += 1
        async for piece in self.inner.stream(messages, max_tokens=max_tokens):
            yield piece


class RecordingIndex:
    """Delegates to an index and remembers every chunk its queries and fetches returned
    (the catalogue fetches the passages it cites; retrieval the neighbours it widens by)."""

    def __init__(self, inner: VectorIndex) -> None:
        self.inner = inner
        self.seen: dict[str, Chunk] = {}

    def query(
        self,
        *,
        vector: Vectors | None,
        keywords: str | None,
        top_k: int,
        where: Metadata | None = None,
    ) -> Rankings:
        rankings = self.inner.query(vector=vector, keywords=keywords, top_k=top_k, where=where)
        for hit in (*rankings.dense, *rankings.keyword):
            self.seen[hit.chunk.id] = hit.chunk
        return rankings

    def upsert(self, chunks: Sequence[Chunk], vectors: Vectors) -> int:
        return self.inner.upsert(chunks, vectors)

    def fetch(self, ids: Sequence[str]) -> list[Chunk]:
        chunks = self.inner.fetch(ids)
        for chunk in chunks:
            self.seen[chunk.id] = chunk
        return chunks

    def delete(self, ids: Sequence[str]) -> int:
        return self.inner.delete(ids)

    def list_ids(self, prefix: str = "") -> Iterator[str]:
        return self.inner.list_ids(prefix)

    def count(self) -> int:
        return self.inner.count()
