"""The body of POST /ask/stream: one run's events as server-sent events.

    event: step    data: {"node": "grade", "ms": 812.4}      a node finished
    event: token   data: {"text": " the"}                    a piece of the reply
    event: done    data: {...}                               exactly POST /ask's JSON
    event: error   data: {"status": 503, "detail": ..., "reason": ..., "trace_id": ...,
                          "retry_after": 10}         retry_after: when the status has one

`done` or `error` ends the stream. The reply's tokens are the model's text as
the runner lets it out, cleaned by the rules of the final answer (no pasted
labels, table rows or passages: candor.graph.answer_text), a sentence or a line
at a time. `done` carries the answer with its citations resolved, or the decline that
replaced an answer no passage accounts for, so a client shows `done.answer` in
place of what it streamed. A comment line (`: keep-alive`) goes out whenever
nothing else has for a while, so that idle connections stay open through a
long step. What is refused before the stream starts (the edge, the session,
the guards) is an ordinary JSON error response, as on POST /ask.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping

from candor.api import errors
from candor.api.schemas import AskResponse
from candor.graph import runner
from candor.results import AskResult, Done, Idle
from candor.service import PreparedAsk

MEDIA_TYPE = "text/event-stream"
KEEPALIVE_SECONDS = 10.0
KEEPALIVE = b": keep-alive\n\n"
# No proxy or cache may hold the events back or keep them.
HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


# The OpenAPI schema of one event (OpenAPI 3.1: `schema` of an event stream
# describes each event, as a client's SSE parser sees it).
EVENT_SCHEMA: dict[str, object] = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"type": "string", "enum": ["step", "token", "done", "error"]},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "description": 'JSON. step: {"node", "ms"}; token: {"text"}; done: the POST /ask '
            'response; error: {"status", "detail", "reason", "trace_id"} and, when the '
            'error has a Retry-After, "retry_after" (whole seconds).',
        },
    },
}


def frame(event: str, data: Mapping[str, object]) -> bytes:
    """One server-sent event; JSON escapes newlines, so the data is one line."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def response_json(result: AskResult) -> dict[str, object]:
    """The JSON of POST /ask for `result`."""
    return AskResponse.model_validate(result.to_json()).model_dump(mode="json")


async def server_sent_events(
    prepared: PreparedAsk, *, keepalive_seconds: float = KEEPALIVE_SECONDS
) -> AsyncIterator[bytes]:
    """The run's events, encoded. Closing this early cancels the run (see PreparedAsk)."""
    try:
        async for event in prepared.events(idle_seconds=keepalive_seconds):
            match event:
                case runner.StepEvent(step=step):
                    yield frame("step", {"node": step.node, "ms": step.ms})
                case runner.TokenEvent(text=text):
                    yield frame("token", {"text": text})
                case Done(result=result):
                    yield frame("done", response_json(result))
                case Idle():
                    yield KEEPALIVE
    except Exception as error:  # after the status line: the same table, as an event
        public = errors.public_error(error, prepared.trace_id)
        data: dict[str, object] = {"status": public.status, **public.body}
        if "Retry-After" in public.headers:  # the header went out with the status line
            data["retry_after"] = int(public.headers["Retry-After"])
        yield frame("error", data)
