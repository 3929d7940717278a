"""One question asked as the widget asks it: the run of POST /ask/stream, timed.

POST /ask and POST /ask/stream start the same run (candor.service.prepare): /ask
reads its result whole, /ask/stream sends its events as they happen
(candor.api.stream). The harness reads the events as the stream does, so the
answer is the one `ask` gives, and the seconds are those a visitor waits in the
widget: to the first `token` event (the first piece of the reply it shows, which
the runner lets out once its cleaner has decided on it: candor.graph.answer_text)
and to `done`. Only the HTTP framing and the network are left out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from candor.deps import Deps
from candor.results import AskResult, Done


@dataclass(frozen=True, slots=True)
class StreamedAsk:
    result: AskResult
    # Seconds from `started` to the first token event; None when none came (a
    # fixed reply, a decline before any text, a warning).
    first_token_s: float | None
    done_s: float  # seconds from `started` to the done event


async def ask_streamed(deps: Deps, question: str, *, started: float) -> StreamedAsk:
    """Ask `question` through the streaming path; seconds count from `started`
    (a time.perf_counter() reading taken before the guards run)."""
    # The service and the graph load only when the agent runs (not --retrieval-only).
    from candor.graph.runner import TokenEvent
    from candor.service import prepare

    prepared = await prepare(deps, question)
    first_token_s: float | None = None
    async for event in prepared.events():
        if isinstance(event, TokenEvent) and first_token_s is None:
            first_token_s = time.perf_counter() - started
        elif isinstance(event, Done):
            return StreamedAsk(event.result, first_token_s, time.perf_counter() - started)
    raise AssertionError("unreachable: events() ends with Done or raises")
