"""The conversation a hand-off carries, built by the server from the session alone.

Nothing the client sends goes into it: the turns come from the session's own
history (the follow-up window, candor.service), and each turn's sources from the
trace the server stored for it, read only when that trace belongs to the same
session. A visitor can hand off only their own conversation, and cannot add to it.

With CANDOR_STORE_QUESTIONS=false the history lasts only the follow-up window
(CANDOR_HISTORY_TTL_SECONDS after the last turn): the transcript holds what it
still keeps, and says so (`scope`).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from candor.ports import StateStore
from candor.settings import Settings
from candor.traces import Trace

Scope = Literal["conversation", "window"]
# The most of one answer a transcript repeats; the owner has the trace for the rest.
ANSWER_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Source:
    title: str
    url: str | None


@dataclass(frozen=True, slots=True)
class Entry:
    """One turn: what the visitor asked, what candor replied, and the sources it cited."""

    question: str
    answer: str
    decision: str
    sources: tuple[Source, ...] = ()
    trace_id: str | None = None
    asked_at: float | None = None


@dataclass(frozen=True, slots=True)
class Content:
    """A hand-off's content, as its record stores it (JSON)."""

    email: str
    message: str
    site_name: str
    scope: Scope
    transcript: tuple[Entry, ...] = ()
    after_decline: bool = False
    # With scope "window", how many minutes of the conversation the transcript may hold.
    window_minutes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Content:
        data: dict[str, Any] = json.loads(text)
        entries = tuple(
            Entry(**entry | {"sources": tuple(Source(**s) for s in entry["sources"])})
            for entry in data.pop("transcript")
        )
        return cls(**data | {"transcript": entries})


def scope_of(settings: Settings) -> Scope:
    return "conversation" if settings.store_questions else "window"


def window_minutes(settings: Settings) -> int | None:
    return None if settings.store_questions else max(1, settings.history_ttl_seconds // 60)


def transcript(
    state: StateStore, session_id: str, *, now: float | None = None
) -> tuple[Entry, ...]:
    """The session's turns the server still holds, oldest first, with their sources."""
    now = time.time() if now is None else now
    entries: list[Entry] = []
    for turn in state.get_session(session_id).history:
        trace = _own_trace(state, turn.trace_id, session_id, now)
        sources = (
            tuple(Source(c.title or c.source, c.url) for c in trace.citations)
            if trace is not None and turn.decision == "answered"
            else ()
        )
        entries.append(
            Entry(
                # The visitor's own words where the trace kept them; the history holds
                # the question a follow-up stood for.
                question=(trace.question if trace is not None and trace.question else None)
                or turn.question,
                answer=turn.answer[:ANSWER_CHARS],
                decision=turn.decision,
                sources=sources,
                trace_id=turn.trace_id,
                asked_at=trace.created_at if trace is not None else None,
            )
        )
    return tuple(entries)


def _own_trace(
    state: StateStore, trace_id: str | None, session_id: str, now: float
) -> Trace | None:
    if not trace_id:
        return None
    stored = state.get_trace(trace_id, now=now)
    if stored is None or stored.session_id != session_id:
        return None
    return Trace.from_stored(stored)
