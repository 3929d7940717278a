"""The guards around each question: rate limits, the spending budget, the answer cache.

Their state lives in the StateStore, where each check is one atomic conditional
write; this module decides the keys, the amounts and the reasons a visitor reads.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_CEILING, Decimal
from typing import Any

from candor import __version__, observability
from candor.errors import BudgetExhaustedError, RateLimitedError
from candor.graph import limits
from candor.graph.state import Citation, Decision, GraphState
from candor.ports import CacheKey, Embedder, PricedEmbedder, StateStore
from candor.settings import Settings

logger = logging.getLogger(__name__)

NANO = Decimal("1e-9")


def usd(value: float | Decimal) -> Decimal:
    """Dollars as a Decimal, rounded up to the nano-dollar (both stores keep that precision)."""
    return Decimal(str(value)).quantize(NANO, rounding=ROUND_CEILING).normalize()


# Client addresses.


def client_address(peer: str | None, forwarded_for: str | None, trusted_hops: int) -> str | None:
    """The address a request came from, as far as it can be trusted.

    With no trusted proxy, the connection's peer: on Lambda that is API Gateway's
    `requestContext.identity.sourceIp`, which the client cannot set. X-Forwarded-For
    is then ignored, because its left part is whatever the client sent. Behind
    `trusted_hops` proxies that each append the address they saw, the address
    the outermost one appended is the N-th from the right.
    """
    if trusted_hops == 0:
        return peer
    hops = [part.strip() for part in (forwarded_for or "").split(",") if part.strip()]
    return hops[-trusted_hops] if len(hops) >= trusted_hops else peer


def address_key(address: str) -> str:
    """IPv4 addresses as they are; IPv6 by /64, the block one subscriber usually holds."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if parsed.version == 6:
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False))
    return str(parsed)


# Rate limits.


def check_rate_limits(
    state: StateStore, settings: Settings, *, address: str | None, session_id: str, now: float
) -> None:
    """Count the request against its address and its session; raise when either is full."""
    checks: list[tuple[str, int, int, str]] = []
    if address:
        checks.append(
            (
                f"address#{address_key(address)}",
                settings.rate_address_window_seconds,
                settings.rate_address_limit,
                "too many requests from your address",
            )
        )
    checks.append(
        (
            f"session#{session_id}",
            settings.rate_session_window_seconds,
            settings.rate_session_limit,
            "too many requests in this conversation",
        )
    )
    for key, window, limit, what in checks:
        decision = state.hit_rate_limit(key, window_seconds=window, limit=limit, now=now)
        if not decision.allowed:
            observability.count("rate_limited")
            raise RateLimitedError(
                decision.retry_after,
                f"{what}: at most {limit} every {window} s; try again in {decision.retry_after} s",
            )


# Spending.

# What one request can cost at most: every model call and query embedding the
# graph can make, each at its longest prompt and its cap of output tokens. The
# runner holds each run to these limits (candor.graph.limits), so the reservation
# is never less than the cost a request is trued up to.


def reservation_usd(
    settings: Settings, chat_model: str, embedder: Embedder | None = None
) -> Decimal:
    """What to hold before a request: the setting, or the most it can cost at these prices.

    An embedder that reports usage (PricedEmbedder) is priced by its name;
    local embedders are free.
    """
    if settings.budget_reserve_usd is not None:
        return usd(settings.budget_reserve_usd)
    bound = limits.envelope(settings)
    cost = settings.price(chat_model).cost(bound.chat_in, bound.chat_out)
    if isinstance(embedder, PricedEmbedder):
        cost += settings.price(embedder.name).cost(bound.embedding_in, 0)
    # The module imports no Pinecone SDK at load; reranking is off by default.
    from candor.backends.pinecone_reranker import rerank_cost_upper_bound

    return usd(Decimal(str(cost)) + rerank_cost_upper_bound(settings))


@dataclass(frozen=True, slots=True)
class Hold:
    """A reservation on one ledger, to be settled once the request is over."""

    ledger: str
    amount: Decimal


