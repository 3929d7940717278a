"""GET /widget/config: what the widget offers on this site, read once when its panel opens.

The starter questions (candor.suggestions: the owner's, or those candor checked it
answers, stored per corpus version) and whether hand-offs are on, with how much of
the conversation they carry. A GET, public like /health: no model call, at most
two reads of the state store, and cached by browsers for a minute.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from candor.deps import Deps
from candor.handoffs.transcript import scope_of, window_minutes
from candor.suggestions import Suggestions

CACHE_CONTROL = "public, max-age=60"


class HandoffConfig(BaseModel):
    enabled: bool
    transcript: Literal["conversation", "window"] = Field(
        description="`window`: only the turns of the last `window_minutes` go with a hand-off "
        "(CANDOR_STORE_QUESTIONS=false)."
    )
    window_minutes: int | None = None


class WidgetConfig(BaseModel):
    suggestions: list[str] = Field(description="Up to four starter questions.")
    handoff: HandoffConfig


config_router = APIRouter(tags=["widget"])


@config_router.get("/widget/config", response_model=WidgetConfig)
async def widget_config(request: Request, response: Response) -> WidgetConfig:
    """The widget's starter questions and hand-off settings."""
    deps: Deps = request.app.state.deps_provider()
    suggestions: Suggestions | None = getattr(request.app.state, "suggestions", None)
    if suggestions is None:
        suggestions = request.app.state.suggestions = Suggestions()
    settings = deps.settings
    response.headers["cache-control"] = CACHE_CONTROL
    return WidgetConfig(
        suggestions=await suggestions.for_widget(deps),
        handoff=HandoffConfig(
            enabled=settings.handoffs_enabled,
            transcript=scope_of(settings),
            window_minutes=window_minutes(settings),
        ),
    )
