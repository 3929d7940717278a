"""Hybrid retrieval: dense and keyword rankings fused by Reciprocal Rank Fusion.

Every index backend returns the two rankings separately so that the fusion is
the same code whatever the backend.
"""

from __future__ import annotations

from collections.abc import Sequence

from candor.ports import Embedder, Reranker, VectorIndex
from candor.types import Hit, Metadata, Rankings

Strategy = str  # "dense" | "keyword" | "hybrid" | "hybrid_rerank"
STRATEGIES: tuple[str, ...] = ("dense", "keyword", "hybrid", "hybrid_rerank")


def rrf_fuse(rankings: Sequence[Sequence[Hit]], *, k: int = 60) -> list[Hit]:
    """Fuse rankings by Reciprocal Rank Fusion: score = sum of 1 / (k + rank).

    Ranks start at 1. Ties keep the order in which chunks were first seen, so the
    result is deterministic.
    """
    scores: dict[str, float] = {}
    first: dict[str, Hit] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking, start=1):
            cid = hit.chunk.id
            scores[cid] = scores.get(cid, 0.0) + 1.0 / (k + rank)
            first.setdefault(cid, hit)
    order = sorted(first, key=lambda cid: -scores[cid])
    return [Hit(first[cid].chunk, scores[cid]) for cid in order]


def diversify(hits: Sequence[Hit], per_source: int) -> list[Hit]:
    """At most `per_source` hits of one document before every other document has its turn.

    A long page (a configuration reference, a manual) matches many questions with
    many passages; without a cap it fills the top ranks and pushes out the page
    that answers. Hits over the cap are not dropped: they follow, in order.
    `per_source` 0 means no cap.
    """
    if per_source == 0:
        return list(hits)
    kept: list[Hit] = []
    deferred: list[Hit] = []
    seen: dict[str, int] = {}
    for hit in hits:
        count = seen.get(hit.chunk.source, 0)
        seen[hit.chunk.source] = count + 1
        (kept if count < per_source else deferred).append(hit)
    return kept + deferred


def search(
    query: str,
    *,
    embedder: Embedder,
    index: VectorIndex,
    reranker: Reranker | None,
    top_k: int,
    candidates: int,
    rrf_k: int = 60,
    strategy: Strategy = "hybrid_rerank",
    where: Metadata | None = None,
    per_source: int = 0,
) -> list[Hit]:
    """Return the top_k hits for `query` by the given strategy."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown retrieval strategy {strategy!r}; expected one of {STRATEGIES}")
    wants_dense = strategy != "keyword"
    wants_keyword = strategy != "dense"
    vector = embedder.embed([query])[0] if wants_dense else None
    rankings: Rankings = index.query(
        vector=vector,
        keywords=query if wants_keyword else None,
        top_k=candidates,
        where=where,
    )
    if strategy == "dense":
        return diversify(rankings.dense, per_source)[:top_k]
    if strategy == "keyword":
        return diversify(rankings.keyword, per_source)[:top_k]
    fused = rrf_fuse([rankings.dense, rankings.keyword], k=rrf_k)
    if strategy == "hybrid" or reranker is None or not fused:
        return diversify(fused, per_source)[:top_k]
    scores = reranker.rerank(query, [hit.chunk for hit in fused]).scores
    reranked = sorted(zip(fused, scores, strict=True), key=lambda pair: -pair[1])
    return diversify([Hit(hit.chunk, score) for hit, score in reranked], per_source)[:top_k]