def daily_ledger(now: float) -> str:
    return f"day#{datetime.fromtimestamp(now, UTC):%Y-%m-%d}"


def session_ledger(session_id: str) -> str:
    return f"session#{session_id}"


def _end_of_day(now: float) -> int:
    day = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return int((day + timedelta(days=1)).timestamp())


def reserve(
    state: StateStore, settings: Settings, *, session_id: str, amount: Decimal, now: float
) -> list[Hold]:
    """Hold `amount` on the day's ledger (and the session's); raise if a cap would be passed.

    Each hold is one conditional write. When a later hold fails, the earlier
    ones are refunded before the error is raised.
    """
    # A day's ledger outlives its day a little, for anyone reading yesterday's spend.
    ledgers = [
        (
            daily_ledger(now),
            settings.budget_daily_usd,
            _end_of_day(now) + 86_400,
            "the daily spending budget of this service is used up; try again tomorrow (UTC)",
        )
    ]
    if settings.budget_session_usd is not None:
        ledgers.append(
            (
                session_ledger(session_id),
                settings.budget_session_usd,
                int(now) + 30 * 86_400,
                "this conversation has used up its spending budget; start a new one",
            )
        )
    holds: list[Hold] = []
    for ledger, cap, expires_at, reason in ledgers:
        if not state.reserve_budget(ledger, amount, cap=cap, expires_at=expires_at):
            settle(state, holds, Decimal(0))
            observability.count("budget_refused")
            raise BudgetExhaustedError(reason)
        holds.append(Hold(ledger, amount))
    return holds


def settle(state: StateStore, holds: Sequence[Hold], actual: Decimal) -> None:
    """True each hold up to the measured cost; 0 refunds it in full."""
    for hold in holds:
        if actual > hold.amount:
            # Only a reservation set by hand (budget_reserve_usd) can be too small:
            # the computed one bounds every run. The ledger records what was spent,
            # even past the cap.
            logger.error("request cost %s, more than the %s reserved", actual, hold.amount)
        state.settle_budget(hold.ledger, reserved=hold.amount, actual=actual)


# The answer cache.

CACHEABLE: frozenset[Decision] = frozenset({"answered", "declined"})


def normalise(question: str) -> str:
    """Case, runs of whitespace and closing punctuation do not make a new question."""
    return " ".join(question.casefold().split()).rstrip("?!.。 ")


def settings_fingerprint(settings: Settings, *, chat: str, embedder: str, top_k: int) -> str:
    """A digest of everything besides the question and the corpus that shapes an answer."""
    shaping = settings.model_dump(
        mode="json",
        include={
            "chat_backend",
            "embedder_backend",
            "index_backend",
            "reranker_backend",
            "rerank_model",
            "index_name",
            "local_model_path",
            "candidates",
            "rrf_k",
            "fusion",
            "keyword_weight",
            "widen_passages",
            "max_per_source",
            "max_attempts",
            "grade_threshold",
            "grade_by_names",
            "pack_context",
            "pack_candidates",
            "context_chars",
            "passage_chars",
            "answer_max_tokens",
            "site_name",
            "contact",
        },
    )
    shaping |= {"chat": chat, "embedder": embedder, "top_k": top_k, "candor": __version__}
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()


def cache_key(question: str, *, corpus_version: int, fingerprint: str) -> CacheKey:
    return CacheKey(normalise(question), corpus_version, fingerprint)


def cacheable(state: GraphState) -> bool:
    """Only answers that depend on nothing but the question: no follow-ups, no moderation."""
    return state.decision in CACHEABLE and state.intent not in (None, "follow_up")


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    answer: str
    decision: Decision
    citations: tuple[Citation, ...]

    def to_json(self) -> str:
        return json.dumps(
            {
                "answer": self.answer,
                "decision": self.decision,
                "citations": [asdict(c) for c in self.citations],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> CachedAnswer:
        data: dict[str, Any] = json.loads(text)
        citations = tuple(Citation(**c) for c in data["citations"])
        return cls(data["answer"], data["decision"], citations)
