"""Starter questions for the widget: the owner's, or ones candor checked it can answer.

The owner may set them (CANDOR_SUGGESTED_QUESTIONS, or the widget's
data-suggestions). Otherwise candor proposes them from its own index: the question
generator of `candor eval --generate` (candor.evaluation.generate) writes a question
a visitor might ask of a sampled passage, and the graph itself then answers it; a
question is kept only when the graph answers (not declines), cites, and its support
check removed nothing (no unsupported specific). At most CANDIDATES questions are
written and checked, so a refresh costs at most CANDIDATES generation calls and
CANDIDATES graph runs, reserved on the day's budget first.

They are stored for the corpus version they were checked on (the state store's
answer cache, under a key of their own) and served from there with the widget's
configuration: a page view reads them and never calls a model. An ingest bumps the
corpus version, so the next request for the configuration finds none for the new
version and starts one refresh in the background (one per ten minutes across
processes: a rate-limit window of one). The refresh needs the evaluation module,
which `candor serve` and the command line have and the Lambda layer leaves out:
on AWS, `candor suggestions refresh` (the owner's credentials) stores them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING

from candor import billing, guards
from candor.deps import Deps
from candor.errors import CandorError
from candor.graph import runner
from candor.graph.state import GraphState
from candor.ports import CacheKey
from candor.withheld import type_name

if TYPE_CHECKING:
    from candor.evaluation.generate import Window

logger = logging.getLogger(__name__)

MAX_SUGGESTIONS = 4
# Questions written and checked per refresh, at most: a true bound on its calls.
CANDIDATES = 8
# Passages read to find CANDIDATES prose windows, and ids listed to sample them from.
SAMPLED_PASSAGES = 40
LISTED_IDS = 2000
KEPT_SECONDS = 365 * 86_400
# One refresh per corpus version per this many seconds, across processes.
REFRESH_LEASE_SECONDS = 600
# A process re-reads the stored questions at most this often.
MEMO_SECONDS = 30.0
# Prompt tokens of one generation call, at most (an excerpt of 900 characters and
# the instructions), for the reservation.
GENERATION_PROMPT_TOKENS = 700


def _key(deps: Deps, version: int) -> CacheKey:
    return CacheKey("suggested questions", version, f"suggestions#{deps.settings.index_name}")


@dataclass
class Refresh:
    """What one refresh did: the kept questions and each candidate's fate."""

    kept: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)
    cost_usd: float = 0.0


def windows_from_index(deps: Deps, *, seed: int) -> list[Window]:
    """Prose windows from a sample of indexed passages (the generator's own filter)."""
    from candor.evaluation.generate import MIN_WINDOW_CHARS, Window, is_prose

    ids: list[str] = []
    for chunk_id in deps.index.list_ids():
        ids.append(chunk_id)
        if len(ids) >= LISTED_IDS:
            break
    rng = random.Random(seed)
    rng.shuffle(ids)
    windows = []
    for chunk in deps.index.fetch(ids[:SAMPLED_PASSAGES]):
        if len(chunk.text) >= MIN_WINDOW_CHARS and is_prose(chunk.text):
            windows.append(Window(chunk.source, chunk.title, chunk.heading, chunk.text))
    return windows[:CANDIDATES]


def answers_it(final: GraphState) -> str | None:
    """Why the graph's run does not make the question a starter (None: it does)."""
    if final.decision != "answered":
        return f"the graph {final.decision or 'declined'}"
    if not final.citations:
        return "the answer cites nothing"
    support = final.support
    if support is not None and (support.removed or support.unsupported or support.declined):
        return "the answer held an unsupported specific"
    return None


def reservation(deps: Deps) -> Decimal:
    """The most a refresh can cost: CANDIDATES generation calls and graph runs."""
    from candor.evaluation.generate import QUESTION_TOKENS

    price = deps.settings.price(deps.chat.name)
    writing = price.cost(GENERATION_PROMPT_TOKENS, QUESTION_TOKENS)
    per_run = guards.reservation_usd(deps.settings, deps.chat.name, deps.embedder)
    return guards.usd(Decimal(str(writing)) + per_run) * CANDIDATES


