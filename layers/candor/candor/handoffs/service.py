"""Taking a hand-off: its guards, the transcript the server builds, and the stored record.

In this order, each before anything is forwarded: the limits (a few an hour per
client address, per e-mail address and per session; one atomic write each), the
session's moderation status (an ended session cannot hand off), the transcript
(candor.handoffs.transcript) and the record itself, written whole. Only then is
it forwarded (candor.handoffs.dispatch): a hand-off that was accepted is stored.
"""

from __future__ import annotations

import hashlib
import time
import uuid

from candor import guards, observability
from candor.errors import RateLimitedError, SessionEndedError, StateStoreError
from candor.handoffs.store import Handoff, HandoffStore
from candor.handoffs.transcript import Content, scope_of, transcript, window_minutes
from candor.ports import StateStore
from candor.settings import Settings

HOUR = 3600


def _email_key(email: str) -> str:
    # The window's key names the address by digest: the limits table holds no address.
    return hashlib.sha256(email.casefold().encode()).hexdigest()[:32]


def check_limits(
    state: StateStore,
    settings: Settings,
    *,
    client: str | None,
    email: str,
    session_id: str,
    now: float,
) -> None:
    limit = settings.handoff_hourly_limit
    checks = [(f"handoff-session#{session_id}", "this conversation")]
    checks.append((f"handoff-email#{_email_key(email)}", "this e-mail address"))
    if client:
        checks.insert(0, (f"handoff-address#{guards.address_key(client)}", "your address"))
    for key, who in checks:
        decision = state.hit_rate_limit(key, window_seconds=HOUR, limit=limit, now=now)
        if not decision.allowed:
            observability.count("handoff_rate_limited")
            raise RateLimitedError(
                decision.retry_after,
                f"{who} has asked for a person {limit} times in the last hour; try again in "
                f"{decision.retry_after} s",
            )


def take(
    state: StateStore,
    handoffs: HandoffStore,
    settings: Settings,
    *,
    session_id: str,
    client: str | None,
    email: str,
    message: str,
    now: float | None = None,
) -> Handoff:
    """Check, build and store one hand-off; it is then ready to forward."""
    now = time.time() if now is None else now
    check_limits(state, settings, client=client, email=email, session_id=session_id, now=now)
    if state.session_status(session_id) == "ended":
        raise SessionEndedError(session_id)
    entries = transcript(state, session_id, now=now)
    content = Content(
        email=email,
        message=message,
        site_name=settings.site_name,
        scope=scope_of(settings),
        transcript=entries,
        after_decline=bool(entries) and entries[-1].decision == "declined",
        window_minutes=window_minutes(settings),
    )
    handoff = Handoff(
        id=uuid.uuid4().hex,
        session_id=session_id,
        created_at=now,
        expires_at=int(now) + settings.handoff_ttl_days * 86_400,
        body=content.to_json(),
    )
    if not handoffs.put_handoff(handoff):  # a 128-bit id that exists: never in practice
        raise StateStoreError(f"hand-off {handoff.id} exists already")
    observability.count("handoffs")
    return handoff
