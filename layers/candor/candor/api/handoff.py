"""POST /handoff: a visitor asks for a person, and the site's team gets the conversation.

The body names the signed session, the visitor's e-mail address and a message;
the transcript is built by the server from that session (candor.handoffs.transcript),
and any other field a client sends is ignored. The hand-off is stored before it is
forwarded (candor.handoffs.service), so a 202 means it is kept; forwarding then
happens apart from the request (candor.handoffs.dispatch). The same edge as /ask
(origins, JSON, 16 KB) applies, and limits of their own: a few an hour per client
address, per e-mail address and per session. Off (404) until the owner sets a
destination.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request
from pydantic import BaseModel, Field, ValidationInfo, field_validator

from candor import guards
from candor.api.edge import Edge
from candor.api.schemas import (
    EDGE_RESPONSES,
    SESSION_ID_PATTERN,
    ValidationErrorResponse,
    error_responses,
    refuse_control_characters,
)
from candor.deps import Deps
from candor.handoffs import service
from candor.handoffs.addresses import normalised_address
from candor.handoffs.dispatch import Forwarder, forwarder_for
from candor.handoffs.store import HandoffStore
from candor.handoffs.transcript import Content
from candor.settings import Settings
from candor.withheld import type_name, withheld

logger = logging.getLogger("candor.api")

MESSAGE_MAX_CHARS = 2000


class HandoffRequest(BaseModel):
    session_id: str | None = Field(
        default=None,
        pattern=SESSION_ID_PATTERN,
        description="The conversation to hand off; omit it when nothing was asked yet.",
    )
    email: str = Field(min_length=3, max_length=254, description="Where the site's team replies.")
    message: str = Field(min_length=1, max_length=MESSAGE_MAX_CHARS)

    @field_validator("email")
    @classmethod
    def _email(cls, value: str) -> str:
        refuse_control_characters("email", value)
        return normalised_address(value.strip())

    @field_validator("message")
    @classmethod
    def _message(cls, value: str, info: ValidationInfo) -> str:
        refuse_control_characters(info.field_name or "message", value)
        if not value.strip():
            raise ValueError("message must contain more than whitespace")
        return value.strip()


class HandoffResponse(BaseModel):
    handoff_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    session_id: str
    state: str = Field(description="`pending`: stored, and on its way to the site's team.")
    transcript_turns: int = Field(description="Turns of the conversation it carries.")


@dataclass(frozen=True, slots=True)
class Handoffs:
    store: HandoffStore
    forwarder: Forwarder


def build_handoffs(settings: Settings) -> Handoffs:
    from candor.factory import build_handoff_store

    store = build_handoff_store(settings)
    return Handoffs(store, forwarder_for(settings, store))


class HandoffsFromSettings:
    """Built once per settings object (tests swap the settings, a process does not)."""

    def __init__(self, settings: Callable[[], Settings]) -> None:
        self._settings = settings
        self._built: tuple[Settings, Handoffs] | None = None

    def __call__(self) -> Handoffs:
        settings = self._settings()
        if self._built is None or self._built[0] is not settings:
            self._built = (settings, build_handoffs(settings))
        return self._built[1]


def _deps(request: Request) -> Deps:
    deps: Deps = request.app.state.deps_provider()
    return deps


def _handoffs(request: Request) -> Handoffs:
    provider: Callable[[], Handoffs] | None = getattr(request.app.state, "handoffs_provider", None)
    if provider is None:
        provider = request.app.state.handoffs_provider = HandoffsFromSettings(
            lambda: _deps(request).settings
        )
    return provider()


handoff_router = APIRouter(tags=["handoff"])


@handoff_router.post(
    "/handoff",
    status_code=202,
    response_model=HandoffResponse,
    responses={
        **EDGE_RESPONSES,
        **error_responses(
            **{
                "401": "The session id is not one this server signed, or it expired.",
                "404": "Hand-offs are off: the site has set no destination for them.",
                "429": "Too many hand-offs from this address, e-mail address or "
                "conversation in the last hour; see Retry-After.",
                "503": "The service's storage is unavailable; nothing was kept.",
            }
        ),
        422: {"model": ValidationErrorResponse, "description": "The body is not a valid hand-off."},
    },
)
async def handoff(
    body: HandoffRequest,
    request: Request,
    deps: Annotated[Deps, Depends(_deps)],
    wiring: Annotated[Handoffs, Depends(_handoffs)],
) -> HandoffResponse:
    """Send the conversation and a message to the site's team, who reply by e-mail."""
    settings = deps.settings
    if not settings.handoffs_enabled:
        raise HTTPException(404, "this site takes no hand-offs")
    edge: Edge = request.app.state.edge_provider()
    signer = edge.signer()
    session_id = signer.verify(body.session_id) if body.session_id else signer.issue()
    address = guards.client_address(
        request.client.host if request.client else None,
        request.headers.get("x-forwarded-for"),
        settings.trusted_proxy_hops,
    )
    taken = await asyncio.to_thread(
        service.take,
        deps.state,
        wiring.store,
        settings,
        session_id=session_id,
        client=address,
        email=body.email,
        message=body.message,
    )
    try:
        await wiring.forwarder.dispatch(taken.id)
    except Exception as error:
        # Stored and pending: `candor handoffs retry` forwards it; the visitor is told
        # the truth, that it is kept.
        logger.error(
            "hand-off %s stored; forwarding did not start",
            taken.id,
            exc_info=withheld(error),
            extra={"error_type": type_name(error)},
        )
    turns = len(Content.from_json(taken.body).transcript)
    return HandoffResponse(
        handoff_id=taken.id, session_id=session_id, state="pending", transcript_turns=turns
    )
