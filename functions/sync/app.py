"""The site sync on AWS Lambda: a schedule starts it, its SQS queue carries it on.

Thin: the schedule's event (anything without Records: `{"sync": "start"}`, or an
owner's `{"sync": "start", "site": URL, "accept_removals": true}`) sends one start
message per site; each SQS record is one step of one site's sync
(candor.sync.aws.SyncFunction.step). A step that fails raises, so that SQS delivers
its message again and, after the queue's retries, to the dead-letter queue.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.data_classes import SQSEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

from candor.observability import logger, metrics, route_library_logs, tracer
from candor.settings import get_settings
from candor.sync.aws import SyncFunction

route_library_logs()


@cache
def sync_function() -> SyncFunction:
    return SyncFunction.build(get_settings())


def process(event: dict[str, Any], work: SyncFunction, context: LambdaContext) -> dict[str, Any]:
    if "Records" not in event:
        return {"started": work.schedule(event)}
    steps = []
    for record in SQSEvent(event).records:
        seconds_left = context.get_remaining_time_in_millis() / 1000
        step = work.step(
            json.loads(record.body), holder=context.aws_request_id, seconds_left=seconds_left
        )
        logger.info(f"sync step: {step.status}", extra=step.to_json())
        steps.append(step.to_json())
    return {"steps": steps}


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return process(event, sync_function(), context)
