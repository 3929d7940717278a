"""The feedback use case: a visitor rates an answer, by the trace id it carried.

Beside `service` (the ask use case): `traces` stores what a rating joins, and
this module puts a rating behind the same guards as a question: the rate limits,
and no rating from a session that was ended after repeated abuse. What the visitor
wrote (comment, better answer) is stored only when CANDOR_STORE_QUESTIONS is true,
and always as "pending" the owner's review (candor.review).
"""

from __future__ import annotations

import time
from dataclasses import replace

from candor import guards, observability
from candor.errors import SessionEndedError
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
    session did not ask it. Raises RateLimitedError and SessionEndedError like
    `candor.service.ask`, in the same order.
    """
    now = time.time() if now is None else now
    guards.check_rate_limits(state, settings, address=client, session_id=session_id, now=now)
    if state.session_status(session_id) == "ended":
        raise SessionEndedError(session_id)
    stored = replace(feedback, rated_at=now, review="pending")
    if not settings.store_questions:
        # A visitor's own words are as private as their question.
        stored = replace(stored, comment=None, better_answer=None)
    outcome = state.rate_trace(trace_id, session_id, stored.to_json(), now=now)
    if outcome == "rated":
        observability.count("feedback_up" if feedback.score > 0 else "feedback_down")
    return outcome
