"""The suite's tables from `candor eval --context-chars` reports (`make eval-budgets`).

One row per set: n, Recall@1, Recall@5 and MRR of candor's hybrid retrieval with
`plain` beside each (and hybrid − plain paired per question, with its 95% interval),
answer context at the local and the OpenAI default budgets with `plain` beside each,
and the pool ceiling; then the budget sweep of every set, and the sets pooled.

    python scripts/suite_table.py eval-out/budgets-*/ > suite.md
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from candor.evaluation import paired
from candor.evaluation.question_figures import MRR, RECALL_1, RECALL_5, strategy_values


def _load(folder: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((folder / "report.json").read_text())
    return report


def _name(report: Mapping[str, Any]) -> str:
    return Path(report["meta"]["questions_file"]).name.removesuffix("-questions.jsonl")


def _interval(found: paired.Paired) -> str:
    if found.difference is None or found.low is None or found.high is None:
        return "–"
    return f"{found.difference:+.3f} [{found.low:+.3f}, {found.high:+.3f}]"


def _default_row(report: Mapping[str, Any], backend: str) -> Mapping[str, Any]:
    for row in report["context_budgets"]["budgets"]:
        if backend in (row["default_for"] or "").split(", "):
            return dict(row)
    raise KeyError(backend)


def retrieval_table(reports: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = [
        "| set | n | Recall@1 hybrid / plain | Recall@5 hybrid / plain | MRR hybrid / plain "
        "| R@1 hybrid − plain [95%] | R@5 hybrid − plain [95%] | MRR hybrid − plain [95%] "
        "| answer context, local budget / plain | answer context, OpenAI budget / plain "
        "| pool ceiling / plain |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for report in reports:
        hybrid, reference = report["retrieval"]["hybrid"], report["retrieval"]["plain"]
        ranks = report["retrieval_ranks"]
        after, before = strategy_values(ranks["hybrid"]), strategy_values(ranks["plain"])
        intervals = [
            _interval(paired.paired(before[figure], after[figure], higher_is_better=True))
            for figure in (RECALL_1, RECALL_5, MRR)
        ]
        local, hosted = _default_row(report, "local"), _default_row(report, "openai")
        section = report["context_budgets"]
        cells = [
            _name(report),
            str(hybrid["n"]),
            *(f"{hybrid[k]:.3f} / {reference[k]:.3f}" for k in ("recall@1", "recall@5", "mrr")),
            *intervals,
            f"{local['answer_context']:.3f} / {local['plain_answer_context']:.3f}",
            f"{hosted['answer_context']:.3f} / {hosted['plain_answer_context']:.3f}",
            f"{section['ceiling']:.3f} / {section['plain_ceiling']:.3f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    pooled = []
    for figure in (RECALL_1, RECALL_5, MRR):
        plain_values = [strategy_values(r["retrieval_ranks"]["plain"])[figure] for r in reports]
        hybrid_values = [strategy_values(r["retrieval_ranks"]["hybrid"])[figure] for r in reports]
        pooled.append(_interval(paired.pooled(plain_values, hybrid_values, higher_is_better=True)))
    n = sum(report["retrieval"]["hybrid"]["n"] for report in reports)
    lines.append(f"| pooled | {n} | | | | " + " | ".join(pooled) + " | | | |")
    return lines


def sweep_table(reports: Sequence[Mapping[str, Any]]) -> list[str]:
    names = [_name(report) for report in reports]
    lines = [
        "| characters | excerpts | excerpt at most | shown | "
        + " | ".join(names)
        + " | pooled | share of ceiling, pooled | prompt tokens, mean | $ per question |",
        "|---|---|---|---|" + "---|" * len(names) + "---|---|---|---|",
    ]
    keyed = [
        {
            (r["chars"], r["excerpts"], r["excerpt_chars"], r["shown"]): r
            for r in report["context_budgets"]["budgets"]
        }
        for report in reports
    ]
    shapes = sorted(set.intersection(*(set(k) for k in keyed))) if keyed else []
    ceiling_hits = sum(
        round(report["context_budgets"]["ceiling"] * report["context_budgets"]["ceiling_n"])
        for report in reports
    )
    for shape in shapes:
        rows = [rows_of[shape] for rows_of in keyed]
        n = sum(row["n"] for row in rows)
        hits = sum(round(row["answer_context"] * row["n"]) for row in rows)
        tokens = sum(row["prompt_tokens"] * row["n"] for row in rows) / n
        usd = sum(row["usd_per_question"] * row["n"] for row in rows) / n
        cells = [f"{shape[0]:,}", str(shape[1]), str(shape[2]), shape[3]]
        cells += [f"{row['answer_context']:.3f}" for row in rows]
        cells += [f"{hits / n:.3f}", f"{hits / ceiling_hits:.3f}", f"{tokens:,.0f}", f"{usd:.6f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def shape_table(reports: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per swept budget, whole passages against packed sentences, paired and pooled."""
    lines = [
        "| characters | excerpts | excerpt at most | whole − sentences, pooled [95%] "
        "| better | worse |",
        "|---|---|---|---|---|---|",
    ]
    keys = [set(report["context_questions"]["candor"]) for report in reports]
    common = set.intersection(*keys) if keys else set()
    for key in sorted(k for k in common if k.endswith("-whole")):
        twin = key.removesuffix("-whole") + "-sentences"
        if twin not in common:
            continue
        before = [report["context_questions"]["candor"][twin] for report in reports]
        after = [report["context_questions"]["candor"][key] for report in reports]
        found = paired.pooled(before, after, higher_is_better=True)
        chars, excerpts, excerpt_chars = key.removesuffix("-whole").split("x")
        cells = [f"{int(chars):,}", excerpts, excerpt_chars, _interval(found)]
        lines.append("| " + " | ".join([*cells, str(found.better), str(found.worse)]) + " |")
    return lines


def main(argv: Sequence[str]) -> int:
    reports = [_load(Path(folder)) for folder in argv[1:]]
    if not reports:
        print(__doc__, file=sys.stderr)
        return 2
    print("\n".join(["## Retrieval and answer context", "", *retrieval_table(reports)]))
    print("\n".join(["", "## Answer context by budget", "", *sweep_table(reports)]))
    print("\n".join(["", "## Whole passages against packed sentences", "", *shape_table(reports)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
