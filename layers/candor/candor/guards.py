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

from candor import __version__, index_reads, observability, release
from candor.errors import BudgetExhaustedError, ConfigurationError, RateLimitedError
from candor.graph import limits
from candor.graph.state import Citation, Decision, GraphState
from candor.ports import CacheKey, Embedder, PricedEmbedder, StateStore
from candor.settings import Settings
from candor.withheld import type_name, withheld

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


def _parsed(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return None
    # An IPv4 client seen through a dual-stack socket is its IPv4 address.
    if parsed.version == 6 and parsed.ipv4_mapped is not None:
        return parsed.ipv4_mapped
    return parsed


def address_key(address: str) -> str:
    """IPv4 addresses as they are; IPv6 by /64, the block one subscriber usually holds."""
    parsed = _parsed(address)
    if parsed is None:
        return address
    if parsed.version == 6:
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False))
    return str(parsed)


def network_key(address: str) -> str:
    """The block around an address: IPv4 by /24, IPv6 by /48 (a site's usual allocation).

    One subscriber's /48 holds 65,536 /64s, each with an address limit and an
    address share of the budget of its own; the network's are what bound them together.
    """
    parsed = _parsed(address)
    if parsed is None:
        return address
    prefix = 48 if parsed.version == 6 else 24
    return str(ipaddress.ip_network(f"{parsed}/{prefix}", strict=False))


# Rate limits.


