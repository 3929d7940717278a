"""POST /ask, POST /ask/stream and GET /health on AWS Lambda behind an API Gateway REST API.

Thin: the FastAPI app comes from the candor library (the layer). Deployed, it
streams: run.sh serves `web` in uvicorn under the Lambda Web Adapter, which
passes each request to it and streams the response back (Python's managed
runtime and Mangum cannot stream). `handler` is the same app behind Mangum, a
buffered entry for `make invoke` and `sam local invoke`. Dependencies are built
once per container, in the function's init: the adapter's readiness check, GET
/health, starts the warm-up (candor.warmup) and waits while it answers 503
`warming`. A deployment without its allowed origins or session key, or with a
budget no request fits in, fails at start (the function's init), not at a
visitor's first question.
"""

from __future__ import annotations

from functools import cache
from typing import Any, cast

from aws_lambda_powertools.utilities.typing import LambdaContext
from mangum import Mangum

from candor.api.app import create_app
from candor.api.edge import Edge, build_edge, require_production_edge
from candor.api.lambda_web import AdaptedInvocations
from candor.deps import Deps, built_once
from candor.guards import require_workable_budget
from candor.observability import API_GATEWAY_REST, logger, metrics, route_library_logs, tracer
from candor.settings import Settings

route_library_logs()

settings = Settings()
require_production_edge(settings)
require_workable_budget(settings)


@built_once
def deps() -> Deps:
    from candor.factory import build_deps

    return build_deps(settings)


@cache
def edge() -> Edge:
    return build_edge(settings)


app = create_app(deps, edge_provider=edge)
web = AdaptedInvocations(app)
asgi = Mangum(app, lifespan="off")


@logger.inject_lambda_context(correlation_id_path=API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # Mangum declares its own LambdaContext protocol; the runtime object is the same.
    response: dict[str, Any] = asgi(event, cast(Any, context))
    return response
