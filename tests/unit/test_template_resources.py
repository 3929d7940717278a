"""The template's least privilege, logs, dead-letter queue, table and outputs.

cfn-lint checks that these resources are well formed; these tests check that
they are the right ones: each function may touch only its own resources, the
table has the index the DynamoDB store queries, failures are kept.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from candor.backends import dynamodb_state
from candor.settings import get_settings
from tests.conftest import clear_candor_env
from tests.support.edge import ORIGIN, SESSION_SECRET
from tests.support.lambda_ import load_handler
from tests.unit.test_template import (
    FUNCTIONS,
    PARAMETERS,
    RESOURCES,
    TEMPLATE,
    TEMPLATE_PATH,
    environment,
    function_properties,
    handler_file,
    policy_statements,
)

pytestmark = pytest.mark.unit

TABLE = {"Fn::GetAtt": ["StateTable", "Arn"]}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def granted(logical_id: str) -> list[tuple[str, Any]]:
    """(action, resource) for every Allow in the function's own policies."""
    return [
        (action, resource)
        for statement in policy_statements(logical_id)
        if statement["Effect"] == "Allow"
        for action in as_list(statement["Action"])
        for resource in as_list(statement["Resource"])
    ]


@pytest.mark.parametrize("logical_id", FUNCTIONS)
def test_every_handler_imports_and_defines_its_handler(
    logical_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the template gives every function behind the API (the key inline, not SSM).
    clear_candor_env(monkeypatch)
    monkeypatch.setenv("CANDOR_ALLOWED_ORIGINS", ORIGIN)
    monkeypatch.setenv("CANDOR_SESSION_SECRET", SESSION_SECRET)
    get_settings.cache_clear()
    path, name = handler_file(logical_id)
    module = load_handler(path.parent.name)
    assert callable(getattr(module, name))


@pytest.mark.parametrize("logical_id", FUNCTIONS)
def test_every_function_logs_to_its_own_group_with_a_retention(logical_id: str) -> None:
    group = function_properties(logical_id)["LoggingConfig"]["LogGroup"]["Ref"]
    assert RESOURCES[group]["Type"] == "AWS::Logs::LogGroup"
    assert RESOURCES[group]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}
    others = {
        function_properties(f)["LoggingConfig"]["LogGroup"]["Ref"]
        for f in FUNCTIONS
        if f != logical_id
    }
    assert group not in others


@pytest.mark.parametrize("logical_id", FUNCTIONS)
def test_no_function_is_granted_a_wildcard(logical_id: str) -> None:
    for action, resource in granted(logical_id):
        assert "*" not in action, f"{logical_id}: {action}"
        assert resource != "*", f"{logical_id}: {action} on *"


