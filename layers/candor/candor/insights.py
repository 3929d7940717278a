"""`candor insights`: what visitors asked, and what the documents are missing.

Read from the stored traces and their feedback (candor.traces), on either state
store. A declined question is one the documents could not answer: grouped first
by its normalised text (the answer cache's normalisation), then groups whose
questions mean the same (embedding cosine at least SIMILAR) are merged, so that
"set up LFS?" and "how do I configure git lfs" count together.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from candor.gaps.opening import SIMILAR
from candor.guards import normalise
from candor.handoffs.store import Handoff
from candor.ports import Embedder
from candor.traces import Trace

# The report's decision names: the graph's, with code_refused shown as "refused".
DECISIONS = {
    "answered": "answered",
    "declined": "declined",
    "smalltalk": "smalltalk",
    "code_refused": "refused",
    "warned": "warned",
    "ended": "ended",
}


@dataclass
class Gap:
    """Declined questions that mean the same: what the documents are missing."""

    example: str
    count: int
    variants: list[str] = field(default_factory=list)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile (q in 0..100), or None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def gaps(questions: Sequence[str], embedder: Embedder | None) -> list[Gap]:
    """Group declined questions, most frequent first."""
    by_text: dict[str, list[str]] = {}
    for question in questions:
        by_text.setdefault(normalise(question), []).append(question)
    groups = [
        Gap(example=Counter(asked).most_common(1)[0][0], count=len(asked), variants=[text])
        for text, asked in by_text.items()
    ]
    groups.sort(key=lambda g: (-g.count, g.variants[0]))
    if embedder is None or len(groups) < 2:
        return groups
    vectors = embedder.embed([g.variants[0] for g in groups])
    merged: list[tuple[Gap, list[int]]] = []
    for n, group in enumerate(groups):
        # Greedy: join the most frequent earlier group it resembles, else start one.
        home = next(
            (
                m
                for m, (_, members) in enumerate(merged)
                if float(np.max(vectors[members] @ vectors[n])) >= SIMILAR
            ),
            None,
        )
        if home is None:
            merged.append((group, [n]))
        else:
            gap, members = merged[home]
            gap.count += group.count
            gap.variants.extend(group.variants)
            members.append(n)
    result = [gap for gap, _ in merged]
    result.sort(key=lambda g: -g.count)
    return result


def report(
    traces: Sequence[Trace],
    *,
    days: int,
    now: float,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """The owner's report of the last `days` UTC days, as JSON-ready data."""
    today = datetime.fromtimestamp(now, UTC).date()
    per_day: dict[str, dict[str, Any]] = {
        (today - timedelta(days=back)).isoformat(): {"questions": 0, "declined": 0, "cost_usd": 0.0}
        for back in range(days - 1, -1, -1)
    }
    decisions = Counter({name: 0 for name in DECISIONS.values()})
    declined: list[str] = []
    declined_unstored = 0
    negative: list[dict[str, Any]] = []
    up = down = 0
    for trace in traces:
        day = datetime.fromtimestamp(trace.created_at, UTC).date().isoformat()
        row = per_day.setdefault(day, {"questions": 0, "declined": 0, "cost_usd": 0.0})
        row["questions"] += 1
        row["cost_usd"] += trace.cost_usd
        decisions[DECISIONS.get(trace.decision, trace.decision)] += 1
        if trace.decision == "declined":
            row["declined"] += 1
            if trace.question is None:
                declined_unstored += 1
            else:
                declined.append(trace.question)
        feedback = trace.feedback
        if feedback is not None and feedback.score > 0:
            up += 1
        elif feedback is not None:
            down += 1
            negative.append(
                {
                    "trace_id": trace.trace_id,
                    "day": day,
                    "question": trace.question,
                    "answer": trace.answer,
                    "decision": trace.decision,
                    "reason": feedback.reason,
                    "comment": feedback.comment,
                    "better_answer": feedback.better_answer,
                }
            )
    for row in per_day.values():
        row["cost_usd"] = round(row["cost_usd"], 6)
    seconds = [trace.seconds for trace in traces]
    total = len(traces)
    return {
        "days": days,
        "since": min(per_day),
        "until": max(per_day),
        "n": total,
        "per_day": [{"day": day} | row for day, row in sorted(per_day.items())],
        "decisions": dict(decisions),
        "missing": [vars(gap) for gap in gaps(declined, embedder)],
        "declined_without_question": declined_unstored,
        "feedback": {"up": up, "down": down},
        "negative": negative,
        "cache_hit_rate": round(sum(t.cached for t in traces) / total, 4) if total else None,
        "cost_usd": round(sum(t.cost_usd for t in traces), 6),
        # Prompt tokens sent to the model, and those it computed (the rest came from
        # its cache of prompt beginnings: the local model's saved system prompts).
        "tokens_in": sum(t.tokens_in for t in traces),
        "tokens_evaluated": sum(t.tokens_evaluated for t in traces),
        "p50_s": percentile(seconds, 50),
        "p95_s": percentile(seconds, 95),
    }


