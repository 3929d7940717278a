"""Dev and validation side by side, and two runs of both paired question by question.

The dev set is where prompts, thresholds and settings are chosen; the validation
set, documentation nobody tuned on, says whether those choices carry over. A
figure that holds on dev and falls on validation is fitted to dev.

    candor compare eval-out/dev eval-out/validation --out eval-out/report.md

Whether a change helps is read from two runs on the same questions, before and
after it, the sets matched by position (candor.evaluation.paired decides):

    candor compare --before OLD/dev OLD/validation --after NEW/dev NEW/validation --out F.md
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from candor.evaluation import paired_report
from candor.evaluation.report import fmt

AGENT_FIGURES = (
    ("routing_accuracy", "routing (all questions)"),
    ("decline_recall", "unanswerable declined"),
    ("answerable_declined", "answerable declined"),
    ("answer_correct", "answers with every keyword"),
    ("citation_accuracy", "answers citing an expected page"),
    ("citation_validity", "citations naming a retrieved passage"),
    ("gate_declined", "declined by the grounding gate"),
    ("support_trimmed", "answers with an unsupported specific (trimmed or declined)"),
    ("unsupported_in_answers", "unsupported specifics left in answers"),
    ("answers_naming_sources", "answers naming a passage, tag or instruction"),
    ("rewrite_rate", "questions that needed a rewrite"),
    ("model_calls_per_answered", "model calls per answered question"),
    ("tokens_in_per_answered", "prompt tokens sent per answered question"),
    ("tokens_evaluated_per_answered", "prompt tokens evaluated per answered question"),
    ("seconds_per_answered", "seconds per answered question, mean"),
    ("first_token_p50_s", "seconds to the first token per answered question, p50"),
    ("done_p50_s", "seconds to done per answered question, p50"),
    ("screened_without_model", "messages screened without the model"),
    ("p50_s", "seconds per question, p50"),
)
ROUTED_KINDS = ("greeting", "code_request", "abusive")
# The questions about the documents themselves (candor.evaluation.catalogue_metrics).
CATALOGUE_FIGURES = (
    ("routed_to_catalogue", "routed to the catalogue"),
    ("completeness", "completeness"),
    ("list_completeness", "completeness of the lists"),
    ("answers_with_an_invented_entry", "answers naming what no document holds"),
    ("citation_validity", "citation validity"),
    ("seconds_p50", "seconds per question, p50"),
)
GRADING_FIGURES = (
    (
        "answerable_when_context_has_keywords",
        "grade says answerable when the passages hold every keyword",
    ),
    ("not_answerable_on_unanswerable", "grade says not answerable on unanswerable questions"),
)


def _cell(value: Any, n: Any) -> str:
    return f"{fmt(value)} (n={fmt(n)})"


def _figures(report: Mapping[str, Any]) -> dict[str, str]:
    """One report's cells, by figure label."""
    hybrid: Mapping[str, Any] = report["retrieval"].get("hybrid", {})
    cells = {
        "hybrid Recall@5": _cell(hybrid.get("recall@5"), hybrid.get("n")),
        "hybrid MRR": _cell(hybrid.get("mrr"), hybrid.get("n")),
        "answer context (hybrid)": _cell(
            hybrid.get("answer_context"), hybrid.get("answer_context_n")
        ),
    }
    agent: Mapping[str, Any] | None = report.get("agent")
    if agent is None:
        return cells
    samples = agent.get("samples", {})
    for key, label in AGENT_FIGURES:
        cells[label] = _cell(agent.get(key), samples.get(key))
    for kind in ROUTED_KINDS:
        row = agent.get("by_kind", {}).get(kind)
        if row is not None:
            cells[f"routing: {kind}"] = _cell(
                row.get("routing_accuracy"), row.get("samples", {}).get("routing_accuracy")
            )
    grading = agent.get("grading", {})
    for key, label in GRADING_FIGURES:
        cells[label] = _cell(grading.get(key), grading.get(f"{key}_n"))
    catalogue: Mapping[str, Any] | None = agent.get("catalogue")
    if catalogue is not None:
        counted = catalogue.get("samples", {})
        for key, label in CATALOGUE_FIGURES:
            cells[f"catalogue and list questions: {label}"] = _cell(
                catalogue.get(key), counted.get(key, catalogue.get("n"))
            )
    return cells


