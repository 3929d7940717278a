"""The ingest function's DynamoDB grant against the calls it makes.

The real handler (functions/ingest) runs a put, a repeat, a change, a delete and a
multi-record event on the state store it deploys with (the DynamoDB one; moto
stands in for S3 and DynamoDB, the table built from the template's StateTable).
Every DynamoDB call it makes is recorded, and each must be one the template's
policy allows, condition included; the items the other functions keep in the same
table (sessions, rate windows, ledgers, cached answers, verdicts, traces), made by
the same store, must be ones it does not allow.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote_plus

import boto3
import pytest
from moto import mock_aws

from candor.backends.dynamodb_state import DynamoDBStateStore
from candor.ports import CacheKey, StoredTrace, Turn
from candor.settings import get_settings
from tests.conftest import clear_candor_env
from tests.support.dynamodb_local import create_state_table
from tests.support.lambda_ import LambdaContext, load_event, load_handler
from tests.support.pdfs import make_pdf
from tests.unit.test_template import policy_statements

pytestmark = pytest.mark.integration

REGION: Final = "eu-west-1"
BUCKET = "candor-docs-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
TABLE = {"Fn::GetAtt": ["StateTable", "Arn"]}


@dataclass
class DynamoDBCalls:
    """(action, partition key) of every DynamoDB call made while it is registered."""

    calls: list[tuple[str, str | None]] = field(default_factory=list)

    def __call__(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        key = params.get("Key", {}).get("pk", {}).get("S")
        if key is None and model.name == "Query":  # the partition its key condition names
            key = params.get("ExpressionAttributeValues", {}).get(":pk", {}).get("S")
        self.calls.append((f"dynamodb:{model.name}", key))


def allowed(statements: list[dict[str, Any]], action: str, partition_key: str | None) -> bool:
    """Whether an Allow among `statements` grants `action` on the table's item `partition_key`.

    Only the condition the template uses is understood; any other fails the test
    rather than being taken to allow or deny.
    """
    for statement in statements:
        actions = statement["Action"]
        actions = actions if isinstance(actions, list) else [actions]
        if statement["Effect"] != "Allow" or action not in actions:
            continue
        if statement["Resource"] != TABLE:
            continue
        condition = statement.get("Condition")
        if condition is None:
            return True
        assert set(condition) == {"ForAllValues:StringLike"}, condition
        (name, patterns), *rest = condition["ForAllValues:StringLike"].items()
        assert name == "dynamodb:LeadingKeys" and not rest, condition
        # IAM's StringLike knows * and ? only; fnmatch would read [ ] as a class too.
        assert not any("[" in p for p in patterns), patterns
        if partition_key is not None and any(fnmatchcase(partition_key, p) for p in patterns):
            return True
    return False


@pytest.fixture
def aws(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fake_aws_credentials: str
) -> Iterator[tuple[Any, str]]:
    """moto's S3 with the documents bucket and DynamoDB with the template's table;
    the ingest function's settings pointing at them (embedder and index local)."""
    clear_candor_env(monkeypatch)
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        table = create_state_table(boto3.client("dynamodb", region_name=REGION))
        for name, value in {
            "CANDOR_STATE_BACKEND": "dynamodb",
            "CANDOR_STATE_TABLE": table,
            "CANDOR_EMBEDDER_BACKEND": "hashing",
            "CANDOR_INDEX_BACKEND": "sqlite",
            "CANDOR_DATA_DIR": str(tmp_path),
            "CANDOR_AWS_REGION": REGION,
        }.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()
        try:
            yield s3, table
        finally:
            get_settings.cache_clear()


@pytest.fixture
def recorder(aws: tuple[Any, str], monkeypatch: pytest.MonkeyPatch) -> DynamoDBCalls:
    # The factory makes its clients from boto3's default session; a handler on that
    # session's events sees the API parameters of every call of those clients. The
    # session is this test's own, so that no other test's clients are recorded.
    calls = DynamoDBCalls()
    session = boto3.Session(region_name=REGION)
    session.events.register("provide-client-params.dynamodb", calls)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", session)
    return calls