def _cell(text: str | None, limit: int = 120) -> str:
    if text is None:
        return "(not stored)"
    flat = " ".join(text.split()).replace("|", "\\|")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def to_markdown(data: dict[str, Any]) -> str:
    lines = [
        f"# candor insights, {data['since']} to {data['until']} (UTC)",
        "",
        f"{data['n']} requests; cache hit rate {_rate(data['cache_hit_rate'])}; "
        f"cost ${data['cost_usd']:.4f}; prompt tokens {data['tokens_in']:,} sent, "
        f"{data['tokens_evaluated']:,} evaluated; seconds p50 {_s(data['p50_s'])}, "
        f"p95 {_s(data['p95_s'])}; feedback {data['feedback']['up']} up, "
        f"{data['feedback']['down']} down.",
        "",
        "## Per day",
        "",
        "| day | questions | declined | cost USD |",
        "|---|---|---|---|",
        *(
            f"| {row['day']} | {row['questions']} | {row['declined']} | {row['cost_usd']:.4f} |"
            for row in data["per_day"]
        ),
        "",
        "## Decisions",
        "",
        "| decision | n |",
        "|---|---|",
        *(f"| {name} | {n} |" for name, n in data["decisions"].items()),
        "",
        "## What the documents are missing",
        "",
        "Declined questions, grouped when they mean the same, most frequent first.",
        "",
    ]
    if data["missing"]:
        lines += ["| asked | example | also asked as |", "|---|---|---|"]
        for gap in data["missing"]:
            others = [v for v in gap["variants"] if v != normalise(gap["example"])]
            lines.append(
                f"| {gap['count']} | {_cell(gap['example'])} | {_cell('; '.join(others)) or '-'} |"
            )
    else:
        lines.append("No declined questions.")
    if data["declined_without_question"]:
        lines += [
            "",
            f"{data['declined_without_question']} declined questions were not stored "
            "(CANDOR_STORE_QUESTIONS=false).",
        ]
    if "handoffs" in data:
        handoffs = data["handoffs"]
        lines += [
            "",
            "## Hand-offs",
            "",
            f"{handoffs['n']} visitors asked for a person, {handoffs['after_decline']} of them "
            f"after candor declined; {handoffs['delivered']} delivered, {handoffs['pending']} "
            f"pending, {handoffs['failed']} failed (`candor handoffs list`).",
        ]
    lines += ["", "## Answers rated down", ""]
    if data["negative"]:
        lines += ["| day | question | answer | reason | comment |", "|---|---|---|---|---|"]
        for row in data["negative"]:
            lines.append(
                f"| {row['day']} | {_cell(row['question'])} | {_cell(row['answer'], 80)} | "
                f"{row['reason'] or '-'} | {_cell(row['comment'] or '-')} |"
            )
    else:
        lines.append("None.")
    return "\n".join(lines) + "\n"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def write_chart(data: dict[str, Any], path: Path) -> None:
    """Questions and declines per day, as a bar chart (matplotlib, imported only here)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    days = [row["day"] for row in data["per_day"]]
    rows = data["per_day"]
    x = np.arange(len(days))
    figure, axes = plt.subplots(figsize=(max(6.0, 0.6 * len(days) + 2), 3.5))
    # With the owner's loop (candor.owner_report): curated answers served beside them,
    # and the gaps opened and closed each day as marks above.
    loop = "curated" in rows[0] if rows else False
    width = 0.27 if loop else 0.4
    axes.bar(x - width, [r["questions"] for r in rows], width, label="questions")
    axes.bar(x, [r["declined"] for r in rows], width, label="declined")
    if loop:
        axes.bar(x + width, [r["curated"] for r in rows], width, label="curated answers")
        top = max([r["questions"] for r in rows] + [1]) * 1.1
        for key, marker, label in (
            ("gaps_opened", "v", "gap opened"),
            ("gaps_closed", "^", "gap closed"),
        ):
            days_with = [i for i, r in enumerate(rows) if r[key]]
            if days_with:
                axes.scatter(days_with, [top] * len(days_with), marker=marker, label=label)
    axes.set_xticks(x, [day[5:] for day in days], rotation=45, ha="right")
    axes.set_ylabel("requests")
    axes.set_title(f"candor: questions and declines per day ({days[0]} to {days[-1]})")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def handoff_counts(handoffs: Sequence[Handoff]) -> dict[str, int]:
    """How many visitors asked for a person, how many after a decline, and where each is."""
    from candor.handoffs.transcript import Content

    states = Counter(h.state for h in handoffs)
    return {
        "n": len(handoffs),
        "after_decline": sum(Content.from_json(h.body).after_decline for h in handoffs),
        "delivered": states["delivered"],
        "pending": states["pending"],
        "failed": states["failed"],
    }
