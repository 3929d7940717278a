"""The ingest pipeline: (source, bytes) in; chunks embedded and written to an index.

It takes the ports, not backends, so the same code fills the local SQLite index
from a folder (`candor ingest`) and the Pinecone index from S3 events.

What it guarantees, whatever the order or repetition of its inputs:
- Ids are `md5(source)-chunkIndex`, so a new version overwrites the old in place.
- Unchanged bytes cost no embedding and no write. Every chunk carries the
  document's fingerprint (`doc_hash`: its bytes, the pipeline version, the
  chunking and the embedder) and chunk count; when chunk 0 holds the same
  fingerprint and the index holds exactly the chunks that version had, the
  document is skipped. Chunk 0 is written last, so its fingerprint means that
  the whole version is in: a run that died halfway leaves an old fingerprint
  behind, and the next delivery redoes the work. (On an eventually consistent
  index such as Pinecone, a duplicate that arrives within moments of the first
  delivery may not see its writes yet and embed again; the index ends the same.)
- A version with fewer chunks leaves no stale tail: the document's ids are listed
  by its prefix and the ones past the new count are deleted, after the new
  chunks are in (a crash in between leaves extra chunks, never a missing document).
- A deleted document leaves nothing: every id under its prefix is deleted.
- One bad document (unsupported, undecodable, oversized, a PDF with no text) is
  recorded with its reason and changes nothing in the index; the others go on.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from candor.errors import CandorError, IngestError, ModelError
from candor.ingest.chunking import chunk_document, doc_prefix
from candor.ingest.loaders import is_supported, load_document
from candor.ports import Embedder, VectorIndex
from candor.types import Chunk

logger = logging.getLogger(__name__)

# Part of every document fingerprint: bump it when the loaders or the chunker
# change what the same bytes become, so that the next ingest redoes every document.
PIPELINE_VERSION = "1"
HASH_KEY = "doc_hash"
CHUNKS_KEY = "doc_chunks"

Status = Literal["changed", "unchanged", "deleted", "absent", "failed"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one document.

    changed: a new version was embedded and written; unchanged: the index already
    held this version; deleted: its chunks were removed; absent: a delete found
    nothing to remove; failed: nothing in the index changed, see `reason`.
    `retryable` marks failures of a backend (a model, the index, storage) rather
    than of the document, which a later attempt may get past.
    """

    source: str
    status: Status
    chunks: int = 0  # the chunks the document has in the index now
    embedded: int = 0
    upserted: int = 0
    deleted: int = 0
    reason: str = ""
    retryable: bool = False

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "source": self.source,
            "status": self.status,
            "chunks": self.chunks,
            "embedded": self.embedded,
            "upserted": self.upserted,
            "deleted": self.deleted,
        }
        if self.status == "failed":
            data |= {"reason": self.reason, "retryable": self.retryable}
        return data


