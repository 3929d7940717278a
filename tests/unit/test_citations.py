"""Citations: the model's own markers, else the passages an unmarked answer is made of."""

from __future__ import annotations

import pytest

from candor.graph import prompts
from candor.graph.citations import attribute, cite, with_attribution
from candor.text import content_words
from candor.types import Chunk, Hit

pytestmark = pytest.mark.unit

PASSAGES = [
    Hit(
        Chunk(
            "p-0",
            "gc.auto: when there are approximately more than this many loose objects, "
            "git gc --auto packs them. The default value is 6700. Setting it to 0 "
            "disables automatic packing.",
            "git-gc.html",
            "git-gc(1)",
            "CONFIGURATION",
        ),
        0.0,
    ),
    Hit(
        Chunk(
            "p-1",
            "git commit --amend replaces the tip of the current branch with a new commit.",
            "git-commit.html",
            "git-commit(1)",
            "OPTIONS",
        ),
        0.0,
    ),
]
QUESTION = "What is the default value of gc.auto?"


def test_content_words_drop_stopwords_and_short_words_but_keep_numbers() -> None:
    assert content_words("The default is 0 and it is on by --auto") == {"default", "0", "auto"}


def test_an_unmarked_answer_made_of_a_passages_words_is_attributed_to_it() -> None:
    answer = "Git packs loose objects automatically above 6700 of them; 0 disables packing."
    assert attribute(answer, QUESTION, PASSAGES, shown_chars=600) == [1]


def test_an_answer_the_passages_do_not_account_for_is_attributed_to_none() -> None:
    answer = "Run the maintenance scheduler every night with cron to keep repositories fast."
    assert attribute(answer, QUESTION, PASSAGES, shown_chars=600) == []


def test_repeating_the_question_is_not_evidence() -> None:
    # Every content word of this answer is in the question, and so proves nothing.
    assert attribute("The default value of gc.auto.", QUESTION, PASSAGES, shown_chars=600) == []


def test_only_the_part_of_a_passage_the_model_was_shown_counts() -> None:
    answer = "Git packs loose objects automatically above 6700 of them; 0 disables packing."
    # Cut before "6700" and "disables": too little of the answer is left in what was shown.
    assert attribute(answer, QUESTION, PASSAGES, shown_chars=40) == []


def test_with_attribution_appends_markers_matching_the_citations() -> None:
    answer, citations = with_attribution(
        "Above 6700 loose objects git gc packs them; 0 disables it.",
        QUESTION,
        PASSAGES,
        shown_chars=600,
    )
    assert answer.endswith(" [1]")
    assert [c.source for c in citations] == ["git-gc.html"]


def test_an_unmarked_list_drawn_from_several_pages_is_cited_step_by_step() -> None:
    # CI, 2026-12-02: "How do I deploy candor to AWS?" got three unmarked steps, each
    # from another passage; no one passage held half the words, so it was declined.
    answer, citations = with_attribution(
        "To fix things, follow these steps:\n"
        "1. Loose objects above 6700 get packed by git gc automatically.\n"
        "2. Replace the tip of the current branch with a new commit.\n"
        "3. Schedule nightly maintenance with cron for faster repositories.",
        "How do I tidy up and redo my last commit?",
        PASSAGES,
        shown_chars=600,
    )
    assert [c.source for c in citations] == ["git-gc.html", "git-commit.html"]
    assert "by git gc automatically [1]." in answer
    assert "with a new commit [2]." in answer
    # A step no passage accounts for is not shown as if it were sourced.
    assert "cron" not in answer
    assert answer.startswith("To fix things, follow these steps:")


def test_sentences_no_passage_accounts_for_are_not_cited_piecemeal() -> None:
    _answer, citations = with_attribution(
        "Run the scheduler nightly with cron. Repositories stay fast with regular upkeep. "
        "Loose objects get packed.",
        QUESTION,
        PASSAGES,
        shown_chars=600,
    )
    assert citations == ()


def test_cite_keeps_markers_of_given_passages_and_renumbers_them() -> None:
    answer, citations = cite("Amend it [2]. Not [7].", PASSAGES)
    assert answer == "Amend it [1]. Not."
    assert [c.id for c in citations] == ["p-1"]


def test_a_citation_of_a_pdf_passage_names_its_page() -> None:
    pdf = Hit(Chunk("d-7", "Run apt-get update first.", "guide.pdf", metadata={"page": 12}), 0.0)

    _, (from_pdf, from_html) = cite("Update first [1]. Amend later [2].", [pdf, PASSAGES[1]])

    assert from_pdf.page == 12
    assert from_html.page is None


def test_markers_count_only_for_passages_the_prompt_showed() -> None:
    many = [Hit(Chunk(f"p-{n}", f"text {n}", f"page-{n}.html"), 0.0) for n in range(12)]

    answer, citations = cite("See [11]. And [10].", prompts.shown(many))

    assert answer == "See. And [1]."
    assert [c.id for c in citations] == ["p-9"]
