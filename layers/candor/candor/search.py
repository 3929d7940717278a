"""A search of the documents with no chat model: what MCP's `search_docs` answers.

The same hybrid search as the graph's retrieve step (dense and keyword rankings
fused, reranked when a reranker is configured, at most a page's share of the
results per page), returning passages with their scores. It calls no chat model,
but a hosted embedder and reranker cost money: the most one search can cost (the
query's embedding and one reranking) is reserved from the day's budget first and
trued up after, as a question's reservation is (candor.guards), and the meter
admits no call past it (candor.billing).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from decimal import Decimal

from candor import billing, guards, retrieval
from candor import deadline as deadlines
from candor.deps import Deps
from candor.graph import limits
from candor.graph.runner import MeteredEmbedder, MeteredReranker
from candor.ports import PricedEmbedder
from candor.settings import Price
from candor.types import Hit, Usage

MAX_RESULTS = 10


def reservation_usd(deps: Deps) -> Decimal:
    """The most one search can cost: the query's embedding at its bound, one reranking."""
    cost = _rerank_bound(deps)
    price = _embedding_price(deps)
    if price is not None:
        tokens = limits.embedding_bounds("retrieve")[0]  # the query, cut at QUERY_CHARS
        cost += Decimal(str(price.cost(tokens, 0)))
    return guards.usd(cost)


async def search(deps: Deps, query: str, *, k: int) -> list[Hit]:
    """The `k` best passages for `query` (at most MAX_RESULTS), best first.

    Raises BudgetExhaustedError when the day's budget cannot cover the search, and
    DeadlineExceededError past the request's deadline (CANDOR_REQUEST_DEADLINE_SECONDS).
    """
    settings = deps.settings
    k = max(1, min(k, MAX_RESULTS))
    amount = reservation_usd(deps)
    now = time.time()
    holds: list[guards.Hold] = []
    if amount > 0:
        holds = await asyncio.to_thread(
            guards.reserve,
            deps.state,
            settings,
            session_id=uuid.uuid4().hex,
            amount=amount,
            now=now,
        )
    meter = billing.Meter(float(amount))
    embedder = MeteredEmbedder(deps.embedder, meter, _embedding_price(deps))
    embedder.begin("retrieve")
    reranker = (
        MeteredReranker(deps.reranker, meter, Usage(cost_usd=float(_rerank_bound(deps))))
        if deps.reranker is not None
        else None
    )
    try:
        deadline = deadlines.after(settings.request_deadline(), start=now)
        with deadlines.bound(deadline), billing.metering(meter):
            return await asyncio.to_thread(
                retrieval.search,
                query[: limits.QUERY_CHARS],
                embedder=embedder,
                index=deps.index,
                reranker=reranker,
                top_k=k,
                candidates=max(settings.candidates, k),
                rrf_k=settings.rrf_k,
                strategy="hybrid_rerank" if reranker is not None else "hybrid",
                per_source=settings.max_per_source,
                fusion=settings.fusion,
                keyword_weight=settings.keyword_weight,
            )
    finally:
        if holds:
            spent = guards.usd(meter.usage.cost_usd)
            await asyncio.to_thread(guards.settle, deps.state, holds, spent)


def _embedding_price(deps: Deps) -> Price | None:
    if not isinstance(deps.embedder, PricedEmbedder):
        return None  # a local embedder: free
    return deps.settings.price(deps.embedder.name)


def _rerank_bound(deps: Deps) -> Decimal:
    if deps.reranker is None:
        return Decimal(0)
    # The module imports no Pinecone SDK at load; reranking is off by default.
    from candor.backends.pinecone_reranker import request_cost_upper_bound

    return request_cost_upper_bound(deps.settings)
