"""Fault injection: a real backend behind a port, whose Nth write fails.

FaultyIndex and FaultyStateStore implement the VectorIndex and StateStore ports by
passing every call to the backend they wrap, and raise InjectedFault in place of
the write a FailNth names, once. The failed write does not reach the backend, as
when a request never arrives; the writes before and after it do. Reads always pass.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from candor.ports import StateStore, VectorIndex, Vectors
from candor.types import Chunk, Metadata, Rankings

INDEX_WRITES = frozenset({"upsert", "delete"})
STATE_WRITES = frozenset(
    {
        "record_offence",
        "append_turn",
        "hit_rate_limit",
        "reserve_budget",
        "settle_budget",
        "cache_put",
        "bump_corpus_version",
        "set_ingest_record",
    }
)


class InjectedFault(Exception):
    """A backend's own exception, not one of candor's: the kind an SDK or driver raises."""


@dataclass
class FailNth:
    """Fail the `nth` (1-based) write among `methods` (every write of the port when empty).

    `writes` lists the watched writes seen so far, the failed one included.
    """

    nth: int
    methods: Collection[str] = ()
    writes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.nth < 1:
            raise ValueError(f"nth counts from 1, not {self.nth}")

    @property
    def fired(self) -> bool:
        return len(self.writes) >= self.nth

    def before(self, method: str) -> None:
        if self.methods and method not in self.methods:
            return
        self.writes.append(method)
        if len(self.writes) == self.nth:
            raise InjectedFault(f"injected failure of write {self.nth} ({method})")


class FaultyIndex:
    """A VectorIndex that fails one write of the index it wraps."""

    def __init__(self, inner: VectorIndex, fail: FailNth) -> None:
        unknown = set(fail.methods) - INDEX_WRITES
        if unknown:
            raise ValueError(f"not writes of a VectorIndex: {sorted(unknown)}")
        self.inner = inner
        self.fail = fail

    def upsert(self, chunks: Sequence[Chunk], vectors: Vectors) -> int:
        self.fail.before("upsert")
        return self.inner.upsert(chunks, vectors)

    def delete(self, ids: Sequence[str]) -> int:
        self.fail.before("delete")
        return self.inner.delete(ids)

    def query(
        self,
        *,
        vector: Vectors | None,
        keywords: str | None,
        top_k: int,
        where: Metadata | None = None,
    ) -> Rankings:
        return self.inner.query(vector=vector, keywords=keywords, top_k=top_k, where=where)

    def fetch(self, ids: Sequence[str]) -> list[Chunk]:
        return self.inner.fetch(ids)

    def list_ids(self, prefix: str = "") -> Iterator[str]:
        return self.inner.list_ids(prefix)

    def count(self) -> int:
        return self.inner.count()


class FaultyStateStore:
    """A StateStore that fails one write of the store it wraps.

    The writes are named in STATE_WRITES; every other method (the reads, and any
    the port gains) passes straight through.
    """

    def __init__(self, inner: StateStore, fail: FailNth) -> None:
        unknown = set(fail.methods) - STATE_WRITES
        if unknown:
            raise ValueError(f"not writes of a StateStore: {sorted(unknown)}")
        self.inner = inner
        self.fail = fail

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if name not in STATE_WRITES:
            return method

        def write(*args: Any, **kwargs: Any) -> Any:
            self.fail.before(name)
            return method(*args, **kwargs)

        return write
