"""The ingest pipeline: (source, bytes) in; chunks embedded and written to an index.

It takes the ports, not backends, so the same code fills the local SQLite index
from a folder (`candor ingest`) and the Pinecone index from S3 events. What the
bytes become (chunks, fingerprint) is candor.ingest.reading; what a run did,
candor.ingest.outcomes; this module decides what a document's version needs and
writes it.

What it guarantees, whatever the order or repetition of its inputs:
- Ids are `md5(source)-chunkIndex`, so a new version overwrites the old in place.
- Writes converge under faults. Given completion records (candor.ingest.records;
  `candor ingest` and the S3 function always give them), a document counts as
  unchanged only when its record holds its fingerprint (its bytes, the pipeline
  version, the chunking and the embedder) and the index still holds its chunks.
  The record is written last, after every chunk of every index and after the
  corpus-version bump, so a run that failed anywhere (a sparse write after the
  dense one, the bump itself) is redone in full, bump included, by the next.
  Without records (an index of one's own, as `candor eval` builds) an index that
  writes each batch in one step is its own evidence: every chunk carries the
  fingerprint and the chunk count, and chunk 0 is written last, so its
  fingerprint says the whole version is in. The SQLite index is one (a batch is
  one transaction); Pinecone with a sparse index is not: each batch goes to the
  dense index, then to the sparse one, and chunk 0 is read back from the dense
  one only, so a run that died between the two writes of chunk 0's batch leaves
  a chunk 0 saying the version is in while the sparse index lacks that batch,
  and a run without records keeps it so. Only records cover both indexes.
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
- With a catalogue (candor.catalogue.keeping), each document's catalogue record is
  brought up to the version the index holds, after its chunks are written and
  before its completion record; an unchanged document whose record is missing or
  stale gets one with no embedding, and the run then bumps the corpus version as a
  changed document would, so that no reader keeps the old catalogue. A deleted
  document's record goes with its chunks.
- One bad document is recorded with its reason and the others go on. Failures are
  classed by where they happen. Reading and chunking the bytes is a pure function
  of them, so whatever fails there (unsupported, undecodable, oversized, a PDF with
  no text, a loader's own exception) is the document's fault and is not retried:
  the same bytes would fail the same way. Everything else is a call to a backend
  (the embedder, the index, the state store), and any exception there, a bare one
  included, is retryable. Titles and headings are capped in bytes when chunking
  (candor.ingest.chunking), and a chunk too large for any index is refused before
  it is embedded, so no document can fail in a backend for its own size. So is a
  PDF of too many pages or a document of too many chunks (Chunking's limits).
- A new version that fails as the document's fault takes the old one out of the
  index: its chunks are deleted and the failure's reason says so. The bucket (or
  folder) no longer holds the old text, so answers quoting it would cite what the
  owner replaced, under a link that now shows something else; and a document's
  fault is never retried, so a kept old version would answer for good with nothing
  to prompt a fix. Removed, its questions are declined and show in `candor
  insights` as missing, the failure is in the ingest log and report, and the next
  good upload is ingested as usual. A backend's failure keeps the old version:
  the retry completes the new one.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from candor.errors import IngestError, ModelError
from candor.ingest.chunking import doc_prefix
from candor.ingest.outcomes import IngestReport, Outcome, describe
from candor.ingest.reading import (
    DEFAULT_MAX_CHUNKS,
    DEFAULT_MAX_PDF_PAGES,
    Chunking,
    embedding_text,
    fingerprint,
    read,
)
from candor.ingest.records import CompletionRecords
from candor.ports import Embedder, MetadataUpdater, VectorIndex
from candor.types import URL_KEY, Chunk
from candor.urls import public_url, source_url

if TYPE_CHECKING:
    # Only named here: the catalogue reads what ingestion loads (an import circle).
    from candor.catalogue.keeping import DocumentCatalogue

logger = logging.getLogger(__name__)

# The marks every chunk carries, by which an index can be its own evidence (above).
HASH_KEY = "doc_hash"
CHUNKS_KEY = "doc_chunks"


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
    rewrite: bool = False,
    catalogue: DocumentCatalogue | None = None,
) -> Outcome:
    """Bring one document's chunks in the index up to `data`; a failure is an Outcome too.

    `url` is the document's public address; anything but an http(s) one is dropped
    (candor.urls). With `records`, a changed document's completion record is left
    PENDING: the caller completes it with `complete` once the run is over.
    `rewrite` embeds and writes every chunk even if the index seems to hold this
    version already: after a race with another writer of the document, whose chunks
    may sit under a chunk 0 that says otherwise (candor.ingest.s3). With `catalogue`,
    its catalogue record is brought up to the same version.
    """
    url = public_url(url, source=source)
    try:
        outcome = _ingest_one(
            source, data, embedder, index, records, chunking, media_type, url, rewrite, catalogue
        )
        if catalogue is not None and outcome.status in ("changed", "unchanged"):
            outcome = _catalogued(outcome, data, catalogue, records, chunking, media_type, url)
        return outcome
    except IngestError as e:
        logger.warning("not ingested: %s", e)
        return refuse_document(source, str(e), index=index, records=records, catalogue=catalogue)
    except Exception as e:
        # Past reading the document, every step is a backend's (the embedder, the
        # index, the state store), and an outage there may pass: retryable, with
        # the traceback in the log in case it is a bug.
        logger.exception("not ingested: %s", source)
        return Outcome(source, "failed", reason=describe(e), retryable=True)


def delete_document(
    source: str,
    *,
    index: VectorIndex,
    records: CompletionRecords | None = None,
    written: int = 0,
    catalogue: DocumentCatalogue | None = None,
) -> Outcome:
    """Remove every chunk of `source` (found by its id prefix: serverless Pinecone
    cannot delete by metadata), and its catalogue record. With `records`, its record
    stays PENDING until the caller's `complete`, so a delete whose bump failed is
    redone, not taken as done.
    `written`: the chunks this process has just written for it, deleted whether or
    not the listing shows them yet (Pinecone's listing can lag its writes)."""
    try:
        if catalogue is not None:
            catalogue.remove(source)
        record = records.record(source) if records is not None else None
        prefix = doc_prefix(source)
        listed = set(index.list_ids(prefix)) | {f"{prefix}{i}" for i in range(written)}
        ids = sorted(listed)
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


def refuse_document(
    source: str,
    reason: str,
    *,
    index: VectorIndex,
    records: CompletionRecords | None = None,
    catalogue: DocumentCatalogue | None = None,
) -> Outcome:
    """A version of `source` that cannot be indexed (its own fault): its failure, and
    the previous version's chunks and catalogue record deleted (see the module's
    docstring for why). With `records`, the record stays PENDING until the caller's
    `complete`."""
    try:
        if catalogue is not None:
            catalogue.remove(source)
        ids = list(index.list_ids(doc_prefix(source)))
        if not ids:
            return Outcome(source, "failed", reason=reason)
        if records is not None:
            records.begin(source)
        deleted = index.delete(ids)
    except Exception as e:
        logger.exception("previous version not removed: %s", source)
        return Outcome(
            source,
            "failed",
            reason=f"{reason}; its previous version could not be removed: {describe(e)}",
            retryable=True,
        )
    return Outcome(
        source,
        "failed",
        deleted=deleted,
        reason=f"{reason}; its previous version was removed from the index",
        unrecorded=records is not None,
    )


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
            # No fingerprint: deleted, or refused with its old version removed.
            records.complete(outcome.source, outcome.fingerprint or None)
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
    max_pdf_pages: int | None = DEFAULT_MAX_PDF_PAGES,
    max_chunks: int | None = DEFAULT_MAX_CHUNKS,
    source_base_url: str | None = None,
    catalogue: DocumentCatalogue | None = None,
) -> IngestReport:
    """Ingest each (source, bytes); a failing document is recorded, not fatal.

    With `source_base_url`, each document's public address is that base plus its
    source, URL-quoted (CANDOR_SOURCE_BASE_URL).

    `progress` is called with 1 after each document, ingested or failed (a bar of
    documents is the one whose total a caller knows before it starts).
    `records` keep the completion records and the corpus version that cached
    answers are keyed on; a run that changed the index bumps it once, at the end.
    `catalogue` keeps each document's catalogue record (candor.catalogue).
    """
    chunking = Chunking(
        max_chars=max_chars,
        overlap=overlap,
        batch_size=batch_size,
        max_bytes=max_bytes,
        max_pdf_pages=max_pdf_pages,
        max_chunks=max_chunks,
    )
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
                catalogue=catalogue,
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


