"""The ask function's app under the AWS Lambda Web Adapter: each request as an invocation.

On Lambda the ask function runs the library's app in uvicorn; the adapter (a
layer) turns each API Gateway event into an HTTP request to it on loopback and
streams the response back. There is no Python handler, so what a handler's
decorators and Mangum do per invocation happens here, around each request:

- The client address is API Gateway's `sourceIp`, from the request context the
  adapter sends in `x-amzn-request-context` (it sets that header itself,
  replacing any a client sent). The connection's peer is the adapter, on loopback,
  for every visitor alike.
- Log lines carry the API Gateway request id as the correlation id and the
  invocation's own keys, from a clean state (`inject_lambda_context(clear_state=True)`).
- The X-Ray SDK finds the invocation's trace where the runtime puts it for a
  handler, `_X_AMZN_TRACE_ID`, taken from the adapter's `x-amzn-lambda-context`.
- The request's metrics are flushed (EMF documents on stdout) once its response,
  streamed or not, has been sent.

Lambda gives an execution environment one request at a time, so per-process
state (the environment variable, the logger's keys) is per request.
"""

from __future__ import annotations

import json
import os
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from candor import observability

REQUEST_CONTEXT = "x-amzn-request-context"
LAMBDA_CONTEXT = "x-amzn-lambda-context"
TRACE_ENVIRONMENT = "_X_AMZN_TRACE_ID"


def _json_header(headers: Headers, name: str) -> dict[str, Any]:
    try:
        value = json.loads(headers.get(name) or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class AdaptedInvocations:
    """ASGI middleware: one adapter request as one Lambda invocation (see the module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._cold = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        request = _json_header(headers, REQUEST_CONTEXT)
        invocation = _json_header(headers, LAMBDA_CONTEXT)
        source_ip = (request.get("identity") or {}).get("sourceIp")
        if isinstance(source_ip, str) and source_ip:
            scope = {**scope, "client": (source_ip, 0)}
        trace = invocation.get("xray_trace_id")
        if isinstance(trace, str) and trace:
            os.environ[TRACE_ENVIRONMENT] = trace
        self._bind_logs(request, invocation)
        try:
            await self.app(scope, receive, send)
        finally:
            observability.metrics.flush_metrics()

    def _bind_logs(self, request: dict[str, Any], invocation: dict[str, Any]) -> None:
        logger = observability.logger
        logger.clear_state()
        environment = invocation.get("env_config") or {}
        logger.append_keys(
            cold_start=self._cold,
            function_name=environment.get("function_name")
            or os.environ.get("AWS_LAMBDA_FUNCTION_NAME"),
            function_arn=invocation.get("invoked_function_arn"),
            function_request_id=invocation.get("request_id"),
        )
        self._cold = False
        logger.set_correlation_id(request.get("requestId"))
