"""The one error table: outages are 503 with Retry-After, nothing internal reaches the public,
a failing settle keeps the original error, and a paid answer survives a failing write.

The backends are real (SQLite, a botocore client) or real ports with a fault
injected around them (tests/support/outages.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sqlite3
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError
from fastapi.testclient import TestClient

from candor import service
from candor.api import errors as table
from candor.api.app import create_app
from candor.backends.dynamodb_state import DynamoDBStateStore
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.errors import (
    CandorError,
    ConfigurationError,
    DeadlineExceededError,
    IndexError_,
    ModelError,
    RateLimitedError,
    StateStoreError,
)
from tests.conftest import MakeDeps
from tests.support.edge import allowing, browser
from tests.support.fakes import ScriptedChatModel
from tests.support.outages import INTERNAL_TEXT, DownIndex, FailingState

pytestmark = pytest.mark.unit

QUESTION = "What does --force-with-lease do?"
ANSWERING: dict[str, list[Any]] = {
    "Triage": [{"abusive": False, "kind": "question"}],
    "judge": [True],
    "text": ["It refuses to overwrite work you have not seen [1]."],
}


def http(deps: Deps) -> TestClient:
    allowed = allowing(deps)
    return browser(create_app(lambda: allowed))


def assert_public(response: Any, status: int, reason: str) -> dict[str, Any]:
    """A table response: the status, the reason, a trace id, and nothing from inside."""
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["reason"] == reason
    assert len(body["trace_id"]) == 32
    assert response.headers["x-trace-id"] == body["trace_id"]
    for secret in INTERNAL_TEXT.split():
        assert secret not in response.text
    return body


# Outages: 503 with Retry-After, a fixed message.


def test_an_index_outage_is_a_503_with_a_fixed_message(make_deps: MakeDeps) -> None:
    deps = dataclasses.replace(make_deps(ScriptedChatModel(ANSWERING)), index=DownIndex())

    response = http(deps).post("/ask", json={"question": QUESTION})

    body = assert_public(response, 503, "index_unavailable")
    assert body["detail"] == "the document index is unavailable; try again shortly"
    assert int(response.headers["retry-after"]) > 0


@pytest.fixture
def locked_state(tmp_path: Path) -> Iterator[SqliteStateStore]:
    """The SQLite state store while another process holds the file's write lock."""
    path = tmp_path / "locked" / "state.sqlite3"
    store = SqliteStateStore(path, timeout=0.1)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    yield store
    other.execute("ROLLBACK")
    other.close()
    store.close()


def test_a_locked_sqlite_state_store_is_a_503_not_a_500(
    make_deps: MakeDeps, locked_state: SqliteStateStore
) -> None:
    chat = ScriptedChatModel({})
    deps = dataclasses.replace(make_deps(chat), state=locked_state)

    response = http(deps).post("/ask", json={"question": QUESTION})

    assert_public(response, 503, "state_unavailable")
    assert chat.calls == []


def test_the_sqlite_state_store_turns_database_is_locked_into_a_state_store_error(
    locked_state: SqliteStateStore,
) -> None:
    with pytest.raises(StateStoreError) as raised:
        locked_state.hit_rate_limit("k", window_seconds=60, limit=5, now=0.0)
    assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
    assert "locked" in str(raised.value.__cause__)


def unreachable_dynamodb() -> DynamoDBStateStore:
    """A real botocore client whose every request fails before it leaves: no endpoint."""
    client = boto3.client(
        "dynamodb",
        region_name="eu-west-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )

    def refuse(**_: Any) -> None:
        raise EndpointConnectionError(endpoint_url="https://dynamodb.eu-west-1.amazonaws.com")

    client.meta.events.register("before-send.dynamodb", refuse)
    return DynamoDBStateStore("candor-state", client=client)


def test_a_botocore_error_from_dynamodb_is_a_503_not_a_500(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel({})
    deps = dataclasses.replace(make_deps(chat), state=unreachable_dynamodb())

    response = http(deps).post("/ask", json={"question": QUESTION})

    body = assert_public(response, 503, "state_unavailable")
    assert "amazonaws" not in body["detail"]
    assert chat.calls == []


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.get_session("s"),
        lambda s: s.hit_rate_limit("k", window_seconds=60, limit=5, now=0.0),
        lambda s: s.cache_put(_key(), "{}", expires_at=1),
    ],
    ids=["GetItem", "conditional UpdateItem", "UpdateItem"],
)
def test_the_dynamodb_store_turns_botocore_errors_into_state_store_errors(call: Any) -> None:
    with pytest.raises(StateStoreError) as raised:
        call(unreachable_dynamodb())
    assert isinstance(raised.value.__cause__, EndpointConnectionError)


def _key() -> Any:
    from candor.ports import CacheKey

    return CacheKey("q", 0, "f")


# Nothing internal reaches the public; the log has it, under the trace id.


def test_a_model_errors_text_stays_in_the_log_under_the_trace_id(
    make_deps: MakeDeps, caplog: pytest.LogCaptureFixture
) -> None:
    chat = ScriptedChatModel(
        {"Triage": [ModelError(f"openai: AuthenticationError: {INTERNAL_TEXT}")]}
    )

    with caplog.at_level(logging.ERROR, logger="candor.api"):
        response = http(make_deps(chat)).post("/ask", json={"question": QUESTION})

    body = assert_public(response, 503, "model_unavailable")
    (record,) = [r for r in caplog.records if getattr(r, "trace_id", None) == body["trace_id"]]
    assert INTERNAL_TEXT in record.getMessage()


