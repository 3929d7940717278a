"""The grounding gate measured alone, on the small real index, without a chat model."""

from __future__ import annotations

from pathlib import Path

import pytest

from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.evaluation import gate_metrics
from candor.evaluation.questions import Question
from candor.ingest.chunking import chunk_document
from candor.ingest.document import Document, Section
from candor.settings import Settings

pytestmark = pytest.mark.unit

TWO_NAMES = Question(
    "q-two",
    "How do --force-with-lease and --amend differ?",
    "factual",
    expected_sources=("git-push.html",),
    answer_keywords=("remote ref",),
)
MADE_UP = Question("q-none", "What is the default of `core.autoCompactHistory`?", "unanswerable")
HELLO = Question("q-hello", "Hello there!", "greeting")


def measure(
    index: SqliteVectorIndex, settings: Settings, *questions: Question, top_k: int = 3
) -> list[gate_metrics.GateRecord]:
    return gate_metrics.evaluate_gate(
        questions,
        embedder=HashingEmbedder(),
        index=index,
        reranker=None,
        settings=settings.model_copy(update={"top_k": top_k}),
    )


def test_per_kind_the_gate_declines_a_made_up_name_and_targets_one_retrieval_missed(
    index: SqliteVectorIndex, settings: Settings
) -> None:
    # One passage is shown, and each name is on a different page: whichever page
    # retrieval found, the other name is in the index only.
    records = measure(index, settings, TWO_NAMES, MADE_UP, HELLO, top_k=1)
    summary = gate_metrics.summarise(records)

    factual = summary["by_kind"]["factual"]
    assert (factual["with_names"], factual["declined"], factual["targeted"]) == (1, 0, 1)
    unanswerable = summary["by_kind"]["unanswerable"]
    assert (unanswerable["declined"], unanswerable["targeted"]) == (1, 0)
    assert summary["by_kind"]["greeting"]["with_names"] == 0
    assert summary["all"]["n"] == 3
    assert summary["declined"] == [
        {"id": "q-none", "kind": "unanswerable", "absent": ["core.autoCompactHistory"]}
    ]
    assert summary["answerable_declined"] == []
    assert records[0].in_index and records[0].added
    assert records[1].context_before is None  # no keywords to look for


def test_an_answerable_question_declined_by_the_gate_is_listed(
    index: SqliteVectorIndex, settings: Settings
) -> None:
    wrong = Question(
        "q-wrong",
        "What does `git frobnicate` do to the remote ref?",
        "factual",
        expected_sources=("git-push.html",),
        answer_keywords=("remote ref",),
    )
    summary = gate_metrics.summarise(measure(index, settings, wrong))

    assert summary["answerable_declined"] == [
        {"id": "q-wrong", "kind": "factual", "absent": ["git frobnicate"]}
    ]
    lines = gate_metrics.markdown(summary)
    assert "Answerable questions declined by the gate: 1." in lines
    assert "- q-wrong (factual): git frobnicate" in lines


def test_the_answer_context_is_measured_on_the_passages_the_gate_leaves(
    index: SqliteVectorIndex, settings: Settings
) -> None:
    # With every passage shown nothing is added, and before equals after.
    (record,) = measure(index, settings, TWO_NAMES, top_k=3)
    assert record.added == ()
    assert record.context_before is True and record.context_after is True


def test_the_gate_is_measured_on_the_passages_the_graph_shows_with_small_to_big_on(
    tmp_path: Path, settings: Settings
) -> None:
    # Given one long section cut into small passages, and small-to-big switched on,
    # which shows the graph the matched passage with its neighbours
    sentences = [f"Sentence {n} of the long option says something new." for n in range(12)]
    doc = Document("push.html", "git-push(1)", [Section("--force", " ".join(sentences), 2)])
    chunks = chunk_document(doc, max_chars=200, overlap=60)
    embedder = HashingEmbedder()
    unpacked = settings.model_copy(update={"pack_context": False})
    widened = unpacked.model_copy(update={"widen_passages": True, "max_per_source": 0})
    question = Question(
        "q-wide",
        "What does sentence 5 say?",
        "factual",
        expected_sources=("push.html",),
        answer_keywords=("Sentence 5", "Sentence 8"),
    )
    with SqliteVectorIndex(tmp_path / "i.sqlite3", embedder.dimensions) as index:
        index.upsert(chunks, embedder.embed([c.text for c in chunks]))
        # (the matched passage alone does not hold both sentences)
        (alone,) = measure(index, unpacked, question, top_k=1)
        (record,) = measure(index, widened, question, top_k=1)

    # Then the gate sees what the graph would: the neighbours hold the second sentence
    assert alone.context_before is False
    assert record.context_before is True
