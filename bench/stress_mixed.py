"""A sustained mixed run through the real app on loopback (`make stress`, after bench.stress).

Many clients at once, on many loopback addresses (127.0.<network>.<host>, so
that addresses and /24 networks are real peers), ask through POST /ask and
/ask/stream and rate answers through POST /feedback, served by uvicorn with a
scripted model (tests/support/fakes.EndlessChat) that is slow and fails at random.
The plan is fixed in advance (seeded): one address sends far more than its limit,
one conversation far more than its own, one network's addresses each stay under
their limit but not together, one address asks costly questions past its share of
the day's budget, one network's addresses together past the network's share.

Rate windows are an hour long, so the whole run counts in one or two windows and
whether a client passes a limit is decided by the plan, not by the machine's speed.

Checks: no 500; every refusal has the status and reason of its kind (429
rate_limited naming the address, network or conversation, with Retry-After; 503
budget_exhausted naming the budget; 503 model_unavailable only for a model failure);
each ledger equals the sum of what its requests were charged, exactly, and stays
under its cap; each rate-limit window holds exactly the hits the store allowed, and
each key as many as the responses say were counted; every answer's trace and every
rating is stored. Ends with `STRESS {json}`; exits 1 when a check fails.
Run from the repository root: `.venv/bin/python -m bench.stress_mixed`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import random
import re
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import httpx

from candor import guards
from candor.api.app import create_app
from candor.api.sessions import SessionSigner
from candor.backends import rate_windows
from candor.backends.dynamodb_state import DynamoDBStateStore
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.ports import RateDecision, StateStore
from candor.settings import DEFAULT_PRICES, Settings
from candor.types import Chunk, Message
from tests.support import dynamodb_local, sse
from tests.support.edge import ORIGIN, SESSION_SECRET, allowing
from tests.support.fakes import EndlessChat
from tests.support.widget_server import bound_socket, serve

WINDOW = 3600
RATE_REASONS = {
    "too many requests from your address": "address",
    "too many requests from your network": "network",
    "too many requests in this conversation": "session",
}
PASSAGE = Chunk(
    "a1-0",
    "--force-with-lease protects the remote ref: the push is refused unless the remote "
    "ref still points at the commit your remote-tracking branch records.",
    "git-push.html",
    "git-push(1)",
    "OPTIONS > --force-with-lease",
)


@dataclass(frozen=True)
class Plan:
    requests: int = 2000
    clients: int = 50
    networks: int = 5  # of 4 addresses each
    sessions: int = 200
    seed: int = 1
    failure_rate: float = 0.05
    latency: tuple[float, float] = (0.0, 0.02)
    stream_share: float = 0.5
    feedback_share: float = 0.3

    @property
    def addresses(self) -> list[str]:
        return [f"127.0.{n + 1}.{h + 1}" for n in range(self.networks) for h in range(4)]

    # What each kind of client sends, in ordinary clients' shares (exactly: see schedule).
    HAMMER = 3.0  # twice the address limit
    CROWDED = 1.25  # each under the address limit, the four together over the network's

    @property
    def share(self) -> float:
        """The requests of one ordinary address."""
        return self.requests / (len(self.addresses) - 5 + self.HAMMER + 4 * self.CROWDED)

    # Limits per window, between what the ordinary and the heavy clients send.
    @property
    def address_limit(self) -> int:
        return round(self.share * 1.5)

    @property
    def network_limit(self) -> int:
        return round(self.share * 4.5)

    @property
    def session_limit(self) -> int:
        # Between an ordinary conversation's share and the chatty one's (60% of its address's).
        return max(3, round(self.share * 0.3))


@dataclass(frozen=True)
class Ask:
    address: str
    session: int
    question: str
    stream: bool
    rate: bool  # then rate the answer


def schedule(plan: Plan) -> list[Ask]:
    """Who sends what, shuffled: the heavy clients' shares are what pass the limits."""
    rng = random.Random(plan.seed)
    addresses = plan.addresses
    hammer, chatty_address, spender = addresses[0], addresses[1], addresses[8]
    crowded = addresses[4:8]  # 127.0.2.0/24
    spending = addresses[12:16]  # 127.0.4.0/24
    counts = {address: plan.share for address in addresses}
    counts[hammer] = plan.share * plan.HAMMER
    for address in crowded:
        counts[address] = plan.share * plan.CROWDED
    senders = [a for a in addresses for _ in range(round(counts[a]))]
    senders = (senders * 2)[: plan.requests]
    rng.shuffle(senders)
    per_address = plan.sessions // len(addresses)  # sessions of each address
    chatty_session = addresses.index(chatty_address) * per_address
    asks: list[Ask] = []
    for n, address in enumerate(senders):
        first = addresses.index(address) * per_address
        session = rng.randrange(first, first + per_address)
        if address == chatty_address and rng.random() < 0.6:
            session = chatty_session  # far over the conversation limit
        cents = 1  # hundredths of a cent per call
        if address == spender:
            cents = 50  # past the address's share
        elif address in spending:
            cents = 30  # each under the address's share, together past the network's
        question = f"What does --force-with-lease do? (ask {n}, spend{cents})"
        if rng.random() < 0.05:
            question = "What does --force-with-lease do?"  # an exact repeat: the cache
        asks.append(
            Ask(
                address,
                session,
                question,
                rng.random() < plan.stream_share,
                rng.random() < plan.feedback_share,
            )
        )
    return asks


