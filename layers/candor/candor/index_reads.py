"""What a request's index reads may cost, where the index bills them.

Pinecone serverless bills every read in read units (RUs): a query 1 RU per GB of
the namespace it searches, at least 0.25, whatever its top_k; a fetch 1 RU per 10
records, at least 1, per request. A hybrid query is two requests, one to the
dense index and one to the sparse one. Each response says how many RUs it used,
and the Pinecone adapter reports that (candor.types.Rankings.read_units); where
nothing says (a fetch, a failed query), a read is charged the most it can be
billed. A query's most is CANDOR_PINECONE_QUERY_READ_UNITS per request: the
namespace's size in GB, which the owner knows and candor cannot. The local SQLite
index bills nothing: its reads are counted, not priced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from candor.graph import prompts
from candor.settings import Settings

# The most ids one fetch of the graph reads: retrieve's small-to-big neighbours, up to
# WIDEN_REACH on each side of each passage shown (candor.retrieval.widen's _REACH).
WIDEN_REACH = 4
MAX_FETCH_IDS = prompts.MAX_PASSAGES * 2 * WIDEN_REACH
# Ids per fetch request of the Pinecone adapter (candor.backends.pinecone_index).
FETCH_BATCH = 100
RECORDS_PER_FETCH_UNIT = 10


@dataclass(frozen=True, slots=True)
class ReadPrice:
    """Dollars per read unit, and the most read units one query request is billed."""

    unit_usd: float
    query_units: float
    keyword_index: bool  # a sparse index answers keyword queries (a second request)

    def cost(self, read_units: float) -> float:
        return read_units * self.unit_usd

    def query_bound(self, *, dense: bool, keyword: bool) -> float:
        """The most one query can cost: a request per index it reaches."""
        requests = int(dense) + int(keyword and self.keyword_index)
        return self.cost(requests * self.query_units)

    def fetch_bound(self, ids: int) -> float:
        """What a fetch of `ids` ids costs: 1 RU per 10 records, at least 1, per request."""
        units = 0
        for start in range(0, ids, FETCH_BATCH):
            batch = min(FETCH_BATCH, ids - start)
            units += max(1, math.ceil(batch / RECORDS_PER_FETCH_UNIT))
        return self.cost(units)

    def per_read(self) -> float:
        """The most any one read of the graph can cost, as the reservation counts it."""
        return max(self.query_bound(dense=True, keyword=True), self.fetch_bound(MAX_FETCH_IDS))


def read_price(settings: Settings) -> ReadPrice | None:
    """The price of the configured index's reads; None where reads cost nothing."""
    if settings.index_backend != "pinecone" or settings.pinecone_read_unit_usd == 0:
        return None
    return ReadPrice(
        unit_usd=settings.pinecone_read_unit_usd,
        query_units=settings.pinecone_query_read_units,
        keyword_index=bool(settings.pinecone_sparse_host),
    )
