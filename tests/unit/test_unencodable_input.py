"""Input that a JSON response cannot carry back: a 4xx with a reason, never a 500.

A lone surrogate ("\\ud800") is valid JSON and a valid Python str, but not UTF-8;
1e400 parses to infinity and NaN to NaN, neither of which strict JSON can write.
The 422 handler used to copy the offending input into its response, so encoding
that response failed and the visitor got a 500 (with a traceback of the question
in the log). A non-ASCII X-Api-Key made `hmac.compare_digest` raise TypeError
before any handler could answer: Starlette's text/plain 500.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from fastapi.testclient import TestClient

from candor.api.app import create_app
from candor.api.local import create_local_app
from tests.conftest import MakeDeps
from tests.support.edge import ORIGIN, SERVER_KEY, allowing
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

# The visitor's words, which must appear neither in a response nor in an ERROR log line.
VISITOR_TEXT = "my secret order number 4417"
ANSWERING: dict[str, list[Any]] = {
    "Triage": [{"abusive": False, "kind": "question"}] * 2,
    "judge": [True] * 2,
    "text": ["It refuses to overwrite work you have not seen [1]."] * 2,
}


def raw(client: TestClient, path: str, body: str, **headers: str) -> Any:
    """POST `body` as it is: a client may send what json.dumps would never write."""
    return client.post(
        path,
        content=body.encode("utf-8", "surrogatepass"),
        headers={"content-type": "application/json", **headers},
    )


def assert_json_refusal(response: Any, status: int, reason: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    assert body["reason"] == reason
    assert len(body["trace_id"]) == 32
    assert response.headers["x-trace-id"] == body["trace_id"]
    return body


@pytest.fixture
def chat() -> ScriptedChatModel:
    return ScriptedChatModel(ANSWERING)


@pytest.fixture
def http(make_deps: MakeDeps, chat: ScriptedChatModel) -> TestClient:
    deps = allowing(make_deps(chat))
    return TestClient(create_app(lambda: deps), headers={"Origin": ORIGIN})


# Each is a body that json.loads accepts and a JSON response cannot hold.
UNENCODABLE_ASK = {
    "lone surrogate": '{"question": "\\ud800 ' + VISITOR_TEXT + '"}',
    "lone low surrogate": '{"question": "' + VISITOR_TEXT + ' \\udfff"}',
    "top_k 1e400": '{"question": "' + VISITOR_TEXT + '", "top_k": 1e400}',
    "top_k -1e400": '{"question": "' + VISITOR_TEXT + '", "top_k": -1e400}',
    "top_k NaN": '{"question": "' + VISITOR_TEXT + '", "top_k": NaN}',
    "top_k Infinity": '{"question": "' + VISITOR_TEXT + '", "top_k": Infinity}',
    "session_id surrogate": '{"question": "' + VISITOR_TEXT + '", "session_id": "\\ud800"}',
}


@pytest.mark.parametrize("path", ["/ask", "/ask/stream"])
@pytest.mark.parametrize("body", UNENCODABLE_ASK.values(), ids=UNENCODABLE_ASK.keys())
def test_input_that_cannot_be_echoed_is_a_422_not_a_500(
    http: TestClient, chat: ScriptedChatModel, path: str, body: str
) -> None:
    response = raw(http, path, body)

    refusal = assert_json_refusal(response, 422, "invalid_request")
    assert VISITOR_TEXT not in response.text  # the input is never echoed
    assert chat.calls == []
    # A clear reason: where and what, as text any client can read.
    (problem,) = refusal["detail"]
    assert problem["loc"][0] == "body"
    assert isinstance(problem["msg"], str) and problem["msg"]
    assert set(problem) <= {"loc", "msg", "type"}


def test_a_lone_surrogate_in_the_question_says_which_field_is_wrong(http: TestClient) -> None:
    refusal = assert_json_refusal(
        raw(http, "/ask", '{"question": "\\ud800 ' + VISITOR_TEXT + '"}'), 422, "invalid_request"
    )

    (problem,) = refusal["detail"]
    assert problem["loc"] == ["body", "question"]
    assert "surrogate" in problem["msg"] or "unicode" in problem["msg"].lower()


def test_a_top_k_of_1e400_says_the_number_is_not_finite(http: TestClient) -> None:
    refusal = assert_json_refusal(
        raw(http, "/ask", '{"question": "ok?", "top_k": 1e400}'), 422, "invalid_request"
    )

    (problem,) = refusal["detail"]
    assert problem["loc"] == ["body", "top_k"]
    assert "finite" in problem["msg"]


def test_an_ordinary_422_echoes_no_input_either(http: TestClient) -> None:
    response = http.post("/ask", json={"question": VISITOR_TEXT, "top_k": 99})

    refusal = assert_json_refusal(response, 422, "invalid_request")
    assert VISITOR_TEXT not in response.text
    assert refusal["detail"][0]["loc"] == ["body", "top_k"]
    assert "less than or equal to 10" in refusal["detail"][0]["msg"]


@pytest.mark.parametrize("body", UNENCODABLE_ASK.values(), ids=UNENCODABLE_ASK.keys())
def test_a_422_logs_no_question_at_error(
    http: TestClient, body: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        raw(http, "/ask", body)

    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
    for record in caplog.records:
        assert VISITOR_TEXT not in record.getMessage()
        assert record.exc_info is None


def test_feedback_that_cannot_be_echoed_is_a_422_not_a_500(
    http: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    answer = http.post("/ask", json={"question": "What does --force-with-lease do?"}).json()
    base = {"trace_id": answer["trace_id"], "session_id": answer["session_id"]}
    bodies = [
        json.dumps(base | {"score": -1})[:-1] + ', "comment": "\\ud800 ' + VISITOR_TEXT + '"}',
        json.dumps(base)[:-1] + ', "score": 1e400}',
        json.dumps(base)[:-1] + ', "score": NaN}',
        json.dumps(base | {"score": 1})[:-1] + ', "better_answer": "' + VISITOR_TEXT + '\\udc00"}',
    ]
    with caplog.at_level(logging.DEBUG):
        for body in bodies:
            response = raw(http, "/feedback", body)
            assert_json_refusal(response, 422, "invalid_request")
            assert VISITOR_TEXT not in response.text
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_the_feedback_functions_own_app_refuses_it_the_same_way(
    make_deps: MakeDeps, chat: ScriptedChatModel
) -> None:
    from candor.api.feedback import FeedbackDeps, create_feedback_app

    deps = allowing(make_deps(chat))
    app = create_feedback_app(lambda: FeedbackDeps(deps.settings, deps.state))
    client = TestClient(app, headers={"Origin": ORIGIN})

    response = raw(client, "/feedback", '{"trace_id": "\\ud800", "score": 1e400}')

    assert_json_refusal(response, 422, "invalid_request")


# X-Api-Key: compared as the bytes it arrived as.

NON_ASCII_KEYS = [
    "clé-du-serveur".encode("latin-1"),
    "ключ".encode(),  # UTF-8 bytes, which Starlette reads as Latin-1 text
    SERVER_KEY.encode() + b"\xff",
    b"\x80",
]


@pytest.mark.parametrize("key", NON_ASCII_KEYS)
def test_a_non_ascii_api_key_is_a_json_403_not_a_text_500(
    make_deps: MakeDeps, chat: ScriptedChatModel, key: bytes
) -> None:
    deps = allowing(make_deps(chat))
    client = TestClient(create_app(lambda: deps))

    response = client.post(
        "/ask",
        json={"question": "What does --force-with-lease do?"},
        headers=[(b"x-api-key", key)],
    )

    assert_json_refusal(response, 403, "api_key_required")
    assert chat.calls == []


def test_a_non_ascii_server_key_matches_the_same_bytes(
    make_deps: MakeDeps, chat: ScriptedChatModel
) -> None:
    key = "clé-0123456789"
    deps = allowing(make_deps(chat), api_keys=key)
    client = TestClient(create_app(lambda: deps))

    sent = client.post(
        "/ask",
        json={"question": "What does --force-with-lease do?"},
        headers=[(b"x-api-key", key.encode())],
    )

    assert sent.status_code == 200, sent.text


def test_a_422_with_a_non_ascii_key_from_a_listed_origin_keeps_its_cors_headers(
    make_deps: MakeDeps, chat: ScriptedChatModel
) -> None:
    # The page's script must be able to read the refusal: a listed origin gets CORS.
    deps = allowing(make_deps(chat), api_keys=None)
    app = create_local_app(deps.settings)
    app.state.deps_provider = lambda: deps

    response = TestClient(app).post(
        "/ask",
        content=b'{"question": "\\ud800"}',
        headers=[
            (b"content-type", b"application/json"),
            (b"origin", ORIGIN.encode()),
            (b"x-api-key", b"\xe9\xff"),
        ],
    )

    assert_json_refusal(response, 422, "invalid_request")
    assert response.headers["access-control-allow-origin"] == ORIGIN
