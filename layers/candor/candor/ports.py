"""The ports: small Protocols that every backend implements.

Chat models are async (a network round trip or seconds of local compute);
the others are plain calls that the graph runs in a worker thread.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Generic, Literal, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel

from candor.errors import ModelError
from candor.types import Chunk, Message, Metadata, Rankings, Usage

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T", bound=BaseModel)
Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class Structured(Generic[T]):
    value: T
    usage: Usage


@dataclass(frozen=True, slots=True)
class Text:
    text: str
    usage: Usage


@dataclass(frozen=True, slots=True)
class Judged:
    """How likely the model finds each option as its reply: probabilities over the
    options, summing to 1 (all 0 when `mass` is 0), and the call's usage.

    `mass` is the share of the reply's first token that the options held together
    before they were normalised: a reply that opens with neither ("Partially", "Sure")
    leaves little on them, and their normalised probabilities then say nothing. 1.0
    where the backend saw only the reply as written.
    """

    probabilities: dict[str, float]
    usage: Usage
    mass: float = 1.0

    def probability(self, option: str) -> float:
        return self.probabilities.get(option, 0.0)


@runtime_checkable
class Preloadable(Protocol):
    """A backend that can do at start what its first call would otherwise pay for.

    The embedded chat model loads its weights and evaluates each fixed system prompt
    once (candor.warmup); a backend behind a network has nothing worth preloading.
    """

    def preload(self, system_prompts: Sequence[str]) -> None:
        """Blocking; safe to call while other calls run (they wait their turn)."""
        ...


# What ChatModel.stream yields: pieces of text as they are generated, then the
# call's Usage, once, last.
TextPiece = str | Usage


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: a constrained structured call, a judged choice between words, and a
    free-text call, whole or streamed."""

    name: str

    async def structured(
        self, messages: Sequence[Message], schema: type[M], *, max_tokens: int = 128
    ) -> Structured[M]:
        """Return an instance of `schema`; the output is constrained so it always parses."""
        ...

    async def judge(self, messages: Sequence[Message], options: Sequence[str]) -> Judged:
        """The probability the model gives each option as its reply's first word.

        A calibrated score, not a verdict: the caller picks its own threshold. The
        options are single words that start differently ("yes", "no"); a call costs
        the prompt and one token.
        """
        ...

    async def text(self, messages: Sequence[Message], *, max_tokens: int = 256) -> Text:
        """Return free text: `read_text(self.stream(...))`."""
        ...

    def stream(
        self, messages: Sequence[Message], *, max_tokens: int = 256
    ) -> AsyncIterator[TextPiece]:
        """Yield free text in pieces as it is generated, then the call's Usage.

        A consumer that stops early (aclose, cancellation) ends the generation.
        """
        ...


async def read_text(pieces: AsyncIterator[TextPiece]) -> Text:
    """The whole reply of a stream, stripped, with the usage that ends it."""
    parts: list[str] = []
    usage: Usage | None = None
    async for piece in pieces:
        if isinstance(piece, Usage):
            usage = piece
        else:
            parts.append(piece)
    if usage is None:
        raise ModelError("the model's stream ended without reporting its usage")
    return Text("".join(parts).strip(), usage)


@runtime_checkable
class Embedder(Protocol):
    """Texts to unit-length vectors (rows of a float32 matrix)."""

    name: str
    dimensions: int

    def embed(self, texts: Sequence[str]) -> Vectors: ...


@runtime_checkable
class PricedEmbedder(Protocol):
    """An Embedder whose calls cost money and say what each one consumed.

    The graph meters a question's embeddings through it, so that they appear in
    the trace and are charged to the budget. Local embedders are free and need
    not implement it.
    """

    name: str

    def embed_with_usage(self, texts: Sequence[str]) -> tuple[Vectors, Usage]: ...


@runtime_checkable
class VectorIndex(Protocol):
    """Chunks with their vectors, searchable by vector and by keywords."""

    def upsert(self, chunks: Sequence[Chunk], vectors: Vectors) -> int:
        """Insert or overwrite by id; returns how many were written."""
        ...

    def query(
        self,
        *,
        vector: Vectors | None,
        keywords: str | None,
        top_k: int,
        where: Metadata | None = None,
    ) -> Rankings:
        """Rank by vector similarity and by keyword relevance (BM25), separately.

        `where` keeps chunks whose metadata (or `source`) equals every given value.
        """
        ...

    def fetch(self, ids: Sequence[str]) -> list[Chunk]: ...

    def delete(self, ids: Sequence[str]) -> int: ...

    def list_ids(self, prefix: str = "") -> Iterator[str]: ...

    def count(self) -> int: ...


