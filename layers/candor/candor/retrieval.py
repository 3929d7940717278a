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
        return rankings.dense[:top_k]
    if strategy == "keyword":
        return rankings.keyword[:top_k]
    fused = rrf_fuse([rankings.dense, rankings.keyword], k=rrf_k)
    if strategy == "hybrid" or reranker is None or not fused:
        return fused[:top_k]
    scores = reranker.rerank(query, [hit.chunk for hit in fused])
    reranked = sorted(zip(fused, scores, strict=True), key=lambda pair: -pair[1])
    return [Hit(hit.chunk, score) for hit, score in reranked[:top_k]]
