"""The edge of the routes for servers and assistants: /mcp and /v1 (candor.api.edge.KeyedRoutes).

A server key always (X-Api-Key or Authorization: Bearer), whatever the Origin; each
refusal in the route's own protocol: a JSON-RPC error on /mcp, OpenAI's error object
on /v1. The scripted model's recorded calls show that a refusal makes none.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from candor.api.local import create_local_app
from candor.deps import Deps
from tests.conftest import MakeDeps
from tests.support.edge import ORIGIN, SERVER_KEY, allowing
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
MCP_HEADERS = {"accept": "application/json, text/event-stream"}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
ASKED = [{"role": "user", "content": "Hi?"}]
COMPLETION: dict[str, Any] = {"model": "candor", "messages": ASKED}


@pytest.fixture
def chat() -> ScriptedChatModel:
    return ScriptedChatModel({})


@pytest.fixture
def deps(make_deps: MakeDeps, chat: ScriptedChatModel) -> Deps:
    return allowing(make_deps(chat))


@pytest.fixture
def http(deps: Deps) -> Iterator[TestClient]:
    app = create_local_app(deps.settings, port=8123)
    app.state.deps_provider = lambda: deps
    with TestClient(app) as client:
        yield client


def mcp(http: TestClient, body: Any = LIST_TOOLS, **headers: str) -> Any:
    return http.post("/mcp", json=body, headers=MCP_HEADERS | headers)


def assert_json_rpc_refusal(response: Any, status: int, code: int, reason: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == code
    assert body["error"]["data"]["reason"] == reason
    assert len(body["error"]["data"]["trace_id"]) == 32
    assert body["error"]["data"]["trace_id"] == response.headers["x-trace-id"]


def assert_openai_refusal(response: Any, status: int, kind: str, code: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) >= {"message", "type", "param", "code"}
    assert (error["type"], error["code"]) == (kind, code)
    assert error["trace_id"] == response.headers["x-trace-id"]


def test_mcp_without_a_key_is_401_as_a_json_rpc_error(
    http: TestClient, chat: ScriptedChatModel
) -> None:
    response = mcp(http)
    assert_json_rpc_refusal(response, 401, -32061, "invalid_api_key")
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert chat.calls == []


def test_mcp_with_a_wrong_key_is_401(http: TestClient) -> None:
    assert_json_rpc_refusal(mcp(http, **{"x-api-key": "nope"}), 401, -32061, "invalid_api_key")
    bearer = mcp(http, authorization="Bearer nope")
    assert_json_rpc_refusal(bearer, 401, -32061, "invalid_api_key")


@pytest.mark.parametrize(
    "headers", [{"x-api-key": SERVER_KEY}, {"authorization": f"Bearer {SERVER_KEY}"}]
)
def test_mcp_takes_the_key_in_either_header(http: TestClient, headers: dict[str, str]) -> None:
    response = mcp(http, **headers)
    assert response.status_code == 200, response.text
    tools = response.json()["result"]["tools"]
    assert [tool["name"] for tool in tools] == ["ask_docs", "search_docs"]


def test_a_listed_origin_does_not_stand_in_for_a_key(http: TestClient) -> None:
    # The widget's origin lets a browser call /ask; it is no credential for /mcp or /v1.
    assert_json_rpc_refusal(mcp(http, origin=ORIGIN), 401, -32061, "invalid_api_key")
    listed = http.get("/v1/models", headers={"origin": ORIGIN})
    assert_openai_refusal(listed, 401, "invalid_request_error", "invalid_api_key")


def test_a_foreign_origin_is_refused_even_with_a_key(http: TestClient) -> None:
    response = mcp(http, origin="https://evil.example", **{"x-api-key": SERVER_KEY})
    assert_json_rpc_refusal(response, 403, -32063, "origin_not_allowed")
    assert "access-control-allow-origin" not in response.headers


def test_mcp_refuses_a_body_that_is_not_json_as_a_json_rpc_error(http: TestClient) -> None:
    response = http.post(
        "/mcp",
        content=b"tools/list",
        headers=MCP_HEADERS | {"x-api-key": SERVER_KEY, "content-type": "text/plain"},
    )
    assert_json_rpc_refusal(response, 415, -32600, "unsupported_media_type")


def test_mcp_keeps_the_16_kb_limit(http: TestClient) -> None:
    call = LIST_TOOLS | {"params": {"padding": "x" * 20_000}}
    response = mcp(http, call, **{"x-api-key": SERVER_KEY})
    assert_json_rpc_refusal(response, 413, -32600, "body_too_large")


def test_openai_routes_without_a_key_are_401_in_openais_shape(
    http: TestClient, chat: ScriptedChatModel
) -> None:
    assert_openai_refusal(http.get("/v1/models"), 401, "invalid_request_error", "invalid_api_key")
    completion = http.post("/v1/chat/completions", json=COMPLETION)
    assert_openai_refusal(completion, 401, "invalid_request_error", "invalid_api_key")
    wrong = http.post(
        "/v1/chat/completions", json=COMPLETION, headers={"authorization": "Bearer nope"}
    )
    assert_openai_refusal(wrong, 401, "invalid_request_error", "invalid_api_key")
    assert chat.calls == []


def test_openai_routes_take_the_key_as_a_bearer_token(http: TestClient) -> None:
    response = http.get("/v1/models", headers={"authorization": f"Bearer {SERVER_KEY}"})
    assert response.status_code == 200
    assert [model["id"] for model in response.json()["data"]] == ["candor"]


def test_a_chat_client_may_send_a_long_conversation(http: TestClient) -> None:
    # Chat clients resend every turn: /v1 takes 256 KB where /ask takes 16 KB, and the
    # route reads only the last turns. 40 KB of history is refused no more.
    history = [{"role": "user", "content": "x" * 900}, {"role": "assistant", "content": "y"}]
    body = COMPLETION | {"messages": history * 40 + ASKED, "model": "gpt-4"}
    response = http.post("/v1/chat/completions", json=body, headers={"x-api-key": SERVER_KEY})
    # Past the edge: refused by the route itself, for its model.
    assert_openai_refusal(response, 404, "invalid_request_error", "model_not_found")
    huge = body | {"messages": history * 400}
    refused = http.post("/v1/chat/completions", json=huge, headers={"x-api-key": SERVER_KEY})
    assert_openai_refusal(refused, 413, "invalid_request_error", "body_too_large")


def test_a_body_that_is_not_utf8_is_a_400_in_openais_shape_not_a_500(http: TestClient) -> None:
    # FastAPI's own HTTPException for a body it cannot decode (found by the fuzz pass).
    response = http.post(
        "/v1/chat/completions",
        content=b'{"model": "\xff\xfe"}',
        headers={"x-api-key": SERVER_KEY, "content-type": "application/json"},
    )
    assert_openai_refusal(response, 400, "invalid_request_error", "bad_request")


def test_the_ask_functions_app_does_not_import_the_mcp_sdk_until_mcp_is_called() -> None:
    # The Lambda's cold start pays for every import; most requests never reach /mcp.
    probe = (
        "import sys; import candor.api.app; "
        "assert not [m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')], "
        "sorted(m for m in sys.modules if m.startswith('mcp'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "layers" / "candor")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