@runtime_checkable
class MetadataUpdater(Protocol):
    """A VectorIndex that can change chunks' metadata in place, without their vectors.

    Optional: the ingest pipeline uses it when only a document's address changed,
    and re-embeds the document on an index without it. The SQLite index has it;
    Pinecone's update takes one id per request, so there a re-embedding and batched
    upsert of the document costs fewer round trips.
    """

    def update_metadata(self, ids: Sequence[str], values: Metadata) -> int:
        """Set `values` in the metadata of each chunk in `ids` that exists, keeping its
        other keys, text and vector; returns how many chunks were updated."""
        ...


@dataclass(frozen=True, slots=True)
class Reranked:
    """One score per passage, in the order given (higher is more relevant), and
    what the call cost: a hosted reranker is billed per request."""

    scores: list[float]
    usage: Usage


@runtime_checkable
class Reranker(Protocol):
    """Scores passages against a query."""

    name: str

    def rerank(self, query: str, passages: Sequence[Chunk]) -> Reranked: ...


SessionStatus = Literal["active", "warned", "ended"]


@dataclass(frozen=True, slots=True)
class Turn:
    question: str
    answer: str
    decision: str
    # The trace of the answer, where the turn was recorded with one: a hand-off reads
    # its sources there (candor.handoffs.transcript).
    trace_id: str | None = None


# The DynamoDB store's default for how long a session's status lasts after its last
# write (SQLite keeps it); the factory gives it CANDOR_SESSION_MAX_AGE_SECONDS, which
# is also how long history lasts when questions are stored (candor.service).
SESSION_LIFETIME_SECONDS = 30 * 86_400


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    status: SessionStatus = "active"
    history: list[Turn] = field(default_factory=list)


@runtime_checkable
class StateStore(Protocol):
    """Server-side state that must survive restarts and concurrent requests."""

    def get_session(self, session_id: str) -> Session:
        """The session, or a new active one with no history."""
        ...

    def session_status(self, session_id: str) -> SessionStatus:
        """The session's status alone, without reading its history ("active" if new)."""
        ...

    def record_offence(self, session_id: str) -> SessionStatus:
        """Atomically move active -> warned, warned -> ended; return the new status."""
        ...

    def append_turn(self, session_id: str, turn: Turn, *, keep: int, expires_at: int) -> None:
        """Add a turn to the session history, keeping only the last `keep` turns.

        The history is a record of its own, apart from the session's status: it and
        every turn in it expire at `expires_at` (epoch seconds), which each turn moves;
        a read after that returns no history, and a turn after that starts a new one."""
        ...

    # Each guard method below is one atomic conditional write (or one read), so
    # that concurrent requests on any number of machines cannot overshoot a limit.

    def hit_rate_limit(
        self, key: str, *, window_seconds: int, limit: int, now: float
    ) -> RateDecision:
        """Count one request in the fixed window that holds `now`, unless `limit` is reached.

        A refused request is not counted. Windows expire by themselves.
        """
        ...

    def reserve_budget(
        self, ledger_key: str, amount: Decimal, *, cap: Decimal, expires_at: int
    ) -> bool:
        """Add `amount` to the ledger if the ledger stays within `cap`; False leaves it as is."""
        ...

    def settle_budget(self, ledger_key: str, *, reserved: Decimal, actual: Decimal) -> None:
        """True a reservation up to the measured cost; `actual=0` refunds it in full."""
        ...

    def budget_spent(self, ledger_key: str) -> Decimal:
        """What the ledger holds now (0 for a ledger never written)."""
        ...

    def cache_get(self, key: CacheKey, *, now: float) -> str | None:
        """The cached value, or None when absent or expired."""
        ...

    def cache_put(self, key: CacheKey, value: str, *, expires_at: int) -> None: ...

    # Screening verdicts (candor.screening.verdicts): one short string per digest of
    # a normalised message, kept until it expires.

    def verdict_get(self, digest: str, *, now: float) -> str | None:
        """The verdict stored under `digest`, or None when absent or expired."""
        ...

    def verdict_put(self, digest: str, verdict: str, *, expires_at: int) -> None:
        """Store (or replace) the verdict under `digest` until `expires_at`."""
        ...

    def corpus_version(self, index_name: str) -> int:
        """The index's corpus version: 0 until the first ingest bumps it."""
        ...

    def bump_corpus_version(self, index_name: str) -> int:
        """Atomically add one to the corpus version and return the new version."""
        ...

    # Ingest completion records: one short string per (index, document source),
    # whose meaning candor.ingest.records defines. Reads see every earlier write.

    def ingest_record(self, index_name: str, source: str) -> str | None:
        """The document's completion record, or None when it has none."""
        ...

    def set_ingest_record(self, index_name: str, source: str, record: str | None) -> None:
        """Write the document's completion record; None removes it."""
        ...

    # Traces and feedback: one trace per answered request, keyed by its trace id.
    # Feedback is stored on its trace, so a rating and what it rates expire together
    # and `candor insights` reads a day's traces with their ratings in one pass.

    def put_trace(self, trace: StoredTrace) -> None:
        """Store a trace; it expires at `trace.expires_at`."""
        ...

    def get_trace(self, trace_id: str, *, now: float) -> StoredTrace | None:
        """The trace with its feedback, or None when absent or expired."""
        ...

    def rate_trace(
        self, trace_id: str, session_id: str, feedback: str, *, now: float
    ) -> RatingOutcome:
        """Attach `feedback` to a live trace of `session_id`, replacing any earlier rating.

        One conditional write: "rated"; "unknown" when the trace is absent or expired;
        "forbidden" when another session asked it (nothing is written then).
        """
        ...

    def review_feedback(self, trace_id: str, seen: str, reviewed: str, *, now: float) -> bool:
        """Replace a live trace's feedback with `reviewed` if it is still `seen`.

        One conditional write, so that the owner's decision (candor.review) applies to
        the text the owner read: False, and nothing written, when the trace is absent
        or expired or the visitor has rated it again since.
        """
        ...

    def traces_on(self, day: str, *, now: float) -> list[StoredTrace]:
        """Every live trace created on a UTC day ("YYYY-MM-DD"), oldest first.

        Reads that day only, not the whole store.
        """
        ...


