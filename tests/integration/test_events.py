"""Every event in events/ through the real handler that receives it, as `make invoke` runs it.

The HTTP events (API Gateway REST API proxy events) go to the function whose
template route matches their method and resource;
the S3 events to the ingest function, with S3 in process (moto) holding the
objects of events/objects/. The chat model is scripted; everything else is the
embedded default in a temporary folder.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import unquote_plus

import pytest

from candor.api.feedback import FeedbackDeps
from candor.backends.sqlite_state import SqliteStateStore
from candor.ports import StoredTrace
from candor.settings import Settings
from scripts.invoke import OBJECTS, invoke, invoke_sync, lambda_environment, with_signed_session
from tests.conftest import MakeDeps
from tests.support.edge import allowing
from tests.support.fakes import ScriptedChatModel
from tests.support.lambda_ import EVENTS, load_event
from tests.support.sites import listed_pages, loopback_only
from tests.unit.test_template import RESOURCES, api_routes, route_function

__all__ = ["loopback_only"]

pytestmark = pytest.mark.integration

EVENT_FILES = sorted(p.name for p in EVENTS.glob("*.json"))
HTTP_EVENTS = [name for name in EVENT_FILES if "httpMethod" in load_event(name)]
SYNC_EVENTS = [name for name in EVENT_FILES if name.startswith("sync-")]
SQS_EVENTS = [
    name
    for name in EVENT_FILES
    if name not in SYNC_EVENTS
    and any(r.get("eventSource") == "aws:sqs" for r in load_event(name).get("Records", []))
]
S3_EVENTS = [name for name in EVENT_FILES if name not in HTTP_EVENTS + SQS_EVENTS + SYNC_EVENTS]


def function_for_route(method: str, resource: str) -> str:
    """ask, feedback or ingest: the function the template gives this route."""
    route = (method, resource)
    assert route in api_routes(), f"no route {method} {resource}"
    return Path(RESOURCES[route_function(route)]["Properties"]["CodeUri"]).name


@pytest.fixture
def lambda_env(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> Iterator[None]:
    for name, value in lambda_environment("test").items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CANDOR_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("CANDOR_EMBEDDER_BACKEND", "hashing")
    yield


def test_the_events_folder_holds_http_and_s3_events() -> None:
    # Guards the parametrised tests below against passing because they saw nothing.
    assert {"ask.json", "ask-with-session.json", "feedback.json", "health.json"} <= set(HTTP_EVENTS)
    assert {"mcp.json", "chat-completions.json"} <= set(HTTP_EVENTS)
    assert {"s3-put.json", "s3-delete.json", "s3-test-event.json"} <= set(S3_EVENTS)
    assert SQS_EVENTS == ["gaps-sqs.json", "handoff-sqs.json"]
    assert {"sync-schedule.json", "sync-step.json"} <= set(SYNC_EVENTS)


def answering() -> ScriptedChatModel:
    return ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": ["Stage it with git add [1]."],
        }
    )


@pytest.mark.parametrize("name", HTTP_EVENTS)
def test_every_http_event_is_answered_by_its_function(
    name: str, lambda_env: None, make_deps: MakeDeps, state: SqliteStateStore
) -> None:
    event = with_signed_session(load_event(name))
    function = function_for_route(event["httpMethod"], event["resource"])
    deps = allowing(make_deps(answering()), session_secret=os.environ["CANDOR_SESSION_SECRET"])
    if function == "feedback":
        # The trace the event rates, asked by the event's session.
        body = json.loads(event["body"])
        state.put_trace(StoredTrace(body["trace_id"], body["session_id"], time.time(), 2**31, "{}"))

    def prepare(module: ModuleType) -> None:
        module.app.state.deps_provider = lambda: deps
        module.app.state.feedback_deps_provider = lambda: FeedbackDeps(deps.settings, state)

    response = invoke(function, event, prepare=prepare)

    assert response["statusCode"] == 200, response["body"]
    assert response["headers"]["content-type"] == "application/json"
    # MCP answers a refused call with 200 too: its JSON-RPC error is in the body.
    assert "error" not in json.loads(response["body"]), response["body"]


def expected_status(record: dict[str, Any]) -> str:
    key = unquote_plus(record["s3"]["object"]["key"])
    if not record["eventName"].startswith("ObjectCreated") or not (OBJECTS / key).is_file():
        return "absent"  # no object, and nothing indexed under the key yet
    return "failed" if "scanned" in key else "changed"  # a PDF with no text


@pytest.mark.parametrize("name", S3_EVENTS)
def test_every_s3_event_is_reconciled_by_the_ingest_function(name: str, lambda_env: None) -> None:
    event = load_event(name)

    result = invoke("ingest", event)

    records = event.get("Records", [])
    assert [r["source"] for r in result["records"]] == [
        unquote_plus(r["s3"]["object"]["key"]) for r in records
    ]
    assert [r["status"] for r in result["records"]] == [expected_status(r) for r in records]


def test_a_queued_gaps_check_checks_the_open_gaps_on_the_owners_budget(
    lambda_env: None, make_deps: MakeDeps, state: SqliteStateStore
) -> None:
    from candor.backends.sqlite_gaps import SqliteGaps
    from candor.service import ask

    # Given a question the documents did not answer when it was asked
    declining = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [False, False],
            "Rewrite": [{"query": "force push"}],
        }
    )
    question = "What does --force-with-lease do?"
    assert asyncio.run(ask(make_deps(declining), question)).decision == "declined"
    deps = make_deps(answering_with("It refuses to overwrite work you have not seen [1]."))
    gaps = SqliteGaps(deps.settings.state_path)

    def prepare(module: ModuleType) -> None:
        setattr(module, "dependencies", lambda: (deps, gaps))  # noqa: B010

    # When the ingest function's request comes (the documents changed)
    summary = invoke("gaps", load_event("gaps-sqs.json"), prepare=prepare)

    # Then the gap opened from that question is closed, on the owner's ledger
    (closed,) = summary["closed"]
    assert summary["requests"] == 1 and summary["budget_exhausted"] is False
    saved = gaps.get_gap(deps.settings.index_name, closed)
    assert saved is not None and saved.closed_by == ("git-push.html",)
    gaps.close()


def answering_with(text: str) -> ScriptedChatModel:
    return ScriptedChatModel(
        {"Triage": [{"abusive": False, "kind": "question"}], "judge": [True], "text": [text]}
    )


@pytest.mark.parametrize("name", [n for n in SQS_EVENTS if n.startswith("handoff")])
def test_a_queued_handoff_is_forwarded_by_the_handoff_function(
    name: str, lambda_env: None, monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    from candor.backends.sqlite_handoffs import SqliteHandoffStore
    from candor.handoffs.store import Handoff
    from candor.handoffs.transcript import Content
    from tests.support.webhook_server import webhook_receiver

    event = load_event(name)
    handoff_id = json.loads(event["Records"][0]["body"])["handoff_id"]
    content = Content("visitor@example.org", "Please help.", "Example Docs", "conversation")
    SqliteHandoffStore(settings.state_path).put_handoff(
        Handoff(handoff_id, "s", time.time(), 2**31, content.to_json())
    )
    with webhook_receiver(statuses=[503]) as receiver:
        monkeypatch.setenv("CANDOR_HANDOFF_WEBHOOK_URL", receiver.url)
        monkeypatch.setenv("CANDOR_HANDOFF_WEBHOOK_SECRET", "webhook-secret-0123456789")

        failed = invoke("handoff", event)
        delivered = invoke("handoff", event)

    message_id = event["Records"][0]["messageId"]
    assert failed == {"batchItemFailures": [{"itemIdentifier": message_id}]}
    assert delivered == {"batchItemFailures": []}
    assert [r.status for r in receiver.received] == [503, 200]


@pytest.mark.usefixtures("loopback_only")
@pytest.mark.parametrize("name", SYNC_EVENTS)
def test_every_sync_event_syncs_the_fixture_site_into_moto_s3(name: str, lambda_env: None) -> None:
    # As `make invoke FN=sync EVENT=events/<name>` runs it: the fixture site on loopback.
    result = invoke_sync(load_event(name))

    (last,) = result["invocations"][-1]["steps"]
    assert last["status"] == "finished"
    assert len(result["objects"]) == len(listed_pages())
    assert all(o["key"].startswith("site/") and o["url"] for o in result["objects"])
