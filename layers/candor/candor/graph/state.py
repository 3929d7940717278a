"""The state that flows through the graph, and the records it produces."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from candor.ports import Turn
from candor.types import Hit

Decision = Literal["answered", "declined", "smalltalk", "code_refused", "warned", "ended"]
Intent = Literal["greeting", "contact", "code_request", "question", "follow_up"]


@dataclass(frozen=True, slots=True)
class Citation:
    id: str
    source: str
    title: str
    snippet: str
    # The 1-based page of a PDF the passage starts on: a link opens `source#page=N`.
    page: int | None = None
    # The document's public http(s) address (candor.urls), when it has one.
    url: str | None = None


@dataclass(frozen=True, slots=True)
class TraceStep:
    node: str
    ms: float
    tokens_in: int
    tokens_out: int
    cost_usd: float


@dataclass(frozen=True, slots=True)
class GraphState:
    """Everything a node may read. Nodes never mutate it; they return an Update."""

    question: str
    session_id: str
    top_k: int
    history: Sequence[Turn] = ()
    intent: Intent | None = None
    query: str = ""
    queries: tuple[str, ...] = ()
    attempts: int = 0
    passages: tuple[Hit, ...] = ()
    answerable: bool | None = None
    decision: Decision | None = None
    answer: str = ""
    citations: tuple[Citation, ...] = ()
    trace: tuple[TraceStep, ...] = field(default=())


class Update(TypedDict, total=False):
    """The fields a node may change."""

    intent: Intent
    query: str
    queries: tuple[str, ...]
    attempts: int
    passages: tuple[Hit, ...]
    answerable: bool
    decision: Decision
    answer: str
    citations: tuple[Citation, ...]
