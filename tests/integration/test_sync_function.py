"""The sync function (functions/sync) against moto's S3 and SQS, the fixture site on
loopback, and the sync's records in SQLite (and DynamoDB Local where it matters).

The schedule's event sends one message per site; each message is one invocation's
step; steps hand on through the queue until the sync is done; the pages end up as
objects under site/ with their URL in x-amz-meta-url, and S3 events (the ingest
function's path) then put them in the index.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto import mock_aws

from candor.backends.dynamodb_sync import DynamoDBSyncStore
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.backends.sqlite_sync import SqliteSyncStore
from candor.ingest.reading import Chunking
from candor.ingest.records import CompletionRecords
from candor.ingest.s3 import ObjectChange, S3Ingestion, S3Reader
from candor.settings import Settings
from candor.sync.aws import SyncFunction
from candor.sync.records import SyncStore
from tests.support import dynamodb_local
from tests.support.embedders import CountingEmbedder
from tests.support.lambda_ import load_handler
from tests.support.site_server import SiteServer
from tests.support.sites import build_site, listed_pages, loopback_only

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

__all__ = ["loopback_only"]

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("loopback_only")]

REGION = "eu-west-1"
BUCKET = "candor-docs-sync-test"


@dataclass(frozen=True)
class Context:
    """A Lambda context with the time left the test wants."""

    seconds: float = 900.0
    aws_request_id: str = "req-1"
    function_name: str = "candor-sync"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:eu-west-1:123456789012:function:candor-sync"

    def get_remaining_time_in_millis(self) -> int:
        return int(self.seconds * 1000)


@dataclass
class Aws:
    s3: S3Client
    sqs: SQSClient
    queue_url: str

    def messages(self) -> list[dict[str, Any]]:
        """Take every message now on the queue (each as an SQS record)."""
        records: list[dict[str, Any]] = []
        while True:
            got = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10)
            batch = got.get("Messages", [])
            if not batch:
                return records
            for message in batch:
                records.append(
                    {
                        "messageId": message["MessageId"],
                        "receiptHandle": message["ReceiptHandle"],
                        "body": message["Body"],
                        "eventSource": "aws:sqs",
                        "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:sync",
                        "attributes": {},
                        "messageAttributes": {},
                    }
                )
                self.sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )

    def pages(self) -> dict[str, dict[str, Any]]:
        """The objects under site/: key -> its metadata, type and body."""
        found = {}
        listed = self.s3.list_objects_v2(Bucket=BUCKET, Prefix="site/").get("Contents", [])
        for item in listed:
            head = self.s3.get_object(Bucket=BUCKET, Key=item["Key"])
            found[item["Key"]] = {
                "url": head["Metadata"].get("url"),
                "type": head["ContentType"],
                "body": head["Body"].read(),
            }
        return found

    def versions(self) -> int:
        listed = self.s3.list_object_versions(Bucket=BUCKET, Prefix="site/")
        return len(listed.get("Versions", [])) + len(listed.get("DeleteMarkers", []))


@pytest.fixture
def aws(fake_aws_credentials: str) -> Iterator[Aws]:
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        where: Any = {"LocationConstraint": REGION}
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration=where)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        sqs = boto3.client("sqs", region_name=REGION)
        queue_url = sqs.create_queue(QueueName="sync")["QueueUrl"]
        yield Aws(s3, sqs, queue_url)


@pytest.fixture
def site() -> Iterator[SiteServer]:
    with SiteServer() as server:
        build_site(server)
        yield server


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SyncStore]:
    sqlite = SqliteSyncStore(tmp_path / "state.sqlite3")
    yield sqlite
    sqlite.close()


@pytest.fixture
def handler() -> ModuleType:
    return load_handler("sync")


def function(aws: Aws, store: SyncStore, site: SiteServer, **settings: Any) -> SyncFunction:
    config = Settings(
        sync_sites=(site.url,),
        sync_delay_seconds=0,
        documents_bucket=BUCKET,
        sync_queue_url=aws.queue_url,
        **settings,
    )
    return SyncFunction(config, store, aws.s3, aws.sqs, BUCKET, aws.queue_url)


def drain(handler: ModuleType, work: SyncFunction, aws: Aws, context: Context) -> list[str]:
    """Deliver every message, one invocation each, until the queue is empty."""
    statuses: list[str] = []
    for _ in range(100):
        records = aws.messages()
        if not records:
            return statuses
        for record in records:
            result = handler.process({"Records": [record]}, work, context)
            statuses.extend(step["status"] for step in result["steps"])
    raise AssertionError("the sync never ended")


def test_the_schedule_starts_a_sync_of_each_site(
    aws: Aws, store: SyncStore, site: SiteServer, handler: ModuleType
) -> None:
    work = function(aws, store, site)

    result = handler.process({"sync": "start"}, work, Context())

    assert result == {"started": [site.url]}
    (message,) = aws.messages()
    assert json.loads(message["body"]) == {
        "site": site.url,
        "action": "start",
        "accept_removals": False,
    }


def test_a_sync_writes_each_page_under_site_with_its_url(
    aws: Aws, store: SyncStore, site: SiteServer, handler: ModuleType
) -> None:
    work = function(aws, store, site)
    handler.process({"sync": "start"}, work, Context())

    assert drain(handler, work, aws, Context()) == ["finished"]

    pages = aws.pages()
    urls = {page["url"] for page in pages.values()}
    assert urls == {site.absolute(path) for path in listed_pages()}
    assert all(key.startswith(f"site/127.0.0.1:{site.port}/") for key in pages)
    assert all(page["type"] == "text/html" for page in pages.values())
    (summary,) = [s for s in store.sites("default")]
    assert summary.pages == len(listed_pages())


def test_a_sync_with_little_time_hands_on_through_the_queue_until_done(
    aws: Aws, store: SyncStore, site: SiteServer, handler: ModuleType
) -> None:
    work = function(aws, store, site, sync_concurrency=1)
    handler.process({"sync": "start"}, work, Context())

    # No time left: each invocation fetches what it started with (two pages, one
    # in flight and one queued), saves its cursor and sends the next step.
    statuses = drain(handler, work, aws, Context(seconds=0.001))

    assert statuses == ["started", "continued", "continued", "finished"]
    assert len(aws.pages()) == len(listed_pages())
    assert store.cursor("default", site.url) is None
    # Each page was fetched once, however many invocations it took.
    assert all(len(site.asked(path)) == 1 for path in listed_pages())


def test_an_unchanged_site_writes_no_object_and_a_404_deletes_one(
    aws: Aws, store: SyncStore, site: SiteServer, handler: ModuleType
) -> None:
    work = function(aws, store, site)
    handler.process({"sync": "start"}, work, Context())
    drain(handler, work, aws, Context())
    versions = aws.versions()

    handler.process({"sync": "start"}, work, Context())
    drain(handler, work, aws, Context())
    assert aws.versions() == versions

    site.remove("/faq.html")
    handler.process({"sync": "start"}, work, Context())
    drain(handler, work, aws, Context())
    assert f"site/127.0.0.1:{site.port}/faq.html" not in aws.pages()
    assert aws.versions() == versions + 1  # a delete marker: restorable, and an event


def test_pages_reach_the_index_through_the_s3_events_with_their_urls(
    aws: Aws, store: SyncStore, site: SiteServer, handler: ModuleType, tmp_path: Path
) -> None:
    work = function(aws, store, site)
    handler.process({"sync": "start"}, work, Context())
    drain(handler, work, aws, Context())

    embedder = CountingEmbedder()
    index = SqliteVectorIndex(tmp_path / "index.sqlite3", embedder.dimensions)
    state = SqliteStateStore(tmp_path / "ingest-state.sqlite3")
    ingestion = S3Ingestion(
        embedder=embedder,
        index=index,
        reader=S3Reader(aws.s3, max_bytes=1_000_000),
        chunking=Chunking(max_bytes=1_000_000),
        records=CompletionRecords(state, "default"),
    )
    result = ingestion.apply(
        [ObjectChange(BUCKET, key, "ObjectCreated:Put") for key in aws.pages()]
    )

    assert result.report.documents_changed == len(listed_pages())
    chunks = index.fetch(list(index.list_ids()))
    assert {c.metadata["url"] for c in chunks} == {site.absolute(p) for p in listed_pages()}
    index.close()
    state.close()


def test_a_second_delivery_while_a_step_runs_does_nothing(
    aws: Aws, store: SyncStore, site: SiteServer, handler: ModuleType
) -> None:
    work = function(aws, store, site)
    assert store.lease("default", site.url, "another-invocation", until=9e12, now=0)
    handler.process({"sync": "start"}, work, Context())

    assert drain(handler, work, aws, Context()) == ["busy"]
    assert site.asked("/guide.html") == []


def test_a_message_for_a_site_the_owner_did_not_configure_is_refused(
    aws: Aws, store: SyncStore, site: SiteServer, handler: ModuleType
) -> None:
    work = function(aws, store, site)
    body = json.dumps({"site": "http://127.0.0.1:9/", "action": "start"})
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=body)

    assert drain(handler, work, aws, Context()) == ["refused"]


def test_held_removals_are_applied_when_the_owner_accepts_them(
    aws: Aws, store: SyncStore, site: SiteServer, handler: ModuleType
) -> None:
    work = function(aws, store, site)
    handler.process({"sync": "start"}, work, Context())
    drain(handler, work, aws, Context())
    for path in listed_pages()[1:]:
        site.remove(path)

    handler.process({"sync": "start"}, work, Context())
    drain(handler, work, aws, Context())
    assert len(aws.pages()) == len(listed_pages())

    handler.process({"sync": "start", "site": site.url, "accept_removals": True}, work, Context())
    drain(handler, work, aws, Context())
    assert list(aws.pages()) == [f"site/127.0.0.1:{site.port}/index.html"]


def test_the_sync_runs_on_the_dynamodb_state_table(
    aws: Aws, site: SiteServer, handler: ModuleType, dynamodb_endpoint: str
) -> None:
    admin = dynamodb_local.client(dynamodb_endpoint)
    table = dynamodb_local.create_state_table(admin)
    store = DynamoDBSyncStore(table, client=dynamodb_local.client(dynamodb_endpoint))
    work = function(aws, store, site)
    handler.process({"sync": "start"}, work, Context())

    statuses = drain(handler, work, aws, Context(seconds=0.001))

    assert statuses[-1] == "finished"
    assert len(aws.pages()) == len(listed_pages())
    keys = {item["pk"]["S"].split("#", 1)[0] for item in admin.scan(TableName=table)["Items"]}
    assert keys == {"sync"}
    admin.delete_table(TableName=table)
