"""The StateStore contract: SQLite and DynamoDB (Local, a real implementation) pass it unchanged.

Concurrency tests give every thread a store of its own (its own SQLite
connection, its own boto3 client), as separate Lambda instances have, and
release them together. moto is not used: its DynamoDB is not atomic under
concurrent writes, so it cannot back a concurrency claim.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest

from candor.backends.dynamodb_state import DynamoDBStateStore
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.ports import CacheKey, StateStore, StoredTrace, Turn, trace_day
from candor.service import ask
from candor.settings import Settings
from tests.conftest import PASSAGES
from tests.support import dynamodb_local
from tests.support.concurrency import together
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.integration

HOUR = 3600
# 100 s into the next hour: every window, ledger and cache entry written expires in
# the future, so DynamoDB Local's TTL cannot delete one while a test reads it.
NOW = float((int(time.time()) // HOUR + 1) * HOUR + 100)
DAY_LATER = int(NOW) + 86_400


@dataclass
class Backend:
    """Opens stores on one shared backing (a SQLite file, a DynamoDB table)."""

    store: Callable[[], StateStore]
    # Everything stored, read past the store: (where, text of the record, its expires_at).
    records: Callable[[], list[tuple[str, str, float | None]]]


@pytest.fixture(params=["sqlite", "dynamodb"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    closers: list[Callable[[], None]] = []
    if request.param == "sqlite":
        path = tmp_path / "state.sqlite3"

        def open_sqlite() -> StateStore:
            store = SqliteStateStore(path)
            closers.append(store.close)
            return store

        def sqlite_records() -> list[tuple[str, str, float | None]]:
            db = sqlite3.connect(path)
            found = []
            try:
                tables = [
                    row[0]
                    for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                ]
                for table in tables:
                    cursor = db.execute(f"SELECT * FROM {table}")
                    columns = [c[0] for c in cursor.description]
                    for row in cursor:
                        fields = dict(zip(columns, row, strict=True))
                        found.append(
                            (table, json.dumps(fields, default=str), fields.get("expires_at"))
                        )
            finally:
                db.close()
            return found

        yield Backend(open_sqlite, sqlite_records)
    else:
        endpoint: str = request.getfixturevalue("dynamodb_endpoint")
        admin = dynamodb_local.client(endpoint)
        table = dynamodb_local.create_state_table(admin)

        def open_dynamodb() -> StateStore:
            return DynamoDBStateStore(table, client=dynamodb_local.client(endpoint))

        def dynamodb_records() -> list[tuple[str, str, float | None]]:
            items = admin.scan(TableName=table, ConsistentRead=True)["Items"]
            return [
                (
                    item["pk"]["S"].split("#", 1)[0],
                    json.dumps(item),
                    float(item["expires_at"]["N"]) if "expires_at" in item else None,
                )
                for item in items
            ]

        yield Backend(open_dynamodb, dynamodb_records)
        admin.delete_table(TableName=table)
    for close in closers:
        close()


@pytest.fixture
def store(backend: Backend) -> StateStore:
    return backend.store()


def new_id() -> str:
    return uuid.uuid4().hex


# Sessions and moderation.


def test_an_unknown_session_is_active_with_no_history(store: StateStore) -> None:
    session = store.get_session(new_id())
    assert session.status == "active"
    assert session.history == []


def test_offences_move_a_session_from_active_to_warned_to_ended(store: StateStore) -> None:
    session_id = new_id()
    assert store.record_offence(session_id) == "warned"
    assert store.get_session(session_id).status == "warned"
    assert store.record_offence(session_id) == "ended"
    assert store.record_offence(session_id) == "ended"
    assert store.get_session(session_id).status == "ended"


def test_history_keeps_only_the_last_turns(store: StateStore) -> None:
    session_id = new_id()
    for n in range(5):
        store.append_turn(
            session_id, Turn(f"q{n}", f"a{n}", "answered"), keep=3, expires_at=DAY_LATER
        )
    history = store.get_session(session_id).history
    assert [turn.question for turn in history] == ["q2", "q3", "q4"]
    assert history[-1] == Turn("q4", "a4", "answered")


def test_a_new_turn_keeps_the_warning(store: StateStore) -> None:
    session_id = new_id()
    store.record_offence(session_id)
    store.append_turn(session_id, Turn("q", "a", "warned"), keep=3, expires_at=DAY_LATER)
    assert store.get_session(session_id).status == "warned"


def test_a_warning_keeps_the_history(store: StateStore) -> None:
    session_id = new_id()
    store.append_turn(session_id, Turn("q", "a", "answered"), keep=3, expires_at=DAY_LATER)
    store.record_offence(session_id)
    assert [turn.question for turn in store.get_session(session_id).history] == ["q"]


QUESTION = "What does --force-with-lease do?"


def answer_once(store: StateStore, settings: Settings, session_id: str) -> None:
    """Ask QUESTION through the service, with `store` as its state store."""
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": ["It refuses to overwrite work you have not seen [1]."],
        }
    )
    embedder = HashingEmbedder()
    index = SqliteVectorIndex(settings.index_path, embedder.dimensions, embedder=embedder.name)
    try:
        index.upsert(PASSAGES, embedder.embed([c.text for c in PASSAGES]))
        deps = Deps(settings, chat, embedder, index, None, store)
        result = asyncio.run(ask(deps, QUESTION, session_id=session_id))
    finally:
        index.close()
    assert result.session_id == session_id


def test_history_holds_no_question_past_the_follow_up_window_when_questions_are_not_stored(
    backend: Backend, settings: Settings
) -> None:
    # The defect: with CANDOR_STORE_QUESTIONS=false, the session record still kept
    # the last three questions, 30 days after the last turn (DynamoDB) or forever (SQLite).
    settings = settings.model_copy(update={"store_questions": False, "history_ttl_seconds": 600})
    store, session_id = backend.store(), new_id()
    before = time.time()

    answer_once(store, settings, session_id)

    holding = [
        (where, expires)
        for where, text, expires in backend.records()
        if QUESTION.lower() in text.lower()
    ]
    assert holding, "the follow-up history should hold the question inside the window"
    assert all(expires is not None and expires <= time.time() + 600 for _, expires in holding), (
        holding
    )
    assert all(expires is not None and expires >= before + 600 - 1 for _, expires in holding), (
        holding
    )
    # The question is still there for a follow-up.
    assert [turn.question for turn in store.get_session(session_id).history] == [QUESTION]


def stored_history_expiry(backend: Backend) -> float:
    """When the one stored record of the question's history expires."""
    history = [
        expires
        for where, text, expires in backend.records()
        if where in ("history", "session_history") and QUESTION.lower() in text.lower()
    ]
    assert len(history) == 1
    assert history[0] is not None
    return history[0]


