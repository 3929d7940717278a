"""POST /feedback on AWS Lambda behind the API Gateway REST API (infra/template.yaml, Api).

Thin: the FastAPI app and its feedback router come from the candor library (the
layer); Mangum translates the REST API's proxy events (buffered: nothing to stream).
Only the state store is built (once per container): no model, no index, no API key.
"""

from __future__ import annotations

from functools import cache
from typing import Any, cast

from aws_lambda_powertools.utilities.typing import LambdaContext
from mangum import Mangum

from candor.api.edge import require_production_edge
from candor.api.feedback import FeedbackDeps, create_feedback_app
from candor.observability import API_GATEWAY_REST, logger, metrics, route_library_logs, tracer
from candor.settings import get_settings

route_library_logs()
# Like the ask function: no start without the allowed origins and the session key.
require_production_edge(get_settings())


@cache
def deps() -> FeedbackDeps:
    from candor.factory import build_state

    settings = get_settings()
    return FeedbackDeps(settings, build_state(settings))


app = create_feedback_app(deps)
asgi = Mangum(app, lifespan="off")


@logger.inject_lambda_context(correlation_id_path=API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # Mangum declares its own LambdaContext protocol; the runtime object is the same.
    response: dict[str, Any] = asgi(event, cast(Any, context))
    return response
