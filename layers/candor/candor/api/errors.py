"""The one table from errors to responses: a status, a reason code and a fixed public message.

What a visitor reads never comes from an exception's text: that can hold a host
name, a parameter name, an SDK's message with an organisation id or a key's tail.
The detail goes to the log under the request's trace id, which the response
carries too, so that a report from a visitor finds the log line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from candor.errors import (
    BudgetExhaustedError,
    CandorError,
    ConfigurationError,
    CuratedAnswerError,
    DeadlineExceededError,
    IndexError_,
    IngestError,
    ModelError,
    RateLimitedError,
    SessionEndedError,
    SessionInvalidError,
    StateStoreError,
)
from candor.handoffs.forward import DeliveryError
from candor.outbound import AddressRefusedError, OutboundError
from candor.withheld import type_name, withheld

logger = logging.getLogger("candor.api")

# Seconds a client should wait before trying again after an outage.
OUTAGE_RETRY_AFTER = 10
TRACE_HEADER = "x-trace-id"


# Refusals at the edge, before any route runs (candor.api.edge).


class OriginNotAllowedError(CandorError):
    """The request's Origin is not one of CANDOR_ALLOWED_ORIGINS."""


class ApiKeyRequiredError(CandorError):
    """A request without an Origin carried no valid server key."""


class ServerKeyRequiredError(CandorError):
    """A route for servers only (MCP, the OpenAI-compatible API) got no valid server key."""


class UnsupportedMediaTypeError(CandorError):
    """The body is not JSON."""


class BodyTooLargeError(CandorError):
    """The body is over the edge's limit."""


@dataclass(frozen=True, slots=True)
class Row:
    status: int
    reason: str
    # Fixed text, or a function of the error for the few errors whose message
    # candor itself writes for the visitor (a limit and when to try again).
    message: str | Callable[[Any], str]
    retry_after: int | Callable[[Any], int] | None = None
    # Outages and bugs are logged with their detail; a refusal is routine.
    log: bool = False


# Most specific first: the first row whose class the error is an instance of wins.
TABLE: tuple[tuple[type[BaseException], Row], ...] = (
    (
        SessionInvalidError,
        Row(401, "session_invalid", "this conversation is not valid here; start a new one"),
    ),
    (
        ServerKeyRequiredError,
        Row(
            401,
            "invalid_api_key",
            "this route needs a valid server key, in X-Api-Key or Authorization: Bearer",
        ),
    ),
    (
        OriginNotAllowedError,
        Row(403, "origin_not_allowed", "requests from this site are not accepted"),
    ),
    (
        ApiKeyRequiredError,
        Row(403, "api_key_required", "a request without an Origin needs a valid X-Api-Key"),
    ),
    (
        SessionEndedError,
        Row(403, "session_ended", "this conversation was ended after repeated abuse"),
    ),
    (BodyTooLargeError, Row(413, "body_too_large", "the request body is too large")),
    (
        UnsupportedMediaTypeError,
        Row(415, "unsupported_media_type", "send the request body as application/json"),
    ),
    (IngestError, Row(422, "document_rejected", "the document could not be ingested")),
    (
        CuratedAnswerError,
        Row(422, "curated_answer_rejected", "the curated answer cannot be kept as given"),
    ),
    (
        RateLimitedError,
        Row(429, "rate_limited", lambda e: e.reason, retry_after=lambda e: e.retry_after),
    ),
    (BudgetExhaustedError, Row(503, "budget_exhausted", lambda e: e.reason)),
    (
        DeadlineExceededError,
        Row(
            503,
            "deadline_exceeded",
            "the question took too long to answer; try again",
            OUTAGE_RETRY_AFTER,
            log=True,
        ),
    ),
    (
        ModelError,
        Row(
            503,
            "model_unavailable",
            "the language model is unavailable; try again shortly",
            OUTAGE_RETRY_AFTER,
            log=True,
        ),
    ),
    (
        IndexError_,
        Row(
            503,
            "index_unavailable",
            "the document index is unavailable; try again shortly",
            OUTAGE_RETRY_AFTER,
            log=True,
        ),
    ),
    (
        StateStoreError,
        Row(
            503,
            "state_unavailable",
            "the service's storage is unavailable; try again shortly",
            OUTAGE_RETRY_AFTER,
            log=True,
        ),
    ),
    (
        ConfigurationError,
        Row(503, "misconfigured", "the service is not configured to answer", log=True),
    ),
    # Requests candor sends out (a hand-off's webhook and e-mail): forwarded apart from
    # the visitor's request, so these reach a caller only through a bug.
    (
        AddressRefusedError,
        Row(503, "misconfigured", "the service is not configured to answer", log=True),
    ),
    (
        DeliveryError,
        Row(503, "unavailable", "the service cannot answer this now", OUTAGE_RETRY_AFTER, log=True),
    ),
    (
        OutboundError,
        Row(503, "unavailable", "the service cannot answer this now", OUTAGE_RETRY_AFTER, log=True),
    ),
    # Every other CandorError: a library error without a row of its own yet.
    (CandorError, Row(503, "unavailable", "the service cannot answer this now", log=True)),
)

