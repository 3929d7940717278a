"""A question holding a control character is a 422 with a reason, on every way in.

NUL, the other C0 controls and DEL used to pass POST /ask, /ask/stream and
`candor ask` and reach the model (and the trace, the session history and the
cache key). No visitor types them; they come from a script, a paste gone wrong
or an attempt to confuse whatever reads the text next. Tab, newline and carriage
return are what a multi-line question is made of: they stay allowed.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from candor import cli
from candor.api.app import create_app
from tests.conftest import MakeDeps
from tests.support.edge import ORIGIN, allowing
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

# The visitor's words, which the refusal must not repeat.
VISITOR_TEXT = "my secret order number 4417"
ANSWERING: dict[str, list[Any]] = {
    "Triage": [{"abusive": False, "kind": "question"}] * 3,
    "judge": [True] * 3,
    "text": ["It refuses to overwrite work you have not seen [1]."] * 3,
}

# Every C0 control but tab, newline and carriage return, DEL, and every C1 control
# (U+0080-U+009F: U+009B is CSI, which a terminal reads as an escape sequence).
CONTROLS = (
    [chr(c) for c in range(0x20) if chr(c) not in "\t\n\r"]
    + ["\x7f"]
    + [chr(c) for c in range(0x80, 0xA0)]
)


@pytest.fixture
def chat() -> ScriptedChatModel:
    return ScriptedChatModel(ANSWERING)


@pytest.fixture
def http(make_deps: MakeDeps, chat: ScriptedChatModel) -> TestClient:
    deps = allowing(make_deps(chat))
    return TestClient(create_app(lambda: deps), headers={"Origin": ORIGIN})


@pytest.mark.parametrize("path", ["/ask", "/ask/stream"])
@pytest.mark.parametrize("control", CONTROLS, ids=[f"U+{ord(c):04X}" for c in CONTROLS])
def test_a_control_character_in_a_question_is_a_422_with_a_reason(
    http: TestClient, chat: ScriptedChatModel, path: str, control: str
) -> None:
    question = f"What does --force-with-lease do? {VISITOR_TEXT}{control} and more"

    response = http.post(path, json={"question": question})

    assert response.status_code == 422, response.text
    body = response.json()
    assert body["reason"] == "invalid_request"
    (problem,) = body["detail"]
    assert problem["loc"] == ["body", "question"]
    assert "control character" in problem["msg"]
    assert f"U+{ord(control):04X}" in problem["msg"]  # which one, not the text around it
    assert VISITOR_TEXT not in response.text
    assert chat.calls == []


@pytest.mark.parametrize("control", ["\x00", "\x1f", "\x0b"])
def test_a_question_of_control_characters_alone_says_control_not_whitespace(
    http: TestClient, control: str
) -> None:
    # Python's str.strip() removes \x0b and \x1c-\x1f as whitespace: the control
    # check must see the question before it is stripped.
    response = http.post("/ask", json={"question": control * 3})

    assert response.status_code == 422
    assert "control character" in response.json()["detail"][0]["msg"]


def test_tab_newline_and_carriage_return_are_still_allowed(
    http: TestClient, chat: ScriptedChatModel
) -> None:
    response = http.post("/ask", json={"question": "What does\t--force-with-lease\r\ndo\nexactly?"})

    assert response.status_code == 200, response.text
    assert chat.calls != []


def test_candor_ask_refuses_a_control_character_with_the_same_reason(
    make_deps: MakeDeps,
    chat: ScriptedChatModel,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    deps = allowing(make_deps(chat))
    monkeypatch.setattr("candor.factory.build_deps", lambda settings: deps)

    code = cli.main(["ask", f"What does --force-with-lease do?\x00 {VISITOR_TEXT}"])

    assert code == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "question" in err and "control character" in err and "U+0000" in err
    assert VISITOR_TEXT not in err
    assert chat.calls == []
