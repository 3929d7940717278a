"""The Lambda handler in functions/ask, invoked with a real-shaped API Gateway v2 event."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import MakeDeps
from tests.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def load_handler_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ask_app", ROOT / "functions/ask/app.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Context:
    function_name = "candor-ask"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:candor-ask"
    aws_request_id = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


def test_handler_answers_the_api_gateway_event(make_deps: MakeDeps) -> None:
    module = load_handler_module()
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "Grade": [{"answerable": True}],
            "text": ["Stage it with git add [1]."],
        }
    )
    deps = make_deps(chat)
    module.app.state.deps_provider = lambda: deps
    event: dict[str, Any] = json.loads((ROOT / "events/ask.json").read_text())

    response = module.handler(event, Context())

    assert response["statusCode"] == 200
    body = json.loads(response["body"])
    assert body["decision"] == "answered"
    assert "git add" in body["answer"]
    assert chat.calls[0].messages[-1]["content"].count("stage a file before committing") == 1


def test_handler_rejects_a_bad_body_with_422(make_deps: MakeDeps) -> None:
    module = load_handler_module()
    chat = ScriptedChatModel({})
    deps = make_deps(chat)
    module.app.state.deps_provider = lambda: deps
    event: dict[str, Any] = json.loads((ROOT / "events/ask.json").read_text())
    event["body"] = json.dumps({"question": ""})
    response = module.handler(event, Context())
    assert response["statusCode"] == 422
    assert "at least 1 character" in response["body"]
    assert chat.calls == []
