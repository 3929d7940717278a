"""The ingest pipeline: (source, bytes) in; chunks embedded and written to an index.

It takes the ports, not backends, so the same code fills the local SQLite index
from a folder (`candor ingest`) and the Pinecone index from S3 events.

What it guarantees, whatever the order or repetition of its inputs:
- Ids are `md5(source)-chunkIndex`, so a new version overwrites the old in place.
- Writes converge under faults. Given completion records (candor.ingest.records;
  `candor ingest` and the S3 function always give them), a document counts as
  unchanged only when its record holds its fingerprint (its bytes, the pipeline
  version, the chunking and the embedder) and the index still holds its chunks.
  The record is written last, after every chunk of every index and after the
  corpus-version bump, so a run that failed anywhere (a sparse write after the
  dense one, the bump itself) is redone in full, bump included, by the next.
  Without records (an index of one's own, as `candor eval` builds) the index is
  its own evidence: every chunk carries the fingerprint and the chunk count, and
  chunk 0 is written last, so its fingerprint says the whole version is in.
- Unchanged bytes cost no embedding and no write.
- A document's public address (`url`, candor.urls) is stored on each of its chunks
  and is not part of its fingerprint: when only the address changed, an index
  that can update metadata in place (candor.ports.MetadataUpdater) gets the new
  address on every chunk, chunk 0 last, with no embedding; any other index has
  the document re-embedded and rewritten. Either way the corpus version is
  bumped, so that no cached answer keeps a citation's old link.
- A version with fewer chunks leaves no stale tail: the document's ids are listed
  by its prefix and the ones past the new count are deleted, after the new
  chunks are in (a crash in between leaves extra chunks, never a missing document).
- A deleted document leaves nothing: every id under its prefix is deleted.
- One bad document is recorded with its reason and the others go on. Failures are
  classed by where they happen. Reading and chunking the bytes is a pure function
  of them, so whatever fails there (unsupported, undecodable, oversized, a PDF with
  no text, a loader's own exception) is the document's fault and is not retried:
  the same bytes would fail the same way. Everything else is a call to a backend
  (the embedder, the index, the state store), and any exception there, a bare one
  included, is retryable. Titles and headings are capped in bytes when chunking
  (candor.ingest.chunking), and a chunk too large for any index is refused before
  it is embedded, so no document can fail in a backend for its own size.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
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
from candor.ingest.records import CompletionRecords
from candor.ports import Embedder, MetadataUpdater, VectorIndex
from candor.types import URL_KEY, Chunk
from candor.urls import public_url, source_url

logger = logging.getLogger(__name__)

# Part of every document fingerprint: bump it when the loaders or the chunker
# change what the same bytes become, so that the next ingest redoes every document.
# 2: titles and headings capped in bytes. 3: PDFs read with PDFium, their chunks
# carry their page.
PIPELINE_VERSION = "3"
HASH_KEY = "doc_hash"
CHUNKS_KEY = "doc_chunks"
# The most a chunk's stored fields (text, source, title, heading, metadata, as
# JSON) may take. Pinecone keeps them as metadata, at most 40 KB per vector, and
# adds its own keys; the other backends take more. The chunker's caps keep real
# chunks far below this; a larger one is refused as the document's fault before
# anything is embedded, rather than failing in the index on every delivery.
MAX_CHUNK_BYTES = 32 * 1024

Status = Literal["changed", "unchanged", "deleted", "absent", "failed"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one document.

    changed: a new version was embedded and written; unchanged: the index already
    held this version; deleted: its chunks were removed; absent: a delete found
    nothing to remove; failed: the document is not in the index as given, see
    `reason` (a failure in a backend may leave part of a new version written,
    which the next delivery completes). `retryable` marks failures of a backend
    (a model, the index, storage) rather than of the document, which a later
    attempt may get past.
    """

    source: str
    status: Status
    chunks: int = 0  # the chunks the document has in the index now
    embedded: int = 0
    upserted: int = 0
    deleted: int = 0
    reason: str = ""
    retryable: bool = False
    # The version written, and whether the index changed for it under a PENDING
    # completion record that the end of the run must complete (candor.ingest.records).
    fingerprint: str = ""
    unrecorded: bool = False

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

    def incomplete(self, reason: str) -> Outcome:
        """This outcome, written to the index but not completed: a retryable failure."""
        return dataclasses.replace(
            self, status="failed", reason=reason, retryable=True, unrecorded=False
        )


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

    @classmethod
    def of(cls, outcomes: Iterable[Outcome], *, corpus_version: int | None = None) -> IngestReport:
        report = cls(corpus_version=corpus_version)
        for outcome in outcomes:
            report.add(outcome)
        return report

    @property
    def documents(self) -> int:
        """Documents that are in the index as they were given (changed or unchanged)."""
        return self.documents_changed + self.documents_unchanged

    @property
    def deleted(self) -> int:
        return self.chunks_deleted

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

    def __post_init__(self) -> None:
        # Checked here, once, so that a bad setting fails the run at its start
        # instead of failing every document as if each were at fault.
        if self.max_chars < 1:
            raise ValueError(f"max_chars must be positive, not {self.max_chars}")
        if not 0 <= self.overlap < self.max_chars:
            raise ValueError(f"overlap must be in [0, max_chars), not {self.overlap}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be positive, not {self.batch_size}")


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
    records: CompletionRecords | None = None,
    chunking: Chunking = Chunking(),
    media_type: str | None = None,
    url: str | None = None,
) -> Outcome:
    """Bring one document's chunks in the index up to `data`; a failure is an Outcome too.

    `url` is the document's public address; anything but an http(s) one is dropped
    (candor.urls). With `records`, a changed document's completion record is left
    PENDING: the caller completes it with `complete` once the run is over.
    """
    url = public_url(url, source=source)
    try:
        return _ingest_one(source, data, embedder, index, records, chunking, media_type, url)
    except IngestError as e:
        logger.warning("not ingested: %s", e)
        return Outcome(source, "failed", reason=str(e))
    except Exception as e:
        # Past reading the document, every step is a backend's (the embedder, the
        # index, the state store), and an outage there may pass: retryable, with
        # the traceback in the log in case it is a bug.
        logger.exception("not ingested: %s", source)
        return Outcome(source, "failed", reason=describe(e), retryable=True)


