"""The Lambda handler in functions/ask, invoked with a real-shaped API Gateway v2 event."""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest

from candor.errors import ConfigurationError
from tests.conftest import MakeDeps, clear_candor_env
from tests.support.edge import ORIGIN, SESSION_SECRET
from tests.support.fakes import ScriptedChatModel
from tests.support.lambda_ import LambdaContext, load_event, load_handler, set_header

pytestmark = pytest.mark.unit

ANSWERING: dict[str, list[Any]] = {
    "Triage": [{"abusive": False, "kind": "question"}],
    "judge": [True],
    "text": ["Stage it with git add [1]."],
}


@pytest.fixture
def deployed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment the template gives the function (the secret inline instead of SSM)."""
    clear_candor_env(monkeypatch)
    monkeypatch.setenv("CANDOR_ALLOWED_ORIGINS", ORIGIN)
    monkeypatch.setenv("CANDOR_SESSION_SECRET", SESSION_SECRET)


def handler_with(make_deps: MakeDeps, chat: ScriptedChatModel) -> ModuleType:
    module = load_handler("ask")
    deps = make_deps(chat)
    module.app.state.deps_provider = lambda: deps
    return module


@pytest.mark.usefixtures("deployed")
def test_handler_answers_the_api_gateway_event(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel(ANSWERING)
    module = handler_with(make_deps, chat)

    response = module.handler(load_event("ask.json"), LambdaContext("candor-ask"))

    assert response["statusCode"] == 200
    body = json.loads(response["body"])
    assert body["decision"] == "answered"
    assert "git add" in body["answer"]
    assert chat.calls[0].messages[-1]["content"].count("stage a file before committing") == 1
    assert response["headers"]["access-control-allow-origin"] == ORIGIN


@pytest.mark.usefixtures("deployed")
def test_handler_rejects_a_bad_body_with_422(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel({})
    module = handler_with(make_deps, chat)
    event = load_event("ask.json")
    event["body"] = json.dumps({"question": ""})
    response = module.handler(event, LambdaContext("candor-ask"))
    assert response["statusCode"] == 422
    assert "at least 1 character" in response["body"]
    assert chat.calls == []


@pytest.mark.usefixtures("deployed")
def test_handler_refuses_an_event_from_a_foreign_origin_without_a_model_call(
    make_deps: MakeDeps,
) -> None:
    chat = ScriptedChatModel({})
    module = handler_with(make_deps, chat)
    event = load_event("ask.json")
    set_header(event, "origin", "https://evil.example")

    response = module.handler(event, LambdaContext("candor-ask"))

    assert response["statusCode"] == 403
    assert json.loads(response["body"])["reason"] == "origin_not_allowed"
    assert chat.calls == []


@pytest.mark.usefixtures("deployed")
def test_on_lambda_loopback_gets_no_pass_without_an_origin(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel({})
    module = handler_with(make_deps, chat)
    event = load_event("ask.json")
    set_header(event, "origin", None)
    event["requestContext"]["identity"]["sourceIp"] = "127.0.0.1"

    response = module.handler(event, LambdaContext("candor-ask"))

    assert response["statusCode"] == 403
    assert json.loads(response["body"])["reason"] == "api_key_required"


@pytest.mark.parametrize("missing", ["CANDOR_ALLOWED_ORIGINS", "CANDOR_SESSION_SECRET"])
def test_the_function_fails_to_start_without_its_origins_or_session_key(
    deployed: None, monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    monkeypatch.delenv(missing)
    with pytest.raises(ConfigurationError, match=missing):
        load_handler("ask")


def test_the_function_fails_to_start_when_no_address_share_covers_one_request(
    deployed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With gpt-4o-mini one request reserves about $0.04; 5% of $0.50 is $0.025: every
    # visitor would be refused, each told that their address had used its share.
    monkeypatch.setenv("CANDOR_CHAT_BACKEND", "openai")
    monkeypatch.setenv("CANDOR_BUDGET_DAILY_USD", "0.5")
    with pytest.raises(ConfigurationError, match="CANDOR_BUDGET_DAILY_USD"):
        load_handler("ask")