def _ingest_one(
    source: str,
    data: bytes,
    embedder: Embedder,
    index: VectorIndex,
    records: CompletionRecords | None,
    chunking: Chunking,
    media_type: str | None,
    url: str | None,
    rewrite: bool = False,
    catalogue: DocumentCatalogue | None = None,
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
    held = (
        _held_version(index, prefix, existing, version) if complete_before and not rewrite else None
    )
    if held is not None:
        ids, first = held
        if first.url == url:
            return _keep(source, index, records, version, existing, ids)
        if isinstance(index, MetadataUpdater):
            return _keep(source, index, records, version, existing, ids, relink=(first.id, url))

    document, chunks = read(source, data, chunking, media_type)
    marks: dict[str, str | int] = {HASH_KEY: version, CHUNKS_KEY: len(chunks)}
    if url is not None:
        marks[URL_KEY] = url
    chunks = [_marked(chunk, marks) for chunk in chunks]
    if records is not None:
        records.begin(source)
    # Chunk 0 goes last: without records, its fingerprint says the whole version is
    # written (to an index that writes a batch in one step; see the module's docstring).
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
    if catalogue is not None:
        catalogue.write(document, chunks, size=len(data), fingerprint=version, url=url)
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


def _catalogued(
    outcome: Outcome,
    data: bytes,
    catalogue: DocumentCatalogue,
    records: CompletionRecords | None,
    chunking: Chunking,
    media_type: str | None,
    url: str | None,
) -> Outcome:
    """The outcome once the document's catalogue record describes what the index holds.

    A document whose chunks were written has its record already (_ingest_one); one
    the index held needs its bytes read again, a parse and no embedding. A record
    written for an unchanged document leaves it to be completed, so that the run
    bumps the corpus version and readers drop the catalogue they hold.
    """
    if catalogue.current(outcome.source, outcome.fingerprint, url):
        return outcome
    document, chunks = read(outcome.source, data, chunking, media_type)
    catalogue.write(document, chunks, size=len(data), fingerprint=outcome.fingerprint, url=url)
    return dataclasses.replace(outcome, unrecorded=records is not None)


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
        return Outcome(source, "unchanged", chunks=len(ids), fingerprint=version)
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
