"""The embedded-default VectorIndex: one SQLite file, FTS5 for BM25, numpy for vectors.

Dense search is exact: the vectors are loaded lazily into one contiguous float32
matrix and scored with a single matrix-vector product. At the corpus sizes the
embedded default is for (tens of thousands of chunks) that takes about a
millisecond, so an approximate index would add only failure modes.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from candor.backends.vectors import as_matrix
from candor.errors import ConfigurationError, IndexError_
from candor.ports import Vectors
from candor.text import FIELD_WEIGHTS, query_terms
from candor.types import Chunk, Hit, Metadata, MetadataValue, Rankings

_SCHEMA_VERSION = "1"
# SQLite's default limit on bound parameters is 32766; stay far below it.
_BATCH = 500

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    -- An explicit integer key: the FTS table refers to rows by it, and unlike an
    -- implicit rowid it survives VACUUM.
    pk INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    text TEXT NOT NULL,
    source TEXT NOT NULL,
    title TEXT NOT NULL,
    heading TEXT NOT NULL,
    metadata TEXT NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_source ON chunks(source);
-- External content: the text is stored once, in chunks; triggers keep the
-- inverted index in step on every insert, overwrite and delete.
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    title, heading, text,
    content='chunks', content_rowid='pk',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, title, heading, text)
    VALUES (new.pk, new.title, new.heading, new.text);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, title, heading, text)
    VALUES ('delete', old.pk, old.title, old.heading, old.text);
END;
CREATE TRIGGER IF NOT EXISTS chunks_au AFTER UPDATE OF title, heading, text ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, title, heading, text)
    VALUES ('delete', old.pk, old.title, old.heading, old.text);
    INSERT INTO chunks_fts(rowid, title, heading, text)
    VALUES (new.pk, new.title, new.heading, new.text);
END;
"""

_UPSERT = """
INSERT INTO chunks(id, text, source, title, heading, metadata, vector)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(id) DO UPDATE SET
    text = excluded.text, source = excluded.source, title = excluded.title,
    heading = excluded.heading, metadata = excluded.metadata, vector = excluded.vector
"""

_CHUNK_COLUMNS = "c.pk, c.id, c.text, c.source, c.title, c.heading, c.metadata"

_MAX_DOC_FREQS = 10_000


def keyword_terms(text: str) -> list[str]:
    """The quoted FTS5 terms and phrases to search free user text by, to be OR-ed.

    OR, so that a chunk needs only some of them: BM25 ranks chunks with more,
    and rarer, ones first. Every term is a quoted string, so no user input can
    be read as FTS5 syntax (`--force-with-lease`, `A...B`, `"`, `(`, `NEAR`,
    `OR`). Which terms: candor.text.query_terms, as for the sparse vectors.
    """
    return [f'"{term}"' for term in query_terms(text)]