@dataclass
class IngestReport:
    """What one ingest run did, summed over its documents."""

    documents_seen: int = 0
    documents_changed: int = 0
    documents_unchanged: int = 0
    documents_deleted: int = 0
    chunks: int = 0  # the chunks the ingested (changed or unchanged) documents have
    chunks_embedded: int = 0
    chunks_upserted: int = 0
    chunks_deleted: int = 0  # stale tails and deleted documents
    failures: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    retryable: list[str] = field(default_factory=list)  # sources that failed in a backend
    corpus_version: int | None = None  # after the bump, when the run changed anything
    seconds: float = 0.0

    @property
    def documents(self) -> int:
        """Documents that are in the index as they were given (changed or unchanged)."""
        return self.documents_changed + self.documents_unchanged

    @property
    def deleted(self) -> int:
        return self.chunks_deleted

    @property
    def changed_anything(self) -> bool:
        return bool(self.documents_changed or self.documents_deleted or self.chunks_deleted)

    def add(self, outcome: Outcome) -> None:
        self.documents_seen += 1
        self.chunks_embedded += outcome.embedded
        self.chunks_upserted += outcome.upserted
        self.chunks_deleted += outcome.deleted
        match outcome.status:
            case "changed" | "unchanged":
                if outcome.status == "changed":
                    self.documents_changed += 1
                else:
                    self.documents_unchanged += 1
                self.chunks += outcome.chunks
            case "deleted":
                self.documents_deleted += 1
            case "failed":
                self.failures.append((outcome.source, outcome.reason))
                if outcome.retryable:
                    self.retryable.append(outcome.source)
            case "absent":
                pass

    def to_json(self) -> dict[str, Any]:
        return {
            # The first four keys predate the rest; scripts read them.
            "documents": self.documents,
            "chunks": self.chunks,
            "deleted": self.chunks_deleted,
            "failed": len(self.failures),
            "documents_seen": self.documents_seen,
            "documents_changed": self.documents_changed,
            "documents_unchanged": self.documents_unchanged,
            "documents_deleted": self.documents_deleted,
            "chunks_embedded": self.chunks_embedded,
            "chunks_upserted": self.chunks_upserted,
            "chunks_deleted": self.chunks_deleted,
            "failures": [{"source": s, "reason": r} for s, r in self.failures],
            "corpus_version": self.corpus_version,
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True, slots=True)
class Chunking:
    """How documents become chunks and vectors: part of every fingerprint."""

    max_chars: int = 800
    overlap: int = 100
    batch_size: int = 64  # texts per embedding call and chunks per upsert
    max_bytes: int | None = None  # a larger document is a failure, not read


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


def fingerprint(
    data: bytes, *, embedder: Embedder, chunking: Chunking, media_type: str | None = None
) -> str:
    """What decides a document's chunks and vectors, hashed: same fingerprint, same index."""
    digest = hashlib.sha256()
    header = "\x00".join(
        (
            PIPELINE_VERSION,
            embedder.name,
            str(embedder.dimensions),
            str(chunking.max_chars),
            str(chunking.overlap),
            media_type or "",
        )
    )
    digest.update(header.encode())
    digest.update(b"\x00")
    digest.update(data)
    return digest.hexdigest()


def ingest_document(
    source: str,
    data: bytes,
    *,
    embedder: Embedder,
    index: VectorIndex,
    chunking: Chunking = Chunking(),
    media_type: str | None = None,
) -> Outcome:
    """Bring one document's chunks in the index up to `data`; a failure is an Outcome too."""
    try:
        return _ingest_one(source, data, embedder, index, chunking, media_type)
    except IngestError as e:
        logger.warning("not ingested: %s", e)
        return Outcome(source, "failed", reason=str(e))
    except CandorError as e:
        logger.warning("not ingested: %s: %s", source, e)
        return Outcome(source, "failed", reason=str(e), retryable=True)
    except Exception as e:
        # A bug or a backend's own exception: still one document's failure, so
        # the rest of the batch goes on, but with the traceback in the log.
        logger.exception("not ingested: %s", source)
        return Outcome(source, "failed", reason=f"{type(e).__name__}: {e}", retryable=True)


def delete_document(source: str, *, index: VectorIndex) -> Outcome:
    """Remove every chunk of `source` (found by its id prefix: serverless Pinecone
    cannot delete by metadata)."""
    try:
        ids = list(index.list_ids(doc_prefix(source)))
        deleted = index.delete(ids) if ids else 0
    except Exception as e:
        logger.exception("not deleted: %s", source)
        return Outcome(source, "failed", reason=f"{type(e).__name__}: {e}", retryable=True)
    return Outcome(source, "deleted" if deleted else "absent", deleted=deleted)


