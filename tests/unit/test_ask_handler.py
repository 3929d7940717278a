"""The Lambda handler in functions/ask, invoked with a real-shaped API Gateway v2 event."""

from __future__ import annotations

import json

import pytest

from tests.conftest import MakeDeps
from tests.support.fakes import ScriptedChatModel
from tests.support.lambda_ import LambdaContext, load_event, load_handler

pytestmark = pytest.mark.unit


def test_handler_answers_the_api_gateway_event(make_deps: MakeDeps) -> None:
    module = load_handler("ask")
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "Grade": [{"answerable": True}],
            "text": ["Stage it with git add [1]."],
        }
    )
    deps = make_deps(chat)
    module.app.state.deps_provider = lambda: deps
    event = load_event("ask.json")

    response = module.handler(event, LambdaContext("candor-ask"))

    assert response["statusCode"] == 200
    body = json.loads(response["body"])
    assert body["decision"] == "answered"
    assert "git add" in body["answer"]
    assert chat.calls[0].messages[-1]["content"].count("stage a file before committing") == 1


def test_handler_rejects_a_bad_body_with_422(make_deps: MakeDeps) -> None:
    module = load_handler("ask")
    chat = ScriptedChatModel({})
    deps = make_deps(chat)
    module.app.state.deps_provider = lambda: deps
    event = load_event("ask.json")
    event["body"] = json.dumps({"question": ""})
    response = module.handler(event, LambdaContext("candor-ask"))
    assert response["statusCode"] == 422
    assert "at least 1 character" in response["body"]
    assert chat.calls == []
