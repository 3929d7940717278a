"""The ingest pipeline: (source, bytes) pairs in; chunks embedded and written to an index.

It takes the ports, not backends, so the same loop fills the local SQLite index
from a folder and, later, the production index from an S3 event.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from candor.errors import CandorError, IngestError, ModelError
from candor.ingest.chunking import chunk_document, doc_prefix
from candor.ingest.loaders import is_supported, load_document
from candor.ports import Embedder, VectorIndex
from candor.types import Chunk

logger = logging.getLogger(__name__)


@dataclass
class IngestReport:
    """What one ingest run did. `documents` counts only the documents that succeeded."""

    documents: int = 0
    chunks: int = 0
    deleted: int = 0  # stale chunks of documents that shrank
    failures: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "chunks": self.chunks,
            "deleted": self.deleted,
            "failed": len(self.failures),
            "failures": [{"source": s, "reason": r} for s, r in self.failures],
            "seconds": round(self.seconds, 3),
        }


def embedding_text(chunk: Chunk) -> str:
    """What the embedder sees: "title — heading" on a line, then the passage.

    A passage often never names its subject ("Defaults to true."); the title and
    heading put "git-push(1) — OPTIONS > --force-with-lease" into its vector. On
    the Git dev set with the local MiniLM this found as many or more answer-bearing
    passages in the top 4 as the text alone (17 vs 15 dense, 20 vs 19 hybrid, of
    28 questions): within noise, so the reason above decides.
    """
    context = " — ".join(part for part in (chunk.title, chunk.heading) if part)
    return f"{context}\n{chunk.text}" if context else chunk.text


def ingest(
    documents: Iterable[tuple[str, bytes]],
    *,
    embedder: Embedder,
    index: VectorIndex,
    batch_size: int = 64,
    progress: Callable[[int], None] | None = None,
    max_chars: int = 800,
    overlap: int = 100,
) -> IngestReport:
    """Load, chunk, embed and upsert each document; a failing document is recorded, not fatal.

    `progress` is called with 1 after each document, ingested or failed (a bar of
    documents is the one whose total a caller knows before it starts).
    Ingesting the same documents again rewrites the same ids and changes nothing.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, not {batch_size}")
    started = time.perf_counter()
    report = IngestReport()
    for source, data in documents:
        try:
            written, deleted = _ingest_one(
                source,
                data,
                embedder=embedder,
                index=index,
                batch_size=batch_size,
                max_chars=max_chars,
                overlap=overlap,
            )
        except CandorError as e:
            logger.warning("not ingested: %s", e)
            report.failures.append((source, str(e)))
        except Exception as e:
            # A bug or a backend's own exception: still one document's failure, so
            # the rest of the batch goes on, but with the traceback in the log.
            logger.exception("not ingested: %s", source)
            report.failures.append((source, f"{type(e).__name__}: {e}"))
        else:
            report.documents += 1
            report.chunks += written
            report.deleted += deleted
        if progress is not None:
            progress(1)
    report.seconds = time.perf_counter() - started
    return report


def _ingest_one(
    source: str,
    data: bytes,
    *,
    embedder: Embedder,
    index: VectorIndex,
    batch_size: int,
    max_chars: int,
    overlap: int,
) -> tuple[int, int]:
    chunks = chunk_document(load_document(data, source), max_chars=max_chars, overlap=overlap)
    if not chunks:
        # Most likely a page whose text the loader stripped as furniture: say so
        # rather than silently dropping the document's old chunks.
        raise IngestError(f"{source}: no text to index")
    for start in range(0, len(chunks), batch_size):
        batch = chunks[start : start + batch_size]
        vectors = embedder.embed([embedding_text(chunk) for chunk in batch])
        if vectors.shape != (len(batch), embedder.dimensions):
            raise ModelError(
                f"{embedder.name} returned vectors of shape {vectors.shape} for "
                f"{len(batch)} texts; expected ({len(batch)}, {embedder.dimensions})"
            )
        index.upsert(batch, vectors)
    # Stale tail ids go only after the new chunks are in: a crash in between leaves
    # extra chunks, never a missing document. The listing is read in full before
    # deleting, as an index may page through it lazily.
    keep = {chunk.id for chunk in chunks}
    stale = [cid for cid in index.list_ids(doc_prefix(source)) if cid not in keep]
    deleted = index.delete(stale) if stale else 0
    return len(chunks), deleted


def iter_paths(paths: Sequence[Path]) -> Iterator[tuple[str, bytes]]:
    """(source, bytes) for each path: a file by its name; a directory's supported files
    (recursively, hidden ones skipped) by their path below it, with "/", sorted.

    Every path is checked before anything is read, so a typo fails at once rather
    than after the other paths were ingested.
    """
    missing = [str(path) for path in paths if not path.exists()]
    if missing:
        raise IngestError(f"no such file or directory: {', '.join(missing)}")
    return _read(paths)


def _read(paths: Sequence[Path]) -> Iterator[tuple[str, bytes]]:
    for path in paths:
        if path.is_dir():
            for relative in _supported_files(path):
                yield relative, (path / relative).read_bytes()
        else:
            # Named on purpose, so not filtered: an unsupported type is reported.
            yield path.name, path.read_bytes()


def _supported_files(root: Path) -> list[str]:
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [name for name in dirs if not name.startswith(".")]
        below = Path(folder).relative_to(root)
        found.extend(
            (below / name).as_posix()
            for name in files
            if not name.startswith(".") and is_supported(name)
        )
    return sorted(found)
