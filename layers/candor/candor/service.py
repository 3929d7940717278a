"""The one call behind POST /ask and `candor ask`."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from dataclasses import asdict, dataclass

from candor import guards
from candor.deps import Deps
from candor.errors import SessionEndedError
from candor.graph import nodes, runner
from candor.graph.state import (
    Citation,
    Decision,
    GradeRecord,
    GraphState,
    SupportCheck,
    TraceStep,
)
from candor.ports import CacheKey, Turn


@dataclass(frozen=True, slots=True)
class AskResult:
    answer: str
    decision: Decision
    citations: tuple[Citation, ...]
    attempts: int
    session_id: str
    trace_id: str
    trace: tuple[TraceStep, ...]
    cached: bool = False
    # What the checks outside the model did: each grade (and the grounding gate's
    # findings), and the support check of the answer.
    grades: tuple[GradeRecord, ...] = ()
    support: SupportCheck | None = None

    def to_json(self) -> dict[str, object]:
        return asdict(self) | {
            "citations": [asdict(c) for c in self.citations],
            "trace": [asdict(s) for s in self.trace],
        }


def new_session_id() -> str:
    return uuid.uuid4().hex


async def ask(
    deps: Deps,
    question: str,
    *,
    session_id: str | None = None,
    top_k: int | None = None,
    client: str | None = None,
) -> AskResult:
    """Answer one question in a session, behind the guards, in this order:

    rate limits (per `client` address and per session), the ended-session check,
    the answer cache (a hit makes no model call and reserves nothing), then a
    budget reservation held around every model call of the graph.
    Raises RateLimitedError, SessionEndedError or BudgetExhaustedError.
    """
    settings = deps.settings
    session_id = session_id or new_session_id()
    top_k = top_k or settings.top_k
    now = time.time()
    await asyncio.to_thread(
        guards.check_rate_limits,
        deps.state,
        settings,
        address=client,
        session_id=session_id,
        now=now,
    )
    session = await asyncio.to_thread(deps.state.get_session, session_id)
    if session.status == "ended":
        raise SessionEndedError(session_id)

    key = (
        await asyncio.to_thread(_cache_key, deps, question, top_k)
        if settings.cache_enabled
        else None
    )
    if key is not None:
        started = time.perf_counter()
        hit = await asyncio.to_thread(deps.state.cache_get, key, now=now)
        if hit is not None:
            cached = guards.CachedAnswer.from_json(hit)
            ms = round((time.perf_counter() - started) * 1000, 2)
            await _remember(deps, session_id, Turn(question, cached.answer, cached.decision))
            return AskResult(
                answer=cached.answer,
                decision=cached.decision,
                citations=cached.citations,
                attempts=0,
                session_id=session_id,
                trace_id=uuid.uuid4().hex,
                trace=(TraceStep("cache", ms, 0, 0, 0.0),),
                cached=True,
            )

    history = session.history[-settings.history_turns :] if settings.history_turns else []
    amount = guards.reservation_usd(settings, deps.chat.name)
    holds = await asyncio.to_thread(
        guards.reserve, deps.state, settings, session_id=session_id, amount=amount, now=now
    )
    # The meter sees every model call, also those of a run that fails halfway, so
    # the true-up charges what was spent: the trace's costs, or less on failure.
    meter = runner.MeteredChatModel(deps.chat)
    try:
        final = await runner.run(
            GraphState(
                question=question, session_id=session_id, top_k=top_k, history=tuple(history)
            ),
            dataclasses.replace(deps, chat=meter),
        )
    finally:
        spent = guards.usd(meter.usage.cost_usd)
        await asyncio.to_thread(guards.settle, deps.state, holds, spent)

    decision: Decision = final.decision or "declined"
    if key is not None and guards.cacheable(final):
        entry = guards.CachedAnswer(final.answer, decision, final.citations)
        await asyncio.to_thread(
            deps.state.cache_put,
            key,
            entry.to_json(),
            expires_at=int(now) + settings.cache_ttl_seconds,
        )
    await _remember(deps, session_id, Turn(nodes.subject(final), final.answer, decision))
    return AskResult(
        answer=final.answer,
        decision=decision,
        citations=final.citations,
        attempts=final.attempts,
        session_id=session_id,
        trace_id=uuid.uuid4().hex,
        trace=final.trace,
        grades=final.grades,
        support=final.support,
    )


def _cache_key(deps: Deps, question: str, top_k: int) -> CacheKey:
    fingerprint = guards.settings_fingerprint(
        deps.settings, chat=deps.chat.name, embedder=deps.embedder.name, top_k=top_k
    )
    version = deps.state.corpus_version(deps.settings.index_name)
    return guards.cache_key(question, corpus_version=version, fingerprint=fingerprint)


async def _remember(deps: Deps, session_id: str, turn: Turn) -> None:
    keep = deps.settings.history_turns
    if keep:
        await asyncio.to_thread(deps.state.append_turn, session_id, turn, keep=keep)