def test_history_lives_as_long_as_the_session_when_questions_are_stored(
    backend: Backend, settings: Settings
) -> None:
    store, session_id = backend.store(), new_id()
    before = time.time()

    answer_once(store, settings, session_id)

    expires = stored_history_expiry(backend)
    assert before + 30 * 86_400 - 1 <= expires <= time.time() + 30 * 86_400


def test_history_lives_as_long_as_a_non_default_session_age_when_questions_are_stored(
    backend: Backend, settings: Settings
) -> None:
    # The defect: stored history kept a fixed 30 days whatever
    # CANDOR_SESSION_MAX_AGE_SECONDS said: past a shorter age the id is refused and
    # its questions were kept for nothing; under a longer one a follow-up lost its topic.
    days_7 = 7 * 86_400
    settings = settings.model_copy(update={"session_max_age_seconds": days_7})
    store, session_id = backend.store(), new_id()
    before = time.time()

    answer_once(store, settings, session_id)

    expires = stored_history_expiry(backend)
    assert before + days_7 - 1 <= expires <= time.time() + days_7


def test_history_is_forgotten_at_its_expiry_and_the_status_stays(store: StateStore) -> None:
    session_id = new_id()
    store.record_offence(session_id)
    expires_at = int(time.time()) + 2
    store.append_turn(session_id, Turn("q1", "a1", "answered"), keep=3, expires_at=expires_at)
    assert [turn.question for turn in store.get_session(session_id).history] == ["q1"]

    time.sleep(max(0.0, expires_at - time.time()) + 0.1)

    session = store.get_session(session_id)
    assert session.history == []
    assert session.status == "warned"
    # A turn after the window starts a new history: the expired turns do not come back.
    store.append_turn(session_id, Turn("q2", "a2", "answered"), keep=3, expires_at=DAY_LATER)
    assert [turn.question for turn in store.get_session(session_id).history] == ["q2"]


