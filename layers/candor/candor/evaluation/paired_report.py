"""Paired comparisons of figures over one or more sets, and their markdown tables.

Two kinds: two runs of the same questions (`candor compare --before ... --after`),
and two arms of one run, candor against its references (hybrid against `plain` on
retrieval, the agent against `plain_rag` when the report has it). Both pair each
question's values (candor.evaluation.question_figures) and decide by
candor.evaluation.paired's rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from candor.evaluation import paired
from candor.evaluation.question_figures import Figure, Values, agent_values, retrieval_values

FigureValues = Mapping[Figure, Values]
# Per set name: the values before (or of the reference) and after (or of candor).
Arms = Mapping[str, tuple[FigureValues, FigureValues]]

CANDOR_STRATEGY = "hybrid"
REFERENCE_STRATEGY = "plain"
REFERENCE_AGENT = "plain_rag_questions"


@dataclass(frozen=True, slots=True)
class FigureComparison:
    figure: Figure
    per_set: dict[str, paired.Paired]
    pool: paired.Paired
    verdict: paired.Verdict

    def to_json(self) -> dict[str, Any]:
        return {
            "figure": self.figure.name,
            "higher_is_better": self.figure.higher_is_better,
            "sets": {name: result.to_json() for name, result in self.per_set.items()},
            "pooled": self.pool.to_json(),
            "kept": self.verdict.kept,
            "verdict": self.verdict.reason,
        }


def compare(arms: Arms) -> list[FigureComparison]:
    """Each figure both arms of some set hold, paired per set, pooled and judged."""
    figures = list(
        dict.fromkeys(
            figure for before, after in arms.values() for figure in before if figure in after
        )
    )
    comparisons: list[FigureComparison] = []
    for figure in figures:
        held = {
            name: pair for name, pair in arms.items() if figure in pair[0] and figure in pair[1]
        }
        better = figure.higher_is_better
        per_set = {
            name: paired.paired(before[figure], after[figure], higher_is_better=better)
            for name, (before, after) in held.items()
        }
        pool = paired.pooled(
            [before[figure] for before, _ in held.values()],
            [after[figure] for _, after in held.values()],
            higher_is_better=better,
        )
        comparisons.append(
            FigureComparison(
                figure, per_set, pool, paired.verdict(per_set, pool, higher_is_better=better)
            )
        )
    return comparisons


def set_name(report: Mapping[str, Any]) -> str:
    """A run's set, named by its questions file (git-doc-questions.jsonl: git-doc)."""
    return PurePath(str(report["meta"]["questions_file"])).stem.removesuffix("-questions")


def _prefixed(values: FigureValues, prefix: str) -> dict[Figure, Values]:
    return {Figure(f"{prefix} {f.name}", f.higher_is_better): v for f, v in values.items()}


def run_values(report: Mapping[str, Any]) -> dict[Figure, Values]:
    """The figures two runs of candor are compared on: its agent, then its hybrid retrieval."""
    values: dict[Figure, Values] = {}
    if "agent_questions" in report:
        values |= agent_values(report["agent_questions"])
    values |= _prefixed(retrieval_values(report, CANDOR_STRATEGY), CANDOR_STRATEGY)
    return values


@dataclass(frozen=True, slots=True)
class Arm:
    """candor against one reference: the names the table's columns use, and its rows."""

    title: str
    reference: str  # the "before" of each pair
    candor: str  # the "after"
    comparisons: list[FigureComparison]

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "before": self.reference,
            "after": self.candor,
            "figures": [comparison.to_json() for comparison in self.comparisons],
        }


def against_references(reports: Mapping[str, Mapping[str, Any]]) -> list[Arm]:
    """candor against its references within each run, the runs' sets pooled.

    A reference no report holds is left out.
    """
    retrieval: dict[str, tuple[FigureValues, FigureValues]] = {}
    agent: dict[str, tuple[FigureValues, FigureValues]] = {}
    for name, report in reports.items():
        reference = retrieval_values(report, REFERENCE_STRATEGY)
        candor = retrieval_values(report, CANDOR_STRATEGY)
        if reference and candor:
            retrieval[name] = (reference, candor)
        if REFERENCE_AGENT in report and "agent_questions" in report:
            # A figure the reference never measures (it screens nothing) has no pair.
            measured = {f: v for f, v in agent_values(report[REFERENCE_AGENT]).items() if v}
            agent[name] = (measured, agent_values(report["agent_questions"]))
    arms: list[Arm] = []
    if retrieval:
        title = f"{CANDOR_STRATEGY} against {REFERENCE_STRATEGY} (retrieval)"
        arms.append(Arm(title, REFERENCE_STRATEGY, CANDOR_STRATEGY, compare(retrieval)))
    if agent:
        title = "the agent against plain_rag (one answer call)"
        arms.append(Arm(title, "plain_rag", "candor", compare(agent)))
    return arms


def _level(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"


def _signed(values: Sequence[float]) -> list[str]:
    """Signed, with the decimals the largest of them needs (a rate: 3; tokens: none)."""
    largest = max(abs(v) for v in values)
    decimals = 3 if largest < 10 else (1 if largest < 1000 else 0)
    return [f"{v:+.{decimals}f}" for v in values]


def _levels(result: paired.Paired) -> str:
    return f"{_level(result.before)} → {_level(result.after)} (n={result.n})"


def _difference(result: paired.Paired) -> str:
    if result.difference is None or result.low is None or result.high is None:
        return "–"
    if result.better == result.worse == 0:
        return "0, no question moved"
    mean, low, high = _signed([result.difference, result.low, result.high])
    return f"{mean} [{low}, {high}], {result.better} better, {result.worse} worse"


def table(
    comparisons: Sequence[FigureComparison],
    sets: Sequence[str],
    *,
    before: str = "before",
    after: str = "after",
) -> list[str]:
    """One row per figure: each set's levels and paired difference, the pool, the verdict."""
    pooled_column = len(sets) > 1
    change = f"{after} − {before} [95%]"
    header = ["figure", "better"]
    for name in sets:
        header += [f"{name}: {before} → {after}", f"{name}: {change}"]
    if pooled_column:
        header.append(f"pooled: {change}")
    header.append("verdict")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in comparisons:
        cells = [row.figure.name, "higher" if row.figure.higher_is_better else "lower"]
        for name in sets:
            result = row.per_set.get(name)
            cells += ["–", "–"] if result is None else [_levels(result), _difference(result)]
        if pooled_column:
            cells.append(f"{_difference(row.pool)} (n={row.pool.n})")
        cells.append(f"**{row.verdict.reason}**" if row.verdict.kept else row.verdict.reason)
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def arm_table(arm: Arm, sets: Sequence[str]) -> list[str]:
    """An arm's table over the sets that hold it."""
    shown = [name for name in sets if any(name in c.per_set for c in arm.comparisons)]
    return table(arm.comparisons, shown, before=arm.reference, after=arm.candor)


RULE = (
    "Each figure is paired question by question over the questions both arms measured; "
    "the interval is a 95% percentile bootstrap of the mean difference (10,000 resamples "
    "of the questions, a fixed seed), pooled over the sets as the question-weighted mean "
    "with each set resampled within itself. Verdicts: *helps* (a change is kept) when the "
    "pooled interval lies wholly on the better side of 0 and no set's interval lies wholly "
    "on the losing side; *loses on* a set whose interval does (not kept, whatever the pool "
    "says); *loses* when the pooled interval lies wholly on the losing side; *within noise* "
    "when it holds 0; *no difference* when no question moved."
)