def ingest(
    documents: Iterable[tuple[str, bytes]],
    *,
    embedder: Embedder,
    index: VectorIndex,
    batch_size: int = 64,
    progress: Callable[[int], object] | None = None,
    max_chars: int = 800,
    overlap: int = 100,
    max_bytes: int | None = None,
    on_change: Callable[[], int] | None = None,
) -> IngestReport:
    """Ingest each (source, bytes); a failing document is recorded, not fatal.

    `progress` is called with 1 after each document, ingested or failed (a bar of
    documents is the one whose total a caller knows before it starts).
    `on_change` runs once at the end if the run changed the index (it bumps the
    corpus version that cached answers are keyed on); its result is reported.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, not {batch_size}")
    chunking = Chunking(max_chars, overlap, batch_size, max_bytes)
    started = time.perf_counter()
    report = IngestReport()
    for source, data in documents:
        report.add(ingest_document(source, data, embedder=embedder, index=index, chunking=chunking))
        if progress is not None:
            progress(1)
    finish(report, on_change)
    report.seconds = time.perf_counter() - started
    return report


def finish(report: IngestReport, on_change: Callable[[], int] | None) -> None:
    """Bump the corpus version once if the run changed the index."""
    if on_change is not None and report.changed_anything:
        report.corpus_version = on_change()


def count_documents(index: VectorIndex) -> int:
    """Documents in the index: the distinct `md5(source)` prefixes of its chunk ids."""
    return len({cid.rpartition("-")[0] for cid in index.list_ids()})


def _ingest_one(
    source: str,
    data: bytes,
    embedder: Embedder,
    index: VectorIndex,
    chunking: Chunking,
    media_type: str | None,
) -> Outcome:
    if chunking.max_bytes is not None and len(data) > chunking.max_bytes:
        raise IngestError(
            f"{source}: {len(data)} bytes is over the limit of {chunking.max_bytes} "
            "(CANDOR_INGEST_MAX_BYTES)"
        )
    prefix = doc_prefix(source)
    version = fingerprint(data, embedder=embedder, chunking=chunking, media_type=media_type)
    existing = list(index.list_ids(prefix))
    held = _held_version(index, prefix, existing, version)
    if held is not None:
        # The index has this version; only ids left over from a run that died
        # between writing and pruning (or from a duplicate racing it) go.
        stale = [cid for cid in existing if cid not in held]
        deleted = index.delete(stale) if stale else 0
        return Outcome(source, "unchanged", chunks=len(held), deleted=deleted)

    document = load_document(data, source, media_type=media_type)
    chunks = chunk_document(document, max_chars=chunking.max_chars, overlap=chunking.overlap)
    if not chunks:
        # Most likely a page whose text the loader stripped as furniture: say so
        # rather than silently dropping the document's old chunks.
        raise IngestError(f"{source}: no text to index")
    marks: dict[str, str | int] = {HASH_KEY: version, CHUNKS_KEY: len(chunks)}
    chunks = [_marked(chunk, marks) for chunk in chunks]
    # Chunk 0 goes last: its fingerprint says the whole version is written.
    order = chunks[1:] + chunks[:1]
    upserted = 0
    for start in range(0, len(order), chunking.batch_size):
        batch = order[start : start + chunking.batch_size]
        vectors = embedder.embed([embedding_text(chunk) for chunk in batch])
        if vectors.shape != (len(batch), embedder.dimensions):
            raise ModelError(
                f"{embedder.name} returned vectors of shape {vectors.shape} for "
                f"{len(batch)} texts; expected ({len(batch)}, {embedder.dimensions})"
            )
        upserted += index.upsert(batch, vectors)
    keep = {chunk.id for chunk in chunks}
    stale = [cid for cid in existing if cid not in keep]
    deleted = index.delete(stale) if stale else 0
    return Outcome(
        source,
        "changed",
        chunks=len(chunks),
        embedded=len(chunks),
        upserted=upserted,
        deleted=deleted,
    )


def _held_version(
    index: VectorIndex, prefix: str, existing: list[str], version: str
) -> set[str] | None:
    """The ids of the document's current version if the index holds all of it, else None."""
    first = f"{prefix}0"
    if first not in existing:
        return None
    fetched = index.fetch([first])
    if not fetched:
        return None
    metadata = fetched[0].metadata
    count = metadata.get(CHUNKS_KEY)
    if metadata.get(HASH_KEY) != version or not isinstance(count, int | float):
        return None
    expected = {f"{prefix}{i}" for i in range(int(count))}
    return expected if expected <= set(existing) else None


def _marked(chunk: Chunk, marks: dict[str, str | int]) -> Chunk:
    return Chunk(
        id=chunk.id,
        text=chunk.text,
        source=chunk.source,
        title=chunk.title,
        heading=chunk.heading,
        metadata={**chunk.metadata, **marks},
    )


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
