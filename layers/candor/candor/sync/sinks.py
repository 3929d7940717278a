"""Where synced pages go: the local index (`candor sync`) or the documents bucket (AWS).

IndexSink runs each page through the ingest pipeline, as `candor ingest` runs a
file: the same loaders, chunks, fingerprints and completion records, with the
page's URL as the document's public address, and one corpus-version bump per
commit. S3Sink writes each page as an object under the bucket's `site/` prefix,
with its URL in `x-amz-meta-url`, and deletes the objects of removed pages: S3
events then ingest and delete, so the ingest function stays the one way into the
index on AWS.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from candor.ingest.outcomes import IngestReport, Outcome
from candor.ingest.pipeline import complete, delete_document, ingest_document
from candor.ingest.reading import Chunking
from candor.ingest.records import CompletionRecords
from candor.ports import Embedder, VectorIndex
from candor.sync.content import Document
from candor.sync.engine import DocumentRefused

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

logger = logging.getLogger(__name__)


class BackendFailure(Exception):
    """The index, the embedder or the state store failed; a later sync tries again."""


@dataclass
class IndexSink:
    """Pages into a VectorIndex through candor.ingest.pipeline."""

    embedder: Embedder
    index: VectorIndex
    records: CompletionRecords
    chunking: Chunking = field(default_factory=Chunking)
    report: IngestReport = field(default_factory=IngestReport)
    _outcomes: list[Outcome] = field(default_factory=list)

    def write(self, source: str, url: str, document: Document) -> None:
        outcome = ingest_document(
            source,
            document.data,
            embedder=self.embedder,
            index=self.index,
            records=self.records,
            chunking=self.chunking,
            media_type=document.media_type,
            url=url,
        )
        self._outcome(outcome)

    def remove(self, source: str) -> None:
        self._outcome(delete_document(source, index=self.index, records=self.records))

    def _outcome(self, outcome: Outcome) -> None:
        if outcome.status == "failed":
            self.report.add(outcome)
            if outcome.retryable:
                raise BackendFailure(outcome.reason)
            raise DocumentRefused(outcome.reason)
        self._outcomes.append(outcome)

    def commit(self) -> set[str]:
        done, version = complete(self._outcomes, self.records)
        self._outcomes = []
        for outcome in done:
            self.report.add(outcome)
        if version is not None:
            self.report.corpus_version = version
        return {outcome.source for outcome in done if outcome.status != "failed"}


@dataclass
class S3Sink:
    """Pages as objects under `site/` in the documents bucket."""

    client: S3Client
    bucket: str
    written: int = 0
    removed: int = 0
    _done: set[str] = field(default_factory=set)

    def write(self, source: str, url: str, document: Document) -> None:
        self.client.put_object(
            Bucket=self.bucket,
            Key=source,
            Body=document.data,
            ContentType=document.media_type,
            # The page's address, which the ingest function stores on every chunk.
            Metadata={"url": url},
        )
        self.written += 1
        self._done.add(source)

    def remove(self, source: str) -> None:
        # On a versioned bucket this adds a delete marker: the ObjectRemoved event
        # removes the document from the index, and the page can be restored.
        self.client.delete_object(Bucket=self.bucket, Key=source)
        self.removed += 1
        self._done.add(source)

    def commit(self) -> set[str]:
        done, self._done = self._done, set()
        return done
