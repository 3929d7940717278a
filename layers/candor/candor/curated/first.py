"""The curated lookup made before the graph's reservation, so that an owner's answer
reserves nothing beyond its embedding.

The budget holds the most a request can cost before its first model call
(candor.guards). A question the owner answered needs no model call at all, but
whether it is one is known only once its embedding is looked up. So, when moderate
will need no model call either (the screening classifier is sure of the message, and
route will read it as a question), the service looks it up first, holding only what
that lookup's embeddings can cost (nothing, with a local embedder); the graph then
runs moderate and route as always and the curated node serves what was found. When
nothing is found, that hold is settled and the graph's own reservation is made.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from decimal import Decimal

from candor import billing, guards
from candor.curated import lookup
from candor.curated.lookup import CuratedMatch
from candor.deps import Deps
from candor.graph import limits, nodes
from candor.graph.runner import MeteredEmbedder
from candor.graph.state import TraceStep
from candor.ports import PricedEmbedder
from candor.screening import classifier, policy
from candor.settings import Settings
from candor.types import NO_USAGE, Usage


def moderated_without_model(question: str, settings: Settings) -> bool:
    """Whether moderate and route will take `question` for a question with no model
    call: the same test moderate makes first (candor.graph.nodes.moderate)."""
    if not settings.screening:
        return False
    screen = classifier.shipped().screen(question)
    if policy.outcome(screen, settings.screening_confidence) != "sure":
        return False
    # A catalogue question is looked up too (candor.graph.edges.after_route).
    return nodes.effective_intent(screen.kind, question) in ("question", "catalogue")


def reservation_usd(settings: Settings, deps: Deps) -> Decimal:
    """The most one lookup's embeddings can cost: 0 for a local embedder."""
    if not isinstance(deps.embedder, PricedEmbedder):
        return Decimal(0)
    tokens = sum(limits.embedding_bounds("curated"))
    return guards.usd(settings.price(deps.embedder.name).cost(tokens, 0))


@dataclass(frozen=True, slots=True)
class LookedUp:
    """What the lookup found (or None), what it consumed and how long it took."""

    match: CuratedMatch | None
    usage: Usage
    ms: float

    def step(self, step: TraceStep) -> TraceStep:
        """The curated node's trace step with this lookup's work added to it."""
        return TraceStep(
            step.node,
            round(step.ms + self.ms, 2),
            step.tokens_in + self.usage.tokens_in,
            step.tokens_out + self.usage.tokens_out,
            step.cost_usd + self.usage.cost_usd,
            tokens_evaluated=step.tokens_evaluated + self.usage.tokens_evaluated,
        )


async def look_up(deps: Deps, question: str, meter: billing.Meter) -> LookedUp:
    """Find the curated answer `question` asks for, each embedding billed to `meter`
    (whose allowance is what was reserved for it).

    Raises what the store, the index or the embedder raise: the caller settles what
    `meter` holds and goes on to the graph without curated answers.
    """
    curation = deps.curated
    match_rule = lookup.rule(deps.settings, deps.embedder.name)
    if curation is None or match_rule is None:
        return LookedUp(None, NO_USAGE, 0.0)
    price = (
        deps.settings.price(deps.embedder.name)
        if isinstance(deps.embedder, PricedEmbedder)
        else None
    )
    embedder = MeteredEmbedder(deps.embedder, meter, price)
    embedder.begin("curated")
    started = time.perf_counter()
    with billing.metering(meter):
        match = await asyncio.to_thread(lookup.find, question, curation, embedder, match_rule)
    return LookedUp(match, meter.usage, (time.perf_counter() - started) * 1000)