@dataclass(frozen=True, slots=True)
class RateDecision:
    allowed: bool
    retry_after: int = 0  # whole seconds until the window ends; 0 when allowed


@dataclass(frozen=True, slots=True)
class CacheKey:
    """An exact repeat: the same normalised question, corpus version and settings.

    `secret`: the key of an HMAC digest when questions are not stored
    (candor.question_keys), so that a guessed question cannot be confirmed.
    """

    question: str
    corpus_version: int
    settings_fingerprint: str
    secret: bytes | None = field(default=None, repr=False, compare=False)

    @property
    def digest(self) -> str:
        text = f"{self.settings_fingerprint}\x00{self.corpus_version}\x00{self.question}"
        data = text.encode("utf-8", "surrogatepass")
        if self.secret is not None:
            return hmac.new(self.secret, data, hashlib.sha256).hexdigest()
        return hashlib.sha256(data).hexdigest()


RatingOutcome = Literal["rated", "unknown", "forbidden"]


def trace_day(created_at: float) -> str:
    """The UTC day a trace belongs to, as the stores index it."""
    return datetime.fromtimestamp(created_at, UTC).strftime("%Y-%m-%d")


@dataclass(frozen=True, slots=True)
class StoredTrace:
    """A trace as a store keeps it: the fields it indexes and checks, and the record
    itself as JSON (candor.traces.Trace), which the store does not read."""

    trace_id: str
    session_id: str
    created_at: float
    expires_at: int
    body: str
    feedback: str | None = None  # JSON of candor.traces.Feedback

    @property
    def day(self) -> str:
        return trace_day(self.created_at)


@runtime_checkable
class CatalogueStore(Protocol):
    """The document catalogue (candor.catalogue): one record per (index, document source).

    A record is opaque bytes (candor.catalogue.records.encode, at most 300 KB) with a
    short stamp beside it that says which version of the document it describes, so
    that an ingest can tell a current record from a stale one without reading it.
    It lives where the completion records live: the SQLite state file locally, the
    DynamoDB table on AWS. Reads see every earlier write.
    """

    def catalogue_stamp(self, index_name: str, source: str) -> str | None:
        """The stamp of the document's record, or None when it has none."""
        ...

    def put_catalogue(self, index_name: str, source: str, stamp: str, body: bytes) -> None:
        """Write (or replace) the document's record."""
        ...

    def delete_catalogue(self, index_name: str, source: str) -> None:
        """Remove the document's record; nothing happens when it has none."""
        ...

    def catalogue(self, index_name: str) -> list[bytes]:
        """Every record of the index, in no particular order."""
        ...
