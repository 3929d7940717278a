"""A cheap `candor eval --retrieval-only` on a slice of a real corpus, for the slow
suite's regression guards: the pages a few questions expect plus a spread of
distractor pages, indexed into .candor/test-eval so that the second run reuses it."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest

from candor.cli import main
from tests.conftest import clear_candor_env

ROOT = Path(__file__).resolve().parents[2]


def corpus_from_env(variable: str, page: str, *, what: str, hint: str) -> Path:
    """The corpus folder the environment names (relative to the repository), skipping
    the test when it is unset and failing it when the folder lacks `page`."""
    configured = os.environ.get(variable)
    if not configured:
        pytest.skip(f"{variable} is not set; `make test` sets it{hint}")
    folder = Path(configured)
    if not folder.is_absolute():
        folder = ROOT / folder
    if not (folder / page).is_file():
        pytest.fail(f"{variable}={configured} holds no {what}")
    return folder


def smoke_report(
    corpus: Path,
    questions_file: Path,
    ids: Collection[str],
    *,
    strategies: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    left_out: Collection[str] = (),
    distractors: int = 20,
) -> dict[str, Any]:
    """The report of a retrieval-only run of the questions `ids` on their expected
    pages (less `left_out`) and `distractors` others (every n-th of the rest, by name)."""
    rows = [json.loads(line) for line in questions_file.read_text().splitlines() if line.strip()]
    rows = [row for row in rows if row["id"] in ids]
    assert len(rows) == len(ids)
    for row in rows:
        row["expected_sources"] = [s for s in row["expected_sources"] if s not in left_out]
    needed = {source for row in rows for source in row["expected_sources"]}
    others = sorted(p.name for p in corpus.glob("*.html") if p.name not in needed | set(left_out))
    chosen = others[:: max(1, len(others) // distractors)][:distractors]
    pages = tmp_path / "pages"
    pages.mkdir()
    for name in sorted(needed) + chosen:
        shutil.copy(corpus / name, pages / name)
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(row) + "\n" for row in rows))

    clear_candor_env(monkeypatch)
    monkeypatch.setenv("CANDOR_DATA_DIR", str(ROOT / ".candor" / "test-eval"))
    out = tmp_path / "out"
    argv = ["eval", "--corpus", str(pages), "--questions", str(questions), "--out", str(out)]
    code = main([*argv, "--retrieval-only", "--strategies", strategies])
    assert code == 0, f"candor eval exited {code}"
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    return report
