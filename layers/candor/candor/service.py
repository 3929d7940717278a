"""The one call behind POST /ask, POST /ask/stream and `candor ask`.

`prepare` runs the guards and starts the run; its events are read streamed
(POST /ask/stream, `candor ask` on a terminal) or whole (`ask`, POST /ask).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from candor import billing, guards, question_keys, traces
from candor import deadline as deadlines
from candor.curated import first, lookup
from candor.curated.records import CuratedState
from candor.deps import Deps
from candor.errors import SessionEndedError
from candor.graph import nodes, runner
from candor.graph.state import (
    Decision,
    GraphState,
    TraceStep,
)
from candor.ports import CacheKey, Turn
from candor.results import AskResult, Done, Idle
from candor.settings import Settings
from candor.types import NO_USAGE
from candor.withheld import type_name, withheld

logger = logging.getLogger(__name__)

# Writes that failed after the answer was paid for, by kind, since the process
# started: the answer is returned anyway, and each one is logged with its trace id.
write_failures: Counter[str] = Counter()


def new_session_id() -> str:
    return uuid.uuid4().hex


AskEvent = runner.StepEvent | runner.TokenEvent | Done | Idle


@dataclass(frozen=True, slots=True)
class _Failed:
    error: BaseException


# How a run is driven once its guards have passed: it emits its events, and
# returns the result (or raises).
_Drive = Callable[[runner.Emit], Awaitable[AskResult]]


class PreparedAsk:
    """A question that passed every guard; its run has started, in a task of its own.

    Read its events once, with `events()` (streamed) or `result()` (whole). The
    run is a task rather than the reader's own code so that what it must do
    whatever happens (settle the budget) is not cut short with the reader: a
    reader that stops early (a client that hung up) cancels the run, which then
    settles the reservation to what was spent, with no further model call.
    """

    def __init__(self, trace_id: str, drive: _Drive) -> None:
        self.trace_id = trace_id
        self._queue: asyncio.Queue[AskEvent | _Failed] = asyncio.Queue()
        self._task = asyncio.create_task(self._run(drive), name=f"ask-{trace_id}")

    async def _run(self, drive: _Drive) -> None:
        try:
            result = await drive(self._queue.put_nowait)
        except asyncio.CancelledError:
            self._queue.put_nowait(_Failed(asyncio.CancelledError()))  # a reader stops too
            raise
        except Exception as error:  # handed to the reader, raised there
            self._queue.put_nowait(_Failed(error))
        else:
            self._queue.put_nowait(Done(result))

    async def events(self, *, idle_seconds: float | None = None) -> AsyncIterator[AskEvent]:
        """Steps and tokens as they happen, then Done; an Idle after each quiet interval.

        Raises what the run raised. Stopping early cancels the run.
        """
        try:
            while True:
                try:
                    item = await asyncio.wait_for(self._queue.get(), idle_seconds)
                except TimeoutError:
                    yield Idle()
                    continue
                if isinstance(item, _Failed):
                    raise item.error
                yield item
                if isinstance(item, Done):
                    return
        finally:
            self.cancel()

    async def result(self) -> AskResult:
        """The whole answer, once the run is over."""
        async for event in self.events():
            if isinstance(event, Done):
                return event.result
        raise AssertionError("unreachable: events() ends with Done or raises")

    def cancel(self) -> None:
        """Stop the run (no-op once it is over); it settles the budget as it ends."""
        self._task.cancel()


async def ask(
    deps: Deps,
    question: str,
    *,
    session_id: str | None = None,
    top_k: int | None = None,
    client: str | None = None,
    trace_id: str | None = None,
) -> AskResult:
    """Answer one question: `prepare`, then the whole result. See `prepare` for the guards."""
    prepared = await prepare(
        deps, question, session_id=session_id, top_k=top_k, client=client, trace_id=trace_id
    )
    return await prepared.result()


async def prepare(
    deps: Deps,
    question: str,
    *,
    session_id: str | None = None,
    top_k: int | None = None,
    client: str | None = None,
    trace_id: str | None = None,
    history: Sequence[Turn] | None = None,
) -> PreparedAsk:
    """Run every guard of one question in a session, then start its run. In this order:

    rate limits (per `client` address, its network and the session), the
    ended-session check, the answer cache (a hit makes no model call and reserves
    nothing), then a budget reservation (the address's and the network's shares of
    the day, the session's, the day's) held around every model call of the graph.
    Raises RateLimitedError, SessionEndedError or BudgetExhaustedError here, so
    that a refusal is decided before any answer is sent. The run raises
    DeadlineExceededError when it passes the request's deadline. Once the graph
    has answered, the answer is returned even if settling the budget, caching the
    answer or recording the turn fails (those are logged and counted).

    `history` is the conversation so far when the caller holds it (the
    OpenAI-compatible API, whose client sends every turn); otherwise the session's
    stored turns. Either way only the last CANDOR_HISTORY_TURNS are read.
    """
    settings = deps.settings
    trace_id = trace_id or uuid.uuid4().hex
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

    # The owner's curated answers: how many, and their generation, which the answer
    # cache is keyed on (a new or removed one retires the answers it could change).
    curated = await asyncio.to_thread(_curated_state, deps)
    key = (
        await asyncio.to_thread(
            _cache_key, deps, question, top_k, curated.generation if curated else 0
        )
        if settings.cache_enabled
        else None
    )
    if key is not None:
        started = time.perf_counter()
        hit = await asyncio.to_thread(deps.state.cache_get, key, now=now)
        if hit is not None:
            cached = guards.CachedAnswer.from_json(hit)
            ms = round((time.perf_counter() - started) * 1000, 2)

            async def answer_from_cache(emit: runner.Emit) -> AskResult:
                emit(runner.TokenEvent(cached.answer))  # the whole answer, as one piece
                await _remember(
                    deps,
                    session_id,
                    Turn(question, cached.answer, cached.decision, trace_id),
                    trace_id,
                )
                result = AskResult(
                    answer=cached.answer,
                    decision=cached.decision,
                    citations=cached.citations,
                    attempts=0,
                    session_id=session_id,
                    trace_id=trace_id,
                    trace=(TraceStep("cache", ms, 0, 0, 0.0),),
                    cached=True,
                )
                await traces.record(
                    deps,
                    result,
                    question=question,
                    started=now,
                    corpus_version=key.corpus_version,
                )
                return result

            return PreparedAsk(trace_id, answer_from_cache)

    turns = session.history if history is None else list(history)
    history = turns[-settings.history_turns :] if settings.history_turns else []
    start = GraphState(
        question=question,
        session_id=session_id,
        top_k=top_k,
        history=tuple(history),
        curated_look=curated is not None and curated.count > 0,
    )
    looked: first.LookedUp | None = None
    if start.curated_look and first.moderated_without_model(question, settings):
        # Found now, the owner's answer reserves only its embedding (candor.curated.first).
        looked, holds = await _curated_first(deps, question, session_id, client, now, trace_id)
        if looked is not None and looked.match is not None:
            found = dataclasses.replace(start, curated_found=looked.match.answer)
            return PreparedAsk(
                trace_id, _graph_drive(deps, found, key, holds, Decimal(0), now, trace_id, looked)
            )
        start = dataclasses.replace(start, curated_look=False)  # looked: none answers it
    amount = guards.reservation_usd(settings, deps.chat.name, deps.embedder)
    holds = await asyncio.to_thread(
        guards.reserve,
        deps.state,
        settings,
        session_id=session_id,
        amount=amount,
        now=now,
        address=client,
    )
    return PreparedAsk(
        trace_id, _graph_drive(deps, start, key, holds, amount, now, trace_id, looked)
    )


def _graph_drive(
    deps: Deps,
    start: GraphState,
    key: CacheKey | None,
    holds: list[guards.Hold],
    amount: Decimal,
    now: float,
    trace_id: str,
    looked: first.LookedUp | None,
) -> _Drive:
    """The run of the graph from `start`, under the holds made for it (`amount` each)."""
    settings = deps.settings
    question, session_id = start.question, start.session_id

    async def answer_from_graph(emit: runner.Emit) -> AskResult:
        # The meter sees every model call and embedding, also those of a run that
        # fails halfway, runs out of time or is cancelled: a call that was sent is
        # charged what the provider reported, or its bound where nothing did
        # (candor.billing), so the true-up charges no less than was billed. It admits
        # only calls the computed reservation still covers (retries of attempts that
        # may have been billed count against it); one set by hand is not enforced.
        allowance = float(amount) if settings.budget_reserve_usd is None else None
        meter = billing.Meter(allowance)
        try:
            final = await runner.run(
                start,
                deps,
                meter=meter,
                deadline=deadlines.after(settings.request_deadline(), start=now),
                emit=emit,
            )
        finally:
            # The holds also cover the curated lookup made before the graph, if any.
            before = looked.usage.cost_usd if looked is not None else 0.0
            spent = guards.usd(meter.usage.cost_usd + before)
            # A settle that fails must not replace the run's own error (or lose its
            # answer): the hold then stays on the ledger, which errs towards the cap.
            await _best_effort("settle", trace_id, lambda: guards.settle(deps.state, holds, spent))
        if looked is not None and looked.match is not None:
            steps = tuple(looked.step(s) if s.node == "curated" else s for s in final.trace)
            final = dataclasses.replace(final, trace=steps)

        decision: Decision = final.decision or "declined"
        if key is not None and guards.cacheable(final):
            entry = guards.CachedAnswer(final.answer, decision, final.citations)
            await _best_effort(
                "cache_put",
                trace_id,
                lambda: deps.state.cache_put(
                    key, entry.to_json(), expires_at=int(now) + settings.cache_ttl_seconds
                ),
            )
        await _remember(
            deps, session_id, Turn(nodes.subject(final), final.answer, decision, trace_id), trace_id
        )
        result = AskResult(
            answer=final.answer,
            decision=decision,
            citations=final.citations,
            attempts=final.attempts,
            session_id=session_id,
            trace_id=trace_id,
            trace=final.trace,
            grades=final.grades,
            support=final.support,
        )
        version = key.corpus_version if key is not None else None
        await traces.record(
            deps, result, question=question, started=now, final=final, corpus_version=version
        )
        return result

    return answer_from_graph


def _curated_state(deps: Deps) -> CuratedState | None:
    """The curated answers' count and generation; None when none can be served."""
    if deps.curated is None or lookup.rule(deps.settings, deps.embedder.name) is None:
        return None
    return deps.curated.state()


