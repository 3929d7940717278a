"""The API of `candor serve` and the ask function: /ask, /ask/stream, /health, /feedback,
/handoff and /widget/config, and for servers and assistants, MCP at /mcp
(candor.api.mcp_server) and the OpenAI-compatible /v1 (candor.api.openai_compat)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from candor import guards, service
from candor.api import errors, mcp_server, openai_compat, stream
from candor.api.base import DepsProvider, build_app
from candor.api.edge import Edge, EdgeProvider
from candor.api.feedback import feedback_router
from candor.api.handoff import handoff_router
from candor.api.health import DEPENDENCIES, HealthCache
from candor.api.schemas import (
    EDGE_RESPONSES,
    AskRequest,
    AskResponse,
    HealthResponse,
    ValidationErrorResponse,
    error_responses,
)
from candor.api.widget_config import config_router
from candor.deps import Deps
from candor.warmup import Warmup

# A GET /health that starts the warm-up waits this long for it: a process whose
# dependencies are cheap to build (a cloud backend) answers `ok` at once.
HEALTH_WAIT_SECONDS = 1.0
WARMING_RETRY_SECONDS = 2


def _deps(request: Request) -> Deps:
    provider: DepsProvider = request.app.state.deps_provider
    return provider()


def _edge(request: Request) -> Edge:
    provider: EdgeProvider = request.app.state.edge_provider
    return provider()


DepsDep = Annotated[Deps, Depends(_deps)]
EdgeDep = Annotated[Edge, Depends(_edge)]


ask_router = APIRouter(tags=["ask"])


ASK_RESPONSES: dict[int | str, dict[str, Any]] = {
    **EDGE_RESPONSES,
    **error_responses(
        **{
            "401": "The session id is not one this server signed, or it expired "
            "(reason session_invalid): start a new session.",
            "429": "Rate limited; see Retry-After.",
            "503": "The spending budget is used up, or a dependency (model, index, "
            "state store) is unavailable; see Retry-After.",
        }
    ),
    422: {"model": ValidationErrorResponse, "description": "The body is not a valid question."},
}


@ask_router.post("/ask", response_model=AskResponse, responses=ASK_RESPONSES)
async def ask(body: AskRequest, request: Request, deps: DepsDep, edge: EdgeDep) -> AskResponse:
    """Answer a question from the documents with citations, or decline."""
    prepared = await _prepare(body, request, deps, edge)
    return AskResponse.model_validate((await prepared.result()).to_json())


@ask_router.post(
    "/ask/stream",
    response_class=StreamingResponse,
    responses={
        **ASK_RESPONSES,
        200: {
            "description": "Server-sent events: `step` per node, `token` per piece of the "
            "reply, then `done` (exactly the POST /ask response) or `error` "
            "(`{status, detail, reason, trace_id}`); a `: keep-alive` comment every "
            f"{stream.KEEPALIVE_SECONDS:.0f} s while nothing else is sent. Refusals before the "
            "stream starts are the same JSON errors as POST /ask.",
            "content": {stream.MEDIA_TYPE: {"schema": stream.EVENT_SCHEMA}},
        },
    },
)
async def ask_stream(
    body: AskRequest, request: Request, deps: DepsDep, edge: EdgeDep
) -> StreamingResponse:
    """The same question as POST /ask, answered as it happens (text/event-stream)."""
    prepared = await _prepare(body, request, deps, edge)
    events = stream.server_sent_events(
        prepared, keepalive_seconds=request.app.state.keepalive_seconds
    )
    return StreamingResponse(events, media_type=stream.MEDIA_TYPE, headers=stream.HEADERS)


async def _prepare(
    body: AskRequest, request: Request, deps: Deps, edge: Edge
) -> service.PreparedAsk:
    """Every guard of both routes, in one place; a refusal raises before any byte is sent."""
    # Only ids this server signed reach the guards and the session state: a
    # forged one is refused here, before anything is written for it.
    signer = edge.signer()
    session_id = signer.verify(body.session_id) if body.session_id else signer.issue()
    address = guards.client_address(
        request.client.host if request.client else None,
        request.headers.get("x-forwarded-for"),
        deps.settings.trusted_proxy_hops,
    )
    return await service.prepare(
        deps,
        body.question,
        session_id=session_id,
        top_k=body.top_k,
        client=address,
        trace_id=errors.trace_id_of(request),
    )


health_router = APIRouter(tags=["health"])


@health_router.get(
    "/health",
    response_model=HealthResponse,
    responses={503: {"model": HealthResponse, "description": "Still warming up."}},
)
def health(request: Request) -> HealthResponse | JSONResponse:
    """`ok` or `degraded` per dependency, checked at most every 30 s; `candor health` tells why.

    503 `warming` while the process loads its models (candor.warmup): the Lambda Web
    Adapter's readiness check waits for a status below 500, so a function's init
    lasts until it is warm, and the widget says that the first answer is on its way.
    """
    warmup: Warmup = request.app.state.warmup
    warmup.start()
    if not warmup.wait(HEALTH_WAIT_SECONDS):
        warming = HealthResponse(
            status="warming", dependencies=dict.fromkeys(DEPENDENCIES, "warming")
        )
        return JSONResponse(
            warming.model_dump(),
            status_code=503,
            headers={"retry-after": str(WARMING_RETRY_SECONDS)},
        )
    cache: HealthCache = request.app.state.health
    checks = cache.get(lambda: _deps(request))
    status = "ok" if all(checks.values()) else "degraded"
    return HealthResponse(
        status=status,
        dependencies={name: "ok" if ok else "degraded" for name, ok in checks.items()},
    )


def create_app(
    deps_provider: DepsProvider,
    *,
    edge_provider: EdgeProvider | None = None,
    keepalive_seconds: float = stream.KEEPALIVE_SECONDS,
) -> FastAPI:
    """The whole API: /ask, /ask/stream, /health, /feedback, /handoff, /widget/config, /mcp
    and /v1 (see `base.build_app`)."""
    return build_app(
        deps_provider,
        (
            ask_router,
            health_router,
            feedback_router,
            handoff_router,
            config_router,
            mcp_server.router,
            openai_compat.router,
        ),
        edge_provider=edge_provider,
        keepalive_seconds=keepalive_seconds,
        keyed=(mcp_server.keyed_routes(), openai_compat.keyed_routes()),
    )
