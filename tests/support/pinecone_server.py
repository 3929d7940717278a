"""Pinecone-wire-compatible test servers, in memory, on loopback: one index's data
plane (`serve`), or the hosted inference API's reranking (`serve_inference`).

The index speaks the REST routes the `pinecone` SDK's vector API uses
(`Pinecone(api_key=...).Index(host="http://127.0.0.1:PORT")` makes no control-plane
call) and enforces the limits that shape candor's adapter: at most 1000 vectors
and 2 MB per upsert, 1000 ids per fetch or delete, 40 KB of metadata and 1000
sparse values per vector, no all-zero dense vector, no delete by filter
(serverless), ids listed in sorted order a page of at most 100 at a time.
A dense index scores by cosine, a sparse index by dot product (only records
sharing a term match).

The inference API is `POST /rerank` on the client's own host
(`Pinecone(api_key=..., host="http://127.0.0.1:PORT").inference.rerank(...)`), as
SDK 10.x sends it (API version 2026-07): a body of `model`, `query`, `documents`
(objects), `rank_fields`, `return_documents`, optional `top_n` and `parameters`;
an answer of `model`, `data` (`index`, `score`, `document` when asked for, best
first) and `usage.rerank_units`. It enforces each model's document limit and,
unless `parameters.truncate` is "END", its token limits (tokens counted as four
characters, rounded up). A document scores the share of the query's words it holds.
"""

from __future__ import annotations

import base64
import json
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

MAX_BODY_BYTES = 2 * 1024 * 1024
MAX_VECTORS = 1000
MAX_IDS = 1000
MAX_METADATA_BYTES = 40 * 1024
MAX_SPARSE_VALUES = 1000
MAX_LIST_LIMIT = 100
DEFAULT_NAMESPACE = "__default__"

Kind = Literal["dense", "sparse"]


@dataclass(frozen=True)
class RerankModel:
    max_documents: int
    max_query_tokens: int
    max_pair_tokens: int  # query and one document together
    truncates: bool  # accepts parameters.truncate


RERANK_MODELS: dict[str, RerankModel] = {
    "bge-reranker-v2-m3": RerankModel(100, 256, 1024, truncates=True),
    "pinecone-rerank-v0": RerankModel(100, 256, 512, truncates=True),
    "cohere-rerank-3.5": RerankModel(200, 2048, 4096, truncates=False),
}
DOCUMENTS_PER_UNIT = 100


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Record:
    id: str
    values: list[float]
    sparse: dict[int, float]
    metadata: dict[str, Any]


@dataclass
class Call:
    method: str
    path: str
    body_bytes: int
    items: int  # vectors upserted, ids fetched or deleted


