"""The runner: executes nodes until END and records a trace step per node."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TypeVar

from pydantic import BaseModel

from candor.deps import Deps
from candor.graph import edges, nodes
from candor.graph.state import GraphState, TraceStep, Update
from candor.ports import ChatModel, Structured, Text, TextPiece, read_text
from candor.types import NO_USAGE, Message, Usage

NodeFn = Callable[[GraphState, Deps], Awaitable[Update]]
M = TypeVar("M", bound=BaseModel)

NODES: dict[str, NodeFn] = {
    "moderate": nodes.moderate,
    "route": nodes.route,
    "retrieve": nodes.retrieve,
    "grade": nodes.grade,
    "rewrite": nodes.rewrite,
    "generate": nodes.generate,
}

# moderate, route, then at most max_attempts rounds of retrieve/grade/rewrite, then
# generate. The edges already cap the loop; this bound guards against a future edge bug.
MAX_STEPS_PER_ATTEMPT = 3


class MeteredChatModel:
    """Wraps the chat model to add up the usage of the calls one node makes."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.name = inner.name
        self.usage = NO_USAGE

    def take(self) -> Usage:
        usage, self.usage = self.usage, NO_USAGE
        return usage

    async def structured(
        self, messages: Sequence[Message], schema: type[M], *, max_tokens: int = 128
    ) -> Structured[M]:
        result = await self.inner.structured(messages, schema, max_tokens=max_tokens)
        self.usage = self.usage + result.usage
        return result

    async def text(self, messages: Sequence[Message], *, max_tokens: int = 256) -> Text:
        return await read_text(self.stream(messages, max_tokens=max_tokens))

    async def stream(
        self, messages: Sequence[Message], *, max_tokens: int = 256
    ) -> AsyncIterator[TextPiece]:
        async for piece in self.inner.stream(messages, max_tokens=max_tokens):
            if isinstance(piece, Usage):
                self.usage = self.usage + piece
            yield piece


def next_node(current: str, state: GraphState, max_attempts: int) -> str:
    match current:
        case "moderate":
            return edges.after_moderate(state)
        case "route":
            return edges.after_route(state)
        case "retrieve":
            return edges.after_retrieve(state)
        case "grade":
            return edges.after_grade(state, max_attempts=max_attempts)
        case "rewrite":
            return edges.after_rewrite(state)
        case "generate":
            return edges.after_generate(state)
        case _:
            raise ValueError(f"unknown node {current!r}")


async def run(state: GraphState, deps: Deps) -> GraphState:
    """Run the graph from moderate to END and return the final state with its trace."""
    max_attempts = deps.settings.max_attempts
    metered = MeteredChatModel(deps.chat)
    node_deps = dataclasses.replace(deps, chat=metered)
    trace: list[TraceStep] = []
    current = "moderate"
    for _ in range(3 + MAX_STEPS_PER_ATTEMPT * max_attempts):
        if current == "END":
            break
        started = time.perf_counter()
        update = await NODES[current](state, node_deps)
        ms = (time.perf_counter() - started) * 1000
        usage = metered.take()
        trace.append(
            TraceStep(current, round(ms, 2), usage.tokens_in, usage.tokens_out, usage.cost_usd)
        )
        state = dataclasses.replace(state, **update)
        current = next_node(current, state, max_attempts)
    else:
        raise RuntimeError("the graph did not reach END within its step bound")
    return dataclasses.replace(state, trace=tuple(trace))
