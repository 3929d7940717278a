"""The gaps check after ingest on AWS: the ingest function asks for it, and the gaps-check
function's DynamoDB grant admits every call a check makes (DynamoDB Local, the table
built from the template) and nothing of the visitors' state it does not need."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from candor.backends.dynamodb_gaps import DynamoDBGaps
from candor.backends.dynamodb_state import DynamoDBStateStore
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.deps import Deps
from candor.gaps import after_ingest, request
from candor.ingest.outcomes import IngestReport
from candor.service import ask
from candor.settings import Settings
from tests.integration.test_ingest_policy import TABLE
from tests.support import dynamodb_local
from tests.support.fakes import ScriptedChatModel
from tests.unit.test_template import (
    RESOURCES,
    TEMPLATE,
    function_properties,
    policy_statements,
)

pytestmark = pytest.mark.integration

TRACES_INDEX = {"Fn::Sub": "${StateTable.Arn}/index/by_day"}


@dataclass
class Calls:
    """(action, partition key or queried value, index name) of each DynamoDB call."""

    calls: list[tuple[str, str | None, str | None]] = field(default_factory=list)

    def __call__(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        key = params.get("Key", {}).get("pk", {}).get("S")
        if model.name == "Query":
            values = params.get("ExpressionAttributeValues", {})
            key = next((v["S"] for v in values.values() if "S" in v), None)
        self.calls.append((f"dynamodb:{model.name}", key, params.get("IndexName")))


def allowed(action: str, key: str | None, index: str | None) -> bool:
    """Whether the gaps-check function's policy allows the call (only the conditions
    the template uses are understood)."""
    for statement in policy_statements("GapsCheckFunction"):
        actions = statement["Action"]
        if action not in (actions if isinstance(actions, list) else [actions]):
            continue
        resource = statement["Resource"]
        if index is not None:
            if resource == TRACES_INDEX and index == "by_day":
                return True
            continue
        if resource != TABLE:
            continue
        patterns = statement["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
        if key is not None and any(fnmatchcase(key, p) for p in patterns):
            return True
    return False


@pytest.fixture
def table(dynamodb_endpoint: str) -> Iterator[tuple[Any, str]]:
    client = dynamodb_local.client(dynamodb_endpoint)
    name = dynamodb_local.create_state_table(client)
    yield client, name
    client.delete_table(TableName=name)


def test_a_check_after_ingest_makes_only_calls_its_function_is_granted(
    table: tuple[Any, str], settings: Settings, index: SqliteVectorIndex, tmp_path: Path
) -> None:
    # Given a visitor's declined question on the DynamoDB store
    client, name = table
    store = DynamoDBStateStore(name, client=client)
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}] * 2,
            "judge": [False, False, True],
            "Rewrite": [{"query": "force push"}],
            "text": ["It refuses to overwrite work you have not seen [1]."],
        }
    )
    deps = Deps(settings, chat, HashingEmbedder(), index, None, store)
    declined = asyncio.run(ask(deps, "What does --force-with-lease do?"))
    assert declined.decision == "declined"

    # When the gaps-check function runs after the documents changed
    calls = Calls()
    client.meta.events.register("provide-client-params.dynamodb", calls)
    report = asyncio.run(after_ingest.run(deps, DynamoDBGaps(name, client=client)))

    # Then it opened the gap, answered its question and closed it
    assert len(report.closed) == 1
    # And every call it made is one its grant allows
    assert {action for action, _, _ in calls.calls} >= {"dynamodb:Query", "dynamodb:UpdateItem"}
    assert [c for c in calls.calls if not allowed(*c)] == []
    # And it may not touch what visitors' requests keep (their sessions, windows, cache)
    for key in ("session#0123", "rate#address#1.2.3.4", "cache#ab", "budget#day#2026-12-06"):
        assert not allowed("dynamodb:UpdateItem", key, None)


def test_the_ingest_function_asks_for_a_check_only_when_the_documents_changed(
    settings: Settings, fake_aws_credentials: str
) -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=fake_aws_credentials)
        url = sqs.create_queue(QueueName="gaps-check")["QueueUrl"]
        configured = settings.model_copy(update={"gaps_check_queue_url": url})

        unchanged = request.request_check(configured, IngestReport(), client=sqs)
        off = request.request_check(settings, IngestReport(corpus_version=4), client=sqs)
        asked = request.request_check(configured, IngestReport(corpus_version=4), client=sqs)

        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert (unchanged, off, asked) == (False, False, True)
    (message,) = messages
    assert json.loads(message["Body"]) == {"index": settings.index_name, "corpus_version": 4}


def test_the_check_after_ingest_is_one_parameter_away_and_off_by_default() -> None:
    assert RESOURCES["GapsCheckFunction"]["Condition"] == "CheckGapsAfterIngest"
    parameters = function_properties("IngestFunction")["Environment"]["Variables"]
    assert parameters["CANDOR_GAPS_CHECK_QUEUE_URL"] == {
        "Fn::If": ["CheckGapsAfterIngest", {"Ref": "GapsCheckQueue"}, {"Ref": "AWS::NoValue"}]
    }
    assert TEMPLATE["Parameters"]["GapsCheckAfterIngest"]["Default"] == "false"
    budget = function_properties("GapsCheckFunction")["Environment"]["Variables"]
    assert budget["CANDOR_OWNER_BUDGET_USD"] == {"Ref": "OwnerBudgetUsd"}
    queue = RESOURCES["GapsCheckQueue"]["Properties"]
    assert queue["VisibilityTimeout"] > function_properties("GapsCheckFunction")["Timeout"]
