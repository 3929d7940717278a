"""What the model reads, by chat backend, and the figures that choose it: answer context
at each budget beside the pool ceiling, pages of a PDF as expected sources."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from candor import packing, retrieval
from candor.backends.hashing_embedder import HashingEmbedder
from candor.cli.evaluate import parse_budgets
from candor.evaluation import budgets, generate
from candor.evaluation.questions import QuestionFileError, load_questions
from candor.evaluation.retrieval_metrics import chunk_rank, document_of
from candor.settings import CONTEXT_BUDGETS, Settings
from candor.types import Chunk, Hit
from tests.conftest import clear_candor_env
from tests.support.pdfs import make_pdf

pytestmark = pytest.mark.unit


def test_each_chat_backend_reads_its_own_budget_unless_one_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clear_candor_env(monkeypatch)
    local, hosted = Settings(), Settings(chat_backend="openai")
    assert (local.context_chars, local.top_k, local.passage_chars) == (1800, 6, 600)
    openai = CONTEXT_BUDGETS["openai"]
    assert (hosted.context_chars, hosted.top_k, hosted.passage_chars) == (
        openai.chars,
        openai.excerpts,
        openai.excerpt_chars,
    )
    assert (local.pack_sentences, hosted.pack_sentences) == (True, openai.sentences)
    # The environment says the backend; what it sets itself wins over the backend's.
    monkeypatch.setenv("CANDOR_CHAT_BACKEND", "openai")
    monkeypatch.setenv("CANDOR_CONTEXT_CHARS", "2500")
    chosen = Settings()
    assert (chosen.context_chars, chosen.top_k) == (2500, CONTEXT_BUDGETS["openai"].excerpts)


def test_a_swept_budget_shows_whole_passages_as_many_as_fill_it_never_fewer_than_six() -> None:
    settings = Settings(pack_candidates=15, chunk_chars=800)
    shown = {chars: budgets.sweep_budget(chars, settings) for chars in budgets.SWEEP}
    assert {chars: b.excerpts for chars, b in shown.items()} == {
        1800: 6,
        3600: 6,
        6000: 10,
        9000: 15,
    }
    assert {b.excerpt_chars for b in shown.values()} == {800}
    assert budgets.sweep_budget(20_000, settings).excerpts == 15  # no more than the pool
    # Both backends' defaults are always measured (one row when they are the same
    # budget), the sweep's others beside them.
    chosen = budgets.budgets_for(settings, [1800, 12_345])
    names = {name for budget in chosen for name in budget.name.split(", ") if name}
    assert names == set(CONTEXT_BUDGETS)
    swept = [
        (b.excerpts, b.excerpt_chars, b.sentences, b.name) for b in chosen if b.chars == 12_345
    ]
    # Each swept budget is measured as packed sentences and as whole passages.
    assert swept == [(15, 800, True, ""), (15, 800, False, "")]
    assert len({b.key for b in chosen}) == len(chosen)
    assert [b.chars for b in chosen] == sorted(b.chars for b in chosen)


def test_packing_from_a_scoring_done_once_packs_what_a_scoring_of_its_own_does() -> None:
    embedder = HashingEmbedder()
    words = [
        "push",
        "remote",
        "branch",
        "force",
        "lease",
        "tracking",
        "ref",
        "config",
        "value",
        "default",
    ]
    pool = [
        Hit(Chunk(f"c{n}-0", " ".join(f"{w} {n}." for w in words[n:] + words[:n]), f"p{n}"), 0)
        for n in range(8)
    ]
    question = "what does force with lease check on the remote?"
    scored = packing.score_units(question, pool, embedder)
    for chars in (200, 400, 900):
        alone = packing.pack(
            question, pool, embedder, budget=chars, max_excerpts=4, excerpt_chars=300
        )
        shared = packing.pack(
            question,
            pool,
            embedder,
            budget=chars,
            max_excerpts=4,
            excerpt_chars=300,
            scored=scored,
        )
        assert [(h.chunk.id, h.chunk.text) for h in shared] == [
            (h.chunk.id, h.chunk.text) for h in alone
        ]


def test_whole_passages_are_the_pools_first_in_rank_order_until_the_budget() -> None:
    pool = [Hit(Chunk(f"c{n}-0", f"passage {n} " + "word " * 150, f"p{n}"), 0) for n in range(8)]
    shown = retrieval.whole_passages(pool, budget=2000, excerpts=6, chars=800)
    # Each passage is 760 characters: two fit whole, the third is cut to what is left.
    assert [hit.chunk.id for hit in shown] == ["c0-0", "c1-0", "c2-0"]
    assert shown[0].chunk.text == pool[0].chunk.text
    assert sum(len(hit.chunk.text) for hit in shown) <= 2000
    assert len(retrieval.whole_passages(pool, budget=20_000, excerpts=6, chars=800)) == 6


def test_a_page_of_a_pdf_is_met_by_a_passage_starting_on_it_or_on_the_page_before() -> None:
    def passage(page: int) -> Chunk:
        return Chunk(f"x-{page}", "text", "manual.pdf", metadata={"page": page})

    expected = ["manual.pdf#page=41"]
    assert chunk_rank([passage(12), passage(41)], expected, all_needed=False) == 2
    assert chunk_rank([passage(40)], expected, all_needed=False) == 1  # runs onto 41
    assert chunk_rank([passage(42), passage(39)], expected, all_needed=False) is None
    # A question that expects the document is met by any of its pages.
    assert chunk_rank([passage(3)], ["manual.pdf"], all_needed=False) == 1
    assert document_of("manual.pdf#page=41") == "manual.pdf"
    assert document_of("guide#page.html") == "guide#page.html"


def test_a_question_file_may_expect_a_page_of_a_document_of_the_corpus(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    row = {"id": "q1", "question": "How?", "kind": "factual"}
    path.write_text(json.dumps(row | {"expected_sources": ["manual.pdf#page=7"]}) + "\n")
    assert load_questions(path, sources={"manual.pdf"})[0].expected_sources == (
        "manual.pdf#page=7",
    )
    path.write_text(json.dumps(row | {"expected_sources": ["other.pdf#page=7"]}) + "\n")
    with pytest.raises(QuestionFileError, match=r"other\.pdf#page=7"):
        load_questions(path, sources={"manual.pdf"})


def test_a_question_written_from_a_pdf_expects_the_page_its_passage_starts_on() -> None:
    prose = (
        "The kite line is wound on a reel before every flight, and a loose line is "
        "checked for knots and frayed places that could snap in a strong wind. "
    )
    data = make_pdf([["Cover page of the manual."], [prose[:90], prose[90:]] * 3])
    windows = generate.windows_of("kites.pdf", data)
    assert windows and {w.expected for w in windows} == {"kites.pdf#page=2"}
    html = generate.windows_of("kites.html", f"<p>{prose * 3}</p>".encode())
    assert [w.expected for w in html] == ["kites.html"]


@pytest.mark.parametrize("text", ["1800,x", "50", "1800,999999", "-3"])
def test_a_budget_outside_what_the_settings_take_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_budgets(text)


def test_budgets_are_read_once_each_in_the_order_given() -> None:
    assert parse_budgets("1800, 6000,1800") == (1800, 6000)
    assert parse_budgets(None) == ()
