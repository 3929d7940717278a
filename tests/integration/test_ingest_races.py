"""A put and a delete of one key handled at once, as the ingest function's two
concurrent executions handle them: the index must end as the bucket is.

Each handler has its own index and state connections on the same files (two Lambda
execution environments sharing Pinecone and DynamoDB); S3 is moto's. The put runs
in a thread and is stopped at a chosen point; the delete is handled there, in full;
then the put goes on. And the other way round: the delete is stopped while it lists
the document's chunks, and the put (which read the object before it was deleted) is
handled in full there. Whichever finishes last, the deleted file is never found.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

import boto3
import pytest
from moto import mock_aws

from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.ingest import doc_prefix
from candor.ingest.reading import Chunking
from candor.ingest.records import CompletionRecords
from candor.ingest.s3 import ObjectChange, S3Document, S3Ingestion, S3Reader
from candor.ports import Vectors
from candor.types import Chunk, Metadata, Rankings
from tests.support.embedders import CountingEmbedder

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

pytestmark = pytest.mark.integration

REGION: Final = "eu-west-1"
BUCKET: Final = "candor-docs-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
KEY: Final = "ops/staging.md"
SECRET: Final = "hunter2"
# Two passages, each its own batch (batch_size 1): the one with the password goes last.
STAGING = (
    b"# Staging\n\n## Database\n\nThe staging database password is hunter2.\n\n"
    b"## Hosts\n\nThe staging hosts are in the eu-west-1 region.\n\n"
    b"## Backups\n\nBackups of staging run nightly at two.\n"
)
UPDATED = (
    b"# Staging\n\n## Database\n\nThe staging database password is in the vault.\n\n"
    b"## Hosts\n\nThe staging hosts are in the eu-west-1 region.\n"
)
PUT = ObjectChange(BUCKET, KEY, "ObjectCreated:Put")
DELETE = ObjectChange(BUCKET, KEY, "ObjectRemoved:Delete")
WAIT_SECONDS = 30


class Pause:
    """Where a handler stops: the thread that reaches it waits until it is released."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.released = threading.Event()

    def __call__(self) -> None:
        self.reached.set()
        assert self.released.wait(WAIT_SECONDS), "never released"


@dataclass
class Hooks:
    """Calls to make before the n-th call of a port's method: {(method, n): hook}."""

    at: dict[tuple[str, int], Callable[[], None]] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def __call__(self, method: str) -> None:
        self.calls[method] = self.calls.get(method, 0) + 1
        hook = self.at.pop((method, self.calls[method]), None)
        if hook is not None:
            hook()


class HookedIndex:
    """A VectorIndex that runs the hooks before delegating."""

    def __init__(self, inner: SqliteVectorIndex, hooks: Hooks) -> None:
        self.inner, self.hooks = inner, hooks

    def upsert(self, chunks: Sequence[Chunk], vectors: Vectors) -> int:
        self.hooks("upsert")
        return self.inner.upsert(chunks, vectors)

    def query(
        self,
        *,
        vector: Vectors | None,
        keywords: str | None,
        top_k: int,
        where: Metadata | None = None,
    ) -> Rankings:
        return self.inner.query(vector=vector, keywords=keywords, top_k=top_k, where=where)

    def fetch(self, ids: Sequence[str]) -> list[Chunk]:
        return self.inner.fetch(ids)

    def delete(self, ids: Sequence[str]) -> int:
        self.hooks("delete")
        return self.inner.delete(ids)

    def list_ids(self, prefix: str = "") -> Iterator[str]:
        ids = list(self.inner.list_ids(prefix))
        self.hooks("list_ids")  # after the listing: what it found is what it returns
        return iter(ids)

    def count(self) -> int:
        return self.inner.count()


class HookedEmbedder(CountingEmbedder):
    def __init__(self, hooks: Hooks) -> None:
        super().__init__()
        self.hooks = hooks

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.hooks("embed")
        return super().embed(texts)


class HookedState(SqliteStateStore):
    def __init__(self, path: Path, hooks: Hooks) -> None:
        super().__init__(path)
        self.hooks = hooks

    def bump_corpus_version(self, index_name: str) -> int:
        self.hooks("bump")
        return super().bump_corpus_version(index_name)


class HookedReader(S3Reader):
    def __init__(self, client: S3Client, hooks: Hooks) -> None:
        super().__init__(client, max_bytes=1_000_000)
        self.hooks = hooks

    def read(self, bucket: str, key: str) -> S3Document | None:
        document = super().read(bucket, key)
        self.hooks("read")  # after the read: the object is what it was
        return document


@dataclass
class Execution:
    """One execution environment of the ingest function: its own connections."""

    work: S3Ingestion
    hooks: Hooks
    closers: list[Callable[[], None]]


# The template's bucket keeps versions (a put is then checked by its version id);
# a bucket of one's own may not (by its ETag).
@pytest.fixture(params=["versioned", "unversioned"])
def s3(request: pytest.FixtureRequest, fake_aws_credentials: str) -> Iterator[S3Client]:
    with mock_aws():
        client = boto3.client("s3", region_name=REGION)
        client.create_bucket(
            Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION}
        )
        if request.param == "versioned":
            client.put_bucket_versioning(
                Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"}
            )
        yield client


