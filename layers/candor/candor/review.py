"""`candor feedback review`: the owner reads what visitors wrote and approves or rejects it.

A rating's comment and better_answer are text any visitor can write, so they wait,
"pending", until the owner decides; only an approved better_answer becomes a `chosen`
answer in `candor export-dpo` (candor.dpo). The decision is stored on the rating
itself (candor.traces.Feedback.review), in the StateStore beside its trace, so it
expires with it; a new rating by the visitor replaces it and is pending again.

Each pending rating is listed under a key, `<trace id>.<digest of the rating>`, and a
decision names that key: it applies only if the rating is still the one the owner
read (one conditional write), never to text the visitor changed in between.
"""

from __future__ import annotations

import hashlib
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Literal

from candor.ports import StateStore, StoredTrace
from candor.traces import Review, Trace, stored_since

Decision = Literal["approved", "rejected"]
Outcome = Literal["approved", "rejected", "unknown", "changed"]
DIGEST_CHARS = 12


def review_key(stored: StoredTrace) -> str:
    """The key a decision names: the trace, and the exact rating the owner was shown."""
    feedback = stored.feedback or ""
    digest = hashlib.sha256(feedback.encode("utf-8")).hexdigest()[:DIGEST_CHARS]
    return f"{stored.trace_id}.{digest}"


@dataclass(frozen=True, slots=True)
class Pending:
    key: str
    trace: Trace


def pending(state: StateStore, days: int, *, now: float | None = None) -> Iterator[Pending]:
    """Ratings of the last `days` UTC days with visitor text and no decision, oldest first."""
    for stored in stored_since(state, days, now=now):
        trace = Trace.from_stored(stored)
        feedback = trace.feedback
        if feedback is not None and feedback.has_text and feedback.review == "pending":
            yield Pending(review_key(stored), trace)


def decide(state: StateStore, key: str, decision: Decision, *, now: float | None = None) -> Outcome:
    """Record the owner's decision on the rating listed under `key`.

    "approved" or "rejected" once stored; "unknown" when the key names no live rated
    trace; "changed" when the visitor has rated again since it was listed (list again).
    """
    now = time.time() if now is None else now
    trace_id, _, _ = key.partition(".")
    stored = state.get_trace(trace_id, now=now) if len(trace_id) == 32 else None
    if stored is None or stored.feedback is None:
        return "unknown"
    if review_key(stored) != key:
        return "changed"
    feedback = Trace.from_stored(stored).feedback
    assert feedback is not None  # stored.feedback is set
    review: Review = decision
    reviewed = replace(feedback, review=review).to_json()
    if not state.review_feedback(trace_id, stored.feedback, reviewed, now=now):
        return "changed"
    return decision


# Format (Cf: bidirectional overrides, zero-width marks) and control characters, which a
# terminal would act on or hide: a visitor's text must show as written, to be judged.
_HIDDEN = {"Cc", "Cf"}


def printable(text: str) -> str:
    """Visitor text safe to print to the owner's terminal: those characters escaped."""
    return "".join(
        f"\\u{ord(c):04x}" if unicodedata.category(c) in _HIDDEN and c != "\n" else c for c in text
    )