def cost_of(messages: Sequence[Message]) -> float:
    found = re.search(r"spend(\d+)\)", " ".join(m["content"] for m in messages))
    return int(found.group(1)) * 1e-4 if found else 1e-4


@dataclass
class Ledgers:
    """What the store was asked to hold and settle, per ledger, and how long the guards took."""

    held: dict[str, Decimal] = field(default_factory=lambda: defaultdict(Decimal))
    holds: Counter[str] = field(default_factory=Counter)
    settles: Counter[str] = field(default_factory=Counter)
    allowed: Counter[tuple[str, int]] = field(default_factory=Counter)
    guard_ms: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class RecordingStore:
    """A StateStore passing every call to the store it wraps, recording the guards' writes."""

    def __init__(self, inner: StateStore, record: Ledgers) -> None:
        self.inner = inner
        self.record = record

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def hit_rate_limit(
        self, key: str, *, window_seconds: int, limit: int, now: float
    ) -> RateDecision:
        started = time.perf_counter()
        decision = self.inner.hit_rate_limit(
            key, window_seconds=window_seconds, limit=limit, now=now
        )
        ms = (time.perf_counter() - started) * 1000
        with self.record.lock:
            self.record.guard_ms.append(ms)
            if decision.allowed:
                self.record.allowed[(key, rate_windows.windows(window_seconds, now).start)] += 1
        return decision

    def reserve_budget(
        self, ledger_key: str, amount: Decimal, *, cap: Decimal, expires_at: int
    ) -> bool:
        started = time.perf_counter()
        held = self.inner.reserve_budget(ledger_key, amount, cap=cap, expires_at=expires_at)
        ms = (time.perf_counter() - started) * 1000
        with self.record.lock:
            self.record.guard_ms.append(ms)
            if held:
                self.record.held[ledger_key] += amount
                self.record.holds[ledger_key] += 1
        return held

    def settle_budget(self, ledger_key: str, *, reserved: Decimal, actual: Decimal) -> None:
        self.inner.settle_budget(ledger_key, reserved=reserved, actual=actual)
        with self.record.lock:
            self.record.held[ledger_key] += actual - reserved
            self.record.settles[ledger_key] += 1


@dataclass
class Outcome:
    ask: Ask
    status: int
    reason: str | None = None
    detail: str = ""
    retry_after: str | None = None
    trace_id: str | None = None
    route: str = "ask"


