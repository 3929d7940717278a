"""`candor ask`: the answer streams on a terminal, steps on stderr; `--json` is /ask's JSON."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from candor import cli
from candor.api.app import create_app
from candor.deps import Deps
from candor.graph import prompts
from tests.conftest import MakeDeps
from tests.support.edge import allowing, browser
from tests.support.fakes import ScriptedChatModel, Streamed

pytestmark = pytest.mark.unit

QUESTION = "What does --force-with-lease do?"


def answering(text: Any) -> ScriptedChatModel:
    return ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": [text],
        }
    )


def show(deps: Deps) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    asyncio.run(cli.ask_and_show(deps, QUESTION, live=True, out=out, err=err))
    return out.getvalue(), err.getvalue()


def test_on_a_terminal_the_answer_streams_to_stdout_and_the_steps_to_stderr(
    make_deps: MakeDeps,
) -> None:
    pieces = (" It refuses ", "to overwrite ", "work [1].")
    out, err = show(make_deps(answering(Streamed(pieces))))

    assert out == "It refuses to overwrite work [1].\n"  # once: it was the final answer
    steps = [line.split(":")[0].strip() for line in err.splitlines()]
    assert steps == ["moderate", "route", "retrieve", "grade", "generate"]


def test_a_streamed_reply_that_ends_declined_is_followed_by_the_decline(
    make_deps: MakeDeps,
) -> None:
    deps = make_deps(answering("Bananas ripen faster in paper bags."))

    out, err = show(deps)

    decline = prompts.decline(deps.settings.site_name, deps.settings.contact)
    assert out == f"Bananas ripen faster in paper bags.\n{decline}\n"
    assert "declines" in err


def test_json_prints_exactly_the_post_ask_response(
    make_deps: MakeDeps, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    reply = "It refuses to overwrite work you have not seen [1]."
    # The command builds its dependencies from settings; here, the scripted ones.
    # No cache: the second run would answer from the first one's.
    deps = allowing(make_deps(answering(reply)), cache_enabled=False)
    monkeypatch.setattr("candor.factory.build_deps", lambda settings: deps)
    api = allowing(make_deps(answering(reply)), cache_enabled=False)
    http: TestClient = browser(create_app(lambda: api))

    assert cli.main(["ask", QUESTION, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    expected = http.post("/ask", json={"question": QUESTION}).json()

    assert set(printed) == set(expected)
    for body in (printed, expected):
        body.pop("trace_id"), body.pop("session_id")
        for step in body["trace"]:
            step.pop("ms")
    assert printed == expected