def test_a_configuration_errors_text_does_not_reach_the_public(make_deps: MakeDeps) -> None:
    deps = allowing(make_deps(ScriptedChatModel({})))
    calls = 0

    def provider() -> Deps:
        nonlocal calls
        calls += 1
        if calls > 1:  # the edge reads the settings first; the route's build fails
            raise ConfigurationError(f"cannot read SSM parameter {INTERNAL_TEXT}")
        return deps

    response = browser(create_app(provider)).post("/ask", json={"question": QUESTION})

    body = assert_public(response, 503, "misconfigured")
    assert "SSM" not in body["detail"]


def test_a_true_bug_is_a_generic_500_with_a_trace_id(
    make_deps: MakeDeps, caplog: pytest.LogCaptureFixture
) -> None:
    chat = ScriptedChatModel({"Triage": [ZeroDivisionError(INTERNAL_TEXT)]})

    with caplog.at_level(logging.ERROR, logger="candor.api"):
        response = http(make_deps(chat)).post("/ask", json={"question": QUESTION})

    body = assert_public(response, 500, "internal_error")
    assert body["detail"] == "something went wrong on our side"
    logged = [r for r in caplog.records if getattr(r, "trace_id", None) == body["trace_id"]]
    assert logged and logged[0].exc_info is not None


def _subclasses(kind: type[CandorError]) -> set[type[CandorError]]:
    found = set(kind.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def test_every_candor_error_has_its_own_row_and_none_is_a_500() -> None:
    own = {kind for kind, _ in table.TABLE}
    for kind in _subclasses(CandorError):
        assert kind in own, f"{kind.__name__} has no row in candor.api.errors.TABLE"
    assert all(row.status != 500 for _, row in table.TABLE)


@pytest.mark.parametrize(
    "outage",
    [ModelError("timed out"), IndexError_(), StateStoreError(), DeadlineExceededError()],
)
def test_an_outage_is_a_503_with_retry_after(outage: CandorError) -> None:
    response = table.error_response(outage, "0" * 32)
    assert response.status_code == 503
    assert int(response.headers["retry-after"]) > 0


def test_a_rows_own_message_is_the_one_candor_wrote_for_the_visitor() -> None:
    response = table.error_response(RateLimitedError(7, "too many requests: try in 7 s"), "0" * 32)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "7"
    assert b"too many requests: try in 7 s" in response.body


# A failing settle keeps the original error; a paid answer survives a failing write.


def test_a_failing_settle_keeps_the_original_model_error(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel({"Triage": [ModelError("timed out")]})
    deps = make_deps(chat)
    state = FailingState(deps.state, {"settle_budget"}, StateStoreError("DynamoDB throttled"))

    with pytest.raises(ModelError):
        asyncio.run(service.ask(dataclasses.replace(deps, state=state), QUESTION))

    assert state.failed == ["settle_budget"]


def test_a_failing_settle_answers_the_visitor_with_the_model_error(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel({"Triage": [ModelError("timed out")]})
    deps = make_deps(chat)
    state = FailingState(deps.state, {"settle_budget"}, StateStoreError("DynamoDB throttled"))

    response = http(dataclasses.replace(deps, state=state)).post(
        "/ask", json={"question": QUESTION}
    )

    assert_public(response, 503, "model_unavailable")


@pytest.mark.parametrize("write", ["cache_put", "append_turn", "settle_budget"])
def test_a_paid_answer_is_returned_when_a_write_after_it_fails(
    make_deps: MakeDeps, write: str
) -> None:
    deps = make_deps(ScriptedChatModel(ANSWERING))
    state = FailingState(deps.state, {write}, StateStoreError("database is locked"))
    before = service.write_failures[write.removesuffix("_budget")]

    result = asyncio.run(service.ask(dataclasses.replace(deps, state=state), QUESTION))

    assert result.decision == "answered"
    assert "[1]" in result.answer or result.citations
    assert state.failed == [write]
    assert service.write_failures[write.removesuffix("_budget")] == before + 1


def test_a_paid_answer_reaches_the_visitor_when_caching_it_fails(make_deps: MakeDeps) -> None:
    deps = make_deps(ScriptedChatModel(ANSWERING))
    state = FailingState(deps.state, {"cache_put", "append_turn"}, StateStoreError("locked"))

    response = http(dataclasses.replace(deps, state=state)).post(
        "/ask", json={"question": QUESTION}
    )

    assert response.status_code == 200
    assert response.json()["decision"] == "answered"


def test_the_trace_id_of_an_answer_is_the_one_the_edge_gave_the_request(
    make_deps: MakeDeps,
) -> None:
    response = http(make_deps(ScriptedChatModel(ANSWERING))).post(
        "/ask", json={"question": QUESTION}
    )
    assert response.json()["trace_id"] == response.headers["x-trace-id"]


def test_the_settled_ledger_is_left_holding_the_reservation_when_settle_fails(
    make_deps: MakeDeps,
) -> None:
    # Erring towards the cap: the hold stays rather than the ledger going wrong.
    import time

    from candor import guards

    deps = make_deps(ScriptedChatModel(ANSWERING))
    state = FailingState(deps.state, {"settle_budget"}, StateStoreError("throttled"))
    asyncio.run(service.ask(dataclasses.replace(deps, state=state), QUESTION))
    held = deps.state.budget_spent(guards.daily_ledger(time.time()))
    assert held == guards.reservation_usd(deps.settings, "scripted") > Decimal(0)
