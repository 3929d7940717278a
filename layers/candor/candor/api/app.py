"""The FastAPI application: routers, dependencies and the one place errors become responses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse

from candor import __version__, guards, service
from candor.api.feedback import feedback_router
from candor.api.schemas import (
    AskRequest,
    AskResponse,
    DependencyHealth,
    ErrorResponse,
    HealthResponse,
)
from candor.deps import Deps
from candor.errors import (
    BudgetExhaustedError,
    ConfigurationError,
    ModelError,
    RateLimitedError,
    SessionEndedError,
    StateStoreError,
)

DepsProvider = Callable[[], Deps]


def _deps(request: Request) -> Deps:
    provider: DepsProvider = request.app.state.deps_provider
    return provider()


DepsDep = Annotated[Deps, Depends(_deps)]

ask_router = APIRouter(tags=["ask"])


@ask_router.post(
    "/ask",
    response_model=AskResponse,
    responses={
        403: {"model": ErrorResponse, "description": "The session was ended by moderation."},
        429: {"model": ErrorResponse, "description": "Rate limited; see Retry-After."},
        502: {"model": ErrorResponse, "description": "The language model failed."},
        503: {"model": ErrorResponse, "description": "The spending budget is used up."},
    },
)
async def ask(body: AskRequest, request: Request, deps: DepsDep) -> AskResponse:
    """Answer a question from the documents with citations, or decline."""
    address = guards.client_address(
        request.client.host if request.client else None,
        request.headers.get("x-forwarded-for"),
        deps.settings.trusted_proxy_hops,
    )
    result = await service.ask(
        deps, body.question, session_id=body.session_id, top_k=body.top_k, client=address
    )
    return AskResponse.model_validate(result.to_json())


health_router = APIRouter(tags=["health"])


@health_router.get("/health", response_model=HealthResponse)
def health(deps: DepsDep) -> HealthResponse:
    """Report each dependency; cheap checks only, no model call."""
    checks: dict[str, DependencyHealth] = {}
    settings = deps.settings
    try:
        chunks = deps.index.count()
        checks["index"] = DependencyHealth(
            ok=chunks > 0,
            backend=settings.index_backend,
            detail=f"{chunks} chunks" if chunks else "empty: run `candor ingest` first",
        )
    except Exception as error:  # health must report, not raise
        checks["index"] = DependencyHealth(
            ok=False, backend=settings.index_backend, detail=str(error)
        )
    checks["embedder"] = DependencyHealth(
        ok=True,
        backend=settings.embedder_backend,
        detail=f"{deps.embedder.name}, {deps.embedder.dimensions} dims",
    )
    checks["chat"] = DependencyHealth(ok=True, backend=settings.chat_backend, detail=deps.chat.name)
    try:
        deps.state.get_session("health-check")
        checks["state"] = DependencyHealth(ok=True, backend=settings.state_backend)
    except Exception as error:
        checks["state"] = DependencyHealth(
            ok=False, backend=settings.state_backend, detail=str(error)
        )
    status = "ok" if all(c.ok for c in checks.values()) else "degraded"
    return HealthResponse(status=status, dependencies=checks)


def _error(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"detail": detail}, headers=headers)


def create_app(
    deps_provider: DepsProvider, *, routers: tuple[APIRouter, ...] | None = None
) -> FastAPI:
    """Build the app. `deps_provider` is called per request and should cache its result."""
    app = FastAPI(
        title="candor",
        version=__version__,
        description="Answers from your documents with citations, or declines honestly.",
    )
    app.state.deps_provider = deps_provider
    for router in routers or (ask_router, health_router, feedback_router):
        app.include_router(router)

    @app.exception_handler(SessionEndedError)
    async def _ended(request: Request, error: SessionEndedError) -> JSONResponse:
        return _error(403, str(error))

    @app.exception_handler(RateLimitedError)
    async def _rate(request: Request, error: RateLimitedError) -> JSONResponse:
        return _error(429, error.reason, {"Retry-After": str(error.retry_after)})

    @app.exception_handler(BudgetExhaustedError)
    async def _budget(request: Request, error: BudgetExhaustedError) -> JSONResponse:
        return _error(503, error.reason)

    @app.exception_handler(StateStoreError)
    async def _state(request: Request, error: StateStoreError) -> JSONResponse:
        return _error(503, f"candor's state store is unavailable: {error}")

    @app.exception_handler(ModelError)
    async def _model(request: Request, error: ModelError) -> JSONResponse:
        return _error(502, f"the language model failed: {error}")

    @app.exception_handler(ConfigurationError)
    async def _config(request: Request, error: ConfigurationError) -> JSONResponse:
        return _error(500, f"candor is misconfigured: {error}")

    return app
