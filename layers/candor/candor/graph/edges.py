"""Edges: pure functions of the state that name the next node."""

from __future__ import annotations

from typing import Literal

from candor.graph.state import GraphState

Node = Literal[
    "moderate",
    "route",
    "curated",
    "catalogue",
    "plan",
    "retrieve",
    "grade",
    "rewrite",
    "generate",
    "END",
]


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
            if look and state.intent in ("question", "catalogue"):
                return "curated"
            return searching(state)
        case other:
            raise ValueError(f"route left an unexpected decision: {other!r}")


def after_curated(state: GraphState) -> Node:
    return "END" if state.curated_id is not None else searching(state)


def searching(state: GraphState) -> Node:
    """Where a question goes that nothing answered yet: the catalogue for a question
    about the documents themselves, the plan for one of two or more asks, else
    retrieval."""
    if state.intent == "catalogue":
        return "catalogue"
    return "plan" if state.parts else "retrieve"


def after_catalogue(state: GraphState) -> Node:
    """Answered from the catalogue: done. A greeting it could not answer: small talk.
    Anything else it could not answer: retrieval, as any question."""
    match state.decision:
        case "answered":
            return "END"
        case "smalltalk":
            return "generate"
        case None:
            return "retrieve"
        case other:
            raise ValueError(f"catalogue left an unexpected decision: {other!r}")


def after_plan(state: GraphState) -> Node:
    return "grade"


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
