"""The production VectorIndex: Pinecone serverless, through the `pinecone` SDK's vector API.

Hybrid search uses two Pinecone indexes that hold the same ids in the same
namespace:

- a dense index (cosine, the embedding model's dimensions) holds each chunk's
  embedding and its text, title, heading, source and metadata. It is the record
  of what is indexed: `fetch`, `list_ids` and `count` read it.
- a sparse index (vector type sparse, dotproduct) holds each chunk's keyword
  vector, BM25's document side computed locally (candor.backends.keyword_vectors),
  with the same metadata so that a keyword hit needs no second round trip.

Why two indexes rather than one index of sparse-dense vectors: a sparse-dense
query returns one ranking, the weighted sum of the two scores, but candor fuses
a dense and a keyword ranking with Reciprocal Rank Fusion (candor.retrieval.rrf_fuse,
the same code for every backend). From one sparse-dense index a keyword-only
ranking would need a query with an all-zero dense part, which Pinecone refuses.
Two indexes give the two rankings separately, answer in parallel, and let the
dense index keep the cosine metric. The keyword vectors are computed here rather
than by a hosted sparse model, so ingestion and questions call no further service
and the test server can check the scoring. Without a sparse host the keyword
ranking is empty and retrieval is dense only.

Pinecone's limits shape the writes: an upsert request carries at most 1000
vectors and 2 MB, fetch and delete at most 1000 ids, metadata at most 40 KB per
vector, and a sparse vector at most 1000 non-zero values. Serverless indexes
cannot delete by metadata filter, so a document's chunks are found by listing
ids by the document's prefix (`md5(source)-`), which Pinecone returns in
sorted order, a page at a time.

Every read is billed in read units, which each response reports; a query returns
what its requests were billed (Rankings.read_units), which the graph charges to
the request's budget (candor.index_reads).

Every SDK error becomes candor.errors.IndexError_; caller mistakes (a vector of
the wrong width) stay ValueError, as for the local index. A query made within a
request's deadline (candor.deadline) cuts each attempt at the time left and
waits no longer than that for the SDK's retries: past it, DeadlineExceededError.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from candor import deadline
from candor.backends.keyword_vectors import SparseVector, document_vector, query_vector
from candor.backends.vectors import as_matrix
from candor.errors import DeadlineExceededError, IndexError_
from candor.ports import Vectors
from candor.types import Chunk, Hit, Metadata, MetadataValue, Rankings

if TYPE_CHECKING:
    from pinecone import Index

T = TypeVar("T")

MAX_UPSERT_VECTORS = 1000
MAX_UPSERT_BYTES = 2 * 1024 * 1024
MAX_IDS_PER_REQUEST = 1000
MAX_METADATA_BYTES = 40 * 1024
LIST_PAGE = 100
# Ids go in the query string of a fetch: keep the URL short.
FETCH_BATCH = 100
# Room for the JSON around each vector (keys, brackets, the namespace).
_ENVELOPE_BYTES = 256
# A float as the SDK sends it: up to 17 significant digits, sign, exponent, comma.
_BYTES_PER_FLOAT = 24

# Chunk fields stored in metadata beside the caller's own keys.
_FIELDS = ("text", "source", "title", "heading")
_OWN = "_keys"  # the caller's metadata keys, so a fetch gives back exactly them


class PineconeVectorIndex:
    """A VectorIndex over a dense Pinecone index and, for keywords, a sparse one."""

    def __init__(
        self,
        dense: Index,
        *,
        dimensions: int,
        namespace: str = "",
        sparse: Index | None = None,
        max_batch_vectors: int = MAX_UPSERT_VECTORS,
        max_batch_bytes: int = MAX_UPSERT_BYTES,
        attempt_timeout: float | None = None,
    ) -> None:
        """`attempt_timeout`: seconds per query attempt (None: the SDK client's own)."""
        if dimensions < 1:
            raise ValueError(f"dimensions must be positive, not {dimensions}")
        if not 1 <= max_batch_vectors <= MAX_UPSERT_VECTORS:
            raise ValueError(f"max_batch_vectors must be in 1..{MAX_UPSERT_VECTORS}")
        self.dense_index = dense
        self.sparse_index = sparse
        self.dimensions = dimensions
        self.namespace = namespace
        self.max_batch_vectors = max_batch_vectors
        self.max_batch_bytes = min(max_batch_bytes, MAX_UPSERT_BYTES)
        self.attempt_timeout = attempt_timeout
        # Threads start on first use; only hybrid queries use them.
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pinecone-query")

    def close(self) -> None:
        """Stop the query threads. The SDK clients belong to whoever made them."""
        self._pool.shutdown(wait=False)

    # -- writing ---------------------------------------------------------------

    def upsert(self, chunks: Sequence[Chunk], vectors: Vectors) -> int:
        matrix = as_matrix(vectors, rows=len(chunks), dimensions=self.dimensions)
        if not chunks:
            return 0
        metadata = [_metadata(chunk) for chunk in chunks]
        dense = [
            {"id": c.id, "values": matrix[i].tolist(), "metadata": metadata[i]}
            for i, c in enumerate(chunks)
        ]
        written = self._call(self._upsert_batches, self.dense_index, dense)
        if self.sparse_index is not None:
            sparse: list[dict[str, Any]] = []
            for i, chunk in enumerate(chunks):
                keywords = document_vector(
                    title=chunk.title, heading=chunk.heading, text=chunk.text
                )
                # A chunk without a single word cannot match keywords; Pinecone
                # refuses an empty sparse vector, so it is simply not written there.
                if keywords:
                    sparse.append(
                        {
                            "id": chunk.id,
                            "sparse_values": keywords.to_json(),
                            "metadata": metadata[i],
                        }
                    )
            if sparse:
                self._call(self._upsert_batches, self.sparse_index, sparse)
            # Overwritten chunks that now have no words must not keep old keywords.
            empty = {c.id for c in chunks} - {r["id"] for r in sparse}
            if empty:
                self._call(self._delete_ids, self.sparse_index, sorted(empty))
        return written

    def delete(self, ids: Sequence[str]) -> int:
        unique = list(dict.fromkeys(ids))
        if not unique:
            return 0
        # Pinecone's delete reports nothing, so the ids that exist are counted first.
        existing = list(self._call(self._fetch_raw, unique))
        if not existing:
            return 0
        self._call(self._delete_ids, self.dense_index, existing)
        if self.sparse_index is not None:
            self._call(self._delete_ids, self.sparse_index, existing)
        return len(existing)

    # -- reading ---------------------------------------------------------------

    def fetch(self, ids: Sequence[str]) -> list[Chunk]:
        unique = list(dict.fromkeys(ids))
        if not unique:
            return []
        found = self._call(self._fetch_raw, unique)
        return [_chunk(cid, found[cid]) for cid in ids if cid in found]

    def list_ids(self, prefix: str = "") -> Iterator[str]:
        token: str | None = None
        while True:
            page = self._call(self._list_page, prefix, token)
            yield from (item.id for item in page.vectors if item.id is not None)
            token = page.pagination.next if page.pagination is not None else None
            if not token:
                return

    def count(self) -> int:
        stats = self._call(lambda: self.dense_index.describe_index_stats())
        names = [self.namespace] if self.namespace else ["", "__default__"]
        return sum(stats.namespaces[n].vector_count for n in names if n in stats.namespaces)

    def query(
        self,
        *,
        vector: Vectors | None,
        keywords: str | None,
        top_k: int,
        where: Metadata | None = None,
    ) -> Rankings:
        dense_vector = None if vector is None else self._query_vector(vector)
        sparse_vector = query_vector(keywords) if keywords else None
        if top_k < 1:
            return Rankings(dense=[], keyword=[], read_units=0.0)
        flt = _filter(where)
        # Read here: the pool's threads do not see the request's context.
        left = deadline.remaining()
        if left is not None and left <= 0:
            raise DeadlineExceededError("the request's deadline passed before the index query")
        timeout = self.attempt_timeout
        if left is not None:
            timeout = left if timeout is None else min(timeout, left)
        jobs: dict[str, Callable[[], tuple[list[Hit], float | None]]] = {}
        if dense_vector is not None:
            jobs["dense"] = partial(
                self._ranked, self.dense_index, top_k, flt, timeout, vector=dense_vector
            )
        if sparse_vector and self.sparse_index is not None:
            jobs["keyword"] = partial(
                self._ranked,
                self.sparse_index,
                top_k,
                flt,
                timeout,
                sparse_vector=sparse_vector.to_json(),
            )
        if len(jobs) == 2 or (jobs and left is not None):
            # Two round trips to two hosts: in parallel, the slower one sets the latency.
            # Under a deadline even one runs in the pool, so that the wait can end at
            # the deadline whatever the SDK's retries do.
            futures = {name: self._pool.submit(job) for name, job in jobs.items()}
            results = {name: _result(future) for name, future in futures.items()}
        else:
            results = {name: job() for name, job in jobs.items()}
        # What the requests were billed, each as its response said (candor.index_reads);
        # None when one did not say.
        units = [used for _, used in results.values()]
        read_units = None if None in units else sum(u for u in units if u is not None)
        return Rankings(
            dense=results.get("dense", ([], None))[0],
            keyword=results.get("keyword", ([], None))[0],
            read_units=read_units,
        )

    # -- SDK calls -------------------------------------------------------------

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run one SDK operation; its errors become IndexError_ (ValueErrors of ours pass)."""
        from pinecone.errors.exceptions import PineconeError

        try:
            return fn(*args)
        except PineconeError as e:
            raise IndexError_(f"pinecone: {type(e).__name__}: {e}") from e

    def _upsert_batches(self, index: Index, records: list[dict[str, Any]]) -> int:
        written = 0
        for batch in self._batches(records):
            response = index.upsert(vectors=batch, namespace=self.namespace)
            written += response.upserted_count
        return written

    def _batches(self, records: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
        """Consecutive runs of records within the vector-count and request-size limits."""
        batch: list[dict[str, Any]] = []
        size = _ENVELOPE_BYTES
        for record in records:
            record_size = _record_bytes(record)
            if batch and (
                len(batch) >= self.max_batch_vectors or size + record_size > self.max_batch_bytes
            ):
                yield batch
                batch, size = [], _ENVELOPE_BYTES
            batch.append(record)
            size += record_size
        if batch:
            yield batch

    def _delete_ids(self, index: Index, ids: list[str]) -> None:
        for start in range(0, len(ids), MAX_IDS_PER_REQUEST):
            index.delete(ids=ids[start : start + MAX_IDS_PER_REQUEST], namespace=self.namespace)

    def _fetch_raw(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """id -> metadata of the ids the dense index holds."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(ids), FETCH_BATCH):
            response = self.dense_index.fetch(
                ids=ids[start : start + FETCH_BATCH], namespace=self.namespace
            )
            for cid, vector in response.vectors.items():
                found[cid] = dict(vector.metadata or {})
        return found

    def _list_page(self, prefix: str, token: str | None) -> Any:
        return self.dense_index.list_paginated(
            prefix=prefix or None,
            limit=LIST_PAGE,
            pagination_token=token,
            namespace=self.namespace,
        )

    def _ranked(
        self,
        index: Index,
        top_k: int,
        flt: dict[str, Any] | None,
        timeout: float | None,
        *,
        vector: list[float] | None = None,
        sparse_vector: Mapping[str, Any] | None = None,
    ) -> tuple[list[Hit], float | None]:
        response = self._call(
            lambda: index.query(
                top_k=top_k,
                vector=vector,
                sparse_vector=sparse_vector,
                filter=flt,
                include_metadata=True,
                namespace=self.namespace,
                timeout=timeout,
            )
        )
        hits = [
            Hit(_chunk(match.id, dict(match.metadata or {})), float(match.score))
            for match in response.matches
        ]
        usage = getattr(response, "usage", None)
        units = getattr(usage, "read_units", None)
        return hits, float(units) if isinstance(units, int | float) else None

    # -- checks ----------------------------------------------------------------

    def _query_vector(self, vector: Vectors) -> list[float] | None:
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape != (self.dimensions,):
            raise ValueError(
                f"query vector has {query.size} values; this index holds {self.dimensions}"
            )
        norm = float(np.linalg.norm(query))
        # Pinecone refuses an all-zero vector; like the local index, it ranks nothing.
        if norm == 0.0 or not math.isfinite(norm):
            return None
        values: list[float] = query.tolist()
        return values


def _result(future: Future[T]) -> T:
    """The job's result, waiting no longer than the request's deadline (if any) allows."""
    left = deadline.remaining()
    if left is None:
        return future.result()
    try:
        return future.result(timeout=max(left, 0.0))
    except FutureTimeout:
        raise DeadlineExceededError("the index did not answer before the deadline") from None


def _record_bytes(record: Mapping[str, Any]) -> int:
    """An upper bound on a record's size in the request body, without encoding it."""
    floats = len(record.get("values", ()))
    sparse = record.get("sparse_values")
    if sparse is not None:
        floats += 2 * len(sparse["indices"])
    meta = json.dumps(record.get("metadata") or {}, ensure_ascii=False).encode("utf-8")
    return len(record["id"]) + floats * _BYTES_PER_FLOAT + len(meta) + _ENVELOPE_BYTES


def _metadata(chunk: Chunk) -> dict[str, MetadataValue | list[str]]:
    own = dict(chunk.metadata)
    clash = sorted(set(own) & {*_FIELDS, _OWN})
    if clash:
        raise ValueError(f"chunk {chunk.id}: metadata keys {clash} are reserved")
    metadata: dict[str, MetadataValue | list[str]] = {
        "text": chunk.text,
        "source": chunk.source,
        "title": chunk.title,
        "heading": chunk.heading,
        _OWN: sorted(own),
        **own,
    }
    size = len(json.dumps(metadata, ensure_ascii=False).encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise IndexError_(
            f"chunk {chunk.id} ({chunk.source}): {size} bytes of text and metadata exceed "
            f"Pinecone's {MAX_METADATA_BYTES} per vector; ingest with smaller passages"
        )
    return metadata


def _chunk(cid: str, metadata: dict[str, Any]) -> Chunk:
    own_keys = metadata.get(_OWN) or []
    own: dict[str, MetadataValue] = {}
    for key in own_keys:
        if key in metadata:
            value = metadata[key]
            # JSON has one number type: Pinecone gives 3 back as 3.0.
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            own[key] = value
    return Chunk(
        id=cid,
        text=str(metadata.get("text", "")),
        source=str(metadata.get("source", "")),
        title=str(metadata.get("title", "")),
        heading=str(metadata.get("heading", "")),
        metadata=own,
    )


def _filter(where: Metadata | None) -> dict[str, Any] | None:
    """candor's equality filter in Pinecone's filter language."""
    if not where:
        return None
    clauses = [{key: {"$eq": value}} for key, value in where.items()]
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


__all__ = ["PineconeVectorIndex", "SparseVector"]
