"""The app `candor serve` runs: the same routers, dependencies built once per process.

Besides CANDOR_ALLOWED_ORIGINS it allows its own origin, so that a page it serves
(the API docs at /docs) can call it. While no origins are configured (the local
demo), loopback clients may call without an Origin, so `curl` works as the README
shows; configure origins before anyone else can reach the port.
"""

from __future__ import annotations

from functools import cache

from fastapi import FastAPI

from candor.api.app import create_app
from candor.api.edge import Edge, build_edge
from candor.api.widget import with_widget
from candor.deps import Deps, built_once
from candor.settings import Settings

DEFAULT_PORT = 8000


def own_origins(host: str, port: int) -> tuple[str, ...]:
    """The origins a browser sends for pages this server serves on `port`."""
    origins = [f"http://127.0.0.1:{port}", f"http://localhost:{port}"]
    if host not in {"127.0.0.1", "localhost", "0.0.0.0", "::", ""}:
        origins.append(f"http://{host}:{port}")
    return tuple(origins)


def create_local_app(
    settings: Settings, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT, warm: bool = False
) -> FastAPI:
    """The app; with `warm`, its warm-up starts now (candor.warmup), as `candor serve` does."""

    @built_once
    def provider() -> Deps:
        from candor.factory import build_deps

        return build_deps(settings)

    @cache
    def edge() -> Edge:
        return build_edge(
            settings,
            own_origins=own_origins(host, port),
            loopback_without_origin=not settings.allowed_origins,
        )

    app = with_widget(create_app(provider, edge_provider=edge))
    if warm:
        app.state.warmup.start()
    return app