def _prefix_upper(prefix: str) -> str | None:
    """The smallest string greater than every string that starts with `prefix`.

    None when there is none (an empty prefix, or one made of the highest code
    point only): then the range has no upper bound.
    """
    stripped = prefix.rstrip(chr(0x10FFFF))
    if not stripped:
        return None
    following = ord(stripped[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:  # surrogates cannot be encoded in UTF-8
        following = 0xE000
    return stripped[:-1] + chr(following)


def _batches(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), _BATCH):
        yield items[start : start + _BATCH]


def _placeholders(n: int) -> str:
    return ",".join("?" * n)


def _chunk(row: sqlite3.Row | tuple[Any, ...]) -> Chunk:
    # Columns as in _CHUNK_COLUMNS, after the leading pk.
    _, cid, text, source, title, heading, metadata = row[:7]
    return Chunk(
        id=cid,
        text=text,
        source=source,
        title=title,
        heading=heading,
        metadata=json.loads(metadata),
    )


def _where_sql(where: Metadata | None) -> tuple[str, list[MetadataValue]]:
    if not where:
        return "", []
    clauses: list[str] = []
    params: list[MetadataValue] = []
    for key, value in where.items():
        if key == "source":
            clauses.append("c.source = ?")
            params.append(value)
        else:
            # json_each rather than json_extract: a key may contain the dots and
            # quotes that a JSON path would read as syntax.
            clauses.append(
                "EXISTS (SELECT 1 FROM json_each(c.metadata) AS m WHERE m.key = ? AND m.value = ?)"
            )
            params.extend((key, value))
    return " AND " + " AND ".join(clauses), params


_MISSING = object()  # a metadata key the chunk lacks equals no filter value
_MAX_MASKS = 64


@dataclass
class _Matrix:
    """The vectors of every chunk, in pk order, as dense search needs them."""

    pks: npt.NDArray[np.int64]
    vectors: Vectors  # (n, dimensions), rows scaled to unit length
    sources: list[str]
    metadata: list[dict[str, MetadataValue]]
    masks: dict[tuple[tuple[str, MetadataValue], ...], npt.NDArray[np.bool_]] = field(
        default_factory=dict
    )

    def mask(self, where: Metadata) -> npt.NDArray[np.bool_]:
        # Filters repeat (one per site or document type), so each mask is built once.
        key = tuple(sorted(where.items()))
        cached = self.masks.get(key)
        if cached is None:
            cached = np.fromiter(
                (
                    all(
                        (source if k == "source" else meta.get(k, _MISSING)) == v
                        for k, v in where.items()
                    )
                    for source, meta in zip(self.sources, self.metadata, strict=True)
                ),
                dtype=np.bool_,
                count=len(self.sources),
            )
            if len(self.masks) >= _MAX_MASKS:  # filters may come from requests: stay bounded
                self.masks.clear()
            self.masks[key] = cached
        return cached


class SqliteVectorIndex:
    """A VectorIndex in one SQLite file; safe to share between threads.

    `embedder` names the embedder whose vectors the index holds. The first
    writer records it with the dimensions; opening the file later with another
    embedder or width is a ConfigurationError rather than silently wrong results.
    """

    def __init__(
        self,
        path: Path,
        dimensions: int,
        *,
        embedder: str | None = None,
        field_weights: tuple[float, float, float] = FIELD_WEIGHTS,
    ) -> None:
        if dimensions < 1:
            raise ValueError(f"dimensions must be positive, not {dimensions}")
        self.path = path
        self.dimensions = dimensions
        # BM25's column weights (title, heading, text), given with every query
        # rather than stored in the file, so that one file can be ranked either way.
        self._rank = "bm25({}, {}, {})".format(*field_weights)
        path.parent.mkdir(parents=True, exist_ok=True)
        # One connection behind a lock: SQLite serialises writers anyway, and
        # reads here are short. check_same_thread=False lets a web server's
        # worker threads share it.
        self._conn = sqlite3.connect(path, check_same_thread=False, timeout=30.0)
        self._lock = threading.RLock()
        # Caches of what the file holds, dropped on every write (see _sync).
        self._matrix: _Matrix | None = None
        self._doc_freq: dict[str, int] = {}
        self._rows: int | None = None
        self._data_version = -1
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)
            with self._conn:
                self._check_meta(embedder)
        except BaseException:
            self._conn.close()
            raise

    # -- lifecycle -------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._invalidate()
            self._conn.close()

    def __enter__(self) -> SqliteVectorIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- VectorIndex -----------------------------------------------------------

    def upsert(self, chunks: Sequence[Chunk], vectors: Vectors) -> int:
        matrix = as_matrix(vectors, rows=len(chunks), dimensions=self.dimensions)
        rows = [
            (
                chunk.id,
                chunk.text,
                chunk.source,
                chunk.title,
                chunk.heading,
                json.dumps(dict(chunk.metadata), sort_keys=True, ensure_ascii=False),
                matrix[i].tobytes(),
            )
            for i, chunk in enumerate(chunks)
        ]
        if not rows:
            return 0
        with self._locked(), self._conn:
            self._conn.executemany(_UPSERT, rows)
            self._invalidate()
        return len(rows)

    def update_metadata(self, ids: Sequence[str], values: Metadata) -> int:
        """MetadataUpdater: one UPDATE per batch; the vectors and the FTS rows stay."""
        if not values:
            return 0
        # json_patch merges the object into each row's metadata (RFC 7396); no value
        # is null (MetadataValue), so no key is removed.
        patch = json.dumps(dict(values), sort_keys=True, ensure_ascii=False)
        updated = 0
        with self._locked(), self._conn:
            for batch in _batches(list(dict.fromkeys(ids))):
                cursor = self._conn.execute(
                    "UPDATE chunks SET metadata = json_patch(metadata, ?) "
                    f"WHERE id IN ({_placeholders(len(batch))})",
                    [patch, *batch],
                )
                updated += cursor.rowcount
            if updated:
                self._invalidate()  # the dense matrix keeps metadata for `where`
        return updated

    def delete(self, ids: Sequence[str]) -> int:
        deleted = 0
        with self._locked(), self._conn:
            for batch in _batches(list(dict.fromkeys(ids))):
                cursor = self._conn.execute(
                    f"DELETE FROM chunks WHERE id IN ({_placeholders(len(batch))})", batch
                )
                deleted += cursor.rowcount
            if deleted:
                self._invalidate()
        return deleted

    def list_ids(self, prefix: str = "") -> Iterator[str]:
        upper = _prefix_upper(prefix)
        bound = "" if upper is None else " AND id < ?"
        # Page by key so that the lock is never held while the caller works on an
        # id, and a caller that deletes what it lists does not disturb the listing.
        op, last = ">=", prefix
        while True:
            sql = f"SELECT id FROM chunks WHERE id {op} ?{bound} ORDER BY id LIMIT {_BATCH}"
            params = (last,) if upper is None else (last, upper)
            with self._locked():
                page = [row[0] for row in self._conn.execute(sql, params)]
            yield from page
            if len(page) < _BATCH:
                return
            op, last = ">", page[-1]

    def fetch(self, ids: Sequence[str]) -> list[Chunk]:
        found: dict[str, Chunk] = {}
        with self._locked():
            for batch in _batches(list(dict.fromkeys(ids))):
                for row in self._conn.execute(
                    f"SELECT {_CHUNK_COLUMNS} FROM chunks AS c "
                    f"WHERE c.id IN ({_placeholders(len(batch))})",
                    batch,
                ):
                    chunk = _chunk(row)
                    found[chunk.id] = chunk
        return [found[cid] for cid in ids if cid in found]

    def count(self) -> int:
        with self._locked():
            (n,) = self._conn.execute("SELECT count(*) FROM chunks").fetchone()
        return int(n)

    def query(
        self,
        *,
        vector: Vectors | None,
        keywords: str | None,
        top_k: int,
        where: Metadata | None = None,
    ) -> Rankings:
        dense = [] if vector is None else self.dense(vector, top_k=top_k, where=where)
        keyword = [] if keywords is None else self.keyword(keywords, top_k=top_k, where=where)
        return Rankings(dense=dense, keyword=keyword)

    # -- the two rankings ------------------------------------------------------

    def dense(self, vector: Vectors, *, top_k: int, where: Metadata | None = None) -> list[Hit]:
        """Exact cosine-similarity ranking."""
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape != (self.dimensions,):
            raise ValueError(
                f"query vector has {query.size} values; this index holds {self.dimensions}"
            )
        norm = float(np.linalg.norm(query))
        if top_k < 1 or norm == 0.0 or not np.isfinite(norm):
            return []
        matrix = self._load_matrix()
        # The product runs outside the lock: numpy releases the GIL, so other
        # threads' queries overlap with it.
        scores = matrix.vectors @ (query / norm)
        if where:
            mask = matrix.mask(where)
            scores = np.where(mask, scores, -np.inf)
            available = int(mask.sum())
        else:
            available = len(scores)
        k = min(top_k, available)
        if k == 0:
            return []
        best = np.argpartition(-scores, k - 1)[:k]
        best = best[np.argsort(-scores[best], kind="stable")]
        chunks = self._fetch_by_pk(matrix.pks[best].tolist())
        return [
            Hit(chunks[pk], float(scores[row]))
            for row, pk in zip(best.tolist(), matrix.pks[best].tolist(), strict=True)
            if pk in chunks  # deleted by another connection since the matrix loaded
        ]

    def keyword(self, text: str, *, top_k: int, where: Metadata | None = None) -> list[Hit]:
        """BM25 ranking over title, heading and text; the score is -bm25 (higher is better)."""
        terms = keyword_terms(text)
        if not terms or top_k < 1:
            return []
        filter_sql, filter_params = _where_sql(where)
        sql = (
            f"SELECT {_CHUNK_COLUMNS}, chunks_fts.rank FROM chunks_fts "
            "JOIN chunks AS c ON c.pk = chunks_fts.rowid "
            f"WHERE chunks_fts MATCH ? AND chunks_fts.rank MATCH ?{filter_sql} "
            "ORDER BY chunks_fts.rank LIMIT ?"
        )
        with self._locked():
            match = " OR ".join(self._informative(terms))
            params = [match, self._rank, *filter_params, top_k]
            rows = self._conn.execute(sql, params).fetchall()
        return [Hit(_chunk(row), -float(row[7])) for row in rows]

    # -- internals -------------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._lock:
            try:
                yield
            except sqlite3.Error as e:
                raise IndexError_(f"{self.path}: {e}") from e

    def _check_meta(self, embedder: str | None) -> None:
        meta = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
        stored_dims = meta.get("dimensions")
        if stored_dims is not None and int(stored_dims) != self.dimensions:
            raise ConfigurationError(
                f"index {self.path} holds {stored_dims}-dimensional vectors "
                f"(embedder {meta.get('embedder', 'unknown')!r}), but the configured "
                f"embedder makes {self.dimensions}: use the same embedder, or another index"
            )
        stored_name = meta.get("embedder")
        if embedder is not None and stored_name is not None and stored_name != embedder:
            raise ConfigurationError(
                f"index {self.path} was built with embedder {stored_name!r}, not {embedder!r}: "
                "vectors from different embedders cannot be compared; re-ingest or use "
                "another index"
            )
        # Only what is missing is written, so that opening an index as it is
        # writes nothing and disturbs no other connection.
        wanted = {"schema": _SCHEMA_VERSION, "dimensions": str(self.dimensions)}
        if embedder is not None:
            wanted["embedder"] = embedder
        missing = [(k, v) for k, v in wanted.items() if k not in meta]
        if missing:
            self._conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", missing)

    def _invalidate(self) -> None:
        self._matrix = None
        self._doc_freq.clear()
        self._rows = None

    def _sync(self) -> None:
        """Drop the caches if another connection has written since they were filled."""
        # data_version changes when another connection (say, an ingest process
        # writing to the same file) commits; our own writes call _invalidate.
        (version,) = self._conn.execute("PRAGMA data_version").fetchone()
        if version != self._data_version:
            self._invalidate()
            self._data_version = version

    def _informative(self, terms: list[str]) -> list[str]:
        """The terms without those in half the chunks or more.

        FTS5's BM25 gives such a term an IDF of zero, so it changes no score,
        but it makes the query visit and score most of the index ("git" is in
        93% of the Git manual's chunks). On 16k of those chunks, dropping them
        took the dev set's questions from 29 to 17 ms of CPU each and left its
        hit rates as they were.
        """
        self._sync()
        if self._rows is None:
            (self._rows,) = self._conn.execute("SELECT count(*) FROM chunks").fetchone()
        half = (self._rows + 1) // 2
        kept = []
        for term in terms:
            freq = self._doc_freq.get(term)
            if freq is None:
                # Counting stops at `half`: past that the exact number does not matter.
                (freq,) = self._conn.execute(
                    "SELECT count(*) FROM "
                    "(SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT ?)",
                    (term, half),
                ).fetchone()
                if len(self._doc_freq) >= _MAX_DOC_FREQS:  # terms come from users: stay bounded
                    self._doc_freq.clear()
                self._doc_freq[term] = freq
            if freq < half:
                kept.append(term)
        # Only common words ("git commit"): rank by them rather than not at all.
        return kept or terms

    def _load_matrix(self) -> _Matrix:
        with self._locked():
            self._sync()
            if self._matrix is not None:
                return self._matrix
            rows = self._conn.execute(
                "SELECT pk, source, metadata, vector FROM chunks ORDER BY pk"
            ).fetchall()
            blob = b"".join(row[3] for row in rows)
            vectors = np.frombuffer(blob, dtype="<f4").astype(np.float32)
            vectors = np.ascontiguousarray(vectors.reshape(len(rows), self.dimensions))
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            # Unit rows make the product a cosine whatever the embedder returned;
            # a zero row stays zero and so matches nothing.
            np.divide(vectors, norms, out=vectors, where=norms > 0)
            self._matrix = _Matrix(
                pks=np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows)),
                vectors=vectors,
                sources=[row[1] for row in rows],
                metadata=[json.loads(row[2]) for row in rows],
            )
            return self._matrix

    def _fetch_by_pk(self, pks: list[int]) -> dict[int, Chunk]:
        with self._locked():
            rows = self._conn.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM chunks AS c "
                f"WHERE c.pk IN ({_placeholders(len(pks))})",
                pks,
            ).fetchall()
        return {row[0]: _chunk(row) for row in rows}
