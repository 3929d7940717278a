"""Logs, traces and metrics on AWS Lambda, in one module that the three handlers share.

The handlers wear this module's three Powertools decorators:

    @logger.inject_lambda_context(correlation_id_path=API_GATEWAY_REST, clear_state=True)
    @tracer.capture_lambda_handler
    @metrics.log_metrics(capture_cold_start_metric=True)

- Logger: one JSON object per line, with the API Gateway request id as the
  correlation id and, once a request's trace exists, its `trace_id`.
  `route_library_logs()` sends the library's own `logging` records (candor.*)
  through the same formatter.
- Tracer: X-Ray, a subsegment per graph node annotated with the node and its
  decision (`traced_nodes`); botocore and httpx (the OpenAI SDK) are patched.
- Metrics: CloudWatch EMF in the namespace `candor`, one document per invocation.

Library code records through `count`, `record_request` and `traced_nodes`, which
do nothing outside Lambda, so the CLI and `candor serve` print no metric
documents and send no segments.
"""

from __future__ import annotations

import functools
import logging
import os
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

NAMESPACE = "candor"
# The API is a REST API (infra/template.yaml, Api), not an HTTP API: its request id.
API_GATEWAY_REST = correlation_paths.API_GATEWAY_REST

# The service name comes from POWERTOOLS_SERVICE_NAME (candor-ask, candor-feedback,
# candor-ingest in the template), and becomes the metrics' one dimension.
logger = Logger()
metrics = Metrics(namespace=NAMESPACE)
# GET /health and an S3 test event record no metric; that is not worth a warning
# in the log on every call.
warnings.filterwarnings("ignore", "No application metrics to publish", UserWarning)


@functools.cache
def _tracer() -> Tracer:
    # botocore: DynamoDB, S3 and SSM; httpx: the OpenAI SDK. Outside Lambda (no
    # LAMBDA_TASK_ROOT, or under AWS_SAM_LOCAL) Powertools disables the tracer itself.
    return Tracer(patch_modules=("botocore", "httpx"))


def __getattr__(name: str) -> Tracer:
    # `tracer` is made on first use: creating it imports the X-Ray SDK (a large
    # share of a cold start), which the command line and `candor serve` never need.
    if name == "tracer":
        return _tracer()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


S = TypeVar("S")
D = TypeVar("D")
U = TypeVar("U", bound=Mapping[str, Any])


def in_lambda() -> bool:
    """True in a Lambda runtime (or `make invoke`, which sets what the runtime sets)."""
    return "AWS_LAMBDA_FUNCTION_NAME" in os.environ and not is_metrics_disabled()


def route_library_logs() -> None:
    """Send the candor.* loggers' records through the Powertools handler and formatter."""
    library = logging.getLogger("candor")
    for handler in logger.handlers:
        if handler not in library.handlers:
            library.addHandler(handler)
    library.setLevel(logger.log_level)
    # The Lambda runtime's root handler would print each record a second time, as text.
    library.propagate = False


def bind_trace(trace_id: str) -> None:
    """Put `trace_id` on every later log line of this invocation."""
    logger.append_keys(trace_id=trace_id)


def count(name: str, value: float = 1, unit: MetricUnit = MetricUnit.Count) -> None:
    """Add to one of the invocation's metrics (flushed by the handler's log_metrics)."""
    if in_lambda():
        metrics.add_metric(name=name, unit=unit, value=value)


def _dimensioned(name: str, unit: MetricUnit, value: float, dimension: str, of: str) -> None:
    # A metric with its own dimension is its own EMF document (Powertools keeps one
    # dimension set per document).
    with single_metric(
        name=name,
        unit=unit,
        value=value,
        namespace=NAMESPACE,
        default_dimensions=metrics.default_dimensions,
    ) as metric:
        metric.add_dimension(name=dimension, value=of)


class TimedStep(Protocol):
    @property
    def node(self) -> str: ...
    @property
    def ms(self) -> float: ...
    @property
    def index_reads(self) -> int: ...


class CountedRequest(Protocol):
    """What `record_request` counts of one request (a `candor.traces.Trace` is one)."""

    @property
    def decision(self) -> str: ...
    @property
    def cached(self) -> bool: ...
    @property
    def seconds(self) -> float: ...
    @property
    def tokens_in(self) -> int: ...
    @property
    def tokens_evaluated(self) -> int: ...
    @property
    def tokens_out(self) -> int: ...
    @property
    def cost_usd(self) -> float: ...
    @property
    def steps(self) -> Sequence[TimedStep]: ...


def record_request(trace: CountedRequest) -> None:
    """The metrics of one answered request: its decision, its nodes, tokens, cost, cache,
    index reads."""
    if not in_lambda():
        return
    count("requests")
    count("tokens_in", trace.tokens_in)
    count("tokens_evaluated", trace.tokens_evaluated)
    count("tokens_out", trace.tokens_out)
    count("cost_usd", trace.cost_usd, MetricUnit.NoUnit)
    count("cache_hits", 1 if trace.cached else 0)
    count("index_reads", sum(step.index_reads for step in trace.steps))
    count("request_ms", trace.seconds * 1000, MetricUnit.Milliseconds)
    _dimensioned("decisions", MetricUnit.Count, 1, "decision", trace.decision)
    for step in trace.steps:
        _dimensioned("node_ms", MetricUnit.Milliseconds, step.ms, "node", step.node)


def count_ingest(summary: Mapping[str, Any]) -> None:
    """The metrics of one ingest invocation, from its IngestReport summary."""
    count("ingest_documents", summary["documents_seen"])
    count("ingest_chunks", summary["chunks_upserted"])
    count("ingest_failures", summary["failed"])


def traced_nodes(
    nodes: Mapping[str, Callable[[S, D], Awaitable[U]]],
) -> dict[str, Callable[[S, D], Awaitable[U]]]:
    """The graph's nodes, each run in an X-Ray subsegment `## <node>`, with its decision."""
    return {name: _traced(name, node) for name, node in nodes.items()}


def _traced(name: str, node: Callable[[S, D], Awaitable[U]]) -> Callable[[S, D], Awaitable[U]]:
    async def run(state: S, deps: D) -> U:
        # Untraced unless a handler made the tracer (the CLI never does).
        if _tracer.cache_info().currsize == 0 or _tracer().disabled:
            return await node(state, deps)
        async with _tracer().provider.in_subsegment_async(name=f"## {name}") as subsegment:
            update = await node(state, deps)
            # None when there is no segment to nest in: X-Ray logs that, and the
            # request must go on regardless.
            if subsegment is not None:
                subsegment.put_annotation(key="node", value=name)
                decision = update.get("decision")
                if decision:
                    subsegment.put_annotation(key="decision", value=str(decision))
            return update

    run.__name__ = run.__qualname__ = name
    run.__doc__ = node.__doc__
    return run
