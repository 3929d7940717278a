"""The README's example questions, on the bundled docs, with the real local models.

The README promises that `make demo` answers them; this holds it to the promise:
each is answered from the page that holds the answer (or declined), and no answer
carries a passage label or a table fragment.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from candor.deps import Deps
from candor.factory import build_deps
from candor.results import AskResult
from candor.service import ask
from candor.settings import Settings

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def deps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deps]:
    data = tmp_path_factory.mktemp("data")
    done = subprocess.run(
        [sys.executable, "-m", "candor.cli", "ingest", str(DOCS), "--json"],
        env={k: v for k, v in os.environ.items() if not k.startswith("CANDOR_")}
        | {"CANDOR_DATA_DIR": str(data)},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    assert json.loads(done.stdout)["failed"] == 0
    yield build_deps(Settings(data_dir=data, contact="docs@example.com"))


def run(deps: Deps, question: str) -> AskResult:
    return asyncio.run(ask(deps, question))


def assert_only_sentences(result: AskResult) -> None:
    for line in result.answer.splitlines():
        assert not line.lstrip().startswith("|"), result.answer
        assert " | " not in line, result.answer
    for citation in result.citations:
        assert f"{citation.title} - " not in result.answer, result.answer


def test_the_deploy_question_is_answered_from_the_deploying_page(deps: Deps) -> None:
    result = run(deps, "How do I deploy candor to AWS?")
    assert result.decision == "answered", result.answer
    assert "deploying.md" in {c.source for c in result.citations}, result.citations
    assert_only_sentences(result)


def test_the_setting_question_is_answered_from_the_configuration_page(deps: Deps) -> None:
    result = run(deps, "Which setting changes how many passages are retrieved?")
    assert result.decision == "answered", result.answer
    assert "configuration.md" in {c.source for c in result.citations}, result.citations
    assert "CANDOR_TOP_K" in result.answer
    assert_only_sentences(result)


def test_a_question_the_docs_cannot_answer_is_declined_without_a_model_call(deps: Deps) -> None:
    # "France" stands in no bundled page, so the grounding gate declines it at once.
    # When docs/speed.md quoted the question, the gate found the name, the model read
    # 781 prompt tokens to grade it, and the README's instant decline took 13 s.
    result = run(deps, "What is the capital of France?")
    assert result.decision == "declined", result.answer
    assert "docs@example.com" in result.answer
    assert [grade.by for grade in result.grades] == ["gate"], result.grades
    assert sum(step.tokens_in for step in result.trace) == 0, result.trace


def test_what_can_you_help_with_names_the_bundled_pages_with_no_model_call(deps: Deps) -> None:
    # It was small talk ("I can help you with a wide range of topics"), true of
    # nothing: now the documents' own pages and sections, from their catalogue.
    result = run(deps, "What can you help me with?")
    assert result.decision == "answered", result.answer
    assert result.answer.startswith("I answer questions from the documents of")
    for title in ("Getting started", "Configuration", "Deploying to AWS"):
        assert title in result.answer, result.answer
    assert "configuration.md" in {c.source for c in result.citations}
    assert sum(step.tokens_in for step in result.trace) == 0, result.trace


def test_every_setting_is_listed_from_the_configuration_page(deps: Deps) -> None:
    result = run(deps, "List all the settings candor has.")
    assert result.decision == "answered", result.answer
    table = (DOCS / "configuration.md").read_text()
    settings = {line.split("`")[1] for line in table.splitlines() if line.startswith("| `CANDOR_")}
    missing = [name for name in settings if name not in result.answer]
    assert not missing, result.answer
    assert {c.source for c in result.citations} == {"configuration.md"}