def check_rate_limits(
    state: StateStore, settings: Settings, *, address: str | None, session_id: str, now: float
) -> None:
    """Count the request against its address, its network and its session; raise when one is full.

    Each check counts the request before the next is made, so a request refused by
    its network or its session still counts against its address.
    """
    window = settings.rate_address_window_seconds
    checks: list[tuple[str, int, int, str]] = []
    if address:
        checks.append(
            (
                f"address#{address_key(address)}",
                window,
                settings.rate_address_limit,
                "too many requests from your address",
            )
        )
        checks.append(
            (
                f"network#{network_key(address)}",
                window,
                settings.rate_network_limit,
                "too many requests from your network",
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
    for key, seconds, limit, what in checks:
        decision = state.hit_rate_limit(key, window_seconds=seconds, limit=limit, now=now)
        if not decision.allowed:
            observability.count("rate_limited")
            raise RateLimitedError(
                decision.retry_after,
                f"{what}: at most {limit} every {seconds} s; try again in {decision.retry_after} s",
            )


# Spending.

# What one request can cost at most: every model call and query embedding the
# graph can make, each at its longest prompt and its cap of output tokens, and
# every index read it can make where the index bills reads (candor.index_reads). The
# runner holds each run to these limits (candor.graph.limits), so the reservation
# is never less than the cost a request is trued up to.


def reservation_usd(
    settings: Settings, chat_model: str, embedder: Embedder | None = None
) -> Decimal:
    """What to hold before a request: the setting, or the most it can cost at these prices.

    An embedder that reports usage (PricedEmbedder) is priced by its name;
    local embedders are free.
    """
    priced = embedder.name if isinstance(embedder, PricedEmbedder) else None
    return _reservation(settings, chat_model, priced)


def planned_reservation_usd(settings: Settings) -> Decimal:
    """What each request will reserve with the models these settings name, before any
    is built (the service prices the built ones the same way: reservation_usd)."""
    chat = settings.chat_model if settings.chat_backend == "openai" else "local"
    embedder = settings.embedding_model if settings.embedder_backend == "openai" else None
    return _reservation(settings, chat, embedder)


def _reservation(settings: Settings, chat_model: str, priced_embedder: str | None) -> Decimal:
    if settings.budget_reserve_usd is not None:
        return usd(settings.budget_reserve_usd)
    bound = limits.envelope(settings)
    cost = settings.price(chat_model).cost(bound.chat_in, bound.chat_out)
    if priced_embedder is not None:
        cost += settings.price(priced_embedder).cost(bound.embedding_in, 0)
    reads = index_reads.read_price(settings)
    if reads is not None:
        cost += bound.index_reads * reads.per_read()
    # The module imports no Pinecone SDK at load; reranking is off by default.
    from candor.backends.pinecone_reranker import rerank_cost_upper_bound

    return usd(Decimal(str(cost)) + rerank_cost_upper_bound(settings))


@dataclass(slots=True)
class Hold:
    """A reservation on one ledger, to be settled once the request is over.

    `settled` turns true once the ledger has been trued up (or the hold returned):
    settling it again writes nothing, so a retry, or a second path that returns
    the holds of a failed request, never refunds one twice.
    """

    ledger: str
    amount: Decimal
    settled: bool = False


def _day(now: float) -> str:
    return f"{datetime.fromtimestamp(now, UTC):%Y-%m-%d}"


def daily_ledger(now: float) -> str:
    return f"day#{_day(now)}"


def session_ledger(session_id: str) -> str:
    return f"session#{session_id}"


def address_ledger(address: str, now: float) -> str:
    return f"address#{address_key(address)}#{_day(now)}"


def network_ledger(address: str, now: float) -> str:
    return f"network#{network_key(address)}#{_day(now)}"


# Unset, an address may spend this part of each day's budget, and a network this part.
ADDRESS_SHARE = Decimal("0.05")
NETWORK_SHARE = Decimal("0.20")


def address_share(settings: Settings) -> Decimal:
    if settings.budget_address_usd is not None:
        return settings.budget_address_usd
    return usd(settings.budget_daily_usd * ADDRESS_SHARE)


def network_share(settings: Settings) -> Decimal:
    if settings.budget_network_usd is not None:
        return settings.budget_network_usd
    return usd(settings.budget_daily_usd * NETWORK_SHARE)


CENT = Decimal("0.01")


def require_workable_budget(settings: Settings) -> None:
    """Refuse, at start, budgets under which no visitor could ask at all.

    A request reserves its most before it runs, on its address's share of the day,
    its network's, its session's budget and the day's; a cap below one reservation
    refuses every request, and each visitor would read that their address (or
    network, or conversation) had used its share. The error names the smallest
    daily budget that works with the other settings as they are.
    """
    amount = planned_reservation_usd(settings)
    if amount == 0:
        return
    problems: list[str] = []
    day_needed = amount
    for setting, share, value in (
        ("CANDOR_BUDGET_ADDRESS_USD", ADDRESS_SHARE, settings.budget_address_usd),
        ("CANDOR_BUDGET_NETWORK_USD", NETWORK_SHARE, settings.budget_network_usd),
    ):
        if value is None:
            day_needed = max(day_needed, amount / share)
        elif value < amount:
            problems.append(f"{setting}={value} is less than that: set it to at least ${amount}")
    session = settings.budget_session_usd
    if session is not None and session < amount:
        problems.append(
            f"CANDOR_BUDGET_SESSION_USD={session} is less than that: set it to at least ${amount}"
        )
    smallest = day_needed.quantize(CENT, rounding=ROUND_CEILING)
    if settings.budget_daily_usd < day_needed:
        derived = " (an address may spend 5% of it unless CANDOR_BUDGET_ADDRESS_USD says "
        derived += "otherwise, a network 20%)" if smallest > amount else ""
        problems.append(
            f"CANDOR_BUDGET_DAILY_USD={settings.budget_daily_usd} cannot cover it{derived}: "
            f"set CANDOR_BUDGET_DAILY_USD to at least ${smallest}"
        )
    if problems:
        raise ConfigurationError(
            f"no visitor could ask: one request reserves ${amount}, the most it can cost "
            f"at these prices (or CANDOR_BUDGET_RESERVE_USD); " + "; ".join(problems)
        )


def _end_of_day(now: float) -> int:
    day = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return int((day + timedelta(days=1)).timestamp())


# What a visitor reads when a budget refuses, by the ledger that refused.
BUDGET_REASONS = {
    "address": "your address has used up its share of today's spending budget; "
    "try again tomorrow (UTC)",
    "network": "your network has used up its share of today's spending budget; "
    "try again tomorrow (UTC)",
    "session": "this conversation has used up its spending budget; start a new one",
    "day": "the daily spending budget of this service is used up; try again tomorrow (UTC)",
}


def reserve(
    state: StateStore,
    settings: Settings,
    *,
    session_id: str,
    amount: Decimal,
    now: float,
    address: str | None = None,
) -> list[Hold]:
    """Hold `amount` on each ledger the request spends from; raise if a cap would be passed.

    In order: the client address's share of the day and its network's (when the
    address is known), the session's budget (when set), then the day's. Each hold
    is one conditional write. When a later hold is refused, or its write raises (a
    throttled or timed-out store), the earlier ones are returned before the error
    is raised: a store error must not hold an address's share until midnight.
    """
    # A day's ledgers outlive their day a little, for anyone reading yesterday's spend.
    day_expires = _end_of_day(now) + 86_400
    ledgers: list[tuple[str, str, Decimal, int]] = []
    if address:
        ledgers.append(
            ("address", address_ledger(address, now), address_share(settings), day_expires)
        )
        ledgers.append(
            ("network", network_ledger(address, now), network_share(settings), day_expires)
        )
    if settings.budget_session_usd is not None:
        ledgers.append(
            (
                "session",
                session_ledger(session_id),
                settings.budget_session_usd,
                int(now) + 30 * 86_400,
            )
        )
    ledgers.append(("day", daily_ledger(now), settings.budget_daily_usd, day_expires))
    holds: list[Hold] = []
    try:
        for which, ledger, cap, expires_at in ledgers:
            if not state.reserve_budget(ledger, amount, cap=cap, expires_at=expires_at):
                observability.count("budget_refused")
                raise BudgetExhaustedError(BUDGET_REASONS[which], which)
            holds.append(Hold(ledger, amount))
    except BaseException:
        _give_back(state, holds)
        raise
    return holds


def _give_back(state: StateStore, holds: Sequence[Hold]) -> None:
    """Return every hold of a request that will not run, each write tried apart.

    A return that fails too (the store is still down) leaves its hold on the ledger,
    which errs towards the cap; it is logged, and the request's own error is raised.
    """
    for hold in holds:
        try:
            settle(state, [hold], Decimal(0))
        except Exception as error:
            logger.error(
                "a hold on %s could not be returned: %s",
                hold.ledger.split("#")[0],
                type_name(error),
                exc_info=withheld(error),
            )


def settle(state: StateStore, holds: Sequence[Hold], actual: Decimal) -> None:
    """True each hold up to the measured cost; 0 refunds it in full.

    Holds settled already are skipped, so calling it again after a failure
    settles only what is left.
    """
    for hold in holds:
        if hold.settled:
            continue
        if actual > hold.amount:
            # Only a reservation set by hand (budget_reserve_usd) can be too small:
            # the computed one bounds every run. The ledger records what was spent,
            # even past the cap.
            logger.error("request cost %s, more than the %s reserved", actual, hold.amount)
        state.settle_budget(hold.ledger, reserved=hold.amount, actual=actual)
        hold.settled = True


# The answer cache.

CACHEABLE: frozenset[Decision] = frozenset({"answered", "declined"})


# What may end a question without changing it, in any script's width.
_CLOSING = "?!.。？！．…"
# What may stand around a word in a sentence: it does not make the word code.
_AROUND = "\"'“”‘’()[]{},;:" + _CLOSING


def _key_word(word: str) -> str:
    # A word of letters ("How", "HEAD", "été") is the same word in any case; anything
    # else is code-like and keeps its case: `-d` deletes a merged branch and `-D` any
    # branch, `-s` and `-S`, `SQLITE_BUSY`, `git commit -C`.
    core = word.strip(_AROUND).replace("'", "").replace("’", "")
    return word.casefold() if core.isalpha() or not core else word


def normalise(question: str) -> str:
    """The question as the answer cache, the verdict cache and the DPO pairing key it.

    Runs of whitespace, closing punctuation and the case of plain words do not make a
    new question; the case of a code-like name does (`git branch -d` and `-D`).
    """
    return " ".join(_key_word(word) for word in question.split()).rstrip(_CLOSING + " ")


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
            "yes_no_check",
            "plan_questions",
            "pack_context",
            "pack_sentences",
            "pack_candidates",
            "context_chars",
            "passage_chars",
            "answer_max_tokens",
            "site_name",
            "contact",
        },
    )
    shaping |= {"chat": chat, "embedder": embedder, "top_k": top_k, "candor": __version__}
    # The code itself: an upgrade under the same version must not serve old answers.
    shaping["code"] = release.code_digest()
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()


def cache_key(
    question: str, *, corpus_version: int, fingerprint: str, secret: bytes | None = None
) -> CacheKey:
    """`secret`: candor.question_keys.key_for(settings), for an HMAC digest."""
    return CacheKey(normalise(question), corpus_version, fingerprint, secret)


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
