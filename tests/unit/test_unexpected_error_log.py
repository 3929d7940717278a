"""A bug's log line: the trace id, the exception's type and its frames, never its text.

The unexpected-500 path logged `str(error)` (and, through the traceback, the
text of each error it came from). A bug's message is whatever the failing code
put in it: a KeyError's key, a pydantic error's input value, a decode error's
bytes, which can be the visitor's question or an answer. With
CANDOR_STORE_QUESTIONS=false no log line may hold a question, so the message is
withheld; the type, the frames and the chain of causes are what the owner needs
to find the line that failed.
"""

from __future__ import annotations

import json
import logging
import traceback
from typing import Any

import pytest
from fastapi.testclient import TestClient

from candor import observability
from candor.api.app import create_app
from tests.conftest import MakeDeps
from tests.support.edge import allowing, browser
from tests.support.fakes import ScriptedChatModel
from tests.support.sse import parse_text

pytestmark = pytest.mark.unit

QUESTION = "What does --force-with-lease do for order 4417-SECRET?"


def a_bug_quoting_the_question() -> KeyError:
    """What a real bug raises: its message (and its cause's) holds the visitor's words."""
    try:
        try:
            raise ValueError(f"cannot parse {QUESTION!r}")
        except ValueError as cause:
            raise KeyError(QUESTION) from cause
    except KeyError as error:
        return error


def http(make_deps: MakeDeps) -> TestClient:
    chat = ScriptedChatModel({"Triage": [a_bug_quoting_the_question()]})
    deps = allowing(make_deps(chat))
    return browser(create_app(lambda: deps))


def post(client: TestClient, path: str) -> dict[str, Any]:
    """The public error body of a request that meets the bug, on either route."""
    response = client.post(path, json={"question": QUESTION})
    if path == "/ask":
        assert response.status_code == 500
        body: dict[str, Any] = response.json()
        return body
    (error,) = [e for e in parse_text(response.text) if e.name == "error"]
    data: dict[str, Any] = error.data
    assert data["status"] == 500
    return data


@pytest.mark.parametrize("path", ["/ask", "/ask/stream"])
def test_an_unexpected_errors_log_line_has_its_type_and_traceback_but_no_visitor_text(
    make_deps: MakeDeps, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    with caplog.at_level(logging.DEBUG):
        body = post(http(make_deps), path)

    assert body["reason"] == "internal_error"
    assert body["detail"] == "something went wrong on our side"
    for record in caplog.records:  # every logger, every level, with its traceback
        assert "4417-SECRET" not in logging.Formatter().format(record)
    (logged,) = [r for r in caplog.records if getattr(r, "trace_id", None) == body["trace_id"]]
    assert logged.levelno == logging.ERROR
    assert logged.error_type == "KeyError"  # type: ignore[attr-defined]
    text = logging.Formatter().format(logged)
    assert "KeyError" in text and "ValueError" in text  # the error and its cause
    assert "Traceback (most recent call last)" in text
    assert "a_bug_quoting_the_question" in text  # the frame that raised it
    assert "message withheld" in text


def test_on_lambda_the_json_line_carries_the_trace_id_type_and_traceback(
    make_deps: MakeDeps, caplog: pytest.LogCaptureFixture
) -> None:
    # The ask function's logs go through Powertools' JSON formatter
    # (observability.route_library_logs); format the record as it would.
    with caplog.at_level(logging.ERROR, logger="candor.api"):
        body = post(http(make_deps), "/ask")
    (logged,) = [r for r in caplog.records if getattr(r, "trace_id", None) == body["trace_id"]]
    (handler,) = observability.logger.handlers

    line = json.loads(handler.formatter.format(logged))  # type: ignore[union-attr]

    assert line["level"] == "ERROR"
    assert line["trace_id"] == body["trace_id"]
    assert line["error_type"] == "KeyError"
    assert "a_bug_quoting_the_question" in line["exception"]
    assert "4417-SECRET" not in json.dumps(line)


def test_a_task_groups_failure_keeps_each_members_type_and_frames_without_text() -> None:
    from candor.withheld import withheld

    # A streamed run fails inside a task group: the members are what went wrong.
    group = ExceptionGroup(f"group {QUESTION}", [a_bug_quoting_the_question(), OSError(QUESTION)])
    looped = RuntimeError(QUESTION)
    looped.__context__ = group
    group.__context__ = looped  # re-raised inside its own handler

    stand_in = withheld(looped)
    text = "".join(traceback.format_exception(stand_in))

    assert "4417-SECRET" not in text
    for kind in ("RuntimeError", "ExceptionGroup", "KeyError", "ValueError", "OSError"):
        assert kind in text
    assert "a_bug_quoting_the_question" in text
