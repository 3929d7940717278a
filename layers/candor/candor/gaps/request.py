"""The ingest function's side of the gaps check after ingest (candor.gaps.after_ingest):
one message on the queue when a run changed the documents. A module of its own, so
that the ingest function loads no graph to send it."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from candor.ingest.outcomes import IngestReport
from candor.settings import Settings
from candor.withheld import type_name

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

logger = logging.getLogger(__name__)


def request_check(
    settings: Settings, report: IngestReport, *, client: SQSClient | None = None
) -> bool:
    """Ask for a gaps check when the run changed the index; True when one was asked.

    Never raises: the documents are in the index whatever happens here, and the next
    change asks again. A failure is logged.
    """
    if not settings.gaps_check_queue_url or report.corpus_version is None:
        return False
    try:
        if client is None:
            import boto3

            client = boto3.client("sqs", region_name=settings.aws_region)
        body = {"index": settings.index_name, "corpus_version": report.corpus_version}
        client.send_message(QueueUrl=settings.gaps_check_queue_url, MessageBody=json.dumps(body))
    except Exception as error:
        logger.warning("the gaps check was not requested", extra={"error_type": type_name(error)})
        return False
    return True
