"""Hand-offs queued by the ask function -> one forwarding attempt each, on AWS Lambda.

Thin: each SQS record names a stored hand-off; candor.handoffs.dispatch claims it,
sends it to the webhook and the e-mail address that have not taken it yet, and
records the attempt. A record whose attempt failed is reported back
(ReportBatchItemFailures), so that SQS delivers it again after the queue's
visibility timeout, and to the dead-letter queue after the last try; the hand-off
itself stays in the table whatever happens (`candor handoffs list`).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from candor.handoffs.dispatch import Send, handle_queue_event, senders_for
from candor.handoffs.store import HandoffStore
from candor.observability import logger, metrics, route_library_logs, tracer
from candor.settings import get_settings

route_library_logs()


@cache
def dependencies() -> tuple[HandoffStore, dict[str, Send]]:
    from candor.factory import build_handoff_store

    settings = get_settings()
    return build_handoff_store(settings), senders_for(settings)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    store, senders = dependencies()
    return handle_queue_event(
        event, store, senders, max_attempts=get_settings().handoff_max_attempts
    )
