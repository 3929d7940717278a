"""report.json, report.md and report.png from the report dict of one run."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from candor.evaluation import budgets, gate_metrics, paired_report
from candor.retrieval import STRATEGIES

AGENT_ROWS = (
    ("routing_accuracy", "Routing accuracy"),
    ("decline_precision", "Decline precision"),
    ("decline_recall", "Decline recall (unanswerable declined)"),
    ("answerable_declined", "Answerable declined"),
    ("answer_correct", "Answer has all keywords"),
    ("citation_accuracy", "Citation accuracy (cites an expected page)"),
    ("citation_validity", "Citation validity (cites a retrieved passage)"),
    ("rewrite_rate", "Rewrite rate"),
    ("gate_declined", "Declined by the grounding gate (a name no document holds)"),
    ("support_trimmed", "Answers with an unsupported specific (trimmed or declined)"),
    ("unsupported_in_answers", "Unsupported specifics left in answers"),
    ("answers_naming_sources", "Answers that name a passage, a tag or an instruction"),
    ("model_calls_per_question", "Model calls per question"),
    ("model_calls_per_answered", "Model calls per answered question"),
    ("tokens_in_per_answered", "Prompt tokens sent per answered question"),
    ("tokens_evaluated_per_answered", "Prompt tokens evaluated per answered question"),
    ("seconds_per_answered", "Seconds per answered question, mean"),
    ("first_token_p50_s", "Seconds to the first token per answered question, p50 (streamed)"),
    ("first_token_p90_s", "Seconds to the first token per answered question, p90 (streamed)"),
    ("done_p50_s", "Seconds to done per answered question, p50 (streamed)"),
    ("done_p90_s", "Seconds to done per answered question, p90 (streamed)"),
    ("screened_without_model", "Messages screened without the model (classifier or cache)"),
    ("tokens_per_question", "Tokens per question"),
    ("cost_per_question_usd", "Cost per question (USD)"),
    ("p50_s", "Seconds per question, p50"),
    ("p95_s", "Seconds per question, p95"),
)
KIND_COLUMNS = ("routing_accuracy", "answer_correct", "citation_accuracy", "p50_s")


def fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def _context(row: Mapping[str, Any]) -> str:
    if row.get("answer_context") is None:
        return "–"
    return (
        f"{row['answer_context']:.3f} (top {row['answer_context_k']}, n={row['answer_context_n']})"
    )


def _settings_line(meta: Mapping[str, Any]) -> str:
    keys = (
        "fusion",
        "rrf_k",
        "keyword_weight",
        "max_per_source",
        "widen_passages",
        "passage_chars",
        "chunk_chars",
        "chunk_overlap",
    )
    shown = ", ".join(f"{key} {meta[key]}" for key in keys if key in meta)
    return f"candor's settings: {shown}." if shown else ""


def comparisons(retrieval: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Whether each component beats the simpler strategy, in words."""
    notes: list[str] = []

    def versus(name: str, baseline: str) -> None:
        if name not in retrieval or baseline not in retrieval:
            return
        for metric in ("recall@1", "recall@5", "mrr"):
            a, b = retrieval[name][metric], retrieval[baseline][metric]
            if a is None or b is None:
                continue
            verdict = "beats" if a > b else ("ties" if a == b else "does NOT beat")
            notes.append(f"{name} {verdict} {baseline} on {metric} ({a:.3f} vs {b:.3f})")

    versus("hybrid", "dense")
    versus("hybrid", "keyword")
    versus("hybrid", "plain")
    versus("hybrid_rerank", "hybrid")
    return notes


