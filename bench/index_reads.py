"""Index reads one request makes, for a plain question and for questions of hundreds of names.

    python bench/index_reads.py

A count, not a timing: each question goes through `candor.service.ask` on the
embedded SQLite index (three passages) with a scripted model, behind a wrapper
that counts every query and fetch reaching the index; the trace's own count
(`index_reads`, summed over its steps) is printed beside it, with the bound the
budget reserves for (candor.graph.limits.INDEX_READS). Run it on an older
release to compare: before 2026-12-06 the grounding gate looked up each name
with queries of its own (202 and 402 for the two questions of 200 names).
"""

from __future__ import annotations

import asyncio
import random
import string
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from candor import service
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.graph import limits
from candor.settings import DEFAULT_PRICES, Settings
from tests.conftest import PASSAGES
from tests.support.fakes import EndlessChat


class Counting:
    """The index, every query and fetch counted."""

    def __init__(self, inner: SqliteVectorIndex) -> None:
        self.inner = inner
        self.reads = 0

    def query(self, **kw: Any) -> Any:
        self.reads += 1
        return self.inner.query(**kw)

    def fetch(self, ids: Sequence[str]) -> Any:
        self.reads += 1
        return self.inner.fetch(ids)

    def list_ids(self, prefix: str = "") -> Iterator[str]:
        return self.inner.list_ids(prefix)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def flags(n: int) -> str:
    rnd = random.Random(1)
    found: list[str] = []
    while len(found) < n:
        flag = "--" + "".join(rnd.choice(string.ascii_lowercase) for _ in range(2))
        if flag not in found:
            found.append(flag)
    return " ".join(found)


def products(n: int) -> str:
    rnd = random.Random(2)
    found: list[str] = []
    while len(found) < n:
        name = rnd.choice(string.ascii_lowercase) + rnd.choice(string.ascii_uppercase)
        name += rnd.choice(string.ascii_lowercase)
        if name not in found:
            found.append(name)
    return ", ".join(found)


QUESTIONS = {
    "a plain question": "What does --force-with-lease protect?",
    "200 absent --flags": flags(200),
    "200 made-up product names": products(200),
}


def main() -> int:
    for label, question in QUESTIONS.items():
        with tempfile.TemporaryDirectory() as folder:
            settings = Settings(
                data_dir=Path(folder),
                embedder_backend="hashing",
                screening=False,
                cache_enabled=False,
                prices={**DEFAULT_PRICES, "scripted": DEFAULT_PRICES["gpt-4o-mini"]},
            )
            embedder = HashingEmbedder()
            index = SqliteVectorIndex(settings.index_path, embedder.dimensions)
            index.upsert(PASSAGES, embedder.embed([c.text for c in PASSAGES]))
            state = SqliteStateStore(settings.state_path)
            counting = Counting(index)
            deps = Deps(settings, EndlessChat(), embedder, counting, None, state)
            try:
                result = asyncio.run(service.ask(deps, question))
            finally:
                index.close()
                state.close()
            traced = sum(getattr(step, "index_reads", 0) for step in result.trace)
            bound = getattr(limits.envelope(settings), "index_reads", "none")
            print(
                f"{label}: {len(question)} characters, {counting.reads} index reads "
                f"(trace: {traced}; bound: {bound}), {result.decision}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