async def send(client: httpx.AsyncClient, ask: Ask, session_id: str) -> list[Outcome]:
    body = {"question": ask.question, "session_id": session_id}
    outcomes: list[Outcome] = []
    if ask.stream:
        response = await client.post("/ask/stream", json=body)
        outcome = Outcome(ask, response.status_code, route="stream")
        if response.status_code == 200:
            events = sse.parse_text(response.text)
            last = events[-1]
            if last.name == "done":
                outcome.trace_id = last.data["trace_id"]
            else:
                outcome.status = int(last.data["status"])
                outcome.reason, outcome.detail = last.data["reason"], last.data["detail"]
        else:
            error = response.json()
            outcome.reason, outcome.detail = error.get("reason"), str(error.get("detail"))
            outcome.retry_after = response.headers.get("retry-after")
    else:
        response = await client.post("/ask", json=body)
        data = response.json()
        outcome = Outcome(ask, response.status_code, route="ask")
        if response.status_code == 200:
            outcome.trace_id = data["trace_id"]
        else:
            outcome.reason, outcome.detail = data.get("reason"), str(data.get("detail"))
            outcome.retry_after = response.headers.get("retry-after")
    outcomes.append(outcome)
    if ask.rate and outcome.status == 200 and outcome.trace_id:
        rated = await client.post(
            "/feedback",
            json={"trace_id": outcome.trace_id, "session_id": session_id, "score": 1},
        )
        data = rated.json()
        outcomes.append(
            Outcome(
                ask,
                rated.status_code,
                data.get("reason"),
                str(data.get("detail", "")),
                rated.headers.get("retry-after"),
                outcome.trace_id,
                route="feedback",
            )
        )
    return outcomes


def settings_for(plan: Plan, data_dir: Path) -> Settings:
    return Settings(
        data_dir=data_dir,
        embedder_backend="hashing",
        top_k=3,
        screening=False,
        grade_by_names=False,
        prices={**DEFAULT_PRICES, "scripted": DEFAULT_PRICES["gpt-4o-mini"]},
        rate_address_window_seconds=WINDOW,
        rate_session_window_seconds=WINDOW,
        rate_address_limit=plan.address_limit,
        rate_network_limit=plan.network_limit,
        rate_session_limit=plan.session_limit,
        budget_daily_usd=Decimal(100),
        budget_address_usd=Decimal("0.06"),
        budget_network_usd=Decimal("0.15"),
        budget_reserve_usd=Decimal("0.02"),  # bounds the costliest request, $0.015
    )


def run(plan: Plan, store: StateStore, data_dir: Path, backend: str) -> dict[str, Any]:
    """One mixed run against `store`; the checks' figures, with `ok`."""
    record = Ledgers()
    settings = settings_for(plan, data_dir)
    chat = EndlessChat(
        seed=plan.seed, failure_rate=plan.failure_rate, latency=plan.latency, cost_of=cost_of
    )
    embedder = HashingEmbedder()
    index = SqliteVectorIndex(settings.index_path, embedder.dimensions, embedder=embedder.name)
    index.upsert([PASSAGE], embedder.embed([PASSAGE.text]))
    recording = cast(StateStore, RecordingStore(store, record))
    deps = allowing(Deps(settings, chat, embedder, index, None, recording))
    signer = SessionSigner(SESSION_SECRET, max_age_seconds=settings.session_max_age_seconds)
    sessions = [signer.issue() for _ in range(plan.sessions)]
    asks = schedule(plan)
    outcomes: list[Outcome] = []
    started = time.perf_counter()
    sock = bound_socket()
    with serve(create_app(lambda: deps), sock) as base:

        async def drive() -> None:
            queue: asyncio.Queue[Ask] = asyncio.Queue()
            for ask in asks:
                queue.put_nowait(ask)
            clients = {
                address: httpx.AsyncClient(
                    base_url=base,
                    headers={"Origin": ORIGIN},
                    timeout=60,
                    # A connection per request: reusing one that uvicorn closes as
                    # idle (5 s) in the same instant reads as a dropped request.
                    transport=httpx.AsyncHTTPTransport(
                        local_address=address, limits=httpx.Limits(max_keepalive_connections=0)
                    ),
                )
                for address in plan.addresses
            }

            async def worker() -> None:
                while not queue.empty():
                    ask = queue.get_nowait()
                    try:
                        sent = await send(clients[ask.address], ask, sessions[ask.session])
                    except httpx.TransportError as error:  # counted as a problem below
                        sent = [Outcome(ask, 0, "transport_error", repr(error))]
                    outcomes.extend(sent)

            await asyncio.gather(*(worker() for _ in range(plan.clients)))
            for client in clients.values():
                await client.aclose()

        asyncio.run(drive())
    seconds = time.perf_counter() - started
    index.close()
    return check(plan, backend, settings, store, record, outcomes, sessions, chat, seconds)


