"""POST /feedback: a visitor rates an answer, by the trace id the answer carried.

The router is mounted by `candor serve` beside /ask, and alone by the feedback
function, whose app is built by `create_app` like every other so that the same
guards and error handlers apply. Its rate limits are those of /ask (the same
windows: a rating counts as a request), and a session that was ended may not rate
(403 `session_ended`, as on /ask). No model is called.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from pydantic import BaseModel, Field, ValidationInfo, field_validator

from candor import guards, rating, traces
from candor.api.base import EdgeFromSettings, build_app
from candor.api.edge import Edge
from candor.api.schemas import (
    EDGE_RESPONSES,
    SESSION_ID_PATTERN,
    ErrorResponse,
    refuse_control_characters,
)
from candor.deps import Deps
from candor.errors import ConfigurationError
from candor.ports import StateStore
from candor.settings import Settings


class FeedbackRequest(BaseModel):
    trace_id: str = Field(pattern=r"^[0-9a-f]{32}$", description="The answer's trace_id.")
    session_id: str = Field(
        pattern=SESSION_ID_PATTERN, description="The session that asked the question."
    )
    score: traces.Score = Field(description="1: helpful, -1: not helpful.")
    reason: traces.Reason | None = None
    comment: str | None = Field(default=None, max_length=traces.COMMENT_MAX_CHARS)
    better_answer: str | None = Field(
        default=None,
        max_length=traces.BETTER_ANSWER_MAX_CHARS,
        description="What the answer should have said.",
    )

    @field_validator("comment", "better_answer")
    @classmethod
    def _no_control_characters(cls, value: str | None, info: ValidationInfo) -> str | None:
        # The owner reads these in `candor review` and the insights, as written.
        if value is not None:
            refuse_control_characters(info.field_name or "text", value)
        return value


class FeedbackResponse(BaseModel):
    trace_id: str
    score: traces.Score


@dataclass(frozen=True, slots=True)
class FeedbackDeps:
    """All that feedback needs: no model, no index, no API key."""

    settings: Settings
    state: StateStore


FeedbackDepsProvider = Callable[[], FeedbackDeps]


def _feedback_deps(request: Request) -> FeedbackDeps:
    provider: FeedbackDepsProvider | None = getattr(
        request.app.state, "feedback_deps_provider", None
    )
    if provider is not None:
        return provider()
    deps: Deps = request.app.state.deps_provider()
    return FeedbackDeps(deps.settings, deps.state)


FeedbackDepsDep = Annotated[FeedbackDeps, Depends(_feedback_deps)]

feedback_router = APIRouter(tags=["feedback"])


@feedback_router.post(
    "/feedback",
    response_model=FeedbackResponse,
    responses={
        **EDGE_RESPONSES,
        403: {
            "model": ErrorResponse,
            "description": "Another session asked this question, the session was ended "
            "(reason `session_ended`), or the Origin is not allowed.",
        },
        404: {"model": ErrorResponse, "description": "No such trace, or it has expired."},
        401: {
            "model": ErrorResponse,
            "description": "The session id is not one this server signed.",
        },
        429: {"model": ErrorResponse, "description": "Rate limited; see Retry-After."},
    },
)
async def feedback(
    body: FeedbackRequest, request: Request, deps: FeedbackDepsDep
) -> FeedbackResponse:
    """Rate an answer. A second rating of the same answer replaces the first.

    A comment and a better answer are kept only with CANDOR_STORE_QUESTIONS=true, and
    only the owner's review (`candor feedback review`) makes a better answer training data.
    """
    # Only a session id this server signed may rate (401 session_invalid otherwise),
    # and only the answers that session was given (403).
    edge: Edge = request.app.state.edge_provider()
    session_id = edge.signer().verify(body.session_id)
    address = guards.client_address(
        request.client.host if request.client else None,
        request.headers.get("x-forwarded-for"),
        deps.settings.trusted_proxy_hops,
    )
    given = traces.Feedback(
        score=body.score,
        reason=body.reason,
        comment=body.comment,
        better_answer=body.better_answer,
    )
    outcome = await asyncio.to_thread(
        rating.rate,
        deps.state,
        deps.settings,
        body.trace_id,
        given,
        session_id=session_id,
        client=address,
    )
    if outcome == "unknown":
        raise HTTPException(404, "no such answer to rate: it is unknown or has expired")
    if outcome == "forbidden":
        raise HTTPException(403, "only the conversation that asked may rate this answer")
    return FeedbackResponse(trace_id=body.trace_id, score=body.score)


def _no_full_deps() -> Deps:
    raise ConfigurationError("the feedback app builds only the state store")


def create_feedback_app(provider: FeedbackDepsProvider) -> FastAPI:
    """The feedback function's app: the feedback route alone, on the state store alone."""
    app = build_app(_no_full_deps, (feedback_router,))
    app.state.feedback_deps_provider = provider
    # The same origin and session checks as /ask, from the feedback function's settings.
    app.state.edge_provider = EdgeFromSettings(lambda: app.state.feedback_deps_provider().settings)
    return app
