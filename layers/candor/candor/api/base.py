"""The app every entry point builds: its routers, the edge, the one error table.

`candor serve` and the ask function mount /ask, /health and /feedback
(`api.app.create_app`); the feedback function mounts /feedback alone
(`api.feedback.create_feedback_app`). Both come through `build_app`, so the same
edge checks and error handlers apply to every route, and the route modules only
import this one, never each other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Request

from candor import __version__
from candor.api import errors, stream
from candor.api.edge import Edge, EdgeMiddleware, EdgeProvider, KeyedRoutes, build_edge
from candor.api.health import HealthCache
from candor.deps import Deps
from candor.settings import Settings
from candor.warmup import Warmup

DepsProvider = Callable[[], Deps]


def deps_of(request: Request) -> Deps:
    """The app's dependencies, as its provider builds them (once per process)."""
    provider: DepsProvider = request.app.state.deps_provider
    return provider()


def edge_of(request: Request) -> Edge:
    provider: EdgeProvider = request.app.state.edge_provider
    return provider()


DepsDep = Annotated[Deps, Depends(deps_of)]
EdgeDep = Annotated[Edge, Depends(edge_of)]


class EdgeFromSettings:
    """The edge built from the current settings, rebuilt only when those change (tests)."""

    def __init__(self, settings: Callable[[], Settings]) -> None:
        self._settings = settings
        self._built: tuple[Settings, Edge] | None = None

    def __call__(self) -> Edge:
        settings = self._settings()
        if self._built is None or self._built[0] is not settings:
            self._built = (settings, build_edge(settings))
        return self._built[1]


def build_app(
    deps_provider: DepsProvider,
    routers: Iterable[APIRouter],
    *,
    edge_provider: EdgeProvider | None = None,
    keepalive_seconds: float = stream.KEEPALIVE_SECONDS,
    keyed: Sequence[KeyedRoutes] = (),
) -> FastAPI:
    """An app serving `routers`. Both providers are called per request and should cache.

    Without `edge_provider`, the edge follows the settings of the dependencies.
    `keepalive_seconds` is how long a stream may stay quiet before a keep-alive comment.
    `keyed` are the routes for servers only (candor.api.edge.KeyedRoutes).
    """
    app = FastAPI(
        title="candor",
        version=__version__,
        description="Answers from your documents with citations, or declines honestly.",
    )
    app.state.deps_provider = deps_provider
    app.state.edge_provider = edge_provider or EdgeFromSettings(
        lambda: app.state.deps_provider().settings
    )
    app.state.health = HealthCache()
    # Started by `candor serve` at start, and by the first GET /health otherwise (the
    # Lambda Web Adapter's readiness check): see candor.warmup.
    app.state.warmup = Warmup(lambda: app.state.deps_provider())
    app.state.keepalive_seconds = keepalive_seconds
    for router in routers:
        app.include_router(router)
    errors.install(app)
    app.add_middleware(EdgeMiddleware, edge=lambda: app.state.edge_provider(), keyed=keyed)
    return app
