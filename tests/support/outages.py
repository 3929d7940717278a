"""Backends that are down, or fail on chosen calls: real ports, faults injected around them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from candor.errors import IndexError_
from candor.ports import StateStore, Vectors
from candor.types import Chunk, Metadata, Rankings

# What a real outage's text holds and the public must never read.
INTERNAL_TEXT = "my-index-abc1234.svc.aped-1234-a56b.pinecone.io /candor/openai-api-key sk-...Xy9z"


class DownIndex:
    """A VectorIndex whose every call fails as the Pinecone adapter fails when its host is down."""

    def _down(self) -> IndexError_:
        return IndexError_(f"pinecone: PineconeConnectionError: {INTERNAL_TEXT}")

    def upsert(self, chunks: Sequence[Chunk], vectors: Vectors) -> int:
        raise self._down()

    def query(
        self,
        *,
        vector: Vectors | None,
        keywords: str | None,
        top_k: int,
        where: Metadata | None = None,
    ) -> Rankings:
        raise self._down()

    def fetch(self, ids: Sequence[str]) -> list[Chunk]:
        raise self._down()

    def delete(self, ids: Sequence[str]) -> int:
        raise self._down()

    def list_ids(self, prefix: str = "") -> Iterator[str]:
        raise self._down()

    def count(self) -> int:
        raise self._down()


class FailingState:
    """A real StateStore whose methods named in `failing` raise `error` instead.

    `calls` counts every call by method name, failed or not. Every method of the
    port, present or added later, passes through the same check.
    """

    def __init__(
        self, inner: StateStore, failing: set[str] | None = None, error: Exception | None = None
    ) -> None:
        self.inner = inner
        self.failing = failing or set()
        self.error = error or RuntimeError("injected fault")
        self.failed: list[str] = []
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        def checked(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            if name in self.failing:
                self.failed.append(name)
                raise self.error
            return method(*args, **kwargs)

        return checked
