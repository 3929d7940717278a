"""The ask function's app under the Lambda Web Adapter: each request handled as an invocation.

The adapter sends each API Gateway request to the app on loopback with the
request and Lambda contexts in two headers. These tests send what it sends, to
the app as functions/ask/run.sh serves it (`web`), and read stdout as CloudWatch
does: the client address is API Gateway's sourceIp (not the loopback peer), log
lines carry the request id, the X-Ray trace is the invocation's, and each
request's metrics are flushed once its response is sent.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from fastapi.testclient import TestClient

from candor.api.lambda_web import LAMBDA_CONTEXT, REQUEST_CONTEXT, TRACE_ENVIRONMENT
from tests.conftest import MakeDeps
from tests.integration.test_observability import Output, answering, output, with_deps
from tests.support.edge import ORIGIN
from tests.support.lambda_ import load_handler

pytestmark = pytest.mark.integration

__all__ = ["output"]  # the fixture, shared with test_observability

QUESTION = {"question": "How do I stage a file before committing?"}


def contexts(request_id: str, source_ip: str, trace: str) -> dict[str, str]:
    """The two headers the adapter adds to each request (its own, whatever the client sent)."""
    request = {"requestId": request_id, "stage": "v1", "identity": {"sourceIp": source_ip}}
    invocation = {
        "request_id": f"lambda-{request_id}",
        "deadline": 1_800_000_000_000,
        "invoked_function_arn": "arn:aws:lambda:eu-west-1:123456789012:function:candor-ask",
        "xray_trace_id": trace,
        "env_config": {"function_name": "candor-ask", "memory": 1024, "version": "$LATEST"},
    }
    return {REQUEST_CONTEXT: json.dumps(request), LAMBDA_CONTEXT: json.dumps(invocation)}


def served(make_deps: MakeDeps, **settings: Any) -> TestClient:
    module = load_handler("ask")
    deps = make_deps(answering())
    if settings:
        deps = type(deps)(
            deps.settings.model_copy(update=settings),
            deps.chat,
            deps.embedder,
            deps.index,
            deps.reranker,
            deps.state,
        )
    with_deps(deps)(module)
    return TestClient(module.web, headers={"Origin": ORIGIN})


def test_a_request_is_logged_as_its_invocation_and_its_metrics_are_flushed(
    output: Output, make_deps: MakeDeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TRACE_ENVIRONMENT, raising=False)
    http = served(make_deps)
    trace = "Root=1-66a1b2c3-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;Sampled=1"

    response = http.post("/ask", json=QUESTION, headers=contexts("req-1", "198.51.100.7", trace))

    assert response.status_code == 200
    (request,) = [line for line in output.lines() if line.get("message") == "request"]
    assert request["correlation_id"] == "req-1"
    assert request["function_request_id"] == "lambda-req-1"
    assert request["function_name"] == "candor-ask"
    assert request["trace_id"] == response.json()["trace_id"]
    # Flushed by the middleware once the response was sent: no handler does it here.
    assert output.metrics()[("requests", ())] == [1.0]
    assert os.environ[TRACE_ENVIRONMENT] == trace


def test_the_client_address_is_api_gateways_source_ip_not_the_adapters(
    output: Output, make_deps: MakeDeps
) -> None:
    # Every request reaches the app from the adapter on loopback; the limit is per visitor.
    http = served(make_deps, rate_address_limit=1)
    trace = "Root=1-66a1b2c3-0123456789abcdef01234567"

    first = http.post("/ask", json=QUESTION, headers=contexts("a", "198.51.100.7", trace))
    again = http.post("/ask", json=QUESTION, headers=contexts("b", "198.51.100.7", trace))
    other = http.post("/ask", json=QUESTION, headers=contexts("c", "203.0.113.9", trace))

    assert [first.status_code, again.status_code, other.status_code] == [200, 429, 200]
