"""What only the DynamoDB store has: its IAM grant, its errors, its wiring from settings."""

from __future__ import annotations

import fnmatch
import json
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from candor import rating, traces
from candor.backends.dynamodb_state import DynamoDBStateStore
from candor.errors import ConfigurationError, StateStoreError
from candor.factory import build_state
from candor.ports import CacheKey, StoredTrace, Turn
from candor.settings import Settings
from tests.support import dynamodb_local

pytestmark = pytest.mark.integration


@pytest.fixture
def table(dynamodb_endpoint: str) -> Iterator[str]:
    admin = dynamodb_local.client(dynamodb_endpoint)
    name = dynamodb_local.create_state_table(admin)
    yield name
    admin.delete_table(TableName=name)


def granted_state_actions(function: str) -> set[str]:
    """The DynamoDB actions the template grants `function` on StateTable."""
    policies = dynamodb_local.load_template()["Resources"][function]["Properties"]["Policies"]
    granted: set[str] = set()
    for policy in policies:
        for statement in policy.get("Statement", []) if isinstance(policy, dict) else []:
            if statement["Effect"] == "Allow" and statement["Resource"] == "StateTable.Arn":
                actions = statement["Action"]
                granted |= {actions} if isinstance(actions, str) else set(actions)
    return granted


def test_the_ask_function_is_granted_every_call_the_store_makes(
    dynamodb_endpoint: str, table: str
) -> None:
    # A missing grant passes every linter and fails as AccessDenied in production.
    client = dynamodb_local.client(dynamodb_endpoint)
    made: set[str] = set()

    def record(model: Any, **_: Any) -> None:
        made.add(f"dynamodb:{model.name}")

    client.meta.events.register("before-call.dynamodb", record)
    store = DynamoDBStateStore(table, client=client)
    session_id, key = uuid.uuid4().hex, CacheKey("q", 1, "s")

    store.get_session(session_id)
    store.record_offence(session_id)
    store.append_turn(session_id, Turn("q", "a", "answered"), keep=3, expires_at=2**31)
    store.hit_rate_limit("k", window_seconds=60, limit=1, now=0.0)
    store.reserve_budget("l", Decimal("0.01"), cap=Decimal("1"), expires_at=2**31)
    store.settle_budget("l", reserved=Decimal("0.01"), actual=Decimal(0))
    store.budget_spent("l")
    store.cache_put(key, "v", expires_at=2**31)
    store.cache_get(key, now=0.0)
    store.bump_corpus_version("i")
    store.corpus_version("i")
    store.put_trace(StoredTrace(uuid.uuid4().hex, session_id, time.time(), 2**31, "{}"))

    assert made <= granted_state_actions("AskFunction")
    assert made == {"dynamodb:GetItem", "dynamodb:UpdateItem"}


def test_the_ingest_function_is_granted_every_call_its_records_and_bump_make(
    dynamodb_endpoint: str, table: str
) -> None:
    client = dynamodb_local.client(dynamodb_endpoint)
    made: set[str] = set()

    def record(model: Any, **_: Any) -> None:
        made.add(f"dynamodb:{model.name}")

    client.meta.events.register("before-call.dynamodb", record)
    store = DynamoDBStateStore(table, client=client)

    store.ingest_record("i", "doc.md")
    store.set_ingest_record("i", "doc.md", "pending")
    store.bump_corpus_version("i")
    store.set_ingest_record("i", "doc.md", None)

    assert made <= granted_state_actions("IngestFunction")


def test_a_failure_other_than_a_condition_is_a_state_store_error(dynamodb_endpoint: str) -> None:
    store = DynamoDBStateStore("no-such-table", client=dynamodb_local.client(dynamodb_endpoint))
    with pytest.raises(StateStoreError, match="ResourceNotFoundException"):
        store.reserve_budget("l", Decimal("0.01"), cap=Decimal("1"), expires_at=2**31)


def test_settings_pick_the_dynamodb_store_and_its_endpoint(
    dynamodb_endpoint: str, table: str, fake_aws_credentials: str
) -> None:
    # boto3 looks up credentials itself; DynamoDB Local accepts any.
    settings = Settings(
        state_backend="dynamodb",
        state_table=table,
        dynamodb_endpoint_url=dynamodb_endpoint,
        aws_region="eu-west-1",
    )
    store = build_state(settings)
    assert isinstance(store, DynamoDBStateStore)
    assert store.bump_corpus_version("default") == 1


def test_the_dynamodb_store_needs_a_table_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="CANDOR_STATE_TABLE"):
        build_state(Settings(data_dir=tmp_path, state_backend="dynamodb"))


def test_the_feedback_function_is_granted_every_call_and_key_a_rating_makes(
    dynamodb_endpoint: str, table: str
) -> None:
    # The feedback function may touch only items whose partition key matches its
    # LeadingKeys patterns; a rating must stay inside them, or it fails as AccessDenied.
    client = dynamodb_local.client(dynamodb_endpoint)
    calls: list[tuple[str, str]] = []

    def record(model: Any, params: dict[str, Any], **_: Any) -> None:
        key = json.loads(params["body"])["Key"]
        calls.append((f"dynamodb:{model.name}", key["pk"]["S"]))

    client.meta.events.register("before-call.dynamodb", record)
    store = DynamoDBStateStore(table, client=client)
    trace = StoredTrace(uuid.uuid4().hex, "session-1234", time.time(), 2**31, "{}")
    DynamoDBStateStore(table, client=dynamodb_local.client(dynamodb_endpoint)).put_trace(trace)
    settings = Settings()

    for session in (trace.session_id, "someone-else"):  # rated, then refused (and read)
        rating.rate(
            store,
            settings,
            trace.trace_id,
            traces.Feedback(1),
            session_id=session,
            client="203.0.113.17",
        )
    rating.rate(store, settings, "0" * 32, traces.Feedback(1), session_id="s-12345678")

    policies = dynamodb_local.load_template()["Resources"]["FeedbackFunction"]["Properties"][
        "Policies"
    ]
    # The table statement; the other reads the session key and the server keys.
    (statement,) = [s for p in policies for s in p["Statement"] if "Condition" in s]
    patterns = statement["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    assert {action for action, _ in calls} == set(statement["Action"])
    for action, pk in calls:
        assert any(fnmatch.fnmatchcase(pk, p) for p in patterns), f"{action} on {pk}"
