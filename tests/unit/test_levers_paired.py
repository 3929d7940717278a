"""The levers' rows carry their paired difference from `default`, and two sets' rows
pool into one verdict per lever."""

from __future__ import annotations

from typing import Any

import pytest

from candor.evaluation.levers import pool, row_line, versus_default

pytestmark = pytest.mark.unit


def lever_row(lever: str, found: int, prefix: str, n: int = 28) -> dict[str, Any]:
    """A row as `measure` writes it: the first `found` questions ranked first, the rest missed."""
    ranks = {f"{prefix}{i}": 1 if i < found else None for i in range(n)}
    return {
        "lever": lever,
        "strategy": "hybrid",
        "n": n,
        "recall@1": found / n,
        "recall@5": found / n,
        "recall@10": found / n,
        "mrr": found / n,
        "answer_context": found / n,
        "ranks": ranks,
        "context": {q: rank is not None for q, rank in ranks.items()},
    }


def test_a_lever_that_finds_ten_more_pages_helps_beyond_its_interval() -> None:
    found = versus_default(lever_row("default", 10, "q"), lever_row("rrf k 20", 20, "q"))
    assert set(found) == {"Recall@1", "Recall@5", "MRR", "answer context"}
    recall = found["Recall@1"]
    assert recall["n"] == 28 and recall["better"] == 10 and recall["worse"] == 0
    assert recall["low"] > 0 and recall["verdict"] == "helps"


def test_a_lever_row_prints_its_interval_against_default() -> None:
    row = lever_row("cap off", 11, "q")
    row["paired"] = versus_default(lever_row("default", 10, "q"), row)
    line = row_line(row)
    assert line.startswith("| cap off | hybrid | 28 | 0.393 |")
    assert "+0.036 [+0.000, +0.107]" in line  # one question more: within noise


def test_pooled_levers_are_kept_only_when_they_lose_on_neither_set() -> None:
    runs = {
        "dev": [lever_row("default", 0, "d", 150), lever_row("score", 60, "d", 150)],
        "validation": [lever_row("default", 12, "v"), lever_row("score", 2, "v")],
    }
    text = "\n".join(pool(runs))
    assert "### score (hybrid) against default" in text
    recall = next(line for line in text.splitlines() if line.startswith("| Recall@1 |"))
    assert recall.endswith("| loses on validation |")
