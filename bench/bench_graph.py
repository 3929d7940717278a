"""Graph overhead: the runner, nodes and edges with an instant model and a tiny index.

Prints graph_overhead_p50_ms / p95 for an answered question (5 nodes) and for a
question that is rewritten once and then declined (8 nodes). Target: p50 < 10 ms.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.graph.schemas import Rewrite, Triage
from candor.ports import Judged, Structured, Text, TextPiece, read_text
from candor.service import ask
from candor.settings import Settings
from candor.types import Chunk, Message, Usage

M = TypeVar("M", bound=BaseModel)
RUNS = 300


class InstantModel:
    """Answers every decision at once; `answerable` picks the path."""

    name = "instant"

    def __init__(self, answerable: bool) -> None:
        self.answerable = answerable

    async def structured(
        self, messages: Sequence[Message], schema: type[M], *, max_tokens: int = 128
    ) -> Structured[M]:
        values: dict[type[BaseModel], BaseModel] = {
            Triage: Triage(abusive=False, kind="question"),
            Rewrite: Rewrite(query="git push force lease"),
        }
        value = values[schema]
        assert isinstance(value, schema)
        return Structured(value, Usage(100, 5))

    async def judge(self, messages: Sequence[Message], options: Sequence[str]) -> Judged:
        yes = 1.0 if self.answerable else 0.0
        return Judged({options[0]: yes, options[1]: 1.0 - yes}, Usage(100, 1))

    async def text(self, messages: Sequence[Message], *, max_tokens: int = 256) -> Text:
        return await read_text(self.stream(messages, max_tokens=max_tokens))

    async def stream(
        self, messages: Sequence[Message], *, max_tokens: int = 256
    ) -> AsyncIterator[TextPiece]:
        yield "It refuses to overwrite unseen work [1]."
        yield Usage(400, 12)


def build(folder: Path, answerable: bool) -> Deps:
    # The guards' writes count as overhead; the cache would skip the graph after run one,
    # and the instant model has no price to reserve from.
    settings = Settings(
        data_dir=folder,
        embedder_backend="hashing",
        history_turns=0,
        cache_enabled=False,
        budget_reserve_usd=Decimal(0),
    )
    embedder = HashingEmbedder()
    index = SqliteVectorIndex(settings.index_path, embedder.dimensions, embedder=embedder.name)
    chunks = [
        Chunk(f"doc{n}-0", f"passage {n} about git push option number {n}", f"doc{n}.md")
        for n in range(50)
    ]
    index.upsert(chunks, embedder.embed([c.text for c in chunks]))
    state = SqliteStateStore(settings.state_path)
    return Deps(settings, InstantModel(answerable), embedder, index, None, state)


def measure(deps: Deps) -> list[float]:
    async def loop() -> list[float]:
        times = []
        for _ in range(RUNS):
            started = time.perf_counter()
            await ask(deps, "What does git push --force-with-lease do?")
            times.append((time.perf_counter() - started) * 1000)
        return times

    return asyncio.run(loop())


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for label, answerable in (("answered", True), ("declined_after_rewrite", False)):
            times = sorted(measure(build(Path(tmp) / label, answerable)))
            p50 = statistics.median(times)
            p95 = times[int(len(times) * 0.95)]
            print(f"graph_overhead_{label}_p50_ms={p50:.2f}")
            print(f"graph_overhead_{label}_p95_ms={p95:.2f}")


if __name__ == "__main__":
    main()