@pytest.fixture
def execution(s3: S3Client, tmp_path: Path) -> Iterator[Callable[[], Execution]]:
    made: list[Execution] = []

    def make() -> Execution:
        hooks = Hooks()
        index = SqliteVectorIndex(tmp_path / "index.sqlite3", 384)
        state = HookedState(tmp_path / "state.sqlite3", hooks)
        work = S3Ingestion(
            embedder=HookedEmbedder(hooks),
            index=HookedIndex(index, hooks),
            reader=HookedReader(s3, hooks),
            chunking=Chunking(max_chars=120, overlap=0, batch_size=1),
            records=CompletionRecords(state, "site"),
        )
        made.append(Execution(work, hooks, [index.close, state.close]))
        return made[-1]

    yield make
    for each in made:
        for close in each.closers:
            close()


def in_thread(run: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def target() -> None:
        try:
            run()
        except BaseException as e:  # reported by the test, not lost in the thread
            errors.append(e)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, errors


def found(tmp_path: Path) -> tuple[list[str], list[str]]:
    """What a visitor's search could reach of the key: its chunk ids, and the keyword hits."""
    with SqliteVectorIndex(tmp_path / "index.sqlite3", 384) as index:
        ids = list(index.list_ids(doc_prefix(KEY)))
        hits = index.query(vector=None, keywords=f"staging database password {SECRET}", top_k=10)
    return ids, [hit.chunk.text for hit in hits.keyword if SECRET in hit.chunk.text]


# Where the put is stopped for the delete to be handled in full: before it writes
# anything, between two of its batches, after its writes but before it completes
# (the corpus-version bump that ends a run).
PUT_STOPS = {
    "before-the-puts-writes": ("embed", 1),
    "between-the-puts-batches": ("upsert", 2),
    "after-the-puts-writes": ("bump", 1),
}


@pytest.mark.parametrize("stop", list(PUT_STOPS))
def test_a_delete_handled_during_a_put_leaves_the_deleted_file_unsearchable(
    stop: str, s3: S3Client, execution: Callable[[], Execution], tmp_path: Path
) -> None:
    # Given an uploaded file, whose put event one execution is handling
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=STAGING)
    putter, deleter = execution(), execution()
    pause = Pause()
    putter.hooks.at[PUT_STOPS[stop]] = pause
    thread, errors = in_thread(lambda: putter.work.apply([PUT]))
    assert pause.reached.wait(WAIT_SECONDS)

    # When the file is deleted and the other execution handles the delete meanwhile
    s3.delete_object(Bucket=BUCKET, Key=KEY)
    deleter.work.apply([DELETE])
    pause.released.set()
    thread.join(WAIT_SECONDS)

    # Then, once both are done, nothing of the file can be found
    assert errors == []
    assert found(tmp_path) == ([], [])
    # nor after S3 delivers either event again
    execution().work.apply([PUT, DELETE])
    assert found(tmp_path) == ([], [])


def test_a_put_handled_during_a_delete_leaves_the_deleted_file_unsearchable(
    s3: S3Client, execution: Callable[[], Execution], tmp_path: Path
) -> None:
    # Given a put whose handler read the object just before it was deleted
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=STAGING)
    putter, deleter = execution(), execution()
    read = Pause()
    putter.hooks.at[("read", 1)] = read
    thread, errors = in_thread(lambda: putter.work.apply([PUT]))
    assert read.reached.wait(WAIT_SECONDS)
    s3.delete_object(Bucket=BUCKET, Key=KEY)

    # When the delete's handler, just after it listed the file's chunks (none yet),
    # lets the put be handled in full first
    def the_put_runs_to_its_end() -> None:
        read.released.set()
        thread.join(WAIT_SECONDS)

    deleter.hooks.at[("list_ids", 1)] = the_put_runs_to_its_end
    deleter.work.apply([DELETE])

    # Then nothing of the file can be found
    assert errors == []
    assert not thread.is_alive()
    assert found(tmp_path) == ([], [])


def test_a_put_that_finds_a_newer_version_after_its_writes_indexes_the_newer_one(
    s3: S3Client, execution: Callable[[], Execution], tmp_path: Path
) -> None:
    # Given a put stopped before its writes, and a new version uploaded and
    # handled in full meanwhile
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=STAGING)
    putter = execution()
    pause = Pause()
    putter.hooks.at[("embed", 1)] = pause
    thread, errors = in_thread(lambda: putter.work.apply([PUT]))
    assert pause.reached.wait(WAIT_SECONDS)
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=UPDATED)
    execution().work.apply([PUT])

    # When the first put goes on and writes the version it read
    pause.released.set()
    thread.join(WAIT_SECONDS)

    # Then the index holds the bucket's version, not the one the late put read
    assert errors == []
    ids, secrets = found(tmp_path)
    assert secrets == []
    with SqliteVectorIndex(tmp_path / "index.sqlite3", 384) as index:
        texts = " ".join(chunk.text for chunk in index.fetch(ids))
    assert "in the vault" in texts
    assert "Backups" not in texts


def test_a_refused_version_that_raced_a_good_one_leaves_the_good_one_indexed(
    s3: S3Client, execution: Callable[[], Execution], tmp_path: Path
) -> None:
    # Given an indexed file replaced by a version too large to read, whose handler
    # is stopped just before it removes the old version's chunks
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=UPDATED)
    execution().work.apply([PUT])
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=b"# Huge\n\n" + b"word " * 300_000)
    refuser = execution()
    pause = Pause()
    refuser.hooks.at[("delete", 1)] = pause
    thread, errors = in_thread(lambda: refuser.work.apply([PUT]))
    assert pause.reached.wait(WAIT_SECONDS)

    # When a good version is uploaded and handled in full meanwhile
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=STAGING)
    execution().work.apply([PUT])
    pause.released.set()
    thread.join(WAIT_SECONDS)

    # Then the index holds the good version the bucket holds
    assert errors == []
    ids, secrets = found(tmp_path)
    assert ids and secrets