async def _curated_first(
    deps: Deps, question: str, session_id: str, client: str | None, now: float, trace_id: str
) -> tuple[first.LookedUp | None, list[guards.Hold]]:
    """The curated lookup under a hold of its own embeddings' cost (none when they are
    free). A lookup that fails is logged and settled: the graph then runs without it.
    A found answer keeps its holds, which its run settles; otherwise they are settled now."""
    amount = first.reservation_usd(deps.settings, deps)
    holds: list[guards.Hold] = []
    if amount > 0:
        holds = await asyncio.to_thread(
            guards.reserve,
            deps.state,
            deps.settings,
            session_id=session_id,
            amount=amount,
            now=now,
            address=client,
        )
    meter = billing.Meter(float(amount))
    looked: first.LookedUp | None = None
    try:
        looked = await first.look_up(deps, question, meter)
    except Exception as error:  # the shortcut is lost, not the question
        logger.warning(
            "the curated answers could not be looked up; retrieving instead",
            exc_info=withheld(error),
            extra={"trace_id": trace_id, "error_type": type_name(error)},
        )
    if looked is None or looked.match is None:
        spent = guards.usd(meter.usage.cost_usd)
        await _best_effort("settle", trace_id, lambda: guards.settle(deps.state, holds, spent))
        # Settled here: the graph's run must not count this lookup again.
        looked = dataclasses.replace(looked, usage=NO_USAGE) if looked is not None else None
        return looked, []
    return looked, holds