def delete_document(
    source: str, *, index: VectorIndex, records: CompletionRecords | None = None
) -> Outcome:
    """Remove every chunk of `source` (found by its id prefix: serverless Pinecone
    cannot delete by metadata). With `records`, its record stays PENDING until the
    caller's `complete`, so a delete whose bump failed is redone, not taken as done."""
    try:
        record = records.record(source) if records is not None else None
        ids = list(index.list_ids(doc_prefix(source)))
        if not ids and record is None:
            return Outcome(source, "absent")
        if records is not None:
            records.begin(source)
        deleted = index.delete(ids) if ids else 0
    except Exception as e:
        logger.exception("not deleted: %s", source)
        return Outcome(source, "failed", reason=describe(e), retryable=True)
    if not deleted and records is None:
        return Outcome(source, "absent")
    return Outcome(source, "deleted", deleted=deleted, unrecorded=records is not None)


def complete(
    outcomes: Sequence[Outcome], records: CompletionRecords | None
) -> tuple[list[Outcome], int | None]:
    """End a run: bump the corpus version once if the run changed the index, then
    write the completion record of every document it changed (in that order; see
    candor.ingest.records). Returns the outcomes as they end, and the new corpus
    version. A document whose bump or record failed ends as a retryable failure:
    its writes are in the index, and the next delivery redoes them and the bump.
    """
    done = list(outcomes)
    if records is None or not any(outcome.unrecorded for outcome in done):
        return done, None
    try:
        version = records.bump()
    except Exception as e:
        logger.exception("corpus version not bumped")
        reason = f"written, but the corpus version was not bumped: {describe(e)}"
        return [o.incomplete(reason) if o.unrecorded else o for o in done], None
    for i, outcome in enumerate(done):
        if not outcome.unrecorded:
            continue
        try:
            records.complete(
                outcome.source, None if outcome.status == "deleted" else outcome.fingerprint
            )
        except Exception as e:
            logger.exception("completion not recorded: %s", outcome.source)
            done[i] = outcome.incomplete(f"written, but not recorded as complete: {describe(e)}")
            continue
        done[i] = dataclasses.replace(outcome, unrecorded=False)
    return done, version


def ingest(
    documents: Iterable[tuple[str, bytes]],
    *,
    embedder: Embedder,
    index: VectorIndex,
    records: CompletionRecords | None = None,
    batch_size: int = 64,
    progress: Callable[[int], object] | None = None,
    max_chars: int = 800,
    overlap: int = 100,
    max_bytes: int | None = None,
    source_base_url: str | None = None,
) -> IngestReport:
    """Ingest each (source, bytes); a failing document is recorded, not fatal.

    With `source_base_url`, each document's public address is that base plus its
    source, URL-quoted (CANDOR_SOURCE_BASE_URL).

    `progress` is called with 1 after each document, ingested or failed (a bar of
    documents is the one whose total a caller knows before it starts).
    `records` keep the completion records and the corpus version that cached
    answers are keyed on; a run that changed the index bumps it once, at the end.
    """
    chunking = Chunking(max_chars, overlap, batch_size, max_bytes)
    started = time.perf_counter()
    outcomes: list[Outcome] = []
    for source, data in documents:
        outcomes.append(
            ingest_document(
                source,
                data,
                embedder=embedder,
                index=index,
                records=records,
                chunking=chunking,
                url=source_url(source_base_url, source) if source_base_url else None,
            )
        )
        if progress is not None:
            progress(1)
    done, version = complete(outcomes, records)
    report = IngestReport.of(done, corpus_version=version)
    report.seconds = time.perf_counter() - started
    return report


def count_documents(index: VectorIndex) -> int:
    """Documents in the index: the distinct `md5(source)` prefixes of its chunk ids."""
    return len({cid.rpartition("-")[0] for cid in index.list_ids()})