def test_each_turn_pushes_the_history_expiry(store: StateStore) -> None:
    session_id = new_id()
    soon = int(time.time()) + 2
    store.append_turn(session_id, Turn("q1", "a1", "answered"), keep=3, expires_at=soon)
    store.append_turn(session_id, Turn("q2", "a2", "answered"), keep=3, expires_at=DAY_LATER)

    time.sleep(max(0.0, soon - time.time()) + 0.1)

    assert [turn.question for turn in store.get_session(session_id).history] == ["q1", "q2"]


# Rate limits.


def test_rate_limit_allows_the_limit_then_refuses_until_the_window_ends(
    store: StateStore,
) -> None:
    key = new_id()
    decisions = [store.hit_rate_limit(key, window_seconds=HOUR, limit=3, now=NOW) for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    # The next window counts these 3 hits at first, fading: a request fits once they
    # weigh 2 or less, a third of the way in.
    assert decisions[-1].retry_after == HOUR - 100 + HOUR // 3


def test_the_previous_windows_hits_fade_out_over_the_next_window(store: StateStore) -> None:
    key = new_id()
    for _ in range(2):  # NOW opens a 100-second window
        store.hit_rate_limit(key, window_seconds=100, limit=2, now=NOW)
    assert not store.hit_rate_limit(key, window_seconds=100, limit=2, now=NOW + 99).allowed
    # At the next window's start the two hits still count in full ...
    assert not store.hit_rate_limit(key, window_seconds=100, limit=2, now=NOW + 100).allowed
    # ... halfway through, as one: one more request fits, not two.
    halfway = [
        store.hit_rate_limit(key, window_seconds=100, limit=2, now=NOW + 150) for _ in range(2)
    ]
    assert [d.allowed for d in halfway] == [True, False]
    # A window later the first window no longer counts at all.
    assert store.hit_rate_limit(key, window_seconds=100, limit=2, now=NOW + 200).allowed


def test_a_client_cannot_send_twice_its_limit_across_a_window_edge(store: StateStore) -> None:
    # Fixed windows let a client send its limit in the last second of one window and
    # its limit again in the first second of the next: twice the limit in 2 s.
    key, limit, window = new_id(), 20, 60
    edge = (int(NOW) // window + 1) * window  # a window boundary after NOW
    late = [
        store.hit_rate_limit(key, window_seconds=window, limit=limit, now=edge - 1)
        for _ in range(2 * limit)
    ]
    early = [
        store.hit_rate_limit(key, window_seconds=window, limit=limit, now=edge + 1)
        for _ in range(2 * limit)
    ]
    allowed = sum(d.allowed for d in late) + sum(d.allowed for d in early)
    assert allowed == limit
    refused = next(d for d in early if not d.allowed)
    # What was sent fades over the new window: the next request fits by then.
    assert refused.retry_after <= window
    retry = store.hit_rate_limit(
        key, window_seconds=window, limit=limit, now=edge + 1 + refused.retry_after
    )
    assert retry.allowed


def test_rate_limit_keys_count_separately(store: StateStore) -> None:
    first, second = new_id(), new_id()
    store.hit_rate_limit(first, window_seconds=HOUR, limit=1, now=NOW)
    assert store.hit_rate_limit(second, window_seconds=HOUR, limit=1, now=NOW).allowed


def test_refused_requests_are_not_counted(store: StateStore) -> None:
    key = new_id()
    for _ in range(5):
        store.hit_rate_limit(key, window_seconds=HOUR, limit=1, now=NOW)
    # A larger limit in the same window sees one hit, not five.
    assert store.hit_rate_limit(key, window_seconds=HOUR, limit=2, now=NOW).allowed


# Spending.


def test_reservations_fill_the_ledger_exactly_to_the_cap(store: StateStore) -> None:
    ledger, cap, amount = new_id(), Decimal("0.05"), Decimal("0.01")
    results = [
        store.reserve_budget(ledger, amount, cap=cap, expires_at=DAY_LATER) for _ in range(7)
    ]
    assert results == [True] * 5 + [False] * 2
    assert store.budget_spent(ledger) == cap


def test_a_reservation_larger_than_the_cap_is_refused_on_an_empty_ledger(
    store: StateStore,
) -> None:
    ledger = new_id()
    assert not store.reserve_budget(
        ledger, Decimal("0.02"), cap=Decimal("0.01"), expires_at=DAY_LATER
    )
    assert store.budget_spent(ledger) == 0


def test_settling_trues_the_ledger_up_to_the_measured_cost(store: StateStore) -> None:
    ledger = new_id()
    store.reserve_budget(ledger, Decimal("0.01"), cap=Decimal("1"), expires_at=DAY_LATER)
    store.settle_budget(ledger, reserved=Decimal("0.01"), actual=Decimal("0.000123"))
    assert store.budget_spent(ledger) == Decimal("0.000123")


def test_settling_with_no_cost_refunds_the_reservation_in_full(store: StateStore) -> None:
    ledger = new_id()
    store.reserve_budget(ledger, Decimal("0.01"), cap=Decimal("1"), expires_at=DAY_LATER)
    store.reserve_budget(ledger, Decimal("0.01"), cap=Decimal("1"), expires_at=DAY_LATER)
    store.settle_budget(ledger, reserved=Decimal("0.01"), actual=Decimal(0))
    assert store.budget_spent(ledger) == Decimal("0.01")


def test_a_refund_makes_room_for_another_reservation(store: StateStore) -> None:
    ledger, amount, cap = new_id(), Decimal("0.03"), Decimal("0.05")
    store.reserve_budget(ledger, amount, cap=cap, expires_at=DAY_LATER)
    assert not store.reserve_budget(ledger, amount, cap=cap, expires_at=DAY_LATER)
    store.settle_budget(ledger, reserved=amount, actual=Decimal(0))
    assert store.reserve_budget(ledger, amount, cap=cap, expires_at=DAY_LATER)


def test_an_unknown_ledger_has_spent_nothing(store: StateStore) -> None:
    assert store.budget_spent(new_id()) == 0


# The answer cache and corpus versions.


def test_a_cached_value_is_returned_until_it_expires(store: StateStore) -> None:
    key = CacheKey("what is x", 1, "settings")
    store.cache_put(key, '{"answer": "x"}', expires_at=int(NOW) + 60)
    assert store.cache_get(key, now=NOW) == '{"answer": "x"}'
    assert store.cache_get(key, now=NOW + 61) is None


def test_the_cache_misses_for_another_corpus_version(store: StateStore) -> None:
    question = f"what is {new_id()}"
    store.cache_put(CacheKey(question, 1, "settings"), "old", expires_at=DAY_LATER)
    assert store.cache_get(CacheKey(question, 2, "settings"), now=NOW) is None


def test_the_cache_misses_for_other_settings(store: StateStore) -> None:
    question = f"what is {new_id()}"
    store.cache_put(CacheKey(question, 1, "top_k=3"), "old", expires_at=DAY_LATER)
    assert store.cache_get(CacheKey(question, 1, "top_k=4"), now=NOW) is None


# Screening verdicts.


def test_a_verdict_is_returned_until_it_expires(store: StateStore) -> None:
    digest = new_id()
    store.verdict_put(digest, '{"kind": "contact"}', expires_at=int(NOW) + 60)
    assert store.verdict_get(digest, now=NOW) == '{"kind": "contact"}'
    assert store.verdict_get(digest, now=NOW + 61) is None


def test_an_unknown_verdict_is_none(store: StateStore) -> None:
    assert store.verdict_get(new_id(), now=NOW) is None


def test_a_second_verdict_replaces_the_first_and_its_expiry(store: StateStore) -> None:
    digest = new_id()
    store.verdict_put(digest, '{"kind": "question"}', expires_at=int(NOW) + 60)
    store.verdict_put(digest, '{"kind": "greeting"}', expires_at=DAY_LATER)
    assert store.verdict_get(digest, now=NOW + 61) == '{"kind": "greeting"}'


def test_verdicts_and_cached_answers_are_kept_apart(store: StateStore) -> None:
    key = CacheKey(f"what is {new_id()}", 1, "settings")
    store.cache_put(key, "an answer", expires_at=DAY_LATER)
    assert store.verdict_get(key.digest, now=NOW) is None
    store.verdict_put(key.digest, '{"kind": "question"}', expires_at=DAY_LATER)
    assert store.cache_get(key, now=NOW) == "an answer"


def test_corpus_versions_start_at_zero_and_count_each_bump_per_index(
    store: StateStore,
) -> None:
    index, other = new_id(), new_id()
    assert store.corpus_version(index) == 0
    assert store.bump_corpus_version(index) == 1
    assert store.bump_corpus_version(index) == 2
    assert store.corpus_version(index) == 2
    assert store.corpus_version(other) == 0


# Restarts: a new store on the same backing sees everything.


def test_limits_ledgers_and_warnings_survive_a_new_store_instance(backend: Backend) -> None:
    session_id, key, ledger = new_id(), new_id(), new_id()
    first = backend.store()
    first.record_offence(session_id)
    first.hit_rate_limit(key, window_seconds=HOUR, limit=1, now=NOW)
    first.reserve_budget(ledger, Decimal("0.05"), cap=Decimal("0.05"), expires_at=DAY_LATER)

    second = backend.store()

    assert second.get_session(session_id).status == "warned"
    assert not second.hit_rate_limit(key, window_seconds=HOUR, limit=1, now=NOW).allowed
    assert not second.reserve_budget(
        ledger, Decimal("0.01"), cap=Decimal("0.05"), expires_at=DAY_LATER
    )


def test_a_verdict_survives_a_new_store_instance(backend: Backend) -> None:
    digest = new_id()
    backend.store().verdict_put(digest, '{"kind": "greeting"}', expires_at=DAY_LATER)

    assert backend.store().verdict_get(digest, now=NOW) == '{"kind": "greeting"}'


# Concurrency: each check is one atomic write, so racing requests cannot overshoot.


def test_concurrent_reservations_never_pass_the_cap(backend: Backend) -> None:
    ledger, amount, cap = new_id(), Decimal("0.01"), Decimal("0.05")
    stores = [backend.store() for _ in range(50)]

    results = together(
        stores, lambda s: s.reserve_budget(ledger, amount, cap=cap, expires_at=DAY_LATER)
    )

    assert results.count(True) == 5
    assert stores[0].budget_spent(ledger) == cap


def test_concurrent_requests_pass_a_rate_limit_exactly_limit_times(backend: Backend) -> None:
    key, limit = new_id(), 7
    stores = [backend.store() for _ in range(30)]

    results = together(
        stores, lambda s: s.hit_rate_limit(key, window_seconds=HOUR, limit=limit, now=NOW)
    )

    assert sum(decision.allowed for decision in results) == limit


def test_concurrent_requests_halfway_through_a_window_pass_the_sliding_limit_exactly(
    backend: Backend,
) -> None:
    key, limit, window = new_id(), 8, 100
    start = (int(NOW) // window + 1) * window
    first = backend.store()
    for _ in range(limit):
        first.hit_rate_limit(key, window_seconds=window, limit=limit, now=start - 1)
    stores = [backend.store() for _ in range(30)]

    # Halfway through the next window the full previous one weighs limit / 2.
    results = together(
        stores,
        lambda s: s.hit_rate_limit(key, window_seconds=window, limit=limit, now=start + 50),
    )

    assert sum(decision.allowed for decision in results) == limit // 2


def test_concurrent_offences_warn_once_and_end_the_session(backend: Backend) -> None:
    session_id = new_id()
    stores = [backend.store() for _ in range(10)]

    statuses = together(stores, lambda s: s.record_offence(session_id))

    assert statuses.count("warned") == 1
    assert statuses.count("ended") == 9


def test_concurrent_turns_are_all_kept(backend: Backend) -> None:
    session_id = new_id()
    writers = [(backend.store(), Turn(f"q{n}", "a", "answered")) for n in range(8)]

    together(
        writers,
        lambda writer: writer[0].append_turn(session_id, writer[1], keep=20, expires_at=DAY_LATER),
    )

    history = backend.store().get_session(session_id).history
    assert sorted(turn.question for turn in history) == [f"q{n}" for n in range(8)]


def test_concurrent_bumps_each_get_their_own_version(backend: Backend) -> None:
    index = new_id()
    stores = [backend.store() for _ in range(10)]

    versions = together(stores, lambda s: s.bump_corpus_version(index))

    assert sorted(versions) == list(range(1, 11))


# Ingest completion records (candor.ingest.records).


def test_an_ingest_record_reads_back_until_replaced_or_removed(store: StateStore) -> None:
    index, source = new_id(), "guides/winch.md"
    assert store.ingest_record(index, source) is None

    store.set_ingest_record(index, source, "pending")
    assert store.ingest_record(index, source) == "pending"
    store.set_ingest_record(index, source, "a" * 64)
    assert store.ingest_record(index, source) == "a" * 64

    store.set_ingest_record(index, source, None)
    assert store.ingest_record(index, source) is None
    store.set_ingest_record(index, source, None)  # removing what is not there is no error
    assert store.ingest_record(index, source) is None


def test_ingest_records_are_kept_per_index_and_per_source(store: StateStore) -> None:
    site_a, site_b = new_id(), new_id()

    store.set_ingest_record(site_a, "doc.md", "a")
    store.set_ingest_record(site_b, "doc.md", "b")
    store.set_ingest_record(site_a, "doc.md.bak", "c")

    assert store.ingest_record(site_a, "doc.md") == "a"
    assert store.ingest_record(site_b, "doc.md") == "b"
    assert store.ingest_record(site_a, "doc.md.bak") == "c"
    assert store.ingest_record(site_b, "doc.md.bak") is None


def test_an_ingest_record_takes_the_longest_s3_key(store: StateStore) -> None:
    # S3 keys run to 1024 bytes of UTF-8, past DynamoDB's 1024-byte sort key once prefixed.
    index, source = new_id(), "notes/" + "é" * 509
    assert len(source.encode()) == 1024

    store.set_ingest_record(index, source, "a")

    assert store.ingest_record(index, source) == "a"


def test_ingest_records_survive_a_new_store_instance(backend: Backend) -> None:
    index = new_id()
    backend.store().set_ingest_record(index, "doc.md", "a")

    assert backend.store().ingest_record(index, "doc.md") == "a"


# Traces and feedback.


def a_trace(
    session_id: str = "", *, created_at: float = NOW, expires_at: int = DAY_LATER
) -> StoredTrace:
    return StoredTrace(
        trace_id=new_id(),
        session_id=session_id or new_id(),
        created_at=created_at,
        expires_at=expires_at,
        body='{"answer": "x"}',
    )


def test_a_stored_trace_is_read_back_until_it_expires(store: StateStore) -> None:
    trace = a_trace(expires_at=int(NOW) + 60)
    store.put_trace(trace)
    assert store.get_trace(trace.trace_id, now=NOW) == trace
    assert store.get_trace(trace.trace_id, now=NOW + 61) is None


def test_an_unknown_trace_is_none(store: StateStore) -> None:
    assert store.get_trace(new_id(), now=NOW) is None


def test_the_session_that_asked_can_rate_its_trace(store: StateStore) -> None:
    trace = a_trace()
    store.put_trace(trace)
    assert store.rate_trace(trace.trace_id, trace.session_id, '{"score": 1}', now=NOW) == "rated"
    rated = store.get_trace(trace.trace_id, now=NOW)
    assert rated is not None
    assert rated.feedback == '{"score": 1}'
    assert rated.body == trace.body


def test_a_second_rating_replaces_the_first(store: StateStore) -> None:
    trace = a_trace()
    store.put_trace(trace)
    store.rate_trace(trace.trace_id, trace.session_id, '{"score": 1}', now=NOW)
    store.rate_trace(trace.trace_id, trace.session_id, '{"score": -1}', now=NOW)
    rated = store.get_trace(trace.trace_id, now=NOW)
    assert rated is not None and rated.feedback == '{"score": -1}'


def test_another_session_cannot_rate_a_trace(store: StateStore) -> None:
    trace = a_trace()
    store.put_trace(trace)
    store.rate_trace(trace.trace_id, trace.session_id, '{"score": 1}', now=NOW)
    assert store.rate_trace(trace.trace_id, new_id(), '{"score": -1}', now=NOW) == "forbidden"
    rated = store.get_trace(trace.trace_id, now=NOW)
    assert rated is not None and rated.feedback == '{"score": 1}'


def test_an_unknown_or_expired_trace_cannot_be_rated(store: StateStore) -> None:
    expired = a_trace(expires_at=int(NOW) + 60)
    store.put_trace(expired)
    assert store.rate_trace(new_id(), new_id(), '{"score": 1}', now=NOW) == "unknown"
    outcome = store.rate_trace(expired.trace_id, expired.session_id, '{"score": 1}', now=NOW + 61)
    assert outcome == "unknown"
    assert store.get_trace(new_id(), now=NOW) is None


def test_traces_on_reads_one_day_oldest_first_with_feedback(store: StateStore) -> None:
    day = trace_day(NOW)
    later, earlier = a_trace(created_at=NOW + 20), a_trace(created_at=NOW + 10)
    next_day = a_trace(created_at=NOW + 86_400)
    gone = a_trace(created_at=NOW + 30, expires_at=int(NOW) + 40)
    for trace in (later, earlier, next_day, gone):
        store.put_trace(trace)
    store.rate_trace(later.trace_id, later.session_id, '{"score": -1}', now=NOW)

    found = store.traces_on(day, now=NOW + 50)

    assert [t.trace_id for t in found] == [earlier.trace_id, later.trace_id]
    assert found[1].feedback == '{"score": -1}'
    assert next_day.trace_id in {t.trace_id for t in store.traces_on(next_day.day, now=NOW)}


def test_traces_on_finds_every_trace_of_a_busy_day(store: StateStore) -> None:
    # More traces than shards: the DynamoDB store spreads a day over several.
    traces = [a_trace(created_at=NOW + n) for n in range(40)]
    for trace in traces:
        store.put_trace(trace)

    found = store.traces_on(trace_day(NOW), now=NOW)

    assert [t.trace_id for t in found] == [t.trace_id for t in traces]


def test_a_review_replaces_the_feedback_it_read(store: StateStore) -> None:
    trace = a_trace()
    store.put_trace(trace)
    store.rate_trace(trace.trace_id, trace.session_id, '{"score": -1}', now=NOW)

    reviewed = '{"score": -1, "review": "approved"}'
    assert store.review_feedback(trace.trace_id, '{"score": -1}', reviewed, now=NOW)

    stored = store.get_trace(trace.trace_id, now=NOW)
    assert stored is not None and stored.feedback == reviewed


def test_a_review_of_feedback_the_visitor_has_since_replaced_writes_nothing(
    store: StateStore,
) -> None:
    # The owner read the first rating; the visitor rated again before the owner decided.
    trace = a_trace()
    store.put_trace(trace)
    store.rate_trace(trace.trace_id, trace.session_id, '{"score": -1}', now=NOW)
    store.rate_trace(trace.trace_id, trace.session_id, '{"score": -1, "x": 2}', now=NOW)

    approved = '{"score": -1, "review": "approved"}'
    assert not store.review_feedback(trace.trace_id, '{"score": -1}', approved, now=NOW)

    stored = store.get_trace(trace.trace_id, now=NOW)
    assert stored is not None and stored.feedback == '{"score": -1, "x": 2}'


def test_an_unknown_expired_or_unrated_trace_cannot_be_reviewed(store: StateStore) -> None:
    unrated, expiring = a_trace(), a_trace(expires_at=int(NOW) + 60)
    for trace in (unrated, expiring):
        store.put_trace(trace)
    store.rate_trace(expiring.trace_id, expiring.session_id, '{"score": -1}', now=NOW)

    assert not store.review_feedback(new_id(), '{"score": -1}', "{}", now=NOW)
    assert not store.review_feedback(unrated.trace_id, '{"score": -1}', "{}", now=NOW)
    assert not store.review_feedback(expiring.trace_id, '{"score": -1}', "{}", now=NOW + 61)
    stored = store.get_trace(unrated.trace_id, now=NOW)
    assert stored is not None and stored.feedback is None
