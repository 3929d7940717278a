"""Edges: pure functions of the state that name the next node."""

from __future__ import annotations

from typing import Literal

from candor.graph.state import GraphState

Node = Literal["moderate", "route", "curated", "retrieve", "grade", "rewrite", "generate", "END"]


def after_moderate(state: GraphState) -> Node:
    return "END" if state.decision in ("warned", "ended") else "route"


def after_route(state: GraphState) -> Node:
    match state.decision:
        case "smalltalk":
            return "generate"
        case "code_refused":
            return "END"
        case None:
            # A follow-up is read with the history: no curated question asks it.
            look = state.curated_look or state.curated_found is not None
            return "curated" if look and state.intent == "question" else "retrieve"
        case other:
            raise ValueError(f"route left an unexpected decision: {other!r}")


def after_curated(state: GraphState) -> Node:
    return "END" if state.curated_id is not None else "retrieve"


def after_retrieve(state: GraphState) -> Node:
    return "grade"


def after_grade(state: GraphState, *, max_attempts: int) -> Node:
    """Rewrite and retry while attempts remain; the cap makes the loop finite."""
    if state.answerable:
        return "generate"
    if state.grades and state.grades[-1].by == "gate":
        return "generate"  # no rewrite finds a name that no document holds
    return "rewrite" if state.attempts < max_attempts else "generate"


def after_rewrite(state: GraphState) -> Node:
    return "retrieve"


def after_generate(state: GraphState) -> Node:
    return "END"