def counted(outcome: Outcome) -> set[str]:
    """The rate limits a request counted against, read from its response."""
    if outcome.status == 429:
        refused_by = next(
            (kind for text, kind in RATE_REASONS.items() if outcome.detail.startswith(text)), "?"
        )
        return {"address": set(), "network": {"address"}, "session": {"address", "network"}}.get(
            refused_by, set()
        )
    return {"address", "network", "session"}


def check(
    plan: Plan,
    backend: str,
    settings: Settings,
    store: StateStore,
    record: Ledgers,
    outcomes: list[Outcome],
    sessions: list[str],
    chat: EndlessChat,
    seconds: float,
) -> dict[str, Any]:
    problems: list[str] = []
    refusals: Counter[str] = Counter()
    budget_reasons = {text: which for which, text in guards.BUDGET_REASONS.items()}
    for o in outcomes:
        if o.status == 200:
            continue
        if o.status == 429 and o.reason == "rate_limited":
            kind = next((k for t, k in RATE_REASONS.items() if o.detail.startswith(t)), None)
            if kind is None or not o.retry_after or int(o.retry_after) < 1:
                problems.append(f"429 without a known reason or Retry-After: {o.detail}")
            refusals[f"rate_{kind}"] += 1
        elif o.status == 503 and o.reason == "budget_exhausted":
            which = budget_reasons.get(o.detail)
            if which is None:
                problems.append(f"budget refusal with an unknown reason: {o.detail}")
            refusals[f"budget_{which}"] += 1
        elif o.status == 503 and o.reason == "model_unavailable" and o.route != "feedback":
            # Only the scripted model's injected failures.
            refusals["model_unavailable"] += 1
        else:
            problems.append(f"{o.route}: unexpected {o.status} {o.reason}: {o.detail}")
            refusals[f"other_{o.status}"] += 1
    if refusals["model_unavailable"] > chat.failures:
        problems.append("more model_unavailable answers than model failures")
    for kind in ("rate_address", "rate_network", "rate_session", "budget_address"):
        if not refusals[kind]:
            problems.append(f"the plan produced no {kind} refusal")
    if not refusals["budget_network"]:
        problems.append("the plan produced no budget_network refusal")

    # Ledgers: exactly what was held and settled, never past the cap; every hold settled.
    differences = []
    for ledger, expected in record.held.items():
        spent = store.budget_spent(ledger)
        differences.append(abs(spent - expected))
        cap = (
            guards.address_share(settings)
            if ledger.startswith("address#")
            else guards.network_share(settings)
            if ledger.startswith("network#")
            else settings.budget_daily_usd
        )
        if spent > cap:
            problems.append(f"ledger {ledger} at {spent}, past its cap {cap}")
        if record.settles[ledger] != record.holds[ledger]:
            problems.append(
                f"ledger {ledger}: {record.holds[ledger]} holds, settled {record.settles[ledger]}"
            )
    ledger_difference = max(differences, default=Decimal(0))
    if ledger_difference:
        problems.append(f"a ledger differs from its charges by {ledger_difference}")

    # Rate windows: each holds exactly the hits allowed; each key as many as responses counted.
    stored = rate_hits(store)
    for (key, start), hits in record.allowed.items():
        if stored.get((key, start), 0) != hits:
            problems.append(
                f"window {key}@{start}: {stored.get((key, start), 0)} hits, {hits} allowed"
            )
    by_key: Counter[str] = Counter()
    for (key, _), hits in record.allowed.items():
        by_key[key] += hits
    expected_keys: Counter[str] = Counter()
    for o in outcomes:
        for kind in counted(o):
            if kind == "address":
                expected_keys[f"address#{guards.address_key(o.ask.address)}"] += 1
            elif kind == "network":
                expected_keys[f"network#{guards.network_key(o.ask.address)}"] += 1
            else:
                expected_keys[f"session#{sessions[o.ask.session]}"] += 1
    if by_key != expected_keys:
        wrong = {k for k in set(by_key) | set(expected_keys) if by_key[k] != expected_keys[k]}
        problems.append(f"rate counts differ from the responses for {len(wrong)} keys")

    # Traces and ratings: none lost.
    now = time.time()
    answered = [o for o in outcomes if o.status == 200 and o.route != "feedback"]
    lost_traces = sum(store.get_trace(o.trace_id or "", now=now) is None for o in answered)
    rated = [o for o in outcomes if o.route == "feedback" and o.status == 200]
    lost_ratings = 0
    for o in rated:
        trace = store.get_trace(o.trace_id or "", now=now)
        if trace is None or trace.feedback is None or json.loads(trace.feedback)["score"] != 1:
            lost_ratings += 1
    if lost_traces or lost_ratings:
        problems.append(f"lost {lost_traces} traces and {lost_ratings} ratings")

    for problem in problems[:20]:
        print(f"{backend}: {problem}", flush=True)
    ms = sorted(record.guard_ms)
    return {
        "backend": backend,
        "requests": sum(o.route != "feedback" for o in outcomes),
        "ratings": sum(o.route == "feedback" for o in outcomes),
        "seconds": round(seconds, 1),
        "answered": len(answered),
        "refusals": dict(sorted(refusals.items())),
        "500s": sum(o.status >= 500 and o.reason == "internal_error" for o in outcomes)
        + sum(o.status == 500 for o in outcomes),
        "ledger_difference": float(ledger_difference),
        "lost_traces": lost_traces,
        "lost_ratings": lost_ratings,
        "guard_ms_p50": round(statistics.median(ms), 2) if ms else None,
        "guard_ms_p99": round(ms[int(len(ms) * 0.99)], 2) if ms else None,
        "problems": len(problems),
        "ok": not problems,
    }


