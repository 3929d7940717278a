"""End to end on the embedded default with the real local models and real Git pages.

Ten pages of the dev corpus (Git's HTML manual) are ingested through the CLI; then
the full graph answers a factual question with a citation of the right page and
declines a question the pages cannot answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
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
from tests.support import local_models
from tests.support.api_shape import ASK_RESPONSE_KEYS

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

# The embedded default: the CLI and build_deps load both local models.
local_models.require(*local_models.CHAT, *local_models.EMBEDDER)

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    "git-bisect.html",
    "git-push.html",
    "git-commit.html",
    "git-tag.html",
    "git-describe.html",
    "git-stash.html",
    "git-check-ignore.html",
    "git-worktree.html",
    "git-switch.html",
    "git-restore.html",
]


def corpus_dir() -> Path:
    configured = os.environ.get("CANDOR_TEST_CORPUS")
    folder = Path(configured) if configured else ROOT / ".candor/corpus/git-doc"
    if not folder.is_absolute():
        folder = ROOT / folder
    if not (folder / "git-push.html").is_file():
        if configured:
            pytest.fail(f"CANDOR_TEST_CORPUS={configured} holds no Git pages; run `make corpus`")
        local_models.unavailable(
            "the dev corpus is not fetched; `make test` fetches it (`make corpus`)"
        )
    return folder


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    pages = tmp_path_factory.mktemp("pages")
    for name in PAGES:
        shutil.copy(corpus_dir() / name, pages / name)
    data = tmp_path_factory.mktemp("data")
    return os.environ | {
        "CANDOR_DATA_DIR": str(data),
        "CANDOR_CONTACT": "docs@example.com",
        "PAGES": str(pages),
    }


@pytest.fixture(scope="module")
def ingested(env: dict[str, str]) -> dict[str, object]:
    candor = [sys.executable, "-m", "candor.cli"]
    done = subprocess.run(
        [*candor, "ingest", env["PAGES"], "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    summary: dict[str, object] = json.loads(done.stdout)
    return summary


@pytest.fixture(scope="module")
def deps(env: dict[str, str], ingested: dict[str, object]) -> Iterator[Deps]:
    settings = Settings(data_dir=Path(env["CANDOR_DATA_DIR"]), contact="docs@example.com")
    yield build_deps(settings)


def run(deps: Deps, question: str) -> AskResult:
    return asyncio.run(ask(deps, question))


def test_ingest_reports_every_page_and_its_chunks(ingested: dict[str, object]) -> None:
    assert ingested["documents"] == len(PAGES)
    assert isinstance(ingested["chunks"], int) and ingested["chunks"] > 3 * len(PAGES)
    assert ingested["failed"] == 0


def test_factual_question_is_answered_citing_the_right_page(deps: Deps) -> None:
    result = run(
        deps,
        "When using `git bisect run`, which exit code should my test script return "
        "if the current commit cannot be tested?",
    )
    assert result.decision == "answered", result.answer
    assert "git-bisect.html" in {c.source for c in result.citations}
    assert "125" in result.answer


def test_unanswerable_question_is_declined(deps: Deps) -> None:
    result = run(deps, "How do I configure Git LFS to track large video files in my repository?")
    assert result.decision == "declined", result.answer
    assert "docs@example.com" in result.answer
    assert result.citations == ()


def test_cli_ask_json_prints_the_api_response(env: dict[str, str], ingested: object) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "candor.cli", "ask", "Hi there!", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    body = json.loads(done.stdout)
    assert body["decision"] == "smalltalk"
    assert set(body) == ASK_RESPONSE_KEYS
