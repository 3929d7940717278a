"""Completion records: what makes a document count as ingested, and a retry converge.

A document's ingest writes to more than one place: its chunks to the dense index
and, on Pinecone, to the sparse (keyword) index, in batches; then the corpus
version is bumped so that cached answers from the old documents are retired. Any
of these writes can fail after the ones before it succeeded. So no single write
can stand for "done"; a record written after all of them can:

1. Before its first write to the index, the document's record is set to PENDING.
2. Every chunk is written to every index, and stale chunks are deleted.
3. Once per run, after all of its documents, the corpus version is bumped.
4. Then each document's record is set to its fingerprint (None after a delete).

A document counts as unchanged only when its record holds its fingerprint (and the
index still holds its chunks). A run that dies anywhere before step 4 leaves
PENDING or an older fingerprint behind, and the next delivery redoes the writes
and the bump; one that dies during step 4 costs a document its re-embedding at
most. The record of a document being deleted is PENDING until the bump is in, so
a delete whose bump failed is not taken for "nothing to delete" on the retry.

Where the records live: in the StateStore, keyed by index name and source, beside
the corpus version they are written with. Locally that is the SQLite state file
(`candor ingest`); on AWS the DynamoDB table (the S3 ingest function). Both read
their own writes at once (DynamoDB with ConsistentRead), so a retry seconds later
sees the record as the failed run left it. A record inside the index itself would
not: Pinecone is eventually consistent, so a fresh write may not be visible to the
retry; the record would need a vector, which Pinecone's dense index refuses to be
all zeros, and would then be found by searches and counted as a chunk; and it
could not hold the bump, which lives in the StateStore anyway. The index name is
part of the key because several sites may share one table (and one Pinecone index,
a namespace each).

What this does not cover by itself: deliveries of two events of one key running at
the same time can interleave their writes, and a put that read the object before a
delete can write after it. The records keep no lock; the S3 ingestion closes this by
checking, after its writes, that the bucket still holds what it read, and doing the
key again if not (candor.ingest.s3). `candor ingest` runs one process over a folder.
"""

from __future__ import annotations

from dataclasses import dataclass

from candor.ports import StateStore

# Never a fingerprint (those are sha256 hex digests).
PENDING = "pending"


@dataclass(frozen=True, slots=True)
class CompletionRecords:
    """The completion records and the corpus version of one index, in a StateStore."""

    state: StateStore
    index_name: str

    def record(self, source: str) -> str | None:
        """PENDING, the fingerprint of the version last completed, or None (no record)."""
        return self.state.ingest_record(self.index_name, source)

    def begin(self, source: str) -> None:
        """Say that the index is about to change for `source`: not complete until `complete`."""
        self.state.set_ingest_record(self.index_name, source, PENDING)

    def complete(self, source: str, fingerprint: str | None) -> None:
        """Record the version now complete in the index; None: the document is gone."""
        self.state.set_ingest_record(self.index_name, source, fingerprint)

    def bump(self) -> int:
        """Start a new corpus version (cached answers are keyed on it)."""
        return self.state.bump_corpus_version(self.index_name)
