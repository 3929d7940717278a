"""Embedding throughput of the local embedder on ~800-character chunks.

    python bench/bench_embed.py [FOLDER] [--chunks N] [--runs R] [--naive N] [--threads T]
                                [--spin] [--model candor|shipped]
                                [--batch-texts N] [--batch-tokens N]

The chunks are real passages: the files of FOLDER (HTML, Markdown, text) if
given, else the Git manual pages in .candor/corpus/git-doc (`make corpus`), else a
built-in paragraph. They go through the ingest loader and chunker and are embedded
as ingestion embeds them (title and heading first). Prints `name=value` lines for a
Makefile to pick up.

`--model candor` (the default) embeds with the file candor itself loads: the
int8 conversion `candor models` made in CANDOR_MODEL_CACHE_DIR, or the shipped
file when there is none; `--model shipped` always uses the shipped file.

Run it on a quiet machine: another busy process on one of two cores halves the
figures. `embed_cpu_chunks_per_s` (chunks per second of the process's CPU time,
all threads together) moves much less with other processes' load: on N quiet
cores the wall-clock figure can reach at most N times it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from candor.backends.model_files import local_embedding_model, shipped_embedding_model
from candor.backends.onnx_embedder import BATCH_TEXTS, BATCH_TOKENS, OnnxEmbedder
from candor.ingest import chunk_document, embedding_text, iter_paths, load_document
from candor.ports import Embedder
from candor.settings import Settings
from candor.types import Chunk

REPO = Path(__file__).resolve().parents[1]
GIT_DOCS = REPO / ".candor" / "corpus" / "git-doc"
# The chunker's passages run up to 800 characters; the benchmark is about full
# ones, since the short tail (a one-line option) embeds several times faster.
FULL_CHUNK = range(600, 1100)

BUILTIN = (
    "Reference logs, or reflogs, record when the tips of branches and other references "
    "were updated in the local repository. Reflogs are useful in various Git commands, "
    "to specify the old value of a reference. For example, HEAD@{2} means where HEAD "
    "used to be two moves ago, and master@{one.week.ago} means where master used to "
    "point to one week ago in this local repository. The subcommand show, which is the "
    "default in the absence of any subcommands, shows the log of the reference given "
    "on the command line, or HEAD by default. The reflog covers all recent actions, and "
    "in addition the HEAD reflog records branch switching."
)


def corpus_chunks(folder: Path | None = None) -> tuple[str, list[Chunk]]:
    """(where they came from, the chunks) of FOLDER, the Git docs, or the built-in text."""
    candidates = [folder] if folder is not None else [GIT_DOCS] if GIT_DOCS.is_dir() else []
    for root in candidates:
        chunks = [
            chunk
            for source, data in iter_paths([root])
            for chunk in chunk_document(load_document(data, source))
        ]
        if chunks:
            return str(root), chunks
    # Variations of one paragraph: identical texts would all tokenise to one length.
    chunks = [
        Chunk(id=f"builtin-{n}", text=f"{n}. {BUILTIN[n % 97 :]} {BUILTIN[: n % 97]}", source="-")
        for n in range(512)
    ]
    return "built-in paragraph", chunks


def full_chunks(chunks: Sequence[Chunk], n: int) -> list[str]:
    """`n` embedding texts of full-size chunks, spread evenly over the corpus."""
    texts = [t for t in map(embedding_text, chunks) if len(t) in FULL_CHUNK] or [
        embedding_text(c) for c in chunks
    ]
    step = max(1, len(texts) // n)
    return [texts[(i * step) % len(texts)] for i in range(n)]


def rate(embedder: Embedder, texts: Sequence[str], *, one_at_a_time: bool = False) -> float:
    start = time.perf_counter()
    if one_at_a_time:
        for text in texts:
            embedder.embed([text])
    else:
        embedder.embed(texts)
    return len(texts) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, help="HTML/Markdown/text files")
    parser.add_argument("--chunks", type=int, default=256, help="chunks per batched run")
    parser.add_argument("--runs", type=int, default=3, help="batched runs; the median counts")
    parser.add_argument("--naive", type=int, default=64, help="chunks embedded one at a time")
    parser.add_argument("--threads", type=int, default=0, help="0: one per core")
    parser.add_argument("--spin", action="store_true", help="OnnxEmbedder(spin=True)")
    parser.add_argument("--model", choices=("candor", "shipped"), default="candor")
    parser.add_argument("--batch-texts", type=int, default=BATCH_TEXTS)
    parser.add_argument("--batch-tokens", type=int, default=BATCH_TOKENS)
    args = parser.parse_args()

    origin, chunks = corpus_chunks(args.folder)
    texts = full_chunks(chunks, args.chunks)
    start = time.perf_counter()
    model = (
        local_embedding_model(Settings().model_cache_dir)
        if args.model == "candor"
        else shipped_embedding_model()
    )
    embedder = OnnxEmbedder(
        threads=args.threads,
        model=model,
        spin=args.spin,
        batch_texts=args.batch_texts,
        batch_tokens=args.batch_tokens,
    )
    load_s = time.perf_counter() - start
    embedder.embed(texts[:8])  # the first run allocates onnxruntime's buffers

    cpu_start = time.process_time()
    batched = [rate(embedder, texts) for _ in range(args.runs)]
    cpu_rate = len(texts) * args.runs / (time.process_time() - cpu_start)
    naive = rate(embedder, texts[: args.naive], one_at_a_time=True)
    median = statistics.median(batched)
    print(f"embed_corpus={origin}")
    print(f"embed_model={embedder.name}")
    print(f"embed_load_s={load_s:.2f}")
    print(f"embed_threads={args.threads or 'one per core'}")
    print(f"embed_chunks={len(texts)}")
    print(f"embed_chunk_chars_mean={statistics.fmean(map(len, texts)):.0f}")
    print(f"embed_runs={' '.join(f'{r:.1f}' for r in batched)}")
    print(f"embed_chunks_per_s={median:.1f}")
    print(f"embed_cpu_chunks_per_s={cpu_rate:.1f}")
    print(f"embed_naive_chunks_per_s={naive:.1f}")
    print(f"embed_speedup={median / naive:.2f}")


if __name__ == "__main__":
    main()
