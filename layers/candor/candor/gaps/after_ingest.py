"""On AWS: a gaps check after each ingest or sync that changed the documents.

One setting away (infra/template.yaml, GapsCheckAfterIngest=true): the ingest
function, when a run changed the index (it bumped the corpus version), puts one
message on the gaps-check queue (CANDOR_GAPS_CHECK_QUEUE_URL; candor.gaps.request). The gaps-check
function reads the queue in batches (a sync's many events become one check), one
at a time (reserved concurrency 1), counts the traces' missing questions into gaps,
and checks the open ones on the owner's budget (candor.gaps.checking): the owner's
daily cap bounds what it spends, however many ingests ask for it. It stops starting
gaps when the invocation's time runs short; what it checked is saved gap by gap,
and the next change checks the rest.
"""

from __future__ import annotations

import time
from typing import Any

from candor.deps import Deps
from candor.gaps import checking, opening
from candor.gaps.records import GapStore
from candor.traces import traces_since

# The traces whose missing questions a check counts in first (their lifetime's default).
TRACE_DAYS = 30


async def run(
    deps: Deps, store: GapStore, *, stop_at: float | None = None, now: float | None = None
) -> checking.CheckReport:
    """What one queued request does: count the traces' missing questions into gaps,
    then check the open ones until the owner's budget or `stop_at` (time.monotonic())."""
    now = time.time() if now is None else now
    traces = traces_since(deps.state, TRACE_DAYS, now=now)
    embedder = deps.embedder if opening.missing_questions(traces) else None
    opening.refresh(store, traces, embedder, deps.settings.index_name, now=now)
    return await checking.check(deps, store, stop_at=stop_at, now=now)


def summary(report: checking.CheckReport) -> dict[str, Any]:
    return {
        "checked": len(report.checked),
        "closed": report.closed,
        "unchecked": len(report.unchecked),
        "budget_exhausted": report.budget_exhausted,
        "spent_usd": str(report.spent_usd),
    }
