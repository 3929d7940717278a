"""The website widget and a demo page that embeds it, served by `candor serve`.

The widget is one static file (candor-widget.js, package data beside this module),
so a site can load it from here or copy it to its own host. Both routes are GETs:
the edge lets them through to anyone, like /health.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse, Response

WIDGET_PATH = "/widget/candor-widget.js"
# Short, so that a new widget reaches visitors soon after an upgrade.
CACHE_CONTROL = "public, max-age=300"

widget_router = APIRouter(tags=["widget"])


@cache
def _static(name: str) -> bytes:
    return files("candor.api").joinpath("static", name).read_bytes()


@widget_router.get(WIDGET_PATH, include_in_schema=False)
def widget_script() -> Response:
    return Response(
        _static("candor-widget.js"),
        media_type="text/javascript; charset=utf-8",
        headers={"cache-control": CACHE_CONTROL, "x-content-type-options": "nosniff"},
    )


@widget_router.get("/", include_in_schema=False)
def demo_page() -> HTMLResponse:
    return HTMLResponse(_static("demo.html"), headers={"x-content-type-options": "nosniff"})


def with_widget(app: FastAPI) -> FastAPI:
    """`app` with the widget and the demo page mounted (the Lambda apps go without)."""
    app.include_router(widget_router)
    return app
