"""`candor gaps check`: ask each open gap's questions again, on the owner's own budget.

Each question runs the whole graph on the current index (curated answers included),
as a visitor's would, but outside the visitors' guards: no rate limit, no answer
cache, no trace (a check is not a visitor), and its cost on a ledger of its own,
`owner#<UTC day>`, capped at CANDOR_OWNER_BUDGET_USD, apart from the visitors' daily
budget. Before each question the most it can cost is reserved on that ledger, and
the check stops, saying so, at the first question it does not cover: that cap is
the check's true upper bound, whatever the number of gaps.

A question counts as answered when the graph answered it, every citation names a
passage the index holds now (or the owner's curated answer), the support check found
no unsupported specific, and, for a question whose answer a visitor rated down, the
answer is not that same one. A gap closes when every question asked is answered;
it names the documents its answers cited.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from candor import billing, guards
from candor import deadline as deadlines
from candor.curated.records import CITATION_PREFIX
from candor.deps import Deps
from candor.gaps.records import Gap, GapQuestion, GapStore, QuestionCheck
from candor.graph import runner
from candor.graph.state import GraphState
from candor.withheld import type_name, withheld

logger = logging.getLogger(__name__)


def owner_ledger(now: float) -> str:
    return f"owner#{datetime.fromtimestamp(now, UTC):%Y-%m-%d}"


@dataclass
class CheckReport:
    checked: list[str] = field(default_factory=list)  # gap ids asked again
    closed: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)  # left for want of budget
    conflicts: list[str] = field(default_factory=list)  # changed meanwhile: not saved
    spent_usd: Decimal = Decimal(0)
    budget_exhausted: bool = False
    gaps: list[Gap] = field(default_factory=list)  # the gaps checked, as saved


def questions_to_ask(gap: Gap, limit: int) -> list[GapQuestion]:
    """The gap's most recent distinct questions, at most `limit`."""
    chosen: dict[str, GapQuestion] = {}
    for question in sorted(gap.questions, key=lambda q: -q.asked_at):
        key = guards.normalise(question.question)
        if key not in chosen:
            chosen[key] = question
        if len(chosen) == limit:
            break
    return list(chosen.values())


async def check(
    deps: Deps,
    store: GapStore,
    *,
    only: set[str] | None = None,
    stop_at: float | None = None,
    now: float | None = None,
) -> CheckReport:
    """Ask the open gaps' questions again (`only` these ids, when given); close those
    now answered. No gap is started after `stop_at` (a time.monotonic() value)."""
    settings = deps.settings
    now = time.time() if now is None else now
    report = CheckReport()
    gaps = [g for g in store.list_gaps(settings.index_name) if g.status == "open"]
    if only is not None:
        gaps = [g for g in gaps if g.id in only]
    gaps.sort(key=lambda g: (-g.asked, g.opened_at))
    curated = deps.curated.state().count if deps.curated is not None else 0
    for n, gap in enumerate(gaps):
        if stop_at is not None and time.monotonic() >= stop_at:
            report.unchecked += [g.id for g in gaps[n:]]
            return report
        checks: list[QuestionCheck] = []
        for question in questions_to_ask(gap, settings.gap_questions):
            outcome = await _ask_again(deps, gap, question, curated > 0, report)
            if outcome is None:  # the owner's budget cannot cover another question
                report.budget_exhausted = True
                report.unchecked += [g.id for g in gaps[n:]]
                return report
            checks.append(outcome)
        report.checked.append(gap.id)
        saved = _save(store, gap, checks, now)
        if saved is None:
            report.conflicts.append(gap.id)
            continue
        report.gaps.append(saved)
        if saved.status == "closed":
            report.closed.append(gap.id)
    return report


async def _ask_again(
    deps: Deps, gap: Gap, question: GapQuestion, curated: bool, report: CheckReport
) -> QuestionCheck | None:
    """One question through the graph under a reservation on the owner's ledger; None
    when the ledger cannot hold it."""
    settings = deps.settings
    now = time.time()
    amount = guards.reservation_usd(settings, deps.chat.name, deps.embedder)
    ledger = owner_ledger(now)
    expires = int((datetime.fromtimestamp(now, UTC) + timedelta(days=2)).timestamp())
    held = await asyncio.to_thread(
        deps.state.reserve_budget, ledger, amount, cap=settings.owner_budget_usd, expires_at=expires
    )
    if not held:
        return None
    allowance = float(amount) if settings.budget_reserve_usd is None else None
    meter = billing.Meter(allowance)
    state = GraphState(
        question=question.question,
        session_id=f"gaps-check-{gap.id}",
        top_k=settings.top_k,
        curated_look=curated,
    )
    try:
        final = await runner.run(
            state,
            deps,
            meter=meter,
            deadline=deadlines.after(settings.request_deadline(), start=now),
        )
    except Exception as error:  # one failed question leaves the gap open, not the check
        logger.warning(
            "a gap's question failed in the check",
            exc_info=withheld(error),
            extra={"gap": gap.id, "error_type": type_name(error)},
        )
        return QuestionCheck(question.question, False, f"failed: {type_name(error)}")
    finally:
        spent = guards.usd(meter.usage.cost_usd)
        report.spent_usd += spent
        await asyncio.to_thread(deps.state.settle_budget, ledger, reserved=amount, actual=spent)
    return await asyncio.to_thread(_judged, deps, question, final)


def _judged(deps: Deps, question: GapQuestion, final: GraphState) -> QuestionCheck:
    ask, answer = question.question, final.answer
    if final.decision != "answered":
        return QuestionCheck(ask, False, final.decision or "declined", answer=answer)
    if not final.citations:
        return QuestionCheck(ask, False, "no citation", answer=answer)
    curated = [c for c in final.citations if c.id.startswith(CITATION_PREFIX)]
    passages = [c for c in final.citations if not c.id.startswith(CITATION_PREFIX)]
    held = {chunk.id for chunk in deps.index.fetch([c.id for c in passages])} if passages else set()
    if any(c.id not in held for c in passages):
        return QuestionCheck(ask, False, "cited a passage the index no longer holds", answer=answer)
    if final.support is not None and final.support.unsupported:
        return QuestionCheck(ask, False, "unsupported specifics", answer=answer)
    if question.rated_answer is not None and guards.normalise(answer) == guards.normalise(
        question.rated_answer
    ):
        return QuestionCheck(ask, False, "the same answer as was rated down", answer=answer)
    sources = sorted({c.id for c in curated} | {c.url or c.source for c in passages})
    return QuestionCheck(ask, True, "answered", tuple(sources), answer)


def _save(store: GapStore, gap: Gap, checks: list[QuestionCheck], now: float) -> Gap | None:
    """The gap with this check's results, saved; None when it changed meanwhile (its
    questions grew: a check of the old ones must not close it)."""
    closed = bool(checks) and all(c.answered for c in checks)
    updated = dataclasses.replace(
        gap,
        version=gap.version + 1,
        checked_at=now,
        checks=tuple(checks),
        status="closed" if closed else "open",
        closed_at=now if closed else gap.closed_at,
        closed_by=tuple(sorted({s for c in checks for s in c.sources})) if closed else (),
    )
    return updated if store.save_gap(updated) else None
