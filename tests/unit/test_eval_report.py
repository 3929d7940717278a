"""report.json, report.md and report.png from a hand-made report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from candor.evaluation.agent_metrics import (
    AgentRecord,
    cost_ratios,
    summarise,
    summarise_by_kind,
)
from candor.evaluation.report import comparisons, reference_lines, to_markdown, write_report

pytestmark = pytest.mark.unit


def row(r1: float, r5: float, mrr: float) -> dict[str, Any]:
    return {
        "n": 10,
        "recall@1": r1,
        "recall@5": r5,
        "recall@10": 1.0,
        "mrr": mrr,
        "answer_context": 0.5,
        "answer_context_n": 8,
        "answer_context_k": 3,
        "p50_ms": 3.0,
        "p95_ms": 9.5,
    }


def report(*, with_agent: bool) -> dict[str, Any]:
    data: dict[str, Any] = {
        "meta": {
            "date": "2026-11-29T19:00:00+00:00",
            "questions_file": "q.jsonl",
            "questions": 3,
            "documents": 2,
            "chunks": 7,
            "corpus": "docs",
            "embedder": "hashing",
            "index": "eval-0123",
        },
        "retrieval": {
            "dense": row(0.6, 0.8, 0.7),
            "keyword": row(0.5, 0.9, 0.65),
            "hybrid": row(0.5, 0.9, 0.68),
            "hybrid_rerank": row(0.7, 0.9, 0.75),
        },
    }
    if with_agent:
        records = [
            AgentRecord("g", "greeting", 1.0, decision="smalltalk", model_calls=2),
            AgentRecord("u", "unanswerable", 2.0, error="ModelError: boom"),
        ]
        data["agent"] = summarise(records) | {
            "by_kind": summarise_by_kind(records),
            "failure_reasons": [{"id": "u", "kind": "unanswerable", "reason": "ModelError: boom"}],
            "config": {"chat_model": "tiny.gguf", "strategy": "hybrid"},
            "cost_at_api_prices": {
                "model": "gpt-4o-mini",
                "usd_per_question": 0.00025,
                "usd_per_1000_questions": 0.25,
                "n": 1,
            },
        }
    return data


def test_comparisons_say_when_a_component_does_not_beat_the_simpler_one() -> None:
    notes = comparisons(report(with_agent=False)["retrieval"])
    assert "hybrid does NOT beat dense on recall@1 (0.500 vs 0.600)" in notes
    assert "hybrid beats dense on recall@5 (0.900 vs 0.800)" in notes
    assert "hybrid ties keyword on recall@5 (0.900 vs 0.900)" in notes
    assert "hybrid_rerank beats hybrid on mrr (0.750 vs 0.680)" in notes


def test_comparisons_say_whether_candors_hybrid_beats_the_plain_reference() -> None:
    retrieval = report(with_agent=False)["retrieval"] | {"plain": row(0.55, 0.95, 0.6)}
    notes = comparisons(retrieval)
    assert "hybrid does NOT beat plain on recall@1 (0.500 vs 0.550)" in notes
    assert "hybrid does NOT beat plain on recall@5 (0.900 vs 0.950)" in notes
    assert "hybrid beats plain on mrr (0.680 vs 0.600)" in notes


def test_markdown_has_a_row_per_strategy_with_n_and_the_agent_tables() -> None:
    text = to_markdown(report(with_agent=True))
    assert (
        "| hybrid_rerank | 10 | 0.700 | 0.900 | 1.000 | 0.750 | 0.500 (top 3, n=8) "
        "| 3.000 | 9.500 |"
    ) in text
    assert "| Routing accuracy | 1.000 | 1 |" in text
    assert "| unanswerable | 1 | 1 | – | – | – | – |" in text
    assert "- u (unanswerable): ModelError: boom" in text
    assert "`gpt-4o-mini` prices these tokens would cost $0.000250 per question" in text


def answered(id: str, seconds: float, sent: int, evaluated: int, calls: int) -> AgentRecord:
    return AgentRecord(
        id,
        "factual",
        seconds,
        decision="answered",
        model_calls=calls,
        tokens_in=sent,
        tokens_evaluated=evaluated,
    )


def test_the_agent_table_says_what_an_answered_question_costs_with_n() -> None:
    data = report(with_agent=False)
    records = [answered("a", 20.0, 1200, 300, 3), answered("b", 10.0, 800, 100, 3)]
    data["agent"] = summarise(records) | {"by_kind": summarise_by_kind(records)}

    text = to_markdown(data)

    assert "| Prompt tokens sent per answered question | 1000 | 2 |" in text
    assert "| Prompt tokens evaluated per answered question | 200 | 2 |" in text
    assert "| Seconds per answered question, mean | 15.000 | 2 |" in text


def test_the_plain_rag_table_compares_prompt_tokens_sent_and_evaluated() -> None:
    graph = [answered("a", 20.0, 1200, 300, 3).to_json()]
    reference = [answered("a", 10.0, 600, 500, 1).to_json()]
    plain_rag = summarise([]) | {"graph_ratio": cost_ratios(graph, reference)}

    lines = reference_lines(summarise([]), plain_rag)

    assert "| prompt tokens sent per answered question | 1200 | 1 | 600 | 1 |" in lines
    assert "| prompt tokens evaluated per answered question | 300 | 1 | 500 | 1 |" in lines
    assert lines[-1] == (
        "Per answered question, the graph costs plain_rag's times: seconds 2.000x, "
        "prompt tokens sent 2.000x, prompt tokens evaluated 0.600x, model calls 3.000x."
    )


def test_write_report_writes_the_three_files(tmp_path: Path) -> None:
    data = report(with_agent=True)
    paths = write_report(data, tmp_path / "out")

    assert [p.name for p in paths] == ["report.json", "report.md", "report.png"]
    saved = json.loads(paths[0].read_text())
    assert saved["retrieval"]["hybrid"]["recall@5"] == 0.9
    assert saved["agent"]["failures"] == 1
    assert saved["agent"]["by_kind"]["greeting"]["n"] == 1
    assert any("does NOT beat" in note for note in saved["notes"])
    assert paths[2].read_bytes().startswith(b"\x89PNG")


def test_a_retrieval_only_report_has_no_agent_section(tmp_path: Path) -> None:
    paths = write_report(report(with_agent=False), tmp_path)
    assert "agent" not in json.loads(paths[0].read_text())
    assert "## Agent" not in paths[1].read_text()
    assert paths[2].stat().st_size > 0