def test_the_feedback_function_may_touch_only_rate_windows_session_status_and_traces() -> None:
    statements = policy_statements("FeedbackFunction")
    parameter = "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter"
    assert granted("FeedbackFunction") == [
        # The session key and the server keys, to check sessions and origins like /ask.
        ("ssm:GetParameter", {"Fn::Sub": f"{parameter}${{SessionSecretParameter}}"}),
        ("ssm:GetParameter", {"Fn::Sub": f"{parameter}${{ApiKeysParameter}}"}),
        ("dynamodb:GetItem", TABLE),
        ("dynamodb:UpdateItem", TABLE),
    ]
    (table_statement,) = [s for s in statements if "Condition" in s]
    leading = table_statement["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    # session#... holds the status a rating checks (an ended session may not rate);
    # the questions of a session's history (history#...) stay out of its reach.
    assert sorted(leading) == ["rate#*", "session#*", "trace#*"]
    # It is given no provider key and calls neither OpenAI nor Pinecone.
    names = environment("FeedbackFunction")
    assert not [name for name in names if "OPENAI" in name or "PINECONE" in name]


def test_the_handoff_function_may_touch_only_handoff_records_and_send_as_the_owner() -> None:
    statements = policy_statements("HandoffFunction")
    (table,) = [s for s in statements if s.get("Resource") == TABLE]
    assert sorted(table["Action"]) == ["dynamodb:GetItem", "dynamodb:UpdateItem"]
    assert table["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] == ["handoff#*"]
    email = [
        p["Fn::If"] for p in function_properties("HandoffFunction")["Policies"] if "Fn::If" in p
    ]
    [[condition, policy, _]] = email
    assert condition == "HandoffEmail"
    [send] = policy["Statement"]
    assert send["Action"] == "ses:SendEmail"
    assert send["Condition"] == {"StringEquals": {"ses:FromAddress": {"Ref": "HandoffEmailFrom"}}}
    # No provider key, and no grant on the sessions, traces or guards of the table.
    assert not [n for n in environment("HandoffFunction") if "OPENAI" in n or "PINECONE" in n]


def test_handoffs_are_queued_by_the_ask_function_with_a_dead_letter_queue() -> None:
    assert ("sqs:SendMessage", {"Fn::GetAtt": ["HandoffQueue", "Arn"]}) in granted("AskFunction")
    assert environment("AskFunction")["CANDOR_HANDOFF_QUEUE_URL"] == {"Ref": "HandoffQueue"}
    queue = RESOURCES["HandoffQueue"]["Properties"]
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {
        "Fn::GetAtt": ["HandoffDeadLetterQueue", "Arn"]
    }
    # The last delivery is the last attempt the function counts: it marks the hand-off failed.
    attempts = environment("HandoffFunction")["CANDOR_HANDOFF_MAX_ATTEMPTS"]
    assert str(queue["RedrivePolicy"]["maxReceiveCount"]) == attempts
    event = function_properties("HandoffFunction")["Events"]["Handoffs"]["Properties"]
    assert event["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # An attempt (a 10 s webhook and an SES call) ends well inside the visibility timeout.
    assert function_properties("HandoffFunction")["Timeout"] * 6 <= queue["VisibilityTimeout"]


def test_only_the_functions_that_call_openai_are_given_its_key() -> None:
    given = {f for f in FUNCTIONS if "CANDOR_OPENAI_API_KEY_PARAMETER" in environment(f)}
    assert given == {"AskFunction", "IngestFunction", "GapsCheckFunction"}


def test_failed_ingest_events_go_to_the_dead_letter_queue() -> None:
    config = function_properties("IngestFunction")["EventInvokeConfig"]
    assert config["DestinationConfig"]["OnFailure"] == {
        "Type": "SQS",
        "Destination": {"Fn::GetAtt": ["IngestDeadLetterQueue", "Arn"]},
    }
    queue = RESOURCES["IngestDeadLetterQueue"]
    assert queue["Type"] == "AWS::SQS::Queue"
    # The longest SQS keeps a message: two weeks to notice and redrive.
    assert queue["Properties"]["MessageRetentionPeriod"] == 14 * 86_400


def test_the_table_has_the_trace_index_the_dynamodb_store_queries() -> None:
    properties = RESOURCES["StateTable"]["Properties"]
    (index,) = properties["GlobalSecondaryIndexes"]
    assert index["IndexName"] == dynamodb_state.TRACE_INDEX
    assert [k["AttributeName"] for k in index["KeySchema"]] == list(dynamodb_state.TRACE_INDEX_KEYS)
    assert [k["KeyType"] for k in index["KeySchema"]] == ["HASH", "RANGE"]
    # insights reads the traces from the index alone, without a GetItem each.
    assert index["Projection"] == {"ProjectionType": "ALL"}
    types = {a["AttributeName"]: a["AttributeType"] for a in properties["AttributeDefinitions"]}
    assert types == {"pk": "S", "sk": "S", "day_shard": "S", "created_at": "N"}


def test_the_table_expires_items_and_can_be_restored() -> None:
    properties = RESOURCES["StateTable"]["Properties"]
    assert properties["TimeToLiveSpecification"] == {
        "AttributeName": "expires_at",
        "Enabled": True,
    }
    assert properties["PointInTimeRecoverySpecification"] == {
        "PointInTimeRecoveryEnabled": True,
        "RecoveryPeriodInDays": {"Ref": "RecoveryPeriodDays"},
    }
    # DynamoDB's bounds; 35 days, its default, unless the owner keeps less.
    recovery = PARAMETERS["RecoveryPeriodDays"]
    assert (recovery["MinValue"], recovery["MaxValue"], recovery["Default"]) == (1, 35, 35)
    assert properties["BillingMode"] == "PAY_PER_REQUEST"
    assert RESOURCES["StateTable"]["DeletionPolicy"] == "Retain"


def test_the_trace_settings_come_from_parameters() -> None:
    assert environment("AskFunction")["CANDOR_TRACE_TTL_DAYS"] == {"Ref": "TraceRetentionDays"}
    assert environment("AskFunction")["CANDOR_STORE_QUESTIONS"] == {"Ref": "StoreQuestions"}
    assert PARAMETERS["TraceRetentionDays"]["Default"] == 30


def test_the_outputs_name_what_an_owner_needs() -> None:
    outputs = TEMPLATE["Outputs"]
    assert outputs["ApiUrl"]["Value"] == {
        "Fn::Sub": "https://${Api}.execute-api.${AWS::Region}.${AWS::URLSuffix}/v1"
    }
    assert RESOURCES["Api"]["Properties"]["StageName"] == "v1"
    assert outputs["DocumentsBucketName"]["Value"] == {"Ref": "DocumentsBucket"}
    assert outputs["StateTableName"]["Value"] == {"Ref": "StateTable"}
    assert outputs["IngestDeadLetterQueueUrl"]["Value"] == {"Ref": "IngestDeadLetterQueue"}
    for logical_id in FUNCTIONS:
        name = logical_id.removesuffix("Function")
        assert outputs[f"{name}FunctionName"]["Value"] == {"Ref": logical_id}


def test_env_json_sets_only_variables_the_template_declares() -> None:
    # `sam local invoke --env-vars` silently ignores a variable the function does not
    # declare in the template, so a misspelt name there would change nothing.
    overrides: dict[str, dict[str, str]] = json.loads(
        (TEMPLATE_PATH.parent / "env.json").read_text()
    )
    for scope, variables in overrides.items():
        functions = FUNCTIONS if scope == "Parameters" else [scope]
        for name in variables:
            declared = [f for f in functions if name in environment(f)]
            assert declared, f"{scope}: no function declares {name}"