def describe(error: Exception) -> str:
    """An error as a failure's reason: candor's own say what they are."""
    return str(error) if isinstance(error, CandorError) else f"{type(error).__name__}: {error}"


def _ingest_one(
    source: str,
    data: bytes,
    embedder: Embedder,
    index: VectorIndex,
    records: CompletionRecords | None,
    chunking: Chunking,
    media_type: str | None,
    url: str | None,
) -> Outcome:
    if chunking.max_bytes is not None and len(data) > chunking.max_bytes:
        raise IngestError(
            f"{source}: {len(data)} bytes is over the limit of {chunking.max_bytes} "
            "(CANDOR_INGEST_MAX_BYTES)"
        )
    prefix = doc_prefix(source)
    version = fingerprint(data, embedder=embedder, chunking=chunking, media_type=media_type)
    existing = list(index.list_ids(prefix))
    complete_before = records is None or records.record(source) == version
    held = _held_version(index, prefix, existing, version) if complete_before else None
    if held is not None:
        ids, first = held
        if first.url == url:
            return _keep(source, index, records, version, existing, ids)
        if isinstance(index, MetadataUpdater):
            return _keep(source, index, records, version, existing, ids, relink=(first.id, url))

    chunks = _read_chunks(source, data, chunking, media_type)
    marks: dict[str, str | int] = {HASH_KEY: version, CHUNKS_KEY: len(chunks)}
    if url is not None:
        marks[URL_KEY] = url
    chunks = [_marked(chunk, marks) for chunk in chunks]
    if records is not None:
        records.begin(source)
    # Chunk 0 goes last: without records, its fingerprint says the whole version is written.
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
        fingerprint=version,
        unrecorded=records is not None,
    )


def _keep(
    source: str,
    index: VectorIndex,
    records: CompletionRecords | None,
    version: str,
    existing: list[str],
    ids: set[str],
    relink: tuple[str, str | None] | None = None,
) -> Outcome:
    """The index holds this version of the document's text: prune ids left over from
    a run that died between writing and pruning (or from a duplicate racing it), and
    with `relink` (chunk 0's id, the new address) give every chunk the new address."""
    stale = [cid for cid in existing if cid not in ids]
    if not stale and relink is None:
        return Outcome(source, "unchanged", chunks=len(ids))
    if records is not None:
        records.begin(source)
    deleted = index.delete(stale) if stale else 0
    updated = 0
    if relink is not None and isinstance(index, MetadataUpdater):
        first, url = relink
        # "" rather than no key: an update cannot remove one. Chunk 0 goes last, as
        # in a full write: without records, its address says every chunk has it.
        address = {URL_KEY: url or ""}
        updated = index.update_metadata(sorted(ids - {first}), address)
        updated += index.update_metadata([first], address)
    return Outcome(
        source,
        "changed" if relink is not None else "unchanged",
        chunks=len(ids),
        upserted=updated,
        deleted=deleted,
        fingerprint=version,
        unrecorded=records is not None,
    )


def _read_chunks(
    source: str, data: bytes, chunking: Chunking, media_type: str | None
) -> list[Chunk]:
    """The document's chunks. A pure function of the bytes: whatever fails here is
    the document's fault (an IngestError), since the same bytes fail the same way."""
    try:
        document = load_document(data, source, media_type=media_type)
        chunks = chunk_document(document, max_chars=chunking.max_chars, overlap=chunking.overlap)
    except IngestError:
        raise
    except Exception as e:
        # A loader's or the chunker's own exception: perhaps a bug, so with the
        # traceback, but retrying the same bytes cannot get past it.
        logger.exception("cannot read %s", source)
        raise IngestError(f"{source}: cannot be read ({type(e).__name__}: {e})") from e
    if not chunks:
        # Most likely a page whose text the loader stripped as furniture: say so
        # rather than silently dropping the document's old chunks.
        raise IngestError(f"{source}: no text to index")
    for chunk in chunks:
        size = _stored_bytes(chunk)
        if size > MAX_CHUNK_BYTES:
            raise IngestError(
                f"{source}: passage {chunk.id} takes {size} bytes, over the {MAX_CHUNK_BYTES} "
                "an index can store per passage"
            )
    return chunks


def _stored_bytes(chunk: Chunk) -> int:
    fields = {
        "text": chunk.text,
        "source": chunk.source,
        "title": chunk.title,
        "heading": chunk.heading,
        **chunk.metadata,
    }
    return len(json.dumps(fields, ensure_ascii=False).encode("utf-8"))


def _held_version(
    index: VectorIndex, prefix: str, existing: list[str], version: str
) -> tuple[set[str], Chunk] | None:
    """The ids of the document's current version and its chunk 0, if the index holds
    all of it; else None."""
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
    return (expected, fetched[0]) if expected <= set(existing) else None


def _marked(chunk: Chunk, marks: dict[str, str | int]) -> Chunk:
    return dataclasses.replace(chunk, metadata={**chunk.metadata, **marks})


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
