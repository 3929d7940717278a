"""The feedback use case: a visitor rates an answer, by the trace id it carried.

Beside `service` (the ask use case): `traces` stores what a rating joins, and
this module puts a rating behind the same guards as a question.
"""

from __future__ import annotations

import time
from dataclasses import replace

from candor import guards, observability
from candor.ports import RatingOutcome, StateStore
from candor.settings import Settings
from candor.traces import Feedback


def rate(
    state: StateStore,
    settings: Settings,
    trace_id: str,
    feedback: Feedback,
    *,
    session_id: str,
    client: str | None = None,
    now: float | None = None,
) -> RatingOutcome:
    """Store a rating of a trace, behind the same rate limits as a question.

    "rated"; "unknown" when the trace is absent or expired; "forbidden" when the
    session did not ask it. Raises RateLimitedError like `candor.service.ask`.
    """
    now = time.time() if now is None else now
    guards.check_rate_limits(state, settings, address=client, session_id=session_id, now=now)
    outcome = state.rate_trace(
        trace_id, session_id, replace(feedback, rated_at=now).to_json(), now=now
    )
    if outcome == "rated":
        observability.count("feedback_up" if feedback.score > 0 else "feedback_down")
    return outcome
