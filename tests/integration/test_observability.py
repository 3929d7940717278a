"""What a real handler invocation writes to CloudWatch: JSON log lines and EMF metrics.

Each handler runs as `make invoke` runs it (the Lambda environment, a Lambda
context), and its standard output is read back the way CloudWatch reads it: one
JSON object per line, the metric documents among them.
"""

from __future__ import annotations

import io
import json
import logging
import os
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from candor import observability
from candor.api.feedback import FeedbackDeps
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.ports import StoredTrace
from candor.settings import Settings
from scripts.invoke import invoke, lambda_environment, with_signed_session
from tests.conftest import MakeDeps
from tests.support.edge import allowing
from tests.support.fakes import ScriptedChatModel
from tests.support.lambda_ import load_event

pytestmark = pytest.mark.integration


class Output:
    """The invocation's stdout: log lines (Powertools' handler) and print()ed EMF."""

    def __init__(self, logs: io.StringIO, capsys: pytest.CaptureFixture[str]) -> None:
        self._logs, self._capsys = logs, capsys
        self._printed = ""

    def lines(self) -> list[dict[str, Any]]:
        self._printed += self._capsys.readouterr().out
        text = self._logs.getvalue() + self._printed
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], list[float]]:
        """(metric name, its dimensions) -> values, over every EMF document."""
        found: dict[tuple[str, tuple[tuple[str, str], ...]], list[float]] = {}
        for line in self.lines():
            emf = line.get("_aws")
            if emf is None:
                continue
            (directive,) = emf["CloudWatchMetrics"]
            assert directive["Namespace"] == observability.NAMESPACE
            dimensions = tuple(
                sorted((d, str(line[d])) for d in directive["Dimensions"][0] if d != "service")
            )
            for metric in directive["Metrics"]:
                value = line[metric["Name"]]
                values = value if isinstance(value, list) else [value]
                found.setdefault((metric["Name"], dimensions), []).extend(values)
        return found


@pytest.fixture
def output(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], settings: Settings
) -> Iterator[Output]:
    for name, value in lambda_environment("test").items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CANDOR_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("CANDOR_EMBEDDER_BACKEND", "hashing")
    logs = io.StringIO()
    (handler,) = observability.logger.handlers
    assert isinstance(handler, logging.StreamHandler)
    previous = handler.setStream(logs)
    capsys.readouterr()
    yield Output(logs, capsys)
    handler.setStream(previous)


def answering() -> ScriptedChatModel:
    return ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": ["Stage it with git add [1]."],
        }
    )


def with_deps(deps: Deps, state: SqliteStateStore | None = None) -> Any:
    # The origin of the events and the session key of the Lambda environment.
    deps = allowing(deps, session_secret=os.environ["CANDOR_SESSION_SECRET"])

    def prepare(module: ModuleType) -> None:
        module.app.state.deps_provider = lambda: deps
        module.app.state.feedback_deps_provider = lambda: FeedbackDeps(
            deps.settings, state or deps.state
        )

    return prepare


def test_an_ask_invocation_logs_json_with_its_ids_and_emits_its_metrics(
    output: Output, make_deps: MakeDeps
) -> None:
    event = load_event("ask.json")

    response = invoke("ask", event, prepare=with_deps(make_deps(answering())))

    body = json.loads(response["body"])
    lines = output.lines()
    (request,) = [line for line in lines if line.get("message") == "request"]
    assert request["level"] == "INFO"
    assert request["correlation_id"] == event["requestContext"]["requestId"]
    assert request["trace_id"] == body["trace_id"]
    assert request["decision"] == "answered"
    assert request["function_name"] == "candor-ask"

    metrics = output.metrics()
    assert metrics[("requests", ())] == [1.0]
    assert metrics[("decisions", (("decision", "answered"),))] == [1.0]
    assert metrics[("tokens_in", ())] == [sum(float(s["tokens_in"]) for s in body["trace"])]
    assert metrics[("tokens_out", ())][0] > 0
    assert metrics[("cache_hits", ())] == [0.0]
    assert ("cost_usd", ()) in metrics
    for step in body["trace"]:
        assert metrics[("node_ms", (("node", step["node"]),))] == [pytest.approx(step["ms"])]


def test_a_cache_hit_and_a_rate_limited_request_are_counted(
    output: Output, make_deps: MakeDeps
) -> None:
    deps = make_deps(answering())
    settings = deps.settings.model_copy(update={"rate_address_limit": 2})
    deps = Deps(settings, deps.chat, deps.embedder, deps.index, None, deps.state)
    event = load_event("ask.json")

    statuses = [invoke("ask", event, prepare=with_deps(deps))["statusCode"] for _ in range(3)]

    assert statuses == [200, 200, 429]
    metrics = output.metrics()
    assert metrics[("cache_hits", ())] == [0.0, 1.0]
    assert metrics[("rate_limited", ())] == [1.0]


def test_a_feedback_invocation_counts_the_rating(
    output: Output, make_deps: MakeDeps, state: SqliteStateStore
) -> None:
    event = with_signed_session(load_event("feedback.json"))
    body = json.loads(event["body"])
    state.put_trace(StoredTrace(body["trace_id"], body["session_id"], time.time(), 2**31, "{}"))

    response = invoke("feedback", event, prepare=with_deps(make_deps(ScriptedChatModel()), state))

    assert response["statusCode"] == 200
    assert output.metrics()[("feedback_down", ())] == [1.0]


def test_an_ingest_invocation_counts_documents_chunks_and_failures(output: Output) -> None:
    result = invoke("ingest", load_event("s3-multi.json"))

    metrics = output.metrics()
    summary = result["summary"]
    assert metrics[("ingest_documents", ())] == [float(summary["documents_seen"])]
    assert metrics[("ingest_chunks", ())] == [float(summary["chunks_upserted"])]
    assert metrics[("ingest_failures", ())] == [1.0]  # the scanned PDF
    summary_line = next(line for line in output.lines() if line.get("message") == "ingest summary")
    assert summary_line["function_name"] == "candor-ingest"
