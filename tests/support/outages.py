"""Backends that are down, or fail on chosen calls: real ports, faults injected around them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from decimal import Decimal

from candor.errors import IndexError_
from candor.ports import CacheKey, RateDecision, Session, SessionStatus, StateStore, Turn, Vectors
from candor.types import Chunk, Metadata, Rankings

# What a real outage's text holds and the public must never read.
INTERNAL_TEXT = "my-index-abc1234.svc.aped-1234-a56b.pinecone.io /candor/openai-api-key sk-...Xy9z"


class DownIndex:
    """A VectorIndex whose every call fails as the Pinecone adapter fails when its host is down."""

    def _down(self) -> IndexError_:
        return IndexError_(f"pinecone: PineconeConnectionError: {INTERNAL_TEXT}")

    def upsert(self, chunks: Sequence[Chunk], vectors: Vectors) -> int:
        raise self._down()

    def query(
        self,
        *,
        vector: Vectors | None,
        keywords: str | None,
        top_k: int,
        where: Metadata | None = None,
    ) -> Rankings:
        raise self._down()

    def fetch(self, ids: Sequence[str]) -> list[Chunk]:
        raise self._down()

    def delete(self, ids: Sequence[str]) -> int:
        raise self._down()

    def list_ids(self, prefix: str = "") -> Iterator[str]:
        raise self._down()

    def count(self) -> int:
        raise self._down()


class FailingState:
    """A real StateStore whose methods named in `failing` raise `error` instead.

    `calls` counts every call by method name, failed or not.
    """

    def __init__(
        self, inner: StateStore, failing: set[str] | None = None, error: Exception | None = None
    ) -> None:
        self.inner = inner
        self.failing = failing or set()
        self.error = error or RuntimeError("injected fault")
        self.failed: list[str] = []
        self.calls: Counter[str] = Counter()

    def _check(self, name: str) -> None:
        self.calls[name] += 1
        if name in self.failing:
            self.failed.append(name)
            raise self.error

    def get_session(self, session_id: str) -> Session:
        self._check("get_session")
        return self.inner.get_session(session_id)

    def record_offence(self, session_id: str) -> SessionStatus:
        self._check("record_offence")
        return self.inner.record_offence(session_id)

    def append_turn(self, session_id: str, turn: Turn, *, keep: int) -> None:
        self._check("append_turn")
        self.inner.append_turn(session_id, turn, keep=keep)

    def hit_rate_limit(
        self, key: str, *, window_seconds: int, limit: int, now: float
    ) -> RateDecision:
        self._check("hit_rate_limit")
        return self.inner.hit_rate_limit(key, window_seconds=window_seconds, limit=limit, now=now)

    def reserve_budget(
        self, ledger_key: str, amount: Decimal, *, cap: Decimal, expires_at: int
    ) -> bool:
        self._check("reserve_budget")
        return self.inner.reserve_budget(ledger_key, amount, cap=cap, expires_at=expires_at)

    def settle_budget(self, ledger_key: str, *, reserved: Decimal, actual: Decimal) -> None:
        self._check("settle_budget")
        self.inner.settle_budget(ledger_key, reserved=reserved, actual=actual)

    def budget_spent(self, ledger_key: str) -> Decimal:
        self._check("budget_spent")
        return self.inner.budget_spent(ledger_key)

    def cache_get(self, key: CacheKey, *, now: float) -> str | None:
        self._check("cache_get")
        return self.inner.cache_get(key, now=now)

    def cache_put(self, key: CacheKey, value: str, *, expires_at: int) -> None:
        self._check("cache_put")
        self.inner.cache_put(key, value, expires_at=expires_at)

    def corpus_version(self, index_name: str) -> int:
        self._check("corpus_version")
        return self.inner.corpus_version(index_name)

    def bump_corpus_version(self, index_name: str) -> int:
        self._check("bump_corpus_version")
        return self.inner.bump_corpus_version(index_name)