def _cache_key(deps: Deps, question: str, top_k: int, curated_generation: int) -> CacheKey:
    fingerprint = guards.settings_fingerprint(
        deps.settings, chat=deps.chat.name, embedder=deps.embedder.name, top_k=top_k
    )
    if curated_generation:
        curated = f"{fingerprint}\x00curated\x00{curated_generation}"
        fingerprint = hashlib.sha256(curated.encode()).hexdigest()
    version = deps.state.corpus_version(deps.settings.index_name)
    secret = question_keys.key_for(deps.settings)
    return guards.cache_key(
        question, corpus_version=version, fingerprint=fingerprint, secret=secret
    )


def history_expires_at(settings: Settings, now: float) -> int:
    """When a session's follow-up history, written now, is forgotten (epoch seconds).

    Without stored questions, only for the follow-up window; with them, as long as
    a session's id is accepted (CANDOR_SESSION_MAX_AGE_SECONDS)."""
    if settings.store_questions:
        return int(now) + settings.session_max_age_seconds
    return int(now) + settings.history_ttl_seconds


async def _remember(deps: Deps, session_id: str, turn: Turn, trace_id: str) -> None:
    # The graph reads the last history_turns of them; a hand-off sends them all
    # (candor.handoffs.transcript), so more are kept while hand-offs are on.
    keep = max(deps.settings.history_turns, deps.settings.handoff_turns())
    if keep:
        expires_at = history_expires_at(deps.settings, time.time())
        await _best_effort(
            "append_turn",
            trace_id,
            lambda: deps.state.append_turn(session_id, turn, keep=keep, expires_at=expires_at),
        )


async def _best_effort(kind: str, trace_id: str, write: Callable[[], None]) -> None:
    """Run a write that must not cost the visitor the answer; log and count a failure."""
    try:
        await asyncio.to_thread(write)
    except Exception as error:
        write_failures[kind] += 1
        # A bug's message can quote the visitor (candor.withheld): type and frames only.
        logger.error(
            "%s failed after the answer; the answer is returned anyway",
            kind,
            exc_info=withheld(error),
            extra={"trace_id": trace_id, "write": kind, "error_type": type_name(error)},
        )
