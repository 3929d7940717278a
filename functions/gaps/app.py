"""Gaps checks asked for by the ingest function -> one check per batch, on AWS Lambda.

Thin: the SQS records only say that the documents changed (a sync's many events
arrive as one batch); candor.gaps.after_ingest counts the traces' missing questions
into gaps and checks the open ones on the owner's daily budget, stopping a minute
before the invocation's time is up
(a quarter of it, when that is less). What it spent and closed goes to the log.
"""

from __future__ import annotations

import asyncio
import time
from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from candor.deps import Deps
from candor.gaps import after_ingest
from candor.gaps.records import GapStore
from candor.observability import logger, metrics, route_library_logs, tracer
from candor.settings import get_settings

route_library_logs()

# Time kept for the last question of a gap and its save: a minute, or a quarter of
# what is left when that is less.
RESERVE_SECONDS = 60.0


@cache
def dependencies() -> tuple[Deps, GapStore]:
    from candor.factory import build_deps, build_gaps

    settings = get_settings()
    return build_deps(settings), build_gaps(settings)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    deps, store = dependencies()
    remaining = context.get_remaining_time_in_millis() / 1000
    left = remaining - min(RESERVE_SECONDS, remaining / 4)
    report = asyncio.run(after_ingest.run(deps, store, stop_at=time.monotonic() + left))
    summary = after_ingest.summary(report) | {"requests": len(event.get("Records", []))}
    logger.info("gaps check", extra=summary)
    return summary