def side_by_side(reports: Mapping[str, Mapping[str, Any]]) -> str:
    """A markdown table: one row per figure, one column per named report."""
    names = list(reports)
    figures = {name: _figures(report) for name, report in reports.items()}
    labels = list(dict.fromkeys(label for cells in figures.values() for label in cells))
    lines = [
        "# candor eval: " + " and ".join(names),
        "",
        *(
            f"- {name}: {r['meta']['questions']} questions from `{r['meta']['questions_file']}` "
            f"over `{r['meta']['corpus']}` ({r['meta']['date']})"
            for name, r in reports.items()
        ),
        "",
        "| figure | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for label in labels:
        cells = [figures[name].get(label, "–") for name in names]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    sections = _reference_sections(reports, names)
    if sections:
        lines += [*sections, "", paired_report.RULE]
    return "\n".join(lines) + "\n"


def _reference_sections(
    reports: Mapping[str, Mapping[str, Any]], names: Sequence[str], *, where: str = ""
) -> list[str]:
    """candor against its references in each run, paired per question, the sets pooled."""
    lines: list[str] = []
    for arm in paired_report.against_references(reports):
        lines += ["", f"## Paired: {arm.title}{where}", ""]
        lines += paired_report.arm_table(arm, names)
    return lines


def _set_names(reports: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each pair's name: its questions file's stem, numbered when two pairs share one."""
    stems = [paired_report.set_name(report) for report in reports]
    return [
        stem if stems.count(stem) == 1 else f"{stem} ({number})"
        for number, stem in enumerate(stems, start=1)
    ]


Run = tuple[str, Mapping[str, Any]]  # where a report was read from, and the report


def paired_runs(before: Sequence[Run], after: Sequence[Run]) -> str:
    """Two runs of each set paired per question: the markdown of `compare --before --after`.

    The sets are matched by position: before[i] and after[i] ran the same questions.
    """
    if len(before) != len(after):
        raise ValueError(f"{len(before)} runs before and {len(after)} after: pair them by set")
    names = _set_names([report for _, report in after])
    lines = ["# candor compare: before and after, paired per question", ""]
    for name, (old_place, old), (new_place, new) in zip(names, before, after, strict=True):
        lines.append(
            f"- {name}: before `{old_place}` ({old['meta']['date']}), "
            f"after `{new_place}` ({new['meta']['date']})"
        )
        old_file, new_file = old["meta"]["questions_file"], new["meta"]["questions_file"]
        if Path(old_file).name != Path(new_file).name:
            lines.append(
                f"  - different question files (`{old_file}`, `{new_file}`): "
                "only the questions both hold are paired"
            )
    arms = {
        name: (paired_report.run_values(old), paired_report.run_values(new))
        for name, (_, old), (_, new) in zip(names, before, after, strict=True)
    }
    lines += ["", "## candor's figures", ""]
    lines += paired_report.table(paired_report.compare(arms), names)
    afters = {name: report for name, (_, report) in zip(names, after, strict=True)}
    lines += _reference_sections(afters, names, where=", in the runs after")
    lines += ["", paired_report.RULE]
    return "\n".join(lines) + "\n"


def _read(folders: Sequence[Path]) -> list[Run]:
    return [(str(folder), json.loads((folder / "report.json").read_text())) for folder in folders]


def write_paired(before: Sequence[Path], after: Sequence[Path], out: Path) -> str:
    """Write the paired comparison of the runs' reports to `out` and return it."""
    text = paired_runs(_read(before), _read(after))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return text


def write_side_by_side(folders: Sequence[Path], out: Path) -> None:
    """Read each folder's report.json and write the table to `out`, named by folder."""
    reports = {folder.name: json.loads((folder / "report.json").read_text()) for folder in folders}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(side_by_side(reports))
