"""The HandoffStore contract: SQLite and DynamoDB Local pass the same assertions.

The claim is what keeps a hand-off from reaching the owner twice when two
deliverers try it at once, so it is proven under real concurrency on both.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from candor.backends.dynamodb_handoffs import DynamoDBHandoffStore
from candor.backends.dynamodb_state import DynamoDBStateStore
from candor.backends.sqlite_handoffs import SqliteHandoffStore
from candor.handoffs.store import Handoff, HandoffStore, handoff_day
from candor.ports import StoredTrace
from tests.contract.conftest import StateBacking
from tests.support import dynamodb_local
from tests.support.concurrency import together

pytestmark = pytest.mark.integration

HOUR = 3600
NOW = float((int(time.time()) // HOUR + 1) * HOUR + 100)
WEEK_LATER = int(NOW) + 7 * 86_400


@pytest.fixture
def opener(state_backing: StateBacking) -> Callable[[], HandoffStore]:
    """Opens stores on one shared backing, each as its own process would."""

    def open_store() -> HandoffStore:
        if state_backing.kind == "sqlite":
            return state_backing.closing(SqliteHandoffStore(state_backing.path))
        return DynamoDBHandoffStore(state_backing.table, client=state_backing.client())

    return open_store


@pytest.fixture
def store(opener: Callable[[], HandoffStore]) -> HandoffStore:
    return opener()


def new_handoff(created_at: float = NOW, **fields: object) -> Handoff:
    values: dict[str, object] = {
        "id": uuid.uuid4().hex,
        "session_id": "s-" + uuid.uuid4().hex,
        "created_at": created_at,
        "expires_at": WEEK_LATER,
        "body": '{"email": "visitor@example.org"}',
    }
    return Handoff(**(values | fields))  # type: ignore[arg-type]


def test_a_stored_handoff_reads_back_whole_and_pending(store: HandoffStore) -> None:
    handoff = new_handoff()

    assert store.put_handoff(handoff) is True

    assert store.get_handoff(handoff.id, now=NOW) == handoff
    assert handoff.state == "pending" and handoff.attempts == 0


def test_a_second_put_of_the_same_id_writes_nothing(store: HandoffStore) -> None:
    handoff = new_handoff()
    store.put_handoff(handoff)

    assert store.put_handoff(new_handoff(id=handoff.id, body='{"forged": true}')) is False
    stored = store.get_handoff(handoff.id, now=NOW)
    assert stored is not None and stored.body == handoff.body


def test_an_expired_or_unknown_handoff_reads_as_none(store: HandoffStore) -> None:
    handoff = new_handoff(expires_at=int(NOW) + 10)
    store.put_handoff(handoff)

    assert store.get_handoff(handoff.id, now=NOW + 11) is None
    assert store.get_handoff(uuid.uuid4().hex, now=NOW) is None
    assert store.claim_handoff(handoff.id, lease_until=NOW + 100, now=NOW + 11) is None


def test_a_claim_counts_an_attempt_and_holds_the_handoff_until_its_lease_ends(
    store: HandoffStore,
) -> None:
    handoff = new_handoff()
    store.put_handoff(handoff)

    claimed = store.claim_handoff(handoff.id, lease_until=NOW + 60, now=NOW)

    assert claimed is not None and claimed.attempts == 1 and claimed.lease_until == NOW + 60
    assert store.claim_handoff(handoff.id, lease_until=NOW + 90, now=NOW + 30) is None
    # A deliverer that died holding it: once its lease is over, another may try.
    again = store.claim_handoff(handoff.id, lease_until=NOW + 200, now=NOW + 61)
    assert again is not None and again.attempts == 2


def test_a_failed_attempt_releases_it_and_a_delivered_one_is_never_claimed_again(
    store: HandoffStore,
) -> None:
    handoff = new_handoff()
    store.put_handoff(handoff)
    store.claim_handoff(handoff.id, lease_until=NOW + 60, now=NOW)

    store.finish_attempt(
        handoff.id, state="pending", delivered_to=("email",), error="webhook answered 503"
    )
    after_failure = store.get_handoff(handoff.id, now=NOW)
    assert after_failure is not None
    assert (after_failure.delivered_to, after_failure.last_error) == (
        ("email",),
        "webhook answered 503",
    )
    assert store.claim_handoff(handoff.id, lease_until=NOW + 60, now=NOW + 1) is not None
    store.finish_attempt(handoff.id, state="delivered", delivered_to=("email", "webhook"), error="")

    assert store.claim_handoff(handoff.id, lease_until=NOW + 500, now=NOW + 400) is None
    done = store.get_handoff(handoff.id, now=NOW)
    assert done is not None and (done.state, done.attempts) == ("delivered", 2)


def test_of_eight_deliverers_claiming_at_once_exactly_one_wins(
    opener: Callable[[], HandoffStore],
) -> None:
    handoff = new_handoff()
    opener().put_handoff(handoff)
    stores = [opener() for _ in range(8)]

    claims = together(stores, lambda s: s.claim_handoff(handoff.id, lease_until=NOW + 60, now=NOW))

    assert sum(c is not None for c in claims) == 1


def test_a_day_lists_its_handoffs_oldest_first_and_no_other_day(store: HandoffStore) -> None:
    first, second = new_handoff(NOW + 5), new_handoff(NOW + 1)
    tomorrow = new_handoff(NOW + 86_400)
    for handoff in (first, second, tomorrow):
        store.put_handoff(handoff)

    listed = store.handoffs_on(handoff_day(NOW + 1), now=NOW)

    assert [h.id for h in listed] == [second.id, first.id]


def test_handoffs_do_not_show_among_the_days_traces(tmp_path: Path, dynamodb_endpoint: str) -> None:
    # They share the table's by_day index with the traces, under another partition.
    admin = dynamodb_local.client(dynamodb_endpoint)
    table = dynamodb_local.create_state_table(admin)
    handoffs = DynamoDBHandoffStore(table, client=admin)
    state = DynamoDBStateStore(table, client=admin)
    handoffs.put_handoff(new_handoff())
    trace = StoredTrace("t" * 32, "s", NOW, WEEK_LATER, "{}")
    state.put_trace(trace)

    assert [t.trace_id for t in state.traces_on(trace.day, now=NOW)] == [trace.trace_id]
    admin.delete_table(TableName=table)