def run_the_ingest_function(s3: Any) -> None:
    """The handler over a put, its repeat, a change, a multi-record event and a delete."""
    app = load_handler("ingest")
    event = load_event("s3-put.json")
    key = unquote_plus(event["Records"][0]["s3"]["object"]["key"])
    multi = load_event("s3-multi.json")
    install, overview, scanned, config, _old = (
        unquote_plus(r["s3"]["object"]["key"]) for r in multi["Records"]
    )

    def handle(event: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = app.handler(event, LambdaContext("candor-ingest"))
        return result

    s3.put_object(Bucket=BUCKET, Key=key, Body=b"# Start\n\nOpen the winch panel.\n")
    statuses = [handle(event)["records"][0]["status"]]
    statuses.append(handle(event)["records"][0]["status"])
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"# Start\n\nOpen the winch panel twice.\n")
    statuses.append(handle(event)["records"][0]["status"])
    s3.put_object(Bucket=BUCKET, Key=install, Body=b"# Install\n\nUnpack the kite.\n")
    s3.put_object(Bucket=BUCKET, Key=overview, Body=make_pdf([["Overview of the kite."]]))
    s3.put_object(Bucket=BUCKET, Key=scanned, Body=make_pdf([[]]))
    s3.put_object(Bucket=BUCKET, Key=config, Body=b"<html><body><p>winch: on</p></body></html>")
    statuses.extend(r["status"] for r in handle(multi)["records"])
    s3.delete_object(Bucket=BUCKET, Key=key)
    statuses.append(handle(load_event("s3-delete.json"))["records"][0]["status"])
    # Each path of the function ran: written, kept, rewritten, refused, absent, deleted
    assert statuses == [
        "changed",
        "unchanged",
        "changed",
        "changed",
        "changed",
        "failed",
        "changed",
        "absent",
        "deleted",
    ]


def use_the_store_as_the_other_functions_do(table: str) -> None:
    """Sessions and their history, rate windows, a ledger, a cached answer, a verdict, a
    trace and its rating."""
    store = DynamoDBStateStore(table, region=REGION)
    now = time.time()
    store.get_session("s1")
    store.record_offence("s1")
    store.append_turn("s1", Turn("q", "a", "answered"), keep=3, expires_at=2**31)
    store.hit_rate_limit("ip#203.0.113.9", window_seconds=60, limit=5, now=now)
    store.reserve_budget("global#2026-12-02", Decimal("0.01"), cap=Decimal(5), expires_at=2**31)
    store.cache_put(CacheKey("what is kite?", 1, "f"), "{}", expires_at=2**31)
    store.verdict_put("ab" * 32, "question", expires_at=2**31)
    store.put_trace(StoredTrace("t1", "s1", now, 2**31, "{}"))
    store.rate_trace("t1", "s1", "{}", now=now)


def test_ingest_function_may_not_write_any_item_of_the_table(
    aws: tuple[Any, str], recorder: DynamoDBCalls
) -> None:
    # Given the ingest function's policy, and the calls it makes on every path
    s3, table = aws
    statements = policy_statements("IngestFunction")
    run_the_ingest_function(s3)
    made, recorder.calls = recorder.calls, []

    # Then each call it makes is allowed, so the scoped grant breaks nothing
    assert {action for action, _ in made} == {"dynamodb:GetItem", "dynamodb:UpdateItem"}
    assert {key.split("#", 1)[0] for _, key in made if key} == {"corpus", "ingest", "catalogue"}
    refused = [(a, key) for a, key in made if not allowed(statements, a, key)]
    assert refused == []

    # And none of the items the other functions keep in the same table may be
    # read or written by it
    use_the_store_as_the_other_functions_do(table)
    others = recorder.calls
    assert {key.split("#", 1)[0] for _, key in others if key} == {
        "session",
        "history",
        "rate",
        "budget",
        "cache",
        "verdict",
        "trace",
    }
    admitted = [
        (action, key)
        for _, key in others
        for action in ("dynamodb:GetItem", "dynamodb:UpdateItem")
        if allowed(statements, action, key)
    ]
    assert admitted == []