def rate_hits(store: StateStore) -> dict[tuple[str, int], int]:
    """Every rate-limit window the store holds: (key, window start) -> hits."""
    if isinstance(store, SqliteStateStore):
        with sqlite3.connect(store.path) as db:
            rows = db.execute("SELECT key, window_start, hits FROM rate_windows").fetchall()
        return {(key, int(start)): int(hits) for key, start, hits in rows}
    assert isinstance(store, DynamoDBStateStore)
    found: dict[tuple[str, int], int] = {}
    client = store._client
    request: dict[str, Any] = {"TableName": store._table}
    while True:
        page = client.scan(**request)
        for item in page.get("Items", []):
            pk, sk = item["pk"]["S"], item["sk"]["S"]
            if pk.startswith("rate#") and sk.startswith("window#"):
                found[(pk.removeprefix("rate#"), int(sk.removeprefix("window#")))] = int(
                    item["hits"]["N"]
                )
        if "LastEvaluatedKey" not in page:
            return found
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=Plan.requests)
    parser.add_argument("--clients", type=int, default=Plan.clients)
    parser.add_argument("--sessions", type=int, default=Plan.sessions)
    parser.add_argument("--seed", type=int, default=Plan.seed)
    args = parser.parse_args(argv)
    plan = dataclasses.replace(
        Plan(), requests=args.requests, clients=args.clients, sessions=args.sessions, seed=args.seed
    )
    results = []
    with dynamodb_local.DynamoDBLocal() as endpoint, tempfile.TemporaryDirectory() as folder:
        table = dynamodb_local.create_state_table(dynamodb_local.client(endpoint))
        dynamo = DynamoDBStateStore(table, client=dynamodb_local.client(endpoint))
        results.append(run(plan, dynamo, Path(folder) / "dynamodb", "dynamodb-local"))
        sqlite = SqliteStateStore(Path(folder) / "sqlite" / "state.sqlite3")
        results.append(run(plan, sqlite, Path(folder) / "sqlite", "sqlite"))
        sqlite.close()
    ok = all(r.pop("ok") for r in results)
    print(f"STRESS {json.dumps({'mixed': results, 'ok': ok})}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