def to_markdown(report: Mapping[str, Any]) -> str:
    meta = report["meta"]
    lines = [
        "# candor eval",
        "",
        f"{meta['date']}: {meta['questions']} questions from `{meta['questions_file']}` over "
        f"{meta['documents']} documents ({meta['chunks']} chunks) in `{meta['corpus']}`; "
        f"embedder `{meta['embedder']}`, index `{meta['index']}`.",
        "",
        "## Retrieval",
        "",
        "Document level: a hit is a retrieved chunk from an expected page; k counts chunks; "
        "a multi_hop question counts only when all its pages are in the top k.",
        "",
        "Answer context: the share of questions whose passages, as the model is shown "
        "them, contain every expected keyword; the ceiling of answer correctness.",
        "",
        "plain, plain_dense: the reference a user could build in an afternoon, on the same "
        "documents: fixed 800/100-character chunks (LangChain's RecursiveCharacterTextSplitter), "
        "the text alone embedded by the same model, exact dense search and FTS5 fused by "
        "RRF (k = 60), no per-page cap"
        + (f" ({meta['plain_chunks']} chunks)." if "plain_chunks" in meta else ".")
        + " plain_dense: its dense search alone.",
        "",
        _settings_line(meta),
        "",
        "| strategy | n | Recall@1 | Recall@5 | Recall@10 | MRR | answer context | "
        "p50 ms | p95 ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in report["retrieval"].items():
        cells = [row[k] for k in ("n", "recall@1", "recall@5", "recall@10", "mrr")]
        cells += [_context(row), row["p50_ms"], row["p95_ms"]]
        lines.append(f"| {name} | " + " | ".join(fmt(c) for c in cells) + " |")
    notes = comparisons(report["retrieval"])
    if notes:
        lines += ["", *(f"- {note}" for note in notes)]
    lines += budgets.markdown(report.get("context_budgets"))
    if report.get("gate") is not None:
        lines += gate_metrics.markdown(report["gate"])
    agent = report.get("agent")
    if agent is not None:
        config = agent.get("config", {})
        lines += [
            "",
            "## Agent",
            "",
            f"{agent['n']} questions through the full graph "
            f"(chat model `{config.get('chat_model', '?')}`, retrieval "
            f"`{config.get('strategy', '?')}`); {agent['failures']} failed.",
            "",
            "| metric | value | n |",
            "|---|---|---|",
        ]
        samples = agent.get("samples", {})
        for key, label in AGENT_ROWS:
            lines.append(f"| {label} | {fmt(agent.get(key))} | {fmt(samples.get(key))} |")
        api = agent.get("cost_at_api_prices") or {}
        if api.get("usd_per_question") is not None:
            lines += [
                "",
                f"At `{api['model']}` prices these tokens would cost "
                f"${api['usd_per_question']:.6f} per question "
                f"(${api['usd_per_1000_questions']:.2f} per 1,000; n={api['n']}; "
                "counted with the local model's tokenizer, an estimate).",
            ]
        lines += [
            "",
            "### By kind",
            "",
            "| kind | n | failed | routing | answer correct | citation accuracy | p50 s |",
            "|---|---|---|---|---|---|---|",
        ]
        for kind, row in agent.get("by_kind", {}).items():
            cells = [row["n"], row["failures"], *(row[k] for k in KIND_COLUMNS)]
            lines.append(f"| {kind} | " + " | ".join(fmt(c) for c in cells) + " |")
        lines += grading_lines(agent)
        reasons = agent.get("failure_reasons", [])
        if reasons:
            lines += ["", "### Failures", ""]
            lines += [f"- {r['id']} ({r['kind']}): {r['reason']}" for r in reasons]
        lines += reference_lines(agent, report.get("plain_rag"))
        lines += catalogue_lines(agent, report.get("plain_rag"))
    lines += paired_lines(report)
    return "\n".join(lines) + "\n"


def against_references(report: Mapping[str, Any]) -> list[paired_report.Arm]:
    """candor against its references in this run, per question (see paired_report)."""
    return paired_report.against_references({paired_report.set_name(report): report})


def paired_lines(report: Mapping[str, Any]) -> list[str]:
    """candor against its references, paired per question, with 95% intervals."""
    arms = against_references(report)
    if not arms:
        return []
    lines = ["", "## Paired: candor against its references"]
    for arm in arms:
        lines += ["", f"### {arm.title}", ""]
        lines += paired_report.arm_table(arm, [paired_report.set_name(report)])
    return [*lines, "", paired_report.RULE]


# The graph beside the one-call reference, on the questions both answer or decline.
REFERENCE_ROWS = (
    ("answer_correct", "answers with every keyword (answerable)"),
    ("answerable_declined", "answerable declined"),
    ("decline_recall", "unanswerable declined"),
    ("unsupported_in_answers", "answers with an unsupported specific left"),
    ("answers_naming_sources", "answers naming a passage, tag or instruction"),
    ("citation_validity", "citation validity"),
    ("citation_accuracy", "answers citing an expected page"),
)
COST_LABELS = {
    "seconds": "seconds per answered question",
    "tokens_in": "prompt tokens sent per answered question",
    "tokens_evaluated": "prompt tokens evaluated per answered question",
    "model_calls": "model calls per answered question",
}
STREAM_LABELS = {
    "first_token_p50_s": "seconds to the first token per answered question, p50",
    "first_token_p90_s": "seconds to the first token per answered question, p90",
    "done_p50_s": "seconds to done per answered question, p50",
    "done_p90_s": "seconds to done per answered question, p90",
}
STREAM_SHORT = {
    "first_token_p50_s": "first token p50",
    "first_token_p90_s": "first token p90",
    "done_p50_s": "done p50",
    "done_p90_s": "done p90",
}


def reference_lines(agent: Mapping[str, Any], reference: Mapping[str, Any] | None) -> list[str]:
    """The `plain_rag` reference beside the graph (candor.evaluation.plain_rag)."""
    if reference is None:
        return []
    lines = [
        "",
        "### The one-call reference (plain_rag)",
        "",
        "The `plain` retrieval, its top passages at the same character budget, and one "
        "answer call to the same model with a plain prompt that allows declining; its "
        "answers are checked by candor's support check but never trimmed. Graph figures "
        "are on all questions of the kinds both ran (answerable and unanswerable).",
        "",
        "| figure | graph | n | plain_rag | n |",
        "|---|---|---|---|---|",
    ]
    mine = agent.get("samples", {})
    theirs = reference.get("samples", {})
    for key, label in REFERENCE_ROWS:
        lines.append(
            f"| {label} | {fmt(agent.get(key))} | {fmt(mine.get(key))} | "
            f"{fmt(reference.get(key))} | {fmt(theirs.get(key))} |"
        )
    ratios = reference.get("graph_ratio") or {}
    answered = ratios.get("n", {})
    for key, label in COST_LABELS.items():
        row = ratios.get(key)
        if row is None:
            continue
        lines.append(
            f"| {label} | {fmt(row['graph'])} | {fmt(answered.get('graph'))} | "
            f"{fmt(row['reference'])} | {fmt(answered.get('reference'))} |"
        )
    streamed = reference.get("graph_stream_ratio") or {}
    for key, label in STREAM_LABELS.items():
        row = streamed.get(key)
        if row is None:
            continue
        lines.append(
            f"| {label} | {fmt(row['graph'])} | {fmt(row['graph_n'])} | "
            f"{fmt(row['reference'])} | {fmt(row['reference_n'])} |"
        )
    ratio_text = ", ".join(
        f"{COST_LABELS[key].split(' per ')[0]} {fmt(ratios[key]['ratio'])}x"
        for key in COST_LABELS
        if ratios.get(key, {}).get("ratio") is not None
    )
    if ratio_text:
        lines += ["", f"Per answered question, the graph costs plain_rag's times: {ratio_text}."]
    stream_text = ", ".join(
        f"{STREAM_SHORT[key]} {fmt(streamed[key]['ratio'])}x"
        for key in STREAM_LABELS
        if streamed.get(key, {}).get("ratio") is not None
    )
    if stream_text:
        lines += [
            "",
            "Streamed, per answered question, the graph's seconds are plain_rag's times: "
            f"{stream_text}. The graph's text leaves once its cleaner has decided on it "
            "(a sentence after its first 60 characters, or at its end if shorter; a short "
            "line at its line break); plain_rag's as the model streams it.",
        ]
    return lines


CATALOGUE_ROWS = (
    ("routed_to_catalogue", "routed to the catalogue"),
    ("answered_from_catalogue", "answered from the catalogue"),
    ("answered", "answered (not declined)"),
    ("completeness", "completeness: share of the required entries the answer holds"),
    ("list_completeness", "completeness of the list questions"),
    ("complete", "answers holding every required entry"),
    ("answers_with_an_invented_entry", "answers naming as code what no document holds"),
    ("citation_validity", "citation validity"),
    ("citing_an_expected_page", "answers citing an expected page"),
    ("model_calls_per_question", "model calls per question"),
    ("seconds_p50", "seconds per question, p50"),
    ("seconds_p90", "seconds per question, p90"),
)


def catalogue_lines(agent: Mapping[str, Any], reference: Mapping[str, Any] | None) -> list[str]:
    """The questions about the documents themselves (kinds catalogue and list), with
    plain_rag beside them (candor.evaluation.catalogue_metrics)."""
    mine = agent.get("catalogue")
    if mine is None:
        return []
    theirs = (reference or {}).get("catalogue") or {}
    lines = [
        "",
        "### Questions about the documents (catalogue and list)",
        "",
        f"Questions: {mine['n']}, each with the entries a complete answer holds; their "
        "figures are apart from the ones above. Completeness: the share of the entries "
        "the answer holds (case and spaces aside; a declined question holds none). "
        "plain_rag's routing is not applicable: it has one path.",
        "",
        "| figure | graph | n | plain_rag | n |",
        "|---|---|---|---|---|",
    ]
    samples_mine = mine.get("samples", {})
    samples_theirs = theirs.get("samples", {})
    for key, label in CATALOGUE_ROWS:
        sample = key.removesuffix("_p50").removesuffix("_p90")
        own = f"| {label} | {fmt(mine.get(key))} | {fmt(samples_mine.get(sample, mine['n']))} |"
        if key in ("routed_to_catalogue", "answered_from_catalogue") or not theirs:
            lines.append(f"{own} – | – |")
            continue
        lines.append(
            f"{own} {fmt(theirs.get(key))} | {fmt(samples_theirs.get(sample, theirs.get('n')))} |"
        )
    stray = agent.get("other_kinds_answered_from_catalogue") or []
    lines += [
        "",
        "Questions of the other kinds answered from the catalogue: "
        + (", ".join(stray) if stray else "none")
        + ".",
    ]
    return lines


CONTEXT_LABELS = {
    "has_keywords": "passages hold every keyword",
    "lacks_keywords": "passages lack a keyword",
    "unanswerable": "unanswerable question",
}


def grading_lines(agent: Mapping[str, Any]) -> list[str]:
    """The grade against the answer context it judged, per kind (see candor.evaluation.grading)."""
    grading = agent.get("grading")
    if grading is None:
        return []
    lines = [
        "",
        "### Grading",
        "",
        "Every grade of the run, against the passages it judged: do they hold every "
        "expected keyword (the answer context)? Grades the names settled (every name "
        "of the question in the passages the answer reads), those the grounding gate "
        "made and those that had no passages asked no model.",
        "",
        f"- the grade said answerable when the passages held every keyword: "
        f"{fmt(grading['answerable_when_context_has_keywords'])} "
        f"(n={grading['answerable_when_context_has_keywords_n']})",
        f"- the grade said not answerable on unanswerable questions: "
        f"{fmt(grading['not_answerable_on_unanswerable'])} "
        f"(n={grading['not_answerable_on_unanswerable_n']})",
        "",
        "| kind | passages | graded answerable | graded not | names settled | gate declined "
        "| no passages |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, row in agent.get("by_kind", {}).items():
        confusion = row.get("grading", {}).get("confusion")
        if not confusion or not confusion["n"]:
            continue
        cells = confusion["model"] or {"–": {"answerable": 0, "not_answerable": 0, "names": 0}}
        for number, (context, counts) in enumerate(cells.items()):
            extra = (
                [confusion["gate_declined"], confusion["no_passages"]] if number == 0 else ["", ""]
            )
            label = CONTEXT_LABELS.get(context, context)
            answered = [counts["answerable"], counts["not_answerable"], counts.get("names", 0)]
            values = [label, *answered, *extra]
            lines.append(f"| {kind} | " + " | ".join(fmt(v) for v in values) + " |")
    return lines


def write_chart(report: Mapping[str, Any], path: Path) -> None:
    """Recall@5 and MRR per strategy; the agent's rates beside them when it ran."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    retrieval = report["retrieval"]
    agent = report.get("agent")
    panels = 2 if agent is not None else 1
    figure, axes = plt.subplots(1, panels, figsize=(6 * panels, 4), squeeze=False)
    left = axes[0][0]
    names = [s for s in STRATEGIES if s in retrieval] + [
        s for s in retrieval if s not in STRATEGIES
    ]
    width = 0.38
    for offset, metric in ((-width / 2, "recall@5"), (width / 2, "mrr")):
        values = [retrieval[s][metric] or 0.0 for s in names]
        left.bar([i + offset for i in range(len(names))], values, width, label=metric)
    left.set_xticks(range(len(names)), names)
    left.set_ylim(0, 1)
    n = max((retrieval[s]["n"] for s in names), default=0)
    left.set_title(f"Retrieval (n={n})")
    left.legend()
    if agent is not None:
        right = axes[0][1]
        keys = [
            "routing_accuracy",
            "decline_precision",
            "decline_recall",
            "answer_correct",
            "citation_accuracy",
            "citation_validity",
            "rewrite_rate",
        ]
        samples = agent.get("samples", {})
        labels = [f"{k.replace('_', ' ')}\n(n={samples.get(k, 0)})" for k in keys]
        right.barh(labels, [agent.get(k) or 0.0 for k in keys])
        right.set_xlim(0, 1)
        right.invert_yaxis()
        right.set_title(f"Agent (n={agent['n']}, failures={agent['failures']})")
        right.tick_params(axis="y", labelsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_report(report: dict[str, Any], out: Path) -> list[Path]:
    """Write the three files into `out` and return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    report["notes"] = comparisons(report["retrieval"])
    report["paired"] = [arm.to_json() for arm in against_references(report)]
    paths = [out / "report.json", out / "report.md", out / "report.png"]
    paths[0].write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    paths[1].write_text(to_markdown(report))
    write_chart(report, paths[2])
    return paths
