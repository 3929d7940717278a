"""`candor insights` with the owner's loop: gaps opened and closed, curated answers served,
answers that cited what has since changed or gone, in Markdown, JSON and the chart."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from candor import insights, owner_report
from candor.curated.records import CuratedAnswer
from candor.gaps.records import Gap, GapQuestion
from candor.stale_citations import StaleCitation
from candor.traces import Trace

pytestmark = pytest.mark.unit

NOW = 1_796_083_260.0  # 2026-12-01
DAY = 86_400


def trace(n: int, at: float, decision: str = "answered", curated: str | None = None) -> Trace:
    return Trace(
        trace_id=f"{n:032x}",
        session_id="s" * 16,
        created_at=at,
        decision=decision,  # type: ignore[arg-type]
        answer="a",
        question=f"q{n}",
        curated_id=curated,
    )


def gap(gap_id: str, opened: float, closed: float | None = None) -> Gap:
    first = GapQuestion("How do I set up LFS?", "a" * 32, opened, "declined")
    made = Gap(gap_id, "default", "open", opened, (), 0).with_questions([first])
    if closed is None:
        return made
    return dataclasses.replace(made, status="closed", closed_at=closed, closed_by=("lfs.md",))


def report() -> dict[str, object]:
    traces = [
        trace(1, NOW - DAY, curated="a111"),
        trace(2, NOW, curated="a111"),
        trace(3, NOW, curated="a222"),
        trace(4, NOW, "declined"),
    ]
    data = insights.report(traces, days=3, now=NOW)
    gaps = [
        gap("gopen", NOW - DAY),
        gap("gshut", NOW - 10 * DAY, closed=NOW),
        gap("gold", NOW - 9 * DAY),
    ]
    curated = [CuratedAnswer("a111", "How?", "So.", None, NOW - 5 * DAY)]
    stale = [
        StaleCitation("f" * 32, "2026-12-01", "q9", "push.md", None, "Push", "removed", "x", None)
    ]
    return owner_report.loop_report(data, traces, gaps, curated, stale)


def test_the_report_counts_gaps_opened_and_closed_in_its_period() -> None:
    data = report()
    gaps = data["gaps"]
    assert isinstance(gaps, dict)
    assert [g["id"] for g in gaps["opened"]] == ["gopen"]
    assert [g["id"] for g in gaps["closed"]] == ["gshut"]
    assert [g["id"] for g in gaps["open"]] == ["gopen", "gold"]
    assert gaps["closed"][0]["closed_by"] == ["lfs.md"]


def test_the_report_counts_each_curated_answer_served() -> None:
    curated = report()["curated"]
    assert isinstance(curated, dict)
    assert curated["served"] == 3
    assert curated["by_answer"] == [
        {"id": "a111", "question": "How?", "served": 2},
        {"id": "a222", "question": None, "served": 1},
    ]


def test_each_day_says_what_curated_answers_served_and_which_gaps_moved() -> None:
    per_day = report()["per_day"]
    assert isinstance(per_day, list)
    last, before = per_day[-1], per_day[-2]
    assert (last["curated"], last["gaps_closed"], last["gaps_opened"]) == (2, 1, 0)
    assert (before["curated"], before["gaps_opened"]) == (1, 1)


def test_markdown_and_the_chart_show_the_loop(tmp_path: Path) -> None:
    data = report()
    text = insights.to_markdown(data) + owner_report.to_markdown(data)

    assert "## Gaps" in text and "1 opened and 1 closed in the period; 2 open now" in text
    assert "closed 2026-12-01: gshut" in text and "by lfs.md" in text
    assert "| a111 | 2 | How? |" in text
    assert "| 2026-12-01 | " + "f" * 32 + " | q9 | push.md | removed | - |" in text
    chart = tmp_path / "insights.png"
    insights.write_chart(data, chart)
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_citations_not_checked_are_said_to_be_not_checked() -> None:
    data = owner_report.loop_report(insights.report([], days=1, now=NOW), [], [], [], None)
    assert data["cited_since_changed"] is None
    assert "Not checked: the index could not be opened" in owner_report.to_markdown(data)
