"""The sync function in the template: its schedule, its queue, and grants that reach only
its own resources (pages under site/, sync# items, its queue)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from candor.settings import Settings
from tests.unit.test_template import PARAMETERS, RESOURCES, environment, function_properties
from tests.unit.test_template_resources import TABLE, granted

pytestmark = pytest.mark.unit


def events() -> dict[str, Any]:
    found: dict[str, Any] = function_properties("SyncFunction")["Events"]
    return found


def test_a_schedule_from_the_parameter_starts_the_sync_and_is_off_without_sites() -> None:
    (schedule,) = [e for e in events().values() if e["Type"] == "ScheduleV2"]
    properties = schedule["Properties"]
    assert properties["ScheduleExpression"] == {"Ref": "SyncSchedule"}
    assert PARAMETERS["SyncSchedule"]["Default"] == "rate(1 day)"
    assert properties["State"] == {"Fn::If": ["SyncSites", "ENABLED", "DISABLED"]}
    assert RESOURCES and PARAMETERS["SiteUrls"]["Default"] == ""
    assert properties["Input"] == '{"sync": "start"}'
    assert properties["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": ["IngestDeadLetterQueue", "Arn"]}


def test_steps_come_from_the_sync_queue_one_at_a_time_two_sites_at_once() -> None:
    (steps,) = [
        r["Properties"]
        for r in RESOURCES.values()
        if r["Type"] == "AWS::Lambda::EventSourceMapping"
        and r["Properties"]["FunctionName"] == {"Ref": "SyncFunction"}
    ]
    assert steps["EventSourceArn"] == {"Fn::GetAtt": ["SyncQueue", "Arn"]}
    assert steps["BatchSize"] == 1
    assert steps["ScalingConfig"]["MaximumConcurrency"] == 2
    # Not a SAM SQS event: that would attach a managed policy reading every queue.
    assert all(e["Type"] != "SQS" for e in events().values())


def test_the_queues_dead_letters_go_where_the_ingests_go() -> None:
    queue = RESOURCES["SyncQueue"]["Properties"]
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {
        "Fn::GetAtt": ["IngestDeadLetterQueue", "Arn"]
    }
    ingest = function_properties("IngestFunction")["EventInvokeConfig"]["DestinationConfig"]
    sync = function_properties("SyncFunction")["EventInvokeConfig"]["DestinationConfig"]
    assert sync == ingest
    # A message is not delivered again while an invocation may still be working on it.
    assert queue["VisibilityTimeout"] >= 6 * function_properties("SyncFunction")["Timeout"]


def test_the_function_knows_its_sites_bucket_and_queue() -> None:
    env = environment("SyncFunction")
    assert env["CANDOR_SYNC_SITES"] == {"Ref": "SiteUrls"}
    assert env["CANDOR_DOCUMENTS_BUCKET"] == {"Ref": "DocumentsBucket"}
    assert env["CANDOR_SYNC_QUEUE_URL"] == {"Ref": "SyncQueue"}


def test_the_sync_function_writes_only_pages_under_site() -> None:
    s3 = [(a, r) for a, r in granted("SyncFunction") if a.startswith("s3:")]
    assert {a for a, _ in s3} == {"s3:PutObject", "s3:DeleteObject"}
    assert {str(r) for _, r in s3} == {str({"Fn::Sub": "${DocumentsBucket.Arn}/site/*"})}


def test_the_sync_function_touches_only_its_own_items_in_the_table() -> None:
    statements = [
        statement
        for policy in function_properties("SyncFunction")["Policies"]
        for statement in policy["Statement"]
        if any(str(a).startswith("dynamodb:") for a in statement["Action"])
    ]
    (statement,) = statements
    assert statement["Resource"] == TABLE
    assert statement["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["sync#*"]}
    }
    assert "dynamodb:Scan" not in statement["Action"]


def test_the_sync_function_reads_and_sends_only_its_own_queue() -> None:
    sqs = [(a, r) for a, r in granted("SyncFunction") if a.startswith("sqs:")]
    assert {a for a, _ in sqs} == {
        "sqs:SendMessage",
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
        "sqs:ChangeMessageVisibility",
    }
    assert all(r == {"Fn::GetAtt": ["SyncQueue", "Arn"]} for _, r in sqs)


@pytest.mark.parametrize(
    "value", ["", "https://docs.example.com/", "https://a.example/docs/,http://b.example:8080/"]
)
def test_a_site_list_the_parameter_accepts_parses_as_a_setting(value: str) -> None:
    assert re.fullmatch(PARAMETERS["SiteUrls"]["AllowedPattern"], value)
    assert Settings(sync_sites=value).sync_sites == tuple(v for v in value.split(",") if v)
