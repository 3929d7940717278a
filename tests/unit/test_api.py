"""POST /ask and GET /health through FastAPI, with the embedded backends and a scripted model."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from candor.api.app import create_app
from tests.conftest import MakeDeps
from tests.support.api_shape import ASK_RESPONSE_KEYS
from tests.support.edge import allowing, browser
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

ANSWERING: dict[str, list[Any]] = {
    "Triage": [{"abusive": False, "kind": "question"}],
    "judge": [True],
    "text": ["It refuses to overwrite work you have not seen [1]."],
}


def client(make_deps: MakeDeps, chat: ScriptedChatModel) -> TestClient:
    deps = allowing(make_deps(chat))
    return browser(create_app(lambda: deps))


def test_ask_returns_the_documented_response_shape(make_deps: MakeDeps) -> None:
    response = client(make_deps, ScriptedChatModel(ANSWERING)).post(
        "/ask", json={"question": "What does --force-with-lease do?"}
    )
    assert response.status_code == 200
    body = response.json()
    assert set(body) == ASK_RESPONSE_KEYS
    assert body["decision"] == "answered"
    assert body["cached"] is False
    assert set(body["citations"][0]) == {
        "id",
        "source",
        "title",
        "snippet",
        "page",
        "url",
        "quote",
    }
    assert set(body["trace"][0]) == {
        "node",
        "ms",
        "tokens_in",
        "tokens_evaluated",
        "tokens_out",
        "cost_usd",
        "index_reads",
    }
    assert len(body["trace_id"]) == 32


PUSH_SENTENCE = (
    "--force-with-lease protects the remote ref: the push is refused unless the remote ref "
    "still points at the commit your remote-tracking branch records."
)


def test_each_citation_carries_the_quote_of_its_passage_and_a_repeat_from_the_cache_too(
    make_deps: MakeDeps,
) -> None:
    deps = allowing(make_deps(ScriptedChatModel(ANSWERING)), cache_enabled=True)
    http = browser(create_app(lambda: deps))

    first = http.post("/ask", json={"question": "What does --force-with-lease do?"}).json()
    repeat = http.post("/ask", json={"question": "What does --force-with-lease do?"}).json()

    assert [c["quote"] for c in first["citations"]] == [PUSH_SENTENCE]
    assert repeat["cached"] is True
    assert repeat["citations"] == first["citations"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({}, "question"),
        ({"question": ""}, "at least 1 character"),
        ({"question": "   "}, "more than whitespace"),
        ({"question": "x" * 1001}, "at most 1000 characters"),
        ({"question": "ok?", "top_k": 0}, "greater than or equal to 1"),
        ({"question": "ok?", "top_k": 11}, "less than or equal to 10"),
        ({"question": "ok?", "session_id": "../../etc"}, "session_id"),
    ],
)
def test_invalid_input_is_rejected_with_a_reason(
    make_deps: MakeDeps, body: dict[str, object], reason: str
) -> None:
    chat = ScriptedChatModel({})
    response = client(make_deps, chat).post("/ask", json=body)
    assert response.status_code == 422
    assert reason in response.text
    assert chat.calls == []


def test_ended_session_is_refused_with_403_and_a_reason(make_deps: MakeDeps) -> None:
    abusive = {"abusive": True, "kind": "question"}
    confirmed = {"insulting": True}
    chat = ScriptedChatModel({"Triage": [abusive, abusive], "Moderation": [confirmed, confirmed]})
    http = client(make_deps, chat)
    first = http.post("/ask", json={"question": "You idiot."}).json()
    http.post("/ask", json={"question": "Moron.", "session_id": first["session_id"]})
    refused = http.post("/ask", json={"question": "Hello?", "session_id": first["session_id"]})
    assert refused.status_code == 403
    assert refused.json()["reason"] == "session_ended"
    assert "ended" in refused.json()["detail"]


def test_model_failure_is_a_503_with_retry_after_and_a_fixed_reason(make_deps: MakeDeps) -> None:
    from candor.errors import ModelError

    http = client(make_deps, ScriptedChatModel({"Triage": [ModelError("timed out")]}))
    response = http.post("/ask", json={"question": "What does --force-with-lease do?"})
    assert response.status_code == 503
    assert response.json()["reason"] == "model_unavailable"
    assert int(response.headers["retry-after"]) > 0


def test_health_reports_each_dependency(make_deps: MakeDeps) -> None:
    body = client(make_deps, ScriptedChatModel({})).get("/health").json()
    assert body == {
        "status": "ok",
        "dependencies": {"index": "ok", "state": "ok", "embedder": "ok", "chat": "ok"},
    }


def test_openapi_docs_are_served(make_deps: MakeDeps) -> None:
    http = client(make_deps, ScriptedChatModel({}))
    assert http.get("/docs").status_code == 200
    assert "/ask" in http.get("/openapi.json").json()["paths"]