INTERNAL = Row(500, "internal_error", "something went wrong on our side", log=True)


def row_for(error: BaseException) -> Row:
    """The row of an error; a true bug (anything but a CandorError) is a generic 500."""
    for kind, row in TABLE:
        if isinstance(error, kind):
            return row
    return INTERNAL


def body(status_reason: str, message: str, trace_id: str) -> dict[str, str]:
    return {"detail": message, "reason": status_reason, "trace_id": trace_id}


@dataclass(frozen=True, slots=True)
class PublicError:
    """What a client is told of an error: a status, a body and its headers."""

    status: int
    body: dict[str, str]
    headers: dict[str, str]


def public_error(error: BaseException, trace_id: str) -> PublicError:
    """The public face of `error`; logs its detail under `trace_id` when it is not routine."""
    row = row_for(error)
    if row is INTERNAL:
        # A bug: its frames find the line that failed; its text may be the visitor's
        # own words (candor.withheld), so the log has the type and not the message.
        logger.error(
            "request failed: unexpected %s",
            type_name(error),
            extra={"trace_id": trace_id, "reason": row.reason, "error_type": type_name(error)},
            exc_info=withheld(error),
        )
    elif row.log:
        # An outage: the message is candor's own (the backend and what it answered;
        # a ModelError's kind, never the provider's text: candor.errors.ModelError).
        kind = getattr(error, "kind", None)
        logger.error(
            "request failed: %s%s: %s",
            type(error).__name__,
            f" ({kind})" if kind else "",
            error,
            extra={"trace_id": trace_id, "reason": row.reason},
        )
    message = row.message if isinstance(row.message, str) else row.message(error)
    headers = {TRACE_HEADER: trace_id}
    retry = row.retry_after(error) if callable(row.retry_after) else row.retry_after
    if retry is not None:
        headers["Retry-After"] = str(retry)
    return PublicError(row.status, body(row.reason, message, trace_id), headers)


def error_response(error: BaseException, trace_id: str) -> JSONResponse:
    """The response for `error` (see public_error)."""
    public = public_error(error, trace_id)
    return JSONResponse(public.body, public.status, headers=public.headers)


def trace_id_of(request: Request) -> str:
    """The id the edge gave the request at its start (one is made for a bare app)."""
    trace_id: str | None = getattr(request.state, "trace_id", None)
    if trace_id is None:
        from uuid import uuid4

        trace_id = request.state.trace_id = uuid4().hex
    return trace_id


# The most of one part of a field's location or of a message a 422 repeats.
PROBLEM_TEXT_CHARS = 200


def _writable(text: str) -> str:
    """`text` as any JSON response can carry it: a lone surrogate becomes its escape."""
    text = text[:PROBLEM_TEXT_CHARS]
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def invalid_fields(error: RequestValidationError) -> list[dict[str, Any]]:
    """Where the input is wrong and why: each field's location, message and error type.

    Never the input itself (pydantic's `input` and `ctx`): it is the visitor's own
    text, which a response may be unable to encode (a lone surrogate, 1e400 read as
    infinity) and which has no business in a log or a proxy's cache either. A
    location's parts are field names and list positions, except for a JSON
    decode error, whose second part is the character position.
    """
    problems = []
    for problem in error.errors():
        location = [
            part if isinstance(part, int) else _writable(str(part)) for part in problem["loc"]
        ]
        problems.append(
            {
                "loc": location,
                "msg": _writable(str(problem["msg"])),
                "type": _writable(str(problem["type"])),
            }
        )
    return problems


def install(app: FastAPI) -> None:
    """Route every CandorError, bad input and HTTP error of `app` through the table."""

    @app.exception_handler(CandorError)
    async def _candor(request: Request, error: CandorError) -> JSONResponse:
        return error_response(error, trace_id_of(request))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        trace_id = trace_id_of(request)
        content = {
            "detail": invalid_fields(error),
            "reason": "invalid_request",
            "trace_id": trace_id,
        }
        return JSONResponse(content, 422, headers={TRACE_HEADER: trace_id})

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException) -> JSONResponse:
        trace_id = trace_id_of(request)
        # The reason from the status ("not_found", "bad_request"); the detail is
        # Starlette's or FastAPI's own fixed text, such as "Not Found".
        reason = HTTPStatus(error.status_code).phrase.lower().replace(" ", "_").replace("-", "_")
        content = body(reason, str(error.detail), trace_id)
        headers = {**(error.headers or {}), TRACE_HEADER: trace_id}
        return JSONResponse(content, error.status_code, headers=headers)
