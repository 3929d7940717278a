"""The ingest Lambda handler (functions/ingest) with the real-shaped events in events/,
S3 through moto, the HashingEmbedder (counted), a SQLite index and SQLite state."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote_plus

import boto3
import pytest
from moto import mock_aws

from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.ingest import doc_prefix
from candor.ingest.reading import Chunking
from candor.ingest.records import PENDING, CompletionRecords
from candor.ingest.s3 import S3Ingestion, S3Reader
from tests.support.embedders import CountingEmbedder
from tests.support.faults import FailNth, FaultyStateStore
from tests.support.lambda_ import LambdaContext, load_event, load_handler
from tests.support.pdfs import make_pdf

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
REGION: Final = "eu-west-1"
BUCKET = "candor-docs-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
MAX_BYTES = 50_000

GUIDE = b"# Getting started\n\n## Install\n\nRun the installer, then open the winch panel.\n"


def keys_in(event: dict[str, Any]) -> list[str]:
    return [unquote_plus(r["s3"]["object"]["key"]) for r in event["Records"]]


@pytest.fixture
def s3(fake_aws_credentials: str) -> Iterator[S3Client]:
    with mock_aws():
        client = boto3.client("s3", region_name=REGION)
        client.create_bucket(
            Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION}
        )
        yield client


@pytest.fixture
def index(tmp_path: Path) -> Iterator[SqliteVectorIndex]:
    with SqliteVectorIndex(tmp_path / "index.sqlite3", 384) as index:
        yield index


@pytest.fixture
def state(tmp_path: Path) -> Iterator[SqliteStateStore]:
    store = SqliteStateStore(tmp_path / "state.sqlite3")
    yield store
    store.close()


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def app() -> ModuleType:
    return load_handler("ingest")


@pytest.fixture
def work(
    s3: S3Client, embedder: CountingEmbedder, index: SqliteVectorIndex, state: SqliteStateStore
) -> S3Ingestion:
    return S3Ingestion(
        embedder=embedder,
        index=index,
        reader=S3Reader(s3, max_bytes=MAX_BYTES),
        chunking=Chunking(max_bytes=MAX_BYTES),
        records=CompletionRecords(state, "site"),
    )


def put(s3: S3Client, key: str, body: bytes, content_type: str | None = None) -> None:
    extra = {"ContentType": content_type} if content_type else {}
    s3.put_object(Bucket=BUCKET, Key=key, Body=body, **extra)  # type: ignore[arg-type]


def chunk_ids(index: SqliteVectorIndex, key: str) -> list[str]:
    return list(index.list_ids(doc_prefix(key)))


def test_a_put_event_indexes_the_object(
    app: ModuleType, s3: S3Client, work: S3Ingestion, index: SqliteVectorIndex
) -> None:
    # Given an uploaded document and the event S3 sends for it
    event = load_event("s3-put.json")
    (key,) = keys_in(event)
    put(s3, key, GUIDE, "text/markdown")

    # When the handler processes the event
    result = app.process(event, work)

    # Then the document's chunks are indexed and the record is reported
    (record,) = result["records"]
    assert (record["source"], record["status"]) == (key, "changed")
    assert record["chunks"] == len(chunk_ids(index, key)) > 0
    assert result["summary"]["documents_changed"] == 1
    (chunk,) = index.fetch(chunk_ids(index, key))
    assert (chunk.source, chunk.title) == ("guides/getting-started.md", "Getting started")


def test_a_duplicate_event_embeds_once(
    app: ModuleType, s3: S3Client, work: S3Ingestion, embedder: CountingEmbedder
) -> None:
    event = load_event("s3-put.json")
    put(s3, keys_in(event)[0], GUIDE)
    app.process(event, work)
    embedded = embedder.texts

    again = app.process(copy.deepcopy(event), work)

    assert embedded > 0
    assert embedder.texts == embedded
    assert again["records"][0]["status"] == "unchanged"
    assert again["summary"]["chunks_embedded"] == 0


def test_a_delete_event_removes_every_chunk_of_the_object(
    app: ModuleType, s3: S3Client, work: S3Ingestion, index: SqliteVectorIndex
) -> None:
    key = keys_in(load_event("s3-put.json"))[0]
    put(s3, key, GUIDE)
    app.process(load_event("s3-put.json"), work)
    assert chunk_ids(index, key)
    s3.delete_object(Bucket=BUCKET, Key=key)

    result = app.process(load_event("s3-delete.json"), work)

    assert result["records"][0]["status"] == "deleted"
    assert chunk_ids(index, key) == []
    assert index.count() == 0


def test_a_multi_record_event_reports_each_record_and_a_bad_one_stops_no_other(
    app: ModuleType, s3: S3Client, work: S3Ingestion, index: SqliteVectorIndex
) -> None:
    # Given the objects of a five-record event: two good documents, a PDF with
    # text, a scanned PDF without, and a delete of a key never indexed
    event = load_event("s3-multi.json")
    install, overview, scanned, config, old = keys_in(event)
    put(s3, install, b"# Install\n\nUnpack the kite and attach the lines.\n")
    put(s3, overview, make_pdf([["Overview of the kite."]], title="Overview"), "application/pdf")
    put(s3, scanned, make_pdf([[]]), "application/pdf")
    put(s3, config, b"<html><body><h1>Config</h1><p>winch.autocoil: on</p></body></html>")

    # When the handler processes it
    result = app.process(event, work)

    # Then each record has its outcome, and the event succeeds: retrying would
    # not give the scanned PDF any text
    statuses = {r["source"]: r["status"] for r in result["records"]}
    assert statuses == {
        install: "changed",
        overview: "changed",
        scanned: "failed",
        config: "changed",
        old: "absent",
    }
    failed = next(r for r in result["records"] if r["status"] == "failed")
    assert "no extractable text" in failed["reason"]
    assert failed["retryable"] is False
    for key in (install, overview, config):
        assert chunk_ids(index, key)
    summary = result["summary"]
    assert (summary["documents_seen"], summary["documents_changed"], summary["failed"]) == (5, 3, 1)


def test_a_url_encoded_key_with_spaces_and_unicode_is_decoded(
    app: ModuleType, s3: S3Client, work: S3Ingestion, index: SqliteVectorIndex
) -> None:
    event = load_event("s3-unicode-key.json")
    key = "notes/Getting started – été & co.md"
    assert event["Records"][0]["s3"]["object"]["key"] != key  # it arrives encoded
    put(s3, key, b"# Notes\n\nThe summer notes.\n")

    result = app.process(event, work)

    assert result["records"][0]["source"] == key
    assert result["records"][0]["status"] == "changed"
    (chunk,) = index.fetch(chunk_ids(index, key))
    assert chunk.source == key


def test_a_late_delete_event_for_a_re_uploaded_object_keeps_it(
    app: ModuleType, s3: S3Client, work: S3Ingestion, index: SqliteVectorIndex
) -> None:
    # Given an object that was deleted and uploaded again, whose delete event
    # arrives after the put was processed
    key = keys_in(load_event("s3-put.json"))[0]
    put(s3, key, GUIDE)
    app.process(load_event("s3-put.json"), work)

    # When the stale delete event is handled
    result = app.process(load_event("s3-delete.json"), work)

    # Then the index follows the bucket, which still holds the object
    assert result["records"][0]["status"] == "unchanged"
    assert chunk_ids(index, key)


def test_a_late_put_event_for_a_deleted_object_removes_its_chunks(
    app: ModuleType, s3: S3Client, work: S3Ingestion, index: SqliteVectorIndex
) -> None:
    key = keys_in(load_event("s3-put.json"))[0]
    put(s3, key, GUIDE)
    app.process(load_event("s3-put.json"), work)
    s3.delete_object(Bucket=BUCKET, Key=key)

    result = app.process(load_event("s3-put.json"), work)

    assert result["records"][0]["status"] == "deleted"
    assert chunk_ids(index, key) == []


def test_an_object_over_the_size_limit_is_reported_without_reading_it(
    app: ModuleType, s3: S3Client, work: S3Ingestion, embedder: CountingEmbedder
) -> None:
    key = keys_in(load_event("s3-put.json"))[0]
    put(s3, key, b"# Big\n\n" + b"word " * (MAX_BYTES // 4))

    result = app.process(load_event("s3-put.json"), work)

    (record,) = result["records"]
    assert record["status"] == "failed"
    assert f"over the limit of {MAX_BYTES}" in record["reason"]
    assert embedder.texts == 0


def test_a_new_version_over_the_size_limit_takes_the_old_one_out_of_the_index(
    app: ModuleType, s3: S3Client, work: S3Ingestion, index: SqliteVectorIndex
) -> None:
    # Given an indexed document, replaced in the bucket by a version too large to read
    event = load_event("s3-put.json")
    key = keys_in(event)[0]
    put(s3, key, GUIDE)
    app.process(event, work)
    assert chunk_ids(index, key)
    put(s3, key, b"# Big\n\n" + b"word " * (MAX_BYTES // 4))

    # When its put event is handled
    result = app.process(load_event("s3-put.json"), work)

    # Then the refusal is reported, the old version is gone from the index, and the
    # event succeeds: retrying cannot help
    (record,) = result["records"]
    assert record["status"] == "failed" and record["retryable"] is False
    assert "previous version was removed from the index" in record["reason"]
    assert chunk_ids(index, key) == []
    assert work.records is not None and work.records.record(key) is None


def test_an_unsupported_type_is_reported(app: ModuleType, s3: S3Client, work: S3Ingestion) -> None:
    event = load_event("s3-put.json")
    event["Records"][0]["s3"]["object"]["key"] = "images/logo.png"
    put(s3, "images/logo.png", b"\x89PNG\r\n", "image/png")

    result = app.process(event, work)

    assert result["records"][0]["status"] == "failed"
    assert "unsupported file type '.png'" in result["records"][0]["reason"]


def test_a_backend_failure_fails_the_invocation_after_trying_every_record(
    app: ModuleType, s3: S3Client, index: SqliteVectorIndex
) -> None:
    # Given an embedder that fails once the first document is embedded
    event = load_event("s3-multi.json")
    install, overview, _, config, _ = keys_in(event)
    put(s3, install, b"# Install\n\nUnpack the kite.\n")
    put(s3, overview, make_pdf([["Overview of the kite."]]), "application/pdf")
    put(s3, config, b"<html><body><p>winch.autocoil: on</p></body></html>")
    work = S3Ingestion(
        embedder=CountingEmbedder(fail_after=1),
        index=index,
        reader=S3Reader(s3, max_bytes=MAX_BYTES),
    )

    # When the handler processes the event, it raises so that Lambda retries it
    with pytest.raises(app.RetryableIngestError, match=r"papers/overview\.pdf"):
        app.process(event, work)

    # And the document embedded before the failure is indexed
    assert chunk_ids(index, install)


def test_a_failed_bump_fails_the_invocation_and_the_redelivered_event_completes_it(
    app: ModuleType, s3: S3Client, work: S3Ingestion, state: SqliteStateStore
) -> None:
    # Given an upload whose corpus-version bump fails (DynamoDB throttled, say)
    event = load_event("s3-put.json")
    (key,) = keys_in(event)
    put(s3, key, GUIDE)
    faulty = FaultyStateStore(state, FailNth(1, methods={"bump_corpus_version"}))
    failing = dataclasses.replace(work, records=CompletionRecords(faulty, "site"))

    # When the handler processes it, Lambda is told to deliver it again
    with pytest.raises(app.RetryableIngestError, match=r"guides/getting-started\.md"):
        app.process(event, failing)
    assert state.ingest_record("site", key) == PENDING

    # And the redelivered event writes the document again and bumps the version
    again = app.process(copy.deepcopy(event), work)
    assert again["records"][0]["status"] == "changed"
    assert again["summary"]["corpus_version"] == state.corpus_version("site") == 1
    assert state.ingest_record("site", key) not in (None, PENDING)


def test_the_handler_builds_its_dependencies_from_settings(
    app: ModuleType, s3: S3Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from candor.settings import get_settings

    for name, value in {
        "CANDOR_DATA_DIR": str(tmp_path),
        "CANDOR_EMBEDDER_BACKEND": "hashing",
        "CANDOR_INDEX_BACKEND": "sqlite",
        "CANDOR_STATE_BACKEND": "sqlite",
        "CANDOR_INDEX_NAME": "site-a",
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    app.ingestion.cache_clear()
    event = load_event("s3-put.json")
    put(s3, keys_in(event)[0], GUIDE)
    try:
        result = app.handler(event, LambdaContext("candor-ingest"))
        again = app.handler(event, LambdaContext("candor-ingest"))
    finally:
        get_settings.cache_clear()
        app.ingestion.cache_clear()

    assert result["records"][0]["status"] == "changed"
    assert again["records"][0]["status"] == "unchanged"
    # The change bumped the site's corpus version once; the repeat did not
    assert (result["summary"]["corpus_version"], again["summary"]["corpus_version"]) == (1, None)
    state = SqliteStateStore(tmp_path / "state.sqlite3")
    try:
        assert state.corpus_version("site-a") == 1
        # The factory gave the function the site's completion records
        assert state.ingest_record("site-a", keys_in(event)[0]) not in (None, PENDING)
    finally:
        state.close()


def test_the_test_event_s3_sends_on_configuration_is_ignored(
    app: ModuleType, work: S3Ingestion
) -> None:
    event = {
        "Service": "Amazon S3",
        "Event": "s3:TestEvent",
        "Time": "2026-11-29T17:00:00.000Z",
        "Bucket": BUCKET,
        "RequestId": "5582815E1AEA5ADF",
        "HostId": "8cLeGAmw098X5cv4Zkwcmo8vvZa3eH3eKxsPzbB9wrR+YstdA6Knx4Ip8EXAMPLE",
    }

    assert app.process(event, work)["records"] == []


def test_a_folder_placeholder_is_skipped(app: ModuleType, s3: S3Client, work: S3Ingestion) -> None:
    event = load_event("s3-put.json")
    event["Records"][0]["s3"]["object"]["key"] = "guides/"
    put(s3, "guides/", b"")

    assert app.process(event, work)["records"] == []


def test_the_factory_builds_the_functions_ingestion_with_the_sites_records(
    tmp_path: Path,
) -> None:
    from candor.factory import build_s3_ingestion
    from candor.settings import Settings

    settings = Settings(
        data_dir=tmp_path,
        embedder_backend="hashing",
        index_name="site-b",
        ingest_max_bytes=1234,
        ingest_max_pdf_pages=56,
        ingest_max_chunks=789,
    )

    work = build_s3_ingestion(settings)

    assert work.records is not None and work.records.index_name == "site-b"
    assert work.chunking.max_bytes == work.reader.max_bytes == 1234
    assert (work.chunking.max_pdf_pages, work.chunking.max_chunks) == (56, 789)
    assert work.embedder.name == "hashing-384"
