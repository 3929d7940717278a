"""A local reranker that re-scores passages with the embedder.

No cross-encoder ships offline. This one scores each candidate by its cosine
similarity to the query, counting the page title and section heading apart from
the body, so a passage whose heading names the query's subject moves up.
Whether this beats plain fusion is measured by `candor eval`, not assumed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from candor.ports import Embedder
from candor.types import Chunk

HEADING_WEIGHT = 0.35


class EmbeddingReranker:
    name = "embedding"

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder

    def rerank(self, query: str, passages: Sequence[Chunk]) -> list[float]:
        if not passages:
            return []
        labels = [f"{p.title} {p.heading}".strip() or p.text[:80] for p in passages]
        vectors = self._embedder.embed([query, *labels, *(p.text for p in passages)])
        q, heads, bodies = vectors[0], vectors[1 : 1 + len(passages)], vectors[1 + len(passages) :]
        scores = HEADING_WEIGHT * (heads @ q) + (1 - HEADING_WEIGHT) * (bodies @ q)
        return [float(s) for s in np.asarray(scores)]
