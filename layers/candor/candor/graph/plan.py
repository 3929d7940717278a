"""The plan node: a question with two or more asks, searched one ask at a time.

route sends it the questions the rules split (candor.planning.split: "..., and how
do I ...?"; route keeps their parts in the state). Each part is searched with the
same hybrid search and packed on its share of the context, so that every part
keeps at least one excerpt; the graph then grades the whole once and answers it
once, as any other. A question with one ask, and a follow-up, never come here:
retrieve searches them as before, with no added step, call or search.
"""

from __future__ import annotations

import asyncio
import dataclasses

from candor import planning
from candor.deps import Deps
from candor.graph import limits
from candor.graph.state import GraphState, Update


async def plan(state: GraphState, deps: Deps) -> Update:
    planned = planning.split(state.question)
    # Each part's query is cut where the budget reserved for (candor.graph.limits).
    planned = dataclasses.replace(
        planned, queries=tuple(query[: limits.QUERY_CHARS] for query in planned.queries)
    )
    hits = await asyncio.to_thread(
        planning.configured_shown,
        planned,
        deps.settings,
        embedder=deps.embedder,
        index=deps.index,
        reranker=deps.reranker,
        top_k=state.top_k,
    )
    return {
        "passages": tuple(hits),
        "attempts": state.attempts + 1,
        "queries": (*state.queries, state.query),
    }
