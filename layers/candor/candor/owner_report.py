"""What `candor insights` adds for the owner's loop: gaps opened and closed, curated
answers served, and the answers that cited what has since changed or gone.

Kept apart from candor.insights (which reads traces only) because it reads the
gaps, the curated answers, the ingest records and the index besides.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from candor.curated.records import CuratedAnswer
from candor.gaps.records import Gap
from candor.stale_citations import StaleCitation
from candor.traces import Trace


def _day(moment: float | None) -> str | None:
    return None if moment is None else datetime.fromtimestamp(moment, UTC).date().isoformat()


def _in(day: str | None, since: str, until: str) -> bool:
    return day is not None and since <= day <= until


def gap_json(gap: Gap) -> dict[str, Any]:
    return {
        "id": gap.id,
        "status": gap.status,
        "example": gap.example,
        "asked": gap.asked,
        "questions": [q.question for q in gap.questions],
        "opened": _day(gap.opened_at),
        "closed": _day(gap.closed_at) if gap.status == "closed" else None,
        "closed_by": list(gap.closed_by),
        "checked": _day(gap.checked_at),
        "last_check": [
            {"question": c.question, "answered": c.answered, "outcome": c.outcome}
            for c in gap.checks
        ],
    }


def loop_report(
    data: dict[str, Any],
    traces: Sequence[Trace],
    gaps: Sequence[Gap],
    curated: Sequence[CuratedAnswer],
    stale: Sequence[StaleCitation] | None,
) -> dict[str, Any]:
    """`data` (candor.insights.report) with the loop's figures added, per day too.
    `stale` is None when the index could not be read: reported as not checked."""
    since, until = data["since"], data["until"]
    served = Counter(t.curated_id for t in traces if t.curated_id)
    opened = [g for g in gaps if _in(_day(g.opened_at), since, until)]
    closed = [g for g in gaps if g.status == "closed" and _in(_day(g.closed_at), since, until)]
    per_day = []
    for row in data["per_day"]:
        day = row["day"]
        per_day.append(
            row
            | {
                "curated": sum(1 for t in traces if t.curated_id and _day(t.created_at) == day),
                "gaps_opened": sum(1 for g in opened if _day(g.opened_at) == day),
                "gaps_closed": sum(1 for g in closed if _day(g.closed_at) == day),
            }
        )
    questions = {a.id: a.question for a in curated}
    return data | {
        "per_day": per_day,
        "gaps": {
            "opened": [gap_json(g) for g in opened],
            "closed": [gap_json(g) for g in closed],
            "open": [gap_json(g) for g in gaps if g.status == "open"],
        },
        "curated": {
            "answers": len(curated),
            "served": sum(served.values()),
            "by_answer": [
                {"id": answer_id, "question": questions.get(answer_id), "served": n}
                for answer_id, n in served.most_common()
            ],
        },
        "cited_since_changed": None if stale is None else [row.to_json() for row in stale],
    }


def _cell(text: str | None, limit: int = 100) -> str:
    if text is None:
        return "(not stored)"
    flat = " ".join(text.split()).replace("|", "\\|")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def to_markdown(data: dict[str, Any]) -> str:
    """The loop's sections, to follow candor.insights.to_markdown."""
    gaps, curated = data["gaps"], data["curated"]
    lines = [
        "## Gaps",
        "",
        f"{len(gaps['opened'])} opened and {len(gaps['closed'])} closed in the period; "
        f"{len(gaps['open'])} open now (`candor gaps list`, `candor gaps check`).",
        "",
    ]
    if gaps["open"]:
        lines += ["| gap | asked | example | since | last check |", "|---|---|---|---|---|"]
        for gap in gaps["open"]:
            answered = sum(1 for c in gap["last_check"] if c["answered"])
            check = f"{answered}/{len(gap['last_check'])} answered" if gap["checked"] else "-"
            lines.append(
                f"| {gap['id']} | {gap['asked']} | {_cell(gap['example'])} | "
                f"{gap['opened']} | {check} |"
            )
    for gap in gaps["closed"]:
        lines.append(
            f"- closed {gap['closed']}: {gap['id']} ({_cell(gap['example'], 80)}), "
            f"by {', '.join(gap['closed_by']) or '-'}"
        )
    lines += [
        "",
        "## Curated answers served",
        "",
        f"{curated['served']} answers given from {curated['answers']} curated answers.",
    ]
    if curated["by_answer"]:
        lines += ["", "| curated answer | served | question |", "|---|---|---|"]
        lines += [
            f"| {row['id']} | {row['served']} | {_cell(row['question'])} |"
            for row in curated["by_answer"]
        ]
    lines += [
        "",
        "## Answers that cited what has since changed or gone",
        "",
    ]
    stale = data["cited_since_changed"]
    if stale is None:
        lines.append("Not checked: the index could not be opened with these settings.")
    elif stale:
        lines += [
            "| day | trace | question | document | now | quoted words still there |",
            "|---|---|---|---|---|---|",
        ]
        for row in stale:
            still = {True: "yes", False: "no", None: "-"}[row["still_quoted"]]
            lines.append(
                f"| {row['day']} | {row['trace_id']} | {_cell(row['question'], 80)} | "
                f"{_cell(row['url'] or row['source'], 60)} | {row['status']} | {still} |"
            )
    else:
        lines.append("None.")
    return "\n".join(lines) + "\n"
