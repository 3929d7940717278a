"""The app `candor serve` runs: the same routers, dependencies built once per process.

Besides CANDOR_ALLOWED_ORIGINS it allows its own origin, so that a page it serves
(the API docs at /docs) can call it. While no origins are configured (the local
demo), loopback clients may call without an Origin, so `curl` works as the README
shows. Its own origins are also what any client may send, so with no origins
configured it refuses to be bound to an address other machines can reach
(`--host 0.0.0.0`): configure origins first. The Origin check keeps other sites'
pages out; it is not authentication (README, "Guards").
"""

from __future__ import annotations

import ipaddress
from functools import cache

from fastapi import FastAPI

from candor import guards
from candor.api.app import create_app
from candor.api.edge import Edge, build_edge
from candor.api.widget import with_widget
from candor.deps import Deps, built_once
from candor.errors import ConfigurationError
from candor.settings import Settings

DEFAULT_PORT = 8000


def own_origins(host: str, port: int) -> tuple[str, ...]:
    """The origins a browser sends for pages this server serves on `port`."""
    origins = [f"http://127.0.0.1:{port}", f"http://localhost:{port}"]
    if host not in {"127.0.0.1", "localhost", "0.0.0.0", "::", ""}:
        origins.append(f"http://{host}:{port}")
    return tuple(origins)


def is_loopback_host(host: str) -> bool:
    """Whether only this machine can reach a server bound to `host`."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name, or "" / "0.0.0.0" / "::" (every address): reachable


def require_safe_bind(settings: Settings, host: str) -> None:
    """Refuse a reachable address while no origins are configured: it would admit anyone."""
    if settings.allowed_origins or is_loopback_host(host):
        return
    raise ConfigurationError(
        f"refusing to serve on {host or 'every address'}: with no CANDOR_ALLOWED_ORIGINS, "
        "anyone who can reach the port could call it by sending this server's own Origin "
        "(http://127.0.0.1:PORT). Serve on 127.0.0.1, or set CANDOR_ALLOWED_ORIGINS to the "
        "sites that may call it (and keep in mind that an Origin is not authentication: the "
        "rate limits and the budget are what bound a scripted client)"
    )


def create_local_app(
    settings: Settings, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT, warm: bool = False
) -> FastAPI:
    """The app; with `warm`, its warm-up starts now (candor.warmup), as `candor serve` does.

    Raises ConfigurationError for a reachable `host` with no origins configured, and for
    budgets under which no visitor could ask (guards.require_workable_budget).
    """
    require_safe_bind(settings, host)
    guards.require_workable_budget(settings)

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
