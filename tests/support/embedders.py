"""Embedders for tests that implement the Embedder port for real (no mocks of our ports)."""

from __future__ import annotations

from collections.abc import Sequence

from candor.backends.hashing_embedder import HashingEmbedder
from candor.errors import ModelError
from candor.ports import Embedder, Vectors


class CountingEmbedder:
    """Delegates to another Embedder and counts the texts it was asked to embed.

    `fail_after` makes it raise ModelError once that many texts were embedded, as a
    provider outage in the middle of a document would.
    """

    def __init__(self, inner: Embedder | None = None, *, fail_after: int | None = None) -> None:
        self.inner = inner or HashingEmbedder(384)
        self.name = self.inner.name
        self.dimensions = self.inner.dimensions
        self.texts = 0
        self.calls = 0
        self.fail_after = fail_after

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self.fail_after is not None and self.texts + len(texts) > self.fail_after:
            raise ModelError("embedding provider unavailable (test)")
        self.calls += 1
        self.texts += len(texts)
        return self.inner.embed(texts)

    def reset(self) -> None:
        self.texts = self.calls = 0