async def refresh(deps: Deps, *, version: int | None = None) -> Refresh:
    """Write and check starter questions for the corpus as it is; store the kept ones."""
    from candor.evaluation.generate import write_question

    if version is None:
        version = await asyncio.to_thread(deps.state.corpus_version, deps.settings.index_name)
    now = time.time()
    amount = reservation(deps)
    holds = await asyncio.to_thread(
        guards.reserve, deps.state, deps.settings, session_id="suggestions", amount=amount, now=now
    )
    done = Refresh()
    meter = billing.Meter(None)
    try:
        windows = await asyncio.to_thread(windows_from_index, deps, seed=version)
        seen: set[str] = set()
        for window in windows:
            if len(done.kept) >= MAX_SUGGESTIONS:
                break
            question, reason, usage = await write_question(window, deps.chat, seen)
            done.cost_usd += float(usage.cost_usd)
            if reason is None:
                final = await runner.run(
                    GraphState(question, f"suggestions-{uuid.uuid4().hex}", deps.settings.top_k),
                    deps,
                    meter=meter,
                )
                reason = answers_it(final)
            if reason is None:
                done.kept.append(question)
            else:
                done.rejected[question or "(empty)"] = reason
    finally:
        done.cost_usd += float(meter.usage.cost_usd)
        await asyncio.to_thread(guards.settle, deps.state, holds, guards.usd(done.cost_usd))
    await asyncio.to_thread(
        deps.state.cache_put,
        _key(deps, version),
        json.dumps(done.kept),
        expires_at=int(time.time()) + KEPT_SECONDS,
    )
    return done


@dataclass
class Suggestions:
    """What the widget's configuration serves, read from the store at most every
    MEMO_SECONDS per process; a missing set starts one background refresh."""

    _memo: tuple[float, int, list[str]] | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def for_widget(self, deps: Deps) -> list[str]:
        settings = deps.settings
        if settings.suggested_questions:
            return list(settings.suggested_questions[:MAX_SUGGESTIONS])
        if not settings.suggest_questions:
            return []
        now = time.monotonic()
        if self._memo is not None and now - self._memo[0] < MEMO_SECONDS:
            return self._memo[2]
        version = await asyncio.to_thread(deps.state.corpus_version, settings.index_name)
        stored = await asyncio.to_thread(deps.state.cache_get, _key(deps, version), now=time.time())
        questions: list[str] = json.loads(stored) if stored is not None else []
        if stored is None and version > 0:
            await self._start_refresh(deps, version)
        self._memo = (now, version, questions)
        return questions

    async def _start_refresh(self, deps: Deps, version: int) -> None:
        if not _can_refresh():
            return
        claim = await asyncio.to_thread(
            deps.state.hit_rate_limit,
            f"suggestions#{deps.settings.index_name}#{version}",
            window_seconds=REFRESH_LEASE_SECONDS,
            limit=1,
            now=time.time(),
        )
        if not claim.allowed:
            return  # another process (or this one) is at it

        async def run() -> None:
            try:
                done = await refresh(deps, version=version)
                logger.info(
                    "starter questions for corpus version %d: %d kept of %d",
                    version,
                    len(done.kept),
                    len(done.kept) + len(done.rejected),
                )
                self._memo = None
            except CandorError as error:
                logger.warning("starter questions were not refreshed: %s", error)
            except Exception as error:
                logger.error("starter questions were not refreshed: %s", type_name(error))

        task = asyncio.create_task(run(), name=f"suggestions-{version}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def idle(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


def _can_refresh() -> bool:
    """Whether the question generator is here: the Lambda layer leaves it out."""
    import importlib.util

    try:
        return importlib.util.find_spec("candor.evaluation.generate") is not None
    except ModuleNotFoundError:  # its package is gone, not only the module
        return False
