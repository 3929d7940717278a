"""A Reranker on Pinecone's hosted inference (`pc.inference.rerank`).

The fused candidates go to a cross-encoder (bge-reranker-v2-m3 by default) in one
request, each as the embedder sees it: "title — heading", then the passage. What
the request cost comes from the response: Pinecone bills rerank units (one query
with up to 100 documents), and `usage.rerank_units` times the configured price is
the cost that the retrieve step's trace and the budget's true-up record.

A reranker that is busy or down (429, 5xx, a timeout, no connection) costs the
visitor nothing but the reranking: the candidates keep their fused order and a
warning is logged. A refusal that retrying cannot cure (a bad key, an unknown
model, a malformed request) is a ModelError, so a misconfiguration is not hidden.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from candor import billing
from candor.errors import ModelError, ModelErrorKind
from candor.ingest.reading import embedding_text
from candor.ports import Reranked
from candor.types import NO_USAGE, Chunk, Usage
from candor.withheld import type_name, withheld

if TYPE_CHECKING:
    from candor.settings import Settings

logger = logging.getLogger(__name__)

# One request holds at most this many documents (bge-reranker-v2-m3's limit, and
# what one rerank unit covers); fused candidates past it keep their order below.
MAX_DOCUMENTS = 100
# Characters of each document and of the query sent. bge-reranker-v2-m3 reads at
# most 1,024 tokens of query and document together, 256 of them the query, and a
# model that chunks long documents (cohere-rerank-4-fast, at about 500 tokens)
# would bill a longer one as more than one document. At two characters a token
# or more, these stay inside both, so a request is always one rerank unit.
DOCUMENT_CHARS = 1_000
QUERY_CHARS = 500
# Models that truncate an over-long input when asked instead of refusing it.
_PARAMETERS: dict[str, dict[str, Any]] = {
    "bge-reranker-v2-m3": {"truncate": "END"},
    "pinecone-rerank-v0": {"truncate": "END"},
}


def units_per_request(documents: int) -> int:
    """Rerank units one request of `documents` documents can cost."""
    return max(1, math.ceil(documents / MAX_DOCUMENTS))


def request_cost_upper_bound(settings: Settings) -> Decimal:
    """The most one reranking request can cost, in US dollars: MAX_DOCUMENTS
    candidates, one rerank unit. No reranker (or another backend) costs nothing."""
    if settings.reranker_backend != "pinecone":
        return Decimal(0)
    price = Decimal(str(settings.rerank_price(settings.rerank_model)))
    return units_per_request(MAX_DOCUMENTS) * price


def rerank_cost_upper_bound(settings: Settings) -> Decimal:
    """The most reranking can cost one request, in US dollars, for the budget.

    The retrieve node reranks once per attempt, at most `max_attempts` times, and
    each time sends at most MAX_DOCUMENTS candidates: one request of one unit.
    """
    return settings.max_attempts * request_cost_upper_bound(settings)


class PineconeReranker:
    """Scores passages with a hosted Pinecone reranker; `inference` is `pc.inference`."""

    def __init__(self, inference: Any, *, model: str, price_per_unit: float) -> None:
        if price_per_unit < 0:
            raise ValueError(f"price_per_unit must not be negative, not {price_per_unit}")
        self._inference = inference
        self.model = model
        self.name = f"pinecone:{model}"
        self._price = price_per_unit

    def rerank(self, query: str, passages: Sequence[Chunk]) -> Reranked:
        if not passages:
            return Reranked([], NO_USAGE)
        head = passages[:MAX_DOCUMENTS]
        bill = billing.current()
        if bill is not None:
            bill.track()
            bill.sent()
        result = self._request(query, head, bill)
        if result is None:
            return Reranked(_in_order(len(passages)), NO_USAGE)
        # Billed once answered, whether or not the ranking below is of use.
        usage = Usage(cost_usd=int(result.usage.rerank_units) * self._price)
        if bill is not None:
            bill.replied(usage)
        scores = [math.nan] * len(head)
        for ranked in result.data:
            if not 0 <= ranked.index < len(head) or not math.isnan(scores[ranked.index]):
                raise ModelError(f"{self.name}: the response ranks document {ranked.index} twice")
            scores[ranked.index] = float(ranked.score)
        if any(math.isnan(score) for score in scores):
            raise ModelError(f"{self.name}: the response left documents unscored")
        # Candidates past the request keep their fused order, below every scored one.
        floor = min(scores) - 1.0
        scores += [floor - n for n in range(len(passages) - len(head))]
        return Reranked(scores, usage)

    def _request(self, query: str, passages: Sequence[Chunk], bill: billing.Bill | None) -> Any:
        """The SDK's RerankResult, or None when the service is busy or unreachable.

        A busy service (429, 5xx) or a refusal bills nothing; a request that timed
        out or lost its connection may have been billed, so its bill stays at the
        bound (candor.billing).
        """
        from pinecone.errors.exceptions import (
            ApiError,
            PineconeConnectionError,
            PineconeError,
            PineconeTimeoutError,
            RateLimitError,
            ServiceError,
        )

        documents = [{"text": embedding_text(chunk)[:DOCUMENT_CHARS]} for chunk in passages]
        try:
            return self._inference.rerank(
                model=self.model,
                query=query[:QUERY_CHARS],
                documents=documents,
                rank_fields=["text"],
                return_documents=False,
                parameters=_PARAMETERS.get(self.model),
            )
        except (RateLimitError, ServiceError) as e:
            if bill is not None:
                bill.unbilled()
            logger.warning("%s unavailable, keeping the fused order: %s", self.name, type_name(e))
            return None
        except (PineconeTimeoutError, PineconeConnectionError) as e:
            logger.warning("%s unavailable, keeping the fused order: %s", self.name, type_name(e))
            return None
        except PineconeError as e:
            if bill is not None and isinstance(e, ApiError):
                bill.unbilled()  # an error status; a reply it could not parse stays at the bound
            # Its text can quote the query (the visitor's question): the type and status only.
            status = getattr(e, "status", None)
            detail = f" (status {status})" if isinstance(status, int) else ""
            kind: ModelErrorKind = "status" if detail else "failed"
            raise ModelError(f"{self.name}: {type(e).__name__}{detail}", kind) from withheld(e)


def _in_order(count: int) -> list[float]:
    """Scores that keep the passages in the order given."""
    return [float(count - n) for n in range(count)]