@dataclass
class FakeIndex:
    """The state of one index: namespaces of records."""

    kind: Kind
    dimension: int | None
    namespaces: dict[str, dict[str, Record]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    # Status codes to answer the next requests with, for failure tests.
    failures: list[int] = field(default_factory=list)
    # What each query reports it was billed (Pinecone: 1 per GB of the namespace);
    # None: the response says nothing of it.
    query_read_units: int | None = 1
    lock: threading.Lock = field(default_factory=threading.Lock)

    def space(self, namespace: str | None) -> dict[str, Record]:
        return self.namespaces.setdefault(namespace or DEFAULT_NAMESPACE, {})

    # -- routes ------------------------------------------------------------------

    def upsert(self, body: dict[str, Any]) -> dict[str, Any]:
        vectors = body.get("vectors") or []
        if len(vectors) > MAX_VECTORS:
            raise ApiError(400, f"batch of {len(vectors)} vectors exceeds {MAX_VECTORS}")
        records = [self._record(v) for v in vectors]
        space = self.space(body.get("namespace"))
        for record in records:
            space[record.id] = record
        return {"upsertedCount": len(records)}

    def _record(self, raw: dict[str, Any]) -> Record:
        rid = raw["id"]
        values = [float(x) for x in raw.get("values") or []]
        sparse_raw = raw.get("sparseValues") or {"indices": [], "values": []}
        indices, weights = sparse_raw["indices"], sparse_raw["values"]
        if len(indices) != len(weights):
            raise ApiError(400, "sparse indices and values differ in length")
        if len(indices) > MAX_SPARSE_VALUES:
            raise ApiError(400, f"sparse vector of {rid} has more than {MAX_SPARSE_VALUES} values")
        if any(not 0 <= i < 2**32 for i in indices):
            raise ApiError(400, "sparse indices must be uint32")
        metadata = raw.get("metadata") or {}
        size = len(json.dumps(metadata).encode())
        if size > MAX_METADATA_BYTES:
            raise ApiError(400, f"metadata of {rid} is {size} bytes, over {MAX_METADATA_BYTES}")
        for key, value in metadata.items():
            ok = isinstance(value, str | int | float | bool) or (
                isinstance(value, list) and all(isinstance(x, str) for x in value)
            )
            if not ok:
                raise ApiError(400, f"metadata value of {key!r} is not supported")
        if self.kind == "dense":
            if len(values) != self.dimension:
                raise ApiError(
                    400,
                    f"Vector dimension {len(values)} does not match the dimension of "
                    f"the index {self.dimension}",
                )
            if not any(values):
                raise ApiError(400, "Dense vectors must contain at least one non-zero value")
        else:
            if values:
                raise ApiError(400, "a sparse index takes sparse values only")
            if not indices:
                raise ApiError(400, "Sparse vector must contain at least one value")
        return Record(rid, values, dict(zip(indices, weights, strict=True)), metadata)

    def query(self, body: dict[str, Any]) -> dict[str, Any]:
        top_k = int(body["topK"])
        if not 1 <= top_k <= 10_000:
            raise ApiError(400, "topK must be in 1..10000")
        space = self.space(body.get("namespace"))
        flt = body.get("filter")
        candidates = [r for r in space.values() if flt is None or filter_matches(r.metadata, flt)]
        if self.kind == "dense":
            query = body.get("vector")
            if query is None or len(query) != self.dimension:
                raise ApiError(400, "query vector does not match the index dimension")
            norm = math.sqrt(sum(x * x for x in query))
            if norm == 0:
                raise ApiError(400, "query vector must contain a non-zero value")
            scored = [(cosine(query, norm, r.values), r) for r in candidates]
        else:
            if body.get("vector"):
                raise ApiError(400, "a sparse index is queried with a sparse vector")
            raw = body.get("sparseVector")
            if not raw or not raw.get("indices"):
                raise ApiError(400, "sparse query vector is required")
            weights = dict(zip(raw["indices"], raw["values"], strict=True))
            scored = [
                (sum(w * r.sparse.get(i, 0.0) for i, w in weights.items()), r)
                for r in candidates
                if weights.keys() & r.sparse.keys()
            ]
        scored.sort(key=lambda pair: (-pair[0], pair[1].id))
        found = []
        for score, record in scored[:top_k]:
            match: dict[str, Any] = {"id": record.id, "score": score, "values": []}
            if body.get("includeMetadata"):
                match["metadata"] = as_stored(record.metadata)
            if body.get("includeValues"):
                match["values"] = record.values
            found.append(match)
        response: dict[str, Any] = {"matches": found, "namespace": body.get("namespace", "")}
        if self.query_read_units is not None:
            response["usage"] = {"readUnits": self.query_read_units}
        return response

    def fetch(self, query: dict[str, list[str]]) -> dict[str, Any]:
        ids = query.get("ids", [])
        if not ids:
            raise ApiError(400, "ids are required")
        if len(ids) > MAX_IDS:
            raise ApiError(400, f"fetch of more than {MAX_IDS} ids")
        namespace = query.get("namespace", [""])[0]
        space = self.space(namespace)
        vectors = {}
        for rid in ids:
            record = space.get(rid)
            if record is not None:
                vector: dict[str, Any] = {
                    "id": rid,
                    "values": record.values,
                    "metadata": as_stored(record.metadata),
                }
                if record.sparse:
                    vector["sparseValues"] = {
                        "indices": list(record.sparse),
                        "values": list(record.sparse.values()),
                    }
                vectors[rid] = vector
        return {"vectors": vectors, "namespace": namespace, "usage": {"readUnits": 1}}

    def delete(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("filter") is not None:
            raise ApiError(
                400,
                "Serverless and Starter indexes do not support deleting with metadata filtering",
            )
        space = self.space(body.get("namespace"))
        if body.get("deleteAll"):
            space.clear()
            return {}
        ids = body.get("ids") or []
        if len(ids) > MAX_IDS:
            raise ApiError(400, f"delete of more than {MAX_IDS} ids")
        for rid in ids:
            space.pop(rid, None)
        return {}

    def stats(self) -> dict[str, Any]:
        namespaces = {ns: {"vectorCount": len(s)} for ns, s in self.namespaces.items() if s}
        return {
            "namespaces": namespaces,
            "dimension": self.dimension,
            "indexFullness": 0.0,
            "totalVectorCount": sum(len(s) for s in self.namespaces.values()),
            "metric": "cosine" if self.kind == "dense" else "dotproduct",
            "vectorType": self.kind,
        }

    def list(self, query: dict[str, list[str]]) -> dict[str, Any]:
        namespace = query.get("namespace", [""])[0]
        prefix = query.get("prefix", [""])[0]
        limit = int(query.get("limit", [str(MAX_LIST_LIMIT)])[0])
        if not 1 <= limit <= MAX_LIST_LIMIT:
            raise ApiError(400, f"limit must be in 1..{MAX_LIST_LIMIT}")
        token = query.get("paginationToken", [None])[0]
        after = base64.urlsafe_b64decode(token).decode() if token else None
        # Bitwise ("C") order, as Pinecone documents.
        ids = sorted(
            (rid for rid in self.space(namespace) if rid.startswith(prefix)),
            key=lambda rid: rid.encode(),
        )
        if after is not None:
            ids = [rid for rid in ids if rid.encode() > after.encode()]
        page = ids[:limit]
        response: dict[str, Any] = {
            "vectors": [{"id": rid} for rid in page],
            "namespace": namespace,
            "usage": {"readUnits": 1},
        }
        if len(ids) > limit:
            response["pagination"] = {"next": base64.urlsafe_b64encode(page[-1].encode()).decode()}
        return response


@dataclass
class RerankCall:
    """What one rerank request asked for, as the server read it."""

    model: str
    query: str
    documents: list[dict[str, Any]]
    parameters: dict[str, Any]


@dataclass
class FakeInference:
    """The hosted inference API's reranking: every request is answered and recorded."""

    calls: list[Call] = field(default_factory=list)
    reranks: list[RerankCall] = field(default_factory=list)
    # Status codes to answer the next requests with, for failure tests.
    failures: list[int] = field(default_factory=list)
    # Seconds to hold the next replies back, for timeout tests (answered all the same).
    delays: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def rerank(self, body: dict[str, Any]) -> dict[str, Any]:
        name = str(body.get("model") or "")
        model = RERANK_MODELS.get(name)
        if model is None:
            raise ApiError(404, f"Model '{name}' not found")
        query = body.get("query")
        documents = body.get("documents")
        if not isinstance(query, str) or not query:
            raise ApiError(400, "query is required")
        if not isinstance(documents, list) or not documents:
            raise ApiError(400, "documents are required")
        if len(documents) > model.max_documents:
            raise ApiError(
                400,
                f"{len(documents)} documents exceed the maximum of {model.max_documents} "
                f"for {name}",
            )
        fields = body.get("rank_fields") or ["text"]
        if len(fields) != 1:
            raise ApiError(400, f"{name} ranks on exactly one field")
        parameters = body.get("parameters") or {}
        truncate = parameters.get("truncate", "NONE")
        if "truncate" in parameters and (not model.truncates or truncate not in ("END", "NONE")):
            raise ApiError(400, f"unsupported parameter truncate={truncate!r} for {name}")
        texts = []
        for number, document in enumerate(documents):
            text = document.get(fields[0]) if isinstance(document, dict) else None
            if not isinstance(text, str):
                raise ApiError(400, f"document {number} has no string field {fields[0]!r}")
            texts.append(text)
        if truncate != "END":
            if tokens(query) > model.max_query_tokens:
                raise ApiError(400, f"query exceeds {model.max_query_tokens} tokens")
            if any(tokens(query) + tokens(text) > model.max_pair_tokens for text in texts):
                raise ApiError(400, f"query and document exceed {model.max_pair_tokens} tokens")
        self.reranks.append(RerankCall(name, query, documents, parameters))
        wanted = set(query.casefold().split())
        scored = [
            (len(wanted & set(text.casefold().split())) / len(wanted), number)
            for number, text in enumerate(texts)
        ]
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
        top_n = body.get("top_n")
        if top_n is not None:
            scored = scored[: int(top_n)]
        data = []
        for score, number in scored:
            ranked: dict[str, Any] = {"index": number, "score": score}
            if body.get("return_documents", True):
                ranked["document"] = documents[number]
            data.append(ranked)
        units = math.ceil(len(documents) / DOCUMENTS_PER_UNIT)
        return {"model": name, "data": data, "usage": {"rerank_units": units}}


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def cosine(query: list[float], norm: float, values: list[float]) -> float:
    other = math.sqrt(sum(x * x for x in values))
    return sum(a * b for a, b in zip(query, values, strict=True)) / (norm * other)


def as_stored(metadata: dict[str, Any]) -> dict[str, Any]:
    """Numbers come back as doubles, as from Pinecone."""
    return {
        k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v
        for k, v in metadata.items()
    }


def filter_matches(metadata: dict[str, Any], flt: dict[str, Any]) -> bool:
    """Pinecone's metadata filter language (the operators candor and tests use)."""
    for key, condition in flt.items():
        if key == "$and":
            if not all(filter_matches(metadata, sub) for sub in condition):
                return False
        elif key == "$or":
            if not any(filter_matches(metadata, sub) for sub in condition):
                return False
        elif isinstance(condition, dict):
            for op, operand in condition.items():
                if not _compare(metadata, key, op, operand):
                    return False
        elif not _compare(metadata, key, "$eq", condition):
            return False
    return True


def _compare(metadata: dict[str, Any], key: str, op: str, operand: Any) -> bool:
    present = key in metadata
    value = metadata.get(key)
    match op:
        case "$exists":
            return present == bool(operand)
        case "$eq":
            return present and (operand in value if isinstance(value, list) else value == operand)
        case "$ne":
            return not present or value != operand
        case "$in":
            return present and value in operand
        case "$nin":
            return not present or value not in operand
        case "$gt":
            return present and value > operand
        case "$gte":
            return present and value >= operand
        case "$lt":
            return present and value < operand
        case "$lte":
            return present and value <= operand
    raise ApiError(400, f"unsupported filter operator {op}")


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        backend = self.server.backend
        url = urlsplit(self.path)
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            if not self.headers.get("api-key"):
                raise ApiError(401, "missing Api-Key header")
            with backend.lock:
                if backend.failures:
                    raise ApiError(backend.failures.pop(0), "injected failure")
                if length > MAX_BODY_BYTES:
                    raise ApiError(413, f"request of {length} bytes exceeds {MAX_BODY_BYTES}")
                body = json.loads(raw) if raw else {}
                query = parse_qs(url.query)
                response, items = self._route(method, url.path, body, query)
                backend.calls.append(Call(method, url.path, length, items))
                delay = 0.0
                if isinstance(backend, FakeInference) and backend.delays:
                    delay = backend.delays.pop(0)
            if delay:
                time.sleep(delay)
            self._send(200, response)
        except ApiError as e:
            self._send(e.status, {"code": 3, "message": str(e), "details": []})
        except Exception as e:  # a bug here: say so, rather than drop the connection
            self._send(500, {"code": 13, "message": f"{type(e).__name__}: {e}", "details": []})

    def _route(
        self, method: str, path: str, body: dict[str, Any], query: dict[str, list[str]]
    ) -> tuple[dict[str, Any], int]:
        backend = self.server.backend
        if isinstance(backend, FakeInference):
            if (method, path) == ("POST", "/rerank"):
                return backend.rerank(body), len(body.get("documents") or [])
            raise ApiError(404, f"no route {method} {path}")
        index = backend
        match (method, path):
            case ("POST", "/vectors/upsert"):
                return index.upsert(body), len(body.get("vectors") or [])
            case ("POST", "/query"):
                return index.query(body), 0
            case ("GET", "/vectors/fetch"):
                return index.fetch(query), len(query.get("ids", []))
            case ("POST", "/vectors/delete"):
                return index.delete(body), len(body.get("ids") or [])
            case ("POST", "/describe_index_stats"):
                return index.stats(), 0
            case ("GET", "/vectors/list"):
                return index.list(query), 0
        raise ApiError(404, f"no route {method} {path}")

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, backend: FakeIndex | FakeInference) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.backend = backend


@dataclass
class RunningIndex:
    url: str
    index: FakeIndex


@dataclass
class RunningInference:
    url: str
    inference: FakeInference


@contextmanager
def _running(backend: FakeIndex | FakeInference) -> Iterator[str]:
    server = _Server(backend)
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.02},
        name="pinecone-test-server",
        daemon=True,
    )
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host!s}:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextmanager
def serve(kind: Kind = "dense", dimension: int | None = None) -> Iterator[RunningIndex]:
    """Serve one fake index on a free loopback port until the block ends."""
    if kind == "dense" and not dimension:
        raise ValueError("a dense index needs a dimension")
    index = FakeIndex(kind, dimension if kind == "dense" else None)
    with _running(index) as url:
        yield RunningIndex(url, index)


@contextmanager
def serve_inference() -> Iterator[RunningInference]:
    """Serve the hosted inference API's rerank route on a free loopback port."""
    inference = FakeInference()
    with _running(inference) as url:
        yield RunningInference(url, inference)
