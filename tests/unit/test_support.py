"""The support check: the specifics of an answer against the passages it cites."""

from __future__ import annotations

import pytest

from candor.graph.citations import citation
from candor.graph.support import Verified, sentences, specifics, verify
from candor.types import Chunk, Hit

pytestmark = pytest.mark.unit

GC = Hit(
    Chunk(
        "gc-0",
        "gc.auto: when there are more than this many loose objects, git gc --auto packs "
        'them. The default value is 6700. Setting it to 0 disables it. See "git help gc".',
        "git-gc.html",
        "git-gc(1)",
        "CONFIGURATION",
    ),
    0.0,
)
COMMIT = Hit(
    Chunk("c-0", "git commit --amend replaces the tip.", "git-commit.html", "git-commit(1)"),
    0.0,
)


def test_specifics_are_numbers_quoted_values_and_code_like_names() -> None:
    found = specifics('Set gc.auto to 0 [1] or run "git gc --auto" with --quiet in 2.39.')
    assert found == ["0", "2.39", "git gc --auto", "gc.auto", "--auto", "--quiet"]


def test_numbers_inside_identifiers_and_markers_are_not_specifics() -> None:
    assert specifics("Use HEAD~1, sha256 or utf8 [2].") == []


def test_sentences_join_back_into_the_text_and_keep_their_markers() -> None:
    text = "Set gc.auto to 0 [1]. It packs 3.5 times faster! [2]\nNext line"
    parts = sentences(text)
    assert "".join(parts) == text
    assert parts == ["Set gc.auto to 0 [1]. ", "It packs 3.5 times faster! [2]\n", "Next line"]


def verified(answer: str, hits: list[Hit], question: str = "What does gc.auto do?") -> Verified:
    citations = tuple(citation(hit) for hit in hits)
    return verify(answer, citations, [COMMIT, *hits], question, passage_chars=600)


def test_a_fully_supported_answer_is_left_exactly_as_it_was() -> None:
    answer = 'The default is 6700 and 0 disables it; see "git help gc" [1].'
    result = verified(answer, [GC])
    assert result.answer == answer
    assert result.check.verdict == "supported" and result.check.specifics == 3


def test_an_unsupported_value_removes_its_sentence_with_its_marker() -> None:
    result = verified("The default is 6700 [1]. Raise it to 9000 on big repos [1].", [GC])
    assert result.answer == "The default is 6700 [1]."
    assert result.check.unsupported == ("9000",)
    assert result.check.verdict == "trimmed"


def test_only_what_the_model_was_shown_of_a_cited_passage_counts() -> None:
    answer = "The default is 6700 [1]."
    citations = (citation(GC),)
    result = verify(answer, citations, [GC], "What is gc.auto?", passage_chars=40)
    assert result.check.declined


def test_markers_after_the_last_sentence_stay_while_any_sentence_does() -> None:
    # An unmarked answer gets its attribution markers at its very end.
    result = verified("Git packs loose objects. The default is 6700. It stops at 12. [1]", [GC])
    assert result.answer == "Git packs loose objects. The default is 6700. [1]"
    assert [c.id for c in result.citations] == ["gc-0"]


def test_a_name_no_cited_passage_holds_is_unsupported_even_if_another_passage_has_it() -> None:
    # --amend is in a passage the model was shown, but not in the one the answer cites.
    result = verified("Use git commit --amend [1].", [GC], question="How do I pack objects?")
    assert result.check.declined
    assert result.check.unsupported == ("--amend",)


@pytest.mark.parametrize(
    "sentence",
    [
        "The passage in <passage 1> states that 0 disables gc.auto [1].",
        "Passage 1 says that 0 disables gc.auto [1].",
        "As passages 1 and 2 say, 0 disables gc.auto [1].",
    ],
)
def test_a_passage_named_by_its_number_is_not_an_unsupported_number(sentence: str) -> None:
    # The small model refers to what it was shown by the passage's number; that
    # number is candor's, not a value the answer states.
    assert "1" not in specifics(sentence) and "2" not in specifics(sentence)
    assert verified(sentence, [GC]).check.verdict == "supported"
