"""Hybrid query latency of the embedded default at production size (~11,000 chunks).

    python bench/bench_query.py [--queries N] [--rebuild] [--spin]

The index is the Git manual pages chunked by the ingest chunker, repeated as
sites (`site` metadata a, b, ...) up to about 11,000 chunks, with real
embeddings. It is built once (a minute or two, mostly embedding) and kept in
.candor/bench/. Each query is timed end to end through candor.retrieval.search
(strategy "hybrid"), then its parts again one by one. Prints `name=value` lines
for a Makefile to pick up.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from candor.backends.onnx_embedder import OnnxEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.errors import ConfigurationError
from candor.ingest import chunk_document, chunk_id, embedding_text, iter_paths, load_document
from candor.ports import Embedder
from candor.retrieval import rrf_fuse, search
from candor.settings import Settings
from candor.types import Chunk

REPO = Path(__file__).resolve().parents[1]
GIT_DOCS = REPO / ".candor" / "corpus" / "git-doc"
INDEX = REPO / ".candor" / "bench" / "query-index.sqlite3"
QUESTIONS = REPO / "data" / "eval" / "git-doc-questions.jsonl"
TARGET_CHUNKS = 11_000
EMBED_BATCH = 256


def corpus_chunks() -> tuple[Path, list[Chunk]]:
    if GIT_DOCS.is_dir():
        docs = (load_document(data, source) for source, data in iter_paths([GIT_DOCS]))
        return GIT_DOCS, [chunk for doc in docs for chunk in chunk_document(doc)]
    sys.exit("no Git manual pages: run `make corpus` first")


def sites(chunks: Sequence[Chunk]) -> list[str]:
    return [chr(ord("a") + n) for n in range(max(1, round(TARGET_CHUNKS / len(chunks))))]


def build(index: SqliteVectorIndex, embedder: Embedder, chunks: Sequence[Chunk]) -> None:
    # Each site holds the same pages, so each text is embedded once, for all sites.
    start = time.perf_counter()
    for offset in range(0, len(chunks), EMBED_BATCH):
        batch = chunks[offset : offset + EMBED_BATCH]
        vectors = embedder.embed([embedding_text(c) for c in batch])
        for site in sites(chunks):
            copies = [
                Chunk(
                    id=chunk_id(f"site-{site}/{c.source}", int(c.id.rsplit("-", 1)[1])),
                    text=c.text,
                    source=f"site-{site}/{c.source}",
                    title=c.title,
                    heading=c.heading,
                    metadata={"site": site},
                )
                for c in batch
            ]
            index.upsert(copies, vectors)
        done = offset + len(batch)
        rate = done / (time.perf_counter() - start)
        print(
            f"  embedded {done}/{len(chunks)} ({rate:.0f}/s)", file=sys.stderr, end="\r", flush=True
        )
    print(file=sys.stderr)


def open_index(embedder: Embedder, *, rebuild: bool) -> tuple[SqliteVectorIndex, float | None]:
    """The cached index, built first when missing, stale or asked for."""
    origin, chunks = corpus_chunks()
    expected = len(chunks) * len(sites(chunks))
    if not rebuild and INDEX.exists():
        try:
            index = SqliteVectorIndex(INDEX, embedder.dimensions, embedder=embedder.name)
            if index.count() == expected:
                return index, None
            index.close()
        except ConfigurationError:
            pass
    for leftover in INDEX.parent.glob(INDEX.name + "*"):  # the file and its WAL
        leftover.unlink()
    print(f"building {INDEX} from {origin} ({expected} chunks)", file=sys.stderr)
    start = time.perf_counter()
    index = SqliteVectorIndex(INDEX, embedder.dimensions, embedder=embedder.name)
    build(index, embedder, chunks)
    return index, time.perf_counter() - start


def queries(n: int) -> list[str]:
    """The dev set's questions, then openings of random passages, `n` in all."""
    asked: list[str] = []
    if QUESTIONS.exists():
        with QUESTIONS.open() as f:
            asked = [json.loads(line)["question"] for line in f if line.strip()]
    _, chunks = corpus_chunks()
    rng = random.Random(7)
    while len(asked) < n:
        words = re.findall(r"\S+", rng.choice(chunks).text)
        if len(words) >= 6:
            asked.append(" ".join(words[: rng.randint(4, 12)]))
    return asked[:n]


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def percentiles(name: str, ms: Sequence[float]) -> None:
    cuts = statistics.quantiles(ms, n=100)
    print(f"{name}_p50_ms={statistics.median(ms):.2f}")
    print(f"{name}_p95_ms={cuts[94]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached index")
    parser.add_argument("--spin", action="store_true", help="OnnxEmbedder(spin=True)")
    args = parser.parse_args()

    settings = Settings()
    embedder = OnnxEmbedder(spin=args.spin)
    index, build_s = open_index(embedder, rebuild=args.rebuild)
    asked = queries(args.queries)
    k = settings.candidates

    def hybrid(q: str) -> object:
        return search(
            q,
            embedder=embedder,
            index=index,
            reranker=None,
            top_k=settings.top_k,
            candidates=k,
            rrf_k=settings.rrf_k,
            strategy="hybrid",
        )

    # The first query loads the vectors into memory; a server pays that once.
    cold = timed(partial(hybrid, asked[0]))
    # The first pass meets every query term for the first time (the index then
    # counts how many chunks hold it); the second is a server that has seen them.
    first = [timed(partial(hybrid, q)) for q in asked]
    total = [timed(partial(hybrid, q)) for q in asked]

    parts: dict[str, list[float]] = {"embed": [], "dense": [], "keyword": [], "fuse": []}
    for q in asked:
        start = time.perf_counter()
        vector = embedder.embed([q])[0]
        t_embed = time.perf_counter()
        dense = index.query(vector=vector, keywords=None, top_k=k).dense
        t_dense = time.perf_counter()
        keyword = index.query(vector=None, keywords=q, top_k=k).keyword
        t_keyword = time.perf_counter()
        rrf_fuse([dense, keyword], k=settings.rrf_k)
        t_fuse = time.perf_counter()
        seconds = (t_embed - start, t_dense - t_embed, t_keyword - t_dense, t_fuse - t_keyword)
        for name, s in zip(parts, seconds, strict=True):
            parts[name].append(s * 1000)

    print(f"index_chunks={index.count()}")
    print(f"index_file_mb={INDEX.stat().st_size / 1e6:.1f}")
    if build_s is not None:
        print(f"index_build_s={build_s:.1f}")
    print(f"queries={len(asked)}")
    print(f"query_cold_ms={cold:.1f}")
    percentiles("query_first_pass", first)
    percentiles("query", total)
    for name, part in parts.items():
        percentiles(f"query_{name}", part)
    index.close()


if __name__ == "__main__":
    main()
