"""Citations: the model's own markers, else the passages an unmarked answer is made of."""

from __future__ import annotations

import pytest

from candor.graph import prompts
from candor.graph.citations import attribute, cite, with_attribution
from candor.graph.state import Citation
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
TIDY_QUESTION = "How do I tidy up and redo my last commit?"


def attributed(answer: str, question: str = QUESTION) -> tuple[str, tuple[Citation, ...]]:
    """with_attribution over PASSAGES, as the model was shown 600 characters of each."""
    return with_attribution(answer, question, PASSAGES, shown_chars=600)


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
    answer, citations = attributed(
        "Above 6700 loose objects git gc packs them; 0 disables it.",
    )
    assert answer == "Above 6700 loose objects git gc packs them; 0 disables it [1]."
    assert [c.source for c in citations] == ["git-gc.html"]


def test_an_unmarked_list_drawn_from_several_pages_is_cited_step_by_step() -> None:
    # CI, 2026-12-02: "How do I deploy candor to AWS?" got three unmarked steps, each
    # from another passage; no one passage held half the words, so it was declined.
    answer, citations = attributed(
        "To fix things, follow these steps:\n"
        "1. Loose objects above 6700 get packed by git gc automatically.\n"
        "2. Replace the tip of the current branch with a new commit.\n"
        "3. Schedule nightly maintenance with cron for faster repositories.",
        TIDY_QUESTION,
    )
    assert [c.source for c in citations] == ["git-gc.html", "git-commit.html"]
    assert "by git gc automatically [1]." in answer
    assert "with a new commit [2]." in answer
    # A step no passage accounts for is not shown as if it were sourced.
    assert "cron" not in answer
    assert answer.startswith("To fix things, follow these steps:")


def test_an_unmarked_sentence_summing_up_two_passages_cites_both() -> None:
    # make test, 2026-12-03: "How do I deploy candor to AWS?" was answered in two
    # unmarked sentences, the second summing up three steps from two excerpts; no
    # one excerpt held half its words, so the whole answer was declined.
    answer, citations = attributed(
        "You amend the tip of the current branch with a new commit. "
        "Then loose objects get packed automatically, and the branch tip is replaced.",
        TIDY_QUESTION,
    )
    assert [c.source for c in citations] == ["git-commit.html", "git-gc.html"]
    assert answer.endswith("and the branch tip is replaced [2][1].")


def test_a_pair_of_passages_must_still_hold_half_of_a_sentences_words() -> None:
    _answer, citations = attributed(
        "Nightly cron upkeep keeps repositories fast, schedules maintenance windows, "
        "rotates logs, packs loose objects and replaces the branch tip.",
        TIDY_QUESTION,
    )
    assert citations == ()


def test_sentences_no_passage_accounts_for_are_not_cited_piecemeal() -> None:
    _answer, citations = attributed(
        "Run the scheduler nightly with cron. Repositories stay fast with regular upkeep. "
        "Loose objects get packed.",
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
    # Two more passages than a prompt shows (MAX_PASSAGES rose from 10 to 20 in eb8fc2c).
    shown = prompts.MAX_PASSAGES
    many = [Hit(Chunk(f"p-{n}", f"text {n}", f"page-{n}.html"), 0.0) for n in range(shown + 2)]

    answer, citations = cite(f"See [{shown + 1}]. And [{shown}].", prompts.shown(many))

    assert answer == "See. And [1]."
    assert [c.id for c in citations] == [f"p-{shown - 1}"]


def test_a_marker_stranded_after_a_sentence_end_joins_that_sentence() -> None:
    # sqlite-009's answer ended "... as large as 32767 [1]. [2]": the marker of a
    # sentence the clean-up dropped, let out after the sentence it followed.
    answer, _ = cite("It is 2000 [1]. It can be 32767 [1]. [2]", PASSAGES)
    assert answer == "It is 2000 [1]. It can be 32767 [1][2]."

    answer, _ = cite("Amend it [2]. [1] Then push.", PASSAGES)
    assert answer == "Amend it [1][2]. Then push."


def test_a_marker_written_twice_in_a_row_is_shown_once() -> None:
    answer, citations = cite("Amend it [2][2].", PASSAGES)

    assert answer == "Amend it [1]."
    assert len(citations) == 1


def test_a_list_items_number_is_not_taken_for_a_sentence_end() -> None:
    text = "Steps:\n1. [1] Pack the loose objects.\n2. Amend it [2]."

    answer, _ = cite(text, PASSAGES)

    assert answer == text


def test_a_short_answer_that_many_passages_hold_cites_its_best_two_not_all() -> None:
    # git-043 ended "... is called "detached". [1][2][3][4][5][6]": every passage
    # shown held the few words of a one-line answer.
    pages = [
        Hit(
            Chunk(
                f"d-{n}",
                f"Checking out a commit that is not a branch tip leaves HEAD detached ({n}).",
                f"page-{n}.html",
            ),
            0.0,
        )
        for n in range(6)
    ]

    answer, citations = with_attribution(
        "Checking out a commit leaves HEAD detached.", "Can I look at an old commit?", pages, 600
    )

    assert answer == "Checking out a commit leaves HEAD detached [1][2]."
    assert [c.id for c in citations] == ["d-0", "d-1"]


def test_a_last_sentence_that_introduces_nothing_is_left_out() -> None:
    # sqlite-005 ended "For example, consider the following session: [1]", and no
    # session followed.
    answer, citations = cite(
        "Amend it with git commit --amend [2]. For example, consider this session: [1]",
        PASSAGES,
    )

    assert answer == "Amend it with git commit --amend [1][2]."
    assert [c.id for c in citations] == ["p-1", "p-0"]


def test_a_sentence_that_introduces_a_list_that_follows_stays() -> None:
    text = "Do this: [1]\n1. Pack the loose objects.\n2. Amend it [2]."

    answer, _ = cite(text, PASSAGES)

    assert answer == text


def test_stranded_markers_written_together_join_their_sentence_too() -> None:
    # The README's question, 2026-12-02: "... how many passages are retrieved. [1][2]
    # The `CANDOR_CANDIDATES` variable ..." kept its pair of markers after the stop.
    answer, _ = cite("Amend it [2]. [1][2] Then push.", PASSAGES)

    assert answer == "Amend it [1][2]. Then push."
