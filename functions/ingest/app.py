"""S3 puts and deletes in the documents bucket -> the candor ingest pipeline, on AWS Lambda.

Thin: parse the event with Powertools' S3Event, get the dependencies (built once
per container by candor.factory.build_s3_ingestion), reconcile each key with the
bucket (candor.ingest.s3), and log one line per record. A document's own fault
(corrupt PDF, undecodable text, over the size limit) is reported and the event
succeeds: retrying cannot fix it. A backend's fault (OpenAI, Pinecone, S3,
DynamoDB, the corpus-version bump included) fails the invocation after every
record was tried, so that Lambda retries the event; the keys already completed
then cost a record read, a listing and a fetch each, no embedding.
"""

from __future__ import annotations

from functools import cache
from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools.utilities.data_classes import S3Event
from aws_lambda_powertools.utilities.typing import LambdaContext

from candor import observability
from candor.gaps import request
from candor.ingest.s3 import ObjectChange, S3Ingestion
from candor.observability import logger, metrics, route_library_logs, tracer
from candor.settings import get_settings

route_library_logs()


class RetryableIngestError(Exception):
    """Some records failed in a backend; raised so that Lambda delivers the event again."""


@cache
def ingestion() -> S3Ingestion:
    from candor.factory import build_s3_ingestion

    return build_s3_ingestion(get_settings())


def changes(event: S3Event) -> list[ObjectChange]:
    # S3 URL-encodes keys in notifications ("my notes/été.md" arrives as
    # "my+notes/%C3%A9t%C3%A9.md"). S3Event.object_key decodes only the first
    # record's key, so every record's key is decoded here the same way.
    # The test event S3 sends when a notification is configured has no records.
    if "Records" not in event:
        return []
    return [
        ObjectChange(
            bucket=record.s3.bucket.name,
            key=unquote_plus(record.s3.get_object.key),
            event=record.event_name,
            size=record.s3.get_object.get("size"),
        )
        for record in event.records
    ]


def process(event: dict[str, Any], work: S3Ingestion) -> dict[str, Any]:
    """Reconcile every key the event names; raise if a backend failed on any."""
    result = work.apply(changes(S3Event(event)))
    for outcome in result.outcomes:
        if outcome.status == "failed":
            logger.warning("not ingested", extra=outcome.to_json())
        else:
            logger.info(outcome.status, extra=outcome.to_json())
    summary = result.to_json()
    logger.info("ingest summary", extra=summary["summary"])
    observability.count_ingest(summary["summary"])
    # The documents changed: a gaps check, where the owner turned it on (GapsCheckAfterIngest).
    request.request_check(get_settings(), result.report)
    if result.report.retryable:
        raise RetryableIngestError(
            f"{len(result.report.retryable)} record(s) failed in a backend: "
            + ", ".join(result.report.retryable)
        )
    return summary


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return process(event, ingestion())
