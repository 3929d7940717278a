"""`candor eval` on the three fixture pages with the hashing embedder, and the agent
part with a scripted chat model."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.cli import main
from candor.deps import Deps
from candor.errors import ModelError
from candor.evaluation.instruments import CountingChatModel, RecordingIndex
from candor.evaluation.questions import Question
from candor.evaluation.runner import evaluate_agent, open_run_state, prepare_settings
from candor.settings import DEFAULT_PRICES, Settings
from tests.conftest import clear_candor_env
from tests.support.fakes import ScriptedChatModel, Stall

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
QUESTIONS = FIXTURES / "kite-questions.jsonl"
RETRIEVAL_KEYS = {
    "n",
    "recall@1",
    "recall@5",
    "recall@10",
    "mrr",
    "p50_ms",
    "p95_ms",
    "answer_context",
    "answer_context_n",
    "answer_context_k",
}


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    clear_candor_env(monkeypatch)
    monkeypatch.setenv("CANDOR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CANDOR_EMBEDDER_BACKEND", "hashing")
    return tmp_path


def run_eval(out: Path, *extra: str) -> int:
    argv = ["eval", "--corpus", str(FIXTURES / "docs"), "--questions", str(QUESTIONS)]
    return main([*argv, "--out", str(out), "--retrieval-only", *extra])


def test_retrieval_only_writes_every_strategy_with_n_and_reuses_the_index(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_eval(env / "out") == 0
    first: dict[str, Any] = json.loads((env / "out" / "report.json").read_text())

    # candor's strategies, and beside them the plain reference (always). No reranker
    # is configured, so hybrid_rerank would only repeat hybrid: not measured
    assert set(first["retrieval"]) == {"dense", "keyword", "hybrid", "plain", "plain_dense"}
    assert first["meta"]["reranker"] is None
    for row in first["retrieval"].values():
        assert set(row) >= RETRIEVAL_KEYS
        assert row["n"] == 2  # of 4 questions, two have expected sources
        assert row["answer_context_n"] == 2 and row["answer_context_k"] == 6
        assert 0 < row["answer_context_chars"] <= 1800
        assert 0 <= row["recall@1"] <= row["recall@5"] <= row["recall@10"] <= 1
    assert "agent" not in first
    assert first["meta"]["questions"] == 4 and first["meta"]["documents"] == 3
    assert first["meta"]["index"].startswith("eval-")
    assert first["meta"]["ingest"]["changed"] == 3
    # The exact identifier finds its page in the top 10 by keywords.
    assert first["retrieval_ranks"]["keyword"]["kite-1"] is not None
    # Each question's answer context is kept too, so that runs can be paired per question.
    for name, row in first["retrieval"].items():
        context = first["retrieval_context"][name]
        assert len(context) == row["answer_context_n"]
        assert sum(context.values()) / len(context) == pytest.approx(row["answer_context"])
    assert (env / "out" / "report.md").read_text().count("| hybrid") == 1
    assert (env / "out" / "report.png").read_bytes().startswith(b"\x89PNG")
    assert "wrote" in capsys.readouterr().out

    # A rerun on identical files reuses the index: nothing is embedded again.
    assert run_eval(env / "again", "--strategies", "keyword", "--limit", "1") == 0
    again = json.loads((env / "again" / "report.json").read_text())
    assert again["meta"]["index"] == first["meta"]["index"]
    assert again["meta"]["ingest"]["unchanged"] == 3 and again["meta"]["ingest"]["changed"] == 0
    assert set(again["retrieval"]) == {"keyword", "plain", "plain_dense"}
    assert again["retrieval"]["keyword"]["n"] == 1  # --limit 1 took the first factual
    assert len(list((env / "data" / "indexes").glob("eval-*.sqlite3"))) == 1
    assert len(list((env / "data" / "indexes").glob("plain-*.sqlite3"))) == 1
    assert again["meta"]["plain_chunks"] == first["meta"]["plain_chunks"] > 0


def test_every_report_gives_answer_context_at_both_backends_budgets_beside_the_pool_ceiling(
    env: Path,
) -> None:
    assert run_eval(env / "out", "--context-chars", "3600,9000") == 0
    report = json.loads((env / "out" / "report.json").read_text())
    section = report["context_budgets"]
    rows = {
        (row["chars"], row["excerpts"], row["excerpt_chars"], row["shown"]): row
        for row in section["budgets"]
    }
    defaults = {row["default_for"] for row in section["budgets"]}
    assert {n for d in defaults if d for n in d.split(", ")} == {"local", "openai"}
    assert {
        (3600, 6, 800, "sentences"),
        (3600, 6, 800, "whole passages"),
        (9000, 15, 800, "whole passages"),
        (1800, 6, 600, "sentences"),
    } <= set(rows)
    assert section["ceiling_n"] == 2 and section["ceiling"] is not None
    for row in section["budgets"]:
        assert row["n"] == 2
        # Packing chooses from the pool: it can reach its ceiling, never pass it.
        assert row["answer_context"] <= section["ceiling"]
        assert row["prompt_tokens"] > 0 and row["usd_per_question"] > 0
        assert row["versus_plain"]["n"] == 2
    # More characters are never fewer tokens.
    for shown in ("sentences", "whole passages"):
        tokens = [row["prompt_tokens"] for row in section["budgets"] if row["shown"] == shown]
        assert tokens == sorted(tokens)
    per_question = report["context_questions"]["candor"]
    assert set(per_question) >= {
        "1800x6x600-sentences",
        "3600x6x800-whole",
        "9000x15x800-sentences",
        "ceiling",
    }
    markdown = (env / "out" / "report.md").read_text()
    assert (
        "## Answer context by budget" in markdown
        and "| 9,000 | 15 | 800 | whole passages |" in markdown
    )


def test_a_changed_corpus_gets_a_new_index(env: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "docs"
    corpus.mkdir()
    for page in (FIXTURES / "docs").iterdir():
        (corpus / page.name).write_bytes(page.read_bytes())
    argv = ["eval", "--corpus", str(corpus), "--questions", str(QUESTIONS), "--retrieval-only"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    (corpus / "kite-tutorial.html").write_text("<html><body><p>Changed.</p></body></html>")
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    names = {
        json.loads((tmp_path / out / "report.json").read_text())["meta"]["index"]
        for out in ("a", "b")
    }
    assert len(names) == 2


def test_other_chunking_gets_its_own_index_beside_the_first(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_eval(env / "a") == 0
    monkeypatch.setenv("CANDOR_CHUNK_CHARS", "300")
    monkeypatch.setenv("CANDOR_CHUNK_OVERLAP", "40")
    assert run_eval(env / "b") == 0
    a, b = (json.loads((env / out / "report.json").read_text())["meta"] for out in "ab")
    assert a["index"] != b["index"] and (a["chunk_chars"], b["chunk_chars"]) == (800, 300)
    assert b["ingest"]["changed"] == 3 and b["chunks"] > a["chunks"]
    # The first index is still whole: a rerun with its chunking embeds nothing
    monkeypatch.delenv("CANDOR_CHUNK_CHARS")
    monkeypatch.delenv("CANDOR_CHUNK_OVERLAP")
    assert run_eval(env / "c") == 0
    c = json.loads((env / "c" / "report.json").read_text())["meta"]
    assert c["index"] == a["index"] and c["ingest"]["changed"] == 0


@pytest.fixture
def agent_deps(tmp_path: Path) -> Iterator[tuple[Deps, ScriptedChatModel]]:
    from tests.conftest import PASSAGES

    settings = prepare_settings(
        Settings(
            data_dir=tmp_path / "data",
            embedder_backend="hashing",
            max_attempts=1,
            prices={**DEFAULT_PRICES, "scripted": DEFAULT_PRICES["gpt-4o-mini"]},
            # The scripts start each question with its triage call, as screening off.
            screening=False,
        ),
        "eval-test",
    )
    embedder = HashingEmbedder()
    index = SqliteVectorIndex(settings.index_path, embedder.dimensions)
    index.upsert(PASSAGES, embedder.embed([c.text for c in PASSAGES]))
    state = SqliteStateStore(tmp_path / "state.sqlite3")
    question = {"abusive": False, "kind": "question"}
    chat = ScriptedChatModel(
        {
            "Triage": [
                question,
                {"abusive": True, "kind": "question"},
                ModelError("the model timed out"),
                question,
            ],
            "Moderation": [{"insulting": True}],
            "judge": [True, False],
            "text": ["It is 125 [1], as the bisect page says [9]."],
        },
        cost_per_call=0.001,
    )
    deps = Deps(settings, CountingChatModel(chat), embedder, RecordingIndex(index), None, state)
    yield deps, chat
    index.close()
    state.close()


def test_agent_records_calls_citations_and_failures_and_goes_on(
    agent_deps: tuple[Deps, ScriptedChatModel],
) -> None:
    deps, chat = agent_deps
    questions = [
        Question(
            "q1",
            "Which exit code makes git bisect run skip a commit?",
            "factual",
            ("git-bisect.html",),
            ("125", "skip"),
        ),
        Question("q2", "You useless bot.", "abusive"),
        Question("q3", "What is git push?", "factual", ("git-push.html",), ("push",)),
        Question("q4", "How do I use Git LFS?", "unanswerable"),
    ]

    records = evaluate_agent(questions, deps, bar=False, timeout=60)

    assert [r.id for r in records] == ["q1", "q2", "q3", "q4"], [r.error for r in records]
    answered, warned, failed, declined = records
    assert answered.decision == "answered", answered.error
    assert answered.model_calls == 3  # triage, grade, answer
    assert answered.cited_sources == ("git-bisect.html",)  # [9] named no passage
    assert answered.citations_valid == 1
    assert not answered.keywords_present()  # "skip" is missing
    assert answered.cost_usd == pytest.approx(0.003)
    assert warned.decision == "warned"
    assert warned.model_calls == 2  # the triage and moderation's second look
    assert failed.failed and failed.error == "ModelError: the model timed out"
    assert declined.decision == "declined" and declined.model_calls == 2
    assert chat.kinds().count("Triage") == 4


def test_a_question_that_hangs_is_recorded_as_timed_out_and_the_run_goes_on(
    agent_deps: tuple[Deps, ScriptedChatModel],
) -> None:
    deps, _ = agent_deps
    greeting = {"abusive": False, "kind": "greeting"}
    chat = ScriptedChatModel({"Triage": [Stall(30, greeting), greeting], "text": ["Hello!"]})
    deps = dataclasses.replace(deps, chat=CountingChatModel(chat))
    questions = [Question("hangs", "Hi", "greeting"), Question("next", "Hello", "greeting")]

    hung, after = evaluate_agent(questions, deps, bar=False, timeout=0.2)

    assert hung.failed and hung.error == "timed out after 0.2 s"
    assert hung.seconds < 5
    assert after.decision == "smalltalk" and after.answer == "Hello!"


def test_the_runs_traces_stay_beside_its_report_for_candor_insights(
    agent_deps: tuple[Deps, ScriptedChatModel],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    deps, _ = agent_deps
    out = tmp_path / "eval-out"
    earlier = open_run_state(out)
    earlier.close()
    (out / "state.sqlite3").write_bytes(b"an earlier run's store")  # a new run starts empty
    state = open_run_state(out)
    questions = [
        Question("q1", "Which exit code skips a commit?", "factual", ("git-bisect.html",)),
        Question("q2", "You useless bot.", "abusive"),
        Question("q3", "What is git push?", "factual"),  # the model times out: no trace
        Question("q4", "How do I use Git LFS?", "unanswerable"),
    ]
    try:
        evaluate_agent(questions, dataclasses.replace(deps, state=state), bar=False, timeout=60)
    finally:
        state.close()

    clear_candor_env(monkeypatch)
    monkeypatch.setenv("CANDOR_DATA_DIR", str(out))
    monkeypatch.setenv("CANDOR_EMBEDDER_BACKEND", "hashing")
    assert main(["insights", "--days", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    decisions = {name: n for name, n in report["decisions"].items() if n}
    assert decisions == {"answered": 1, "warned": 1, "declined": 1}
    assert [gap["example"] for gap in report["missing"]] == ["How do I use Git LFS?"]


def test_the_one_call_reference_answers_the_questions_that_retrieve_and_reports_its_cost(
    tmp_path: Path,
) -> None:
    # Given the plain reference's index of the fixture pages and a model that
    # answers one question, declines one and fails on the third
    from candor.evaluation import plain
    from candor.evaluation.corpus import read_corpus
    from candor.evaluation.runner import evaluate_plain_rag, plain_rag_summary

    documents = read_corpus(FIXTURES / "docs")
    embedder = HashingEmbedder()
    index = plain.open_index(plain.index_path(tmp_path, documents, embedder), embedder)
    plain.fill(index, plain.chunks_of(documents), embedder)
    chat = ScriptedChatModel(
        {"text": ["Tie the bridle first [1].", "I don't know.", ModelError("timed out")]}
    )
    questions = [
        Question("hi", "Hello!", "greeting"),
        Question("a", "How do I attach the bridle?", "factual", ("kite-tutorial.html",)),
        Question("u", "Which kite wins races?", "unanswerable"),
        Question("f", "What is the line length?", "factual", ("kite-config.html",)),
    ]
    settings = Settings(data_dir=tmp_path, embedder_backend="hashing")

    # When the reference runs
    records = evaluate_plain_rag(
        questions,
        chat,
        embedder=embedder,
        plain_index=index,
        settings=settings,
        bar=False,
        timeout=30,
    )
    graph_rows: list[dict[str, Any]] = [
        {
            "id": "a",
            "kind": "factual",
            "decision": "answered",
            "seconds": 9.0,
            "tokens_in": 900,
            "model_calls": 3,
        },
    ]
    summary = plain_rag_summary(records, graph_rows)

    # Then the greeting was never asked, each other question was asked once,
    # and the failure is recorded without stopping the run
    assert [r.id for r in records] == ["a", "u", "f"]
    assert chat.kinds() == ["text", "text", "text"]
    assert [r.decision for r in records[:2]] == ["answered", "declined"]
    assert records[2].failed and summary["failures"] == 1
    assert summary["decline_recall"] == 1.0
    assert summary["graph_ratio"]["model_calls"]["ratio"] == 3.0
    index.close()
