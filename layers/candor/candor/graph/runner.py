"""The runner: executes nodes until END and records a trace step per node.

As it goes it emits events: a StepEvent when each node finishes, and a
TokenEvent per piece of text generate's model call streams, shaped as it goes
by the same rules as the answer generate keeps (nodes.answer_cleaner: no pasted
labels, table rows or passages). POST /ask ignores them and takes the final
state; POST /ask/stream and `candor ask` show them.

It also holds each run to the limits the budget reserved for (candor.graph.limits):
a node visited more often than `limits.visits` allows (plan and retrieve share the
attempts: `limits.SEARCHES`), a model call that no slot
of its node covers, or an index read past its node's `limits.INDEX_READS`, is a
bug and raises before anything is spent. Each step's trace counts its index reads. And it
keeps the request's deadline: no model call starts after it.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel

from candor import billing, index_reads, observability
from candor import deadline as deadlines
from candor.billing import Bill, Meter
from candor.deadline import Deadline
from candor.deps import Deps
from candor.errors import ConfigurationError
from candor.graph import catalogue, curated, edges, limits, nodes, plan
from candor.graph.answer_text import AnswerCleaner
from candor.graph.state import GraphState, TraceStep, Update
from candor.index_reads import ReadPrice
from candor.ports import (
    ChatModel,
    Embedder,
    Judged,
    PricedEmbedder,
    Reranked,
    Reranker,
    Structured,
    Text,
    TextPiece,
    VectorIndex,
    Vectors,
    read_text,
)
from candor.settings import Price, Settings
from candor.types import NO_USAGE, Chunk, Message, Metadata, Rankings, Usage

NodeFn = Callable[[GraphState, Deps], Awaitable[Update]]
M = TypeVar("M", bound=BaseModel)

# Each node runs in an X-Ray subsegment on Lambda (candor.observability).
NODES: dict[str, NodeFn] = observability.traced_nodes(
    {
        "moderate": nodes.moderate,
        "route": nodes.route,
        "curated": curated.curated,
        "catalogue": catalogue.catalogue,
        "plan": plan.plan,
        "retrieve": nodes.retrieve,
        "grade": nodes.grade,
        "rewrite": nodes.rewrite,
        "generate": nodes.generate,
    }
)


@dataclass(frozen=True, slots=True)
class StepEvent:
    """A node finished: its trace step (name, milliseconds, tokens, cost)."""

    step: TraceStep


@dataclass(frozen=True, slots=True)
class TokenEvent:
    """A piece of the reply as generate's model call streams it, once it is shaped.

    The final answer can differ: citation markers are resolved at the end, and an
    answer no passage accounts for becomes a decline.
    """

    text: str


Event = StepEvent | TokenEvent
Emit = Callable[[Event], None]

# The node whose streamed text is the reply the visitor sees.
STREAMING_NODE = "generate"
# Nodes whose answer is written already (the owner's, the catalogue's template):
# streamed as they end.
WRITTEN_NODES = frozenset({"curated", "catalogue"})


def _ignore(event: Event) -> None:
    pass


class MeteredChatModel:
    """The chat model as one node sees it: metered, within its node's slots and the deadline.

    Each call opens a bill on the meter (candor.billing) with the call's bound,
    priced at `price`, and closes it however the call ends: a call that failed
    after it was sent (a reply of no use, a timeout, the deadline, a cancel, a
    client that hung up mid-stream) is charged what the provider reported, or
    its bound where nothing did, so that the budget is settled to no less than
    was spent. The local model has no price: its bound costs nothing.
    """

    def __init__(
        self,
        inner: ChatModel,
        meter: Meter,
        bounds: dict[str, limits.CallBound],
        *,
        price: Price | None = None,
        emit: Emit = _ignore,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.meter = meter
        self._bounds = bounds
        self._price = price
        self._emit = emit
        self._node = ""
        self._slots: list[limits.CallBound] = []
        self._shape: Callable[[], AnswerCleaner] | None = None

    def begin(self, node: str, *, shape: Callable[[], AnswerCleaner] | None = None) -> None:
        """A visit of `node` starts: it may make the calls its slots allow.

        `shape` makes what cleans each text call the streaming node makes, as it streams.
        """
        self._node = node
        self._slots = [limits.slot_bound(slot, self._bounds) for slot in limits.NODE_CALLS[node]]
        self._shape = shape

    def _open(self, what: str, need: limits.CallBound) -> Bill:
        current = deadlines.current()
        if current is not None:
            current.check(f"the {what} call of {self._node}")
        for i, slot in enumerate(self._slots):
            if slot.covers(need):
                del self._slots[i]
                break
        else:
            raise RuntimeError(
                f"{self._node} made a {what} call of up to {need.tokens_in} tokens in and "
                f"{need.tokens_out} out that no slot of candor.graph.limits.NODE_CALLS covers: "
                "the budget did not reserve for it"
            )
        cost = self._price.cost(need.tokens_in, need.tokens_out) if self._price else 0.0
        bound = Usage(need.tokens_in, need.tokens_out, cost)
        return self.meter.open(bound, f"the {what} call of {self._node}")

    async def structured(
        self, messages: Sequence[Message], schema: type[M], *, max_tokens: int = 128
    ) -> Structured[M]:
        need = limits.CallBound(limits.input_tokens(messages, schema), max_tokens)
        bill = self._open(schema.__name__, need)
        returned: Usage | None = None
        try:
            result = await self.inner.structured(messages, schema, max_tokens=max_tokens)
            returned = result.usage
        finally:
            self.meter.close(bill, returned)
        return result

    async def judge(self, messages: Sequence[Message], options: Sequence[str]) -> Judged:
        need = limits.CallBound(limits.input_tokens(messages), limits.JUDGE_MAX_TOKENS)
        bill = self._open("judge", need)
        returned: Usage | None = None
        try:
            result = await self.inner.judge(messages, options)
            returned = result.usage
        finally:
            self.meter.close(bill, returned)
        return result

    async def text(self, messages: Sequence[Message], *, max_tokens: int = 256) -> Text:
        return await read_text(self.stream(messages, max_tokens=max_tokens))

    async def stream(
        self, messages: Sequence[Message], *, max_tokens: int = 256
    ) -> AsyncIterator[TextPiece]:
        need = limits.CallBound(limits.input_tokens(messages), max_tokens)
        bill = self._open("text", need)
        reported: Usage | None = None
        streams = self._node == STREAMING_NODE
        cleaner = self._shape() if streams and self._shape else None
        try:
            async for piece in self.inner.stream(messages, max_tokens=max_tokens):
                if isinstance(piece, Usage):
                    reported = piece
                elif streams:
                    self._show(cleaner.feed(piece) if cleaner else piece)
                yield piece
            if cleaner:
                self._show(cleaner.finish())
        finally:
            # Also on GeneratorExit and CancelledError (a client that hung up) and the
            # deadline mid-stream: a stream cut before its usage came is at its bound.
            self.meter.close(bill, reported)

    def _show(self, text: str) -> None:
        if text:
            self._emit(TokenEvent(text))


class MeteredEmbedder:
    """The embedder as one node sees it: metered when it is priced, within its node's texts.

    Each visit may embed the texts limits.EMBEDDINGS lists for its node, each no
    longer than its bound; a text beyond them is a bug and raises before it is sent.
    A priced embedding is billed as a chat call is (candor.billing): at what the
    provider reported, or its bound, a token per UTF-8 byte, where nothing did.
    """

    def __init__(self, inner: Embedder, meter: Meter, price: Price | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimensions = inner.dimensions
        self.meter = meter
        self._price = price
        self._node = ""
        self._bounds: list[int] = []  # what the visit may still embed, one bound a text

    def begin(self, node: str) -> None:
        self._node = node
        self._bounds = sorted(limits.embedding_bounds(node), reverse=True)

    def _admit(self, texts: Sequence[str]) -> None:
        needs = sorted((limits.embedding_tokens([text]) for text in texts), reverse=True)
        left = list(self._bounds)
        for need in needs:
            # The smallest bound that covers it, so that larger ones stay for larger texts.
            fitting = [i for i, bound in enumerate(left) if bound >= need]
            if not fitting:
                raise RuntimeError(
                    f"{self._node} embedded {len(texts)} texts beyond "
                    "candor.graph.limits.EMBEDDINGS"
                )
            del left[fitting[-1]]
        self._bounds = left

    def embed(self, texts: Sequence[str]) -> Vectors:
        current = deadlines.current()
        if current is not None:
            current.check(f"the embedding of {self._node}")
        self._admit(texts)
        if not isinstance(self.inner, PricedEmbedder):
            return self.inner.embed(texts)  # a local embedder: free
        tokens = limits.embedding_tokens(texts)
        cost = self._price.cost(tokens, 0) if self._price else 0.0
        bill = self.meter.open(Usage(tokens, 0, cost), f"the embedding of {self._node}")
        returned: Usage | None = None
        try:
            vectors, returned = self.inner.embed_with_usage(texts)
        finally:
            self.meter.close(bill, returned)
        return vectors


class MeteredIndex:
    """The index as one node sees it: every query and fetch counted, within its node's reads.

    Each visit may make limits.INDEX_READS reads of its node; one past them is a
    bug and raises before it is sent. Where the index bills reads (Pinecone,
    candor.index_reads), each is metered as a model call is (candor.billing): at
    what its response reported, or at its bound where nothing did (a fetch, a
    failed query). `take` gives the reads since the last take, a trace step's count.
    """

    def __init__(self, inner: VectorIndex, meter: Meter, price: ReadPrice | None = None) -> None:
        self.inner = inner
        self.meter = meter
        self._price = price
        self._node = ""
        self._left = 0
        self._reads = 0

    def begin(self, node: str) -> None:
        self._node = node
        self._left = limits.INDEX_READS.get(node, 0)

    def take(self) -> int:
        reads, self._reads = self._reads, 0
        return reads

    def _admit(self, what: str) -> None:
        if self._left <= 0:
            raise RuntimeError(
                f"{self._node} made an index {what} past the "
                f"{limits.INDEX_READS.get(self._node, 0)} that candor.graph.limits.INDEX_READS "
                "allows a visit"
            )
        self._left -= 1
        self._reads += 1

    def query(
        self,
        *,
        vector: Vectors | None,
        keywords: str | None,
        top_k: int,
        where: Metadata | None = None,
    ) -> Rankings:
        self._admit("query")
        if self._price is None:
            return self.inner.query(vector=vector, keywords=keywords, top_k=top_k, where=where)
        bound = self._price.query_bound(dense=vector is not None, keyword=bool(keywords))
        bill = self.meter.open(Usage(cost_usd=bound, calls=0), f"the index query of {self._node}")
        returned: Usage | None = None
        try:
            rankings = self.inner.query(vector=vector, keywords=keywords, top_k=top_k, where=where)
            if rankings.read_units is not None:
                returned = Usage(cost_usd=self._price.cost(rankings.read_units), calls=0)
        finally:
            self.meter.close(bill, returned)
        return rankings

    def fetch(self, ids: Sequence[str]) -> list[Chunk]:
        self._admit("fetch")
        if self._price is None:
            return self.inner.fetch(ids)
        # Pinecone bills a fetch by its ids alone: its bound is what it costs.
        bound = Usage(cost_usd=self._price.fetch_bound(len(ids)), calls=0)
        bill = self.meter.open(bound, f"the index fetch of {self._node}")
        try:
            return self.inner.fetch(ids)
        finally:
            self.meter.close(bill, None)

    # The graph writes nothing: the rest passes through, uncounted.

    def upsert(self, chunks: Sequence[Chunk], vectors: Vectors) -> int:
        return self.inner.upsert(chunks, vectors)

    def delete(self, ids: Sequence[str]) -> int:
        return self.inner.delete(ids)

    def list_ids(self, prefix: str = "") -> Iterator[str]:
        return self.inner.list_ids(prefix)

    def count(self) -> int:
        return self.inner.count()


class MeteredReranker:
    """Wraps the reranker to add what its calls cost to the meter (a hosted reranker
    is billed per request), so that the retrieve step's cost says so. `bound` is
    the most one request can cost (candor.backends.pinecone_reranker)."""

    def __init__(self, inner: Reranker, meter: Meter, bound: Usage = NO_USAGE) -> None:
        self.inner = inner
        self.name = inner.name
        self.meter = meter
        self._bound = bound

    def rerank(self, query: str, passages: Sequence[Chunk]) -> Reranked:
        current = deadlines.current()
        if current is not None:
            current.check("the reranking")
        bill = self.meter.open(self._bound, "the reranking")
        returned: Usage | None = None
        try:
            result = self.inner.rerank(query, passages)
            returned = result.usage
        finally:
            self.meter.close(bill, returned)
        return result


def next_node(current: str, state: GraphState, max_attempts: int) -> str:
    match current:
        case "moderate":
            return edges.after_moderate(state)
        case "route":
            return edges.after_route(state)
        case "curated":
            return edges.after_curated(state)
        case "catalogue":
            return edges.after_catalogue(state)
        case "plan":
            return edges.after_plan(state)
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


async def run(
    state: GraphState,
    deps: Deps,
    *,
    meter: Meter | None = None,
    deadline: Deadline | None = None,
    emit: Emit = _ignore,
) -> GraphState:
    """Run the graph from moderate to END and return the final state with its trace.

    `meter` receives the usage of every call (also of a run that fails or is
    cancelled), and admits only the calls that its allowance still covers; past
    `deadline`, no further model call starts: DeadlineExceededError. `emit`
    receives the events as they happen.
    """
    max_attempts = deps.settings.max_attempts
    meter = meter or Meter()
    chat = MeteredChatModel(
        deps.chat,
        meter,
        dict(limits.call_bounds(deps.settings)),
        price=_price(deps.settings, deps.chat.name),
        emit=emit,
    )
    embedder = MeteredEmbedder(deps.embedder, meter, _price(deps.settings, deps.embedder.name))
    reranker = (
        MeteredReranker(deps.reranker, meter, _rerank_bound(deps.settings))
        if deps.reranker is not None
        else None
    )
    index = MeteredIndex(deps.index, meter, index_reads.read_price(deps.settings))
    node_deps = dataclasses.replace(
        deps, chat=chat, embedder=embedder, reranker=reranker, index=index
    )
    allowed = limits.visits(max_attempts)
    visited: Counter[str] = Counter()
    trace: list[TraceStep] = []
    current = "moderate"
    with deadlines.bound(deadline), billing.metering(meter):
        while current != "END":
            visited[current] += 1
            if visited[current] > allowed[current]:
                raise RuntimeError(
                    f"the graph reached {current} more than the {allowed[current]} times "
                    "candor.graph.limits.visits allows"
                )
            if current in limits.SEARCHES and (
                sum(visited[node] for node in limits.SEARCHES) > max_attempts
            ):
                raise RuntimeError(
                    f"the graph searched more than the {max_attempts} attempts "
                    "candor.graph.limits.SEARCHES share"
                )
            shape = (
                nodes.answer_cleaner(state, deps.settings) if current == STREAMING_NODE else None
            )
            chat.begin(current, shape=shape)
            embedder.begin(current)
            index.begin(current)
            started = time.perf_counter()
            update = await NODES[current](state, node_deps)
            ms = (time.perf_counter() - started) * 1000
            usage = meter.take()
            step = TraceStep(
                current,
                round(ms, 2),
                usage.tokens_in,
                usage.tokens_out,
                usage.cost_usd,
                tokens_evaluated=usage.tokens_evaluated,
                index_reads=index.take(),
            )
            trace.append(step)
            if current in WRITTEN_NODES and "answer" in update:
                for piece in curated.pieces(update["answer"]):
                    emit(TokenEvent(piece))
            emit(StepEvent(step))
            state = dataclasses.replace(state, **update)
            current = next_node(current, state, max_attempts)
    return dataclasses.replace(state, trace=tuple(trace))


def _price(settings: Settings, model: str) -> Price | None:
    """A model's price, to charge a call at its bound; None when it has none."""
    try:
        return settings.price(model)
    except ConfigurationError:  # a fixed reservation (budget_reserve_usd) needs none
        return None


def _rerank_bound(settings: Settings) -> Usage:
    """The most one reranking request can cost, as the reservation counts it."""
    # The module imports no Pinecone SDK at load; reranking is off by default.
    from candor.backends.pinecone_reranker import request_cost_upper_bound

    return Usage(cost_usd=float(request_cost_upper_bound(settings)))
