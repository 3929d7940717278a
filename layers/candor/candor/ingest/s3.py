"""Documents in an S3 bucket, kept in step with the index from S3 event notifications.

An event says which keys changed, not what they hold now. S3 delivers events at
least once and in no guaranteed order: a put can arrive after the delete that
followed it, or twice. So each key is reconciled with the bucket as it is when
the event is handled: an object that exists is ingested from its current bytes
(the content fingerprint makes a repeat free), and a key with no object has its
chunks deleted. Applying the same event twice, or two events in either order,
leaves the index as the bucket is. The keys of one event are one run: the corpus
version is bumped once after all of them, then their completion records are
written (candor.ingest.records), so a retried event redoes what did not complete.

Reconciling with the bucket is not enough when two events of one key are handled at
once (the ingest function runs two executions): a put that read the object just
before it was deleted would write chunks that the delete, handled meanwhile, never
saw, and no later event comes for that key. So a put that changed the index checks,
after its writes and before it completes, that the bucket still holds the very
object it read (its version id on a versioned bucket, else its ETag). If the object
is gone, the put deletes what it wrote; if a newer one is there, it ingests that one,
rewriting every chunk; at most RECONCILE_ATTEMPTS rounds, then it fails as retryable
and Lambda delivers the event again. A delete handled after that check lists the
chunks the put wrote (they were written before it), so whichever finishes last the
index ends as the bucket is. One window stays open on Pinecone, whose id listing can
lag its writes by seconds: a delete handled within that lag after the put's check
can miss the newest chunks. Ordering by the events' `sequencer` would not close it
(the chunks would still be missed by the listing), and serialising per key needs an
SQS FIFO queue in front of the function (S3 cannot notify one directly).

An object's `x-amz-meta-url` metadata is its public address, what citations link
to. Changing only that (a copy of the object onto itself, an ObjectCreated:Copy
event) changes the address stored on its chunks.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from candor.errors import IngestError
from candor.ingest.loaders import document_kind
from candor.ingest.outcomes import IngestReport, Outcome, describe
from candor.ingest.pipeline import complete, delete_document, ingest_document, refuse_document
from candor.ingest.reading import Chunking
from candor.ingest.records import CompletionRecords
from candor.ports import Embedder, VectorIndex

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from candor.catalogue.keeping import DocumentCatalogue

logger = logging.getLogger(__name__)

_MISSING_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
# Rounds of read, write and check for one key before its event is left to a retry: a
# key rewritten faster than it can be ingested is not chased for ever.
RECONCILE_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class ObjectChange:
    """One record of an S3 event: the key (decoded), what happened, and where."""

    bucket: str
    key: str
    event: str  # "ObjectCreated:Put", "ObjectRemoved:Delete", ...
    size: int | None = None


@dataclass(frozen=True, slots=True)
class Seen:
    """Which object a key named when it was read: its version id on a versioned
    bucket, and its ETag."""

    version: str | None = None
    etag: str | None = None


@dataclass(frozen=True, slots=True)
class S3Document:
    data: bytes
    media_type: str | None
    # The object's `x-amz-meta-url` metadata as given: the uploader's, unchecked
    # (the pipeline keeps only an http(s) address, candor.urls).
    url: str | None = None
    seen: Seen = Seen()
    # Why the object is not read (too large, or a type no loader reads); its bytes
    # are then empty.
    refusal: str | None = None


class S3Reader:
    """Reads objects; the boto3 client is made on first use unless one is given."""

    def __init__(
        self, client: S3Client | None = None, *, region: str | None = None, max_bytes: int
    ) -> None:
        self._client = client
        self._region = region
        self.max_bytes = max_bytes

    @property
    def client(self) -> S3Client:
        if self._client is None:
            import boto3

            self._client = boto3.client("s3", region_name=self._region)
        return self._client

    def read(self, bucket: str, key: str) -> S3Document | None:
        """The object's bytes, media type and `x-amz-meta-url`, or None if there is
        no such object.

        An object over `max_bytes` comes back refused (`refusal` says why) without
        its body being read; so does a type no loader reads.
        """
        from botocore.exceptions import ClientError

        try:
            response = self.client.get_object(Bucket=bucket, Key=key)
        except ClientError as e:
            # Without s3:ListBucket, S3 answers 403 rather than 404 for a missing
            # key; the template grants it so that a delete is seen as one.
            if e.response.get("Error", {}).get("Code") in _MISSING_CODES:
                return None
            raise
        body = response["Body"]
        seen = Seen(response.get("VersionId"), response.get("ETag"))
        try:
            size = int(response.get("ContentLength", 0))
            media_type = response.get("ContentType")
            if size > self.max_bytes:
                reason = (
                    f"{key}: {size} bytes is over the limit of {self.max_bytes} "
                    "(CANDOR_INGEST_MAX_BYTES)"
                )
                return S3Document(b"", media_type, seen=seen, refusal=reason)
            try:
                document_kind(key, media_type)
            except IngestError as e:
                return S3Document(b"", media_type, seen=seen, refusal=str(e))
            # boto3 gives user metadata without its x-amz-meta- prefix, keys in lower case.
            url = response.get("Metadata", {}).get("url")
            return S3Document(body.read(), media_type, url, seen)
        finally:
            body.close()

    def holds(self, bucket: str, key: str, seen: Seen) -> bool:
        """Whether the key still names the object that was `seen`."""
        from botocore.exceptions import ClientError

        try:
            head = self.client.head_object(Bucket=bucket, Key=key)
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in _MISSING_CODES:
                return False
            raise
        if seen.version is not None and seen.version != "null":
            return head.get("VersionId") == seen.version
        return head.get("ETag") == seen.etag


@dataclass
class SyncResult:
    report: IngestReport
    outcomes: list[Outcome] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "records": [outcome.to_json() for outcome in self.outcomes],
            "summary": self.report.to_json(),
        }


@dataclass
class S3Ingestion:
    """What the ingest function needs: the ports, a reader, how to chunk, and where
    the completion records and the corpus version are kept (None: nowhere), and the
    document catalogue (candor.catalogue; None: none kept)."""

    embedder: Embedder
    index: VectorIndex
    reader: S3Reader
    chunking: Chunking = field(default_factory=Chunking)
    records: CompletionRecords | None = None
    catalogue: DocumentCatalogue | None = None

    def apply(self, changes: Sequence[ObjectChange]) -> SyncResult:
        """Reconcile each key named by `changes` (once per key, in event order)."""
        outcomes: list[Outcome] = []
        seen: set[tuple[str, str]] = set()
        for change in changes:
            # "folder/" placeholders (the S3 console's "Create folder") hold nothing.
            if (change.bucket, change.key) in seen or change.key.endswith("/"):
                continue
            seen.add((change.bucket, change.key))
            outcome = self._reconcile(change)
            logger.debug("%s %s: %s", change.event, change.key, outcome.status)
            outcomes.append(outcome)
        done, version = complete(outcomes, self.records)
        return SyncResult(IngestReport.of(done, corpus_version=version), done)

    def _reconcile(self, change: ObjectChange) -> Outcome:
        key = change.key
        written = 0  # chunks this run wrote for a version the bucket no longer holds
        for attempt in range(RECONCILE_ATTEMPTS):
            try:
                document = self.reader.read(change.bucket, key)
            except Exception as e:  # S3 throttling, a network error: another try may work
                logger.exception("cannot read s3://%s/%s", change.bucket, key)
                return Outcome(key, "failed", reason=describe(e), retryable=True)
            if document is None:
                return delete_document(
                    key,
                    index=self.index,
                    records=self.records,
                    written=written,
                    catalogue=self.catalogue,
                )
            if document.refusal is not None:
                logger.warning("not ingested: %s", document.refusal)
                outcome = refuse_document(
                    key,
                    document.refusal,
                    index=self.index,
                    records=self.records,
                    catalogue=self.catalogue,
                )
            else:
                outcome = ingest_document(
                    key,
                    document.data,
                    embedder=self.embedder,
                    index=self.index,
                    records=self.records,
                    chunking=self.chunking,
                    media_type=document.media_type,
                    url=document.url,
                    rewrite=attempt > 0,
                    catalogue=self.catalogue,
                )
            # Only a run that changed the index (writes, or a removal) can have raced
            # another into leaving what the bucket no longer holds.
            if not (outcome.upserted or outcome.deleted):
                return outcome
            try:
                if self.reader.holds(change.bucket, key, document.seen):
                    return outcome
            except Exception as e:  # the writes are in; the record stays PENDING
                logger.exception("cannot check s3://%s/%s", change.bucket, key)
                return Outcome(key, "failed", reason=describe(e), retryable=True)
            logger.info("%s changed while it was ingested: reconciling it again", key)
            written = max(written, outcome.chunks)
        return Outcome(
            key,
            "failed",
            reason=f"{key}: changed {RECONCILE_ATTEMPTS} times while it was ingested",
            retryable=True,
        )
