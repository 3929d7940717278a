"""Structured outputs of the model's decisions. Field order is the order the model writes."""

from __future__ import annotations

from pydantic import BaseModel, Field

from candor.graph.state import Intent


class Triage(BaseModel):
    abusive: bool
    kind: Intent


class Moderation(BaseModel):
    """A focused second look at a message the triage flagged as abusive."""

    insulting: bool


class Rewrite(BaseModel):
    query: str = Field(min_length=1, max_length=200)
