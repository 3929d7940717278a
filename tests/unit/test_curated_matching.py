"""candor.curated.matching: the rule that decides a question asks what a curated one asks."""

from __future__ import annotations

import pytest

from candor import guards
from candor.backends.hashing_embedder import HashingEmbedder
from candor.curated import matching
from candor.curated.matching import MatchRule

pytestmark = pytest.mark.unit

QUESTION = "What does git branch -d do?"
ANSWER = "git branch -d deletes a branch once it is merged; -D deletes it whatever its state."


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("What does git branch -d do?", {"-d"}),
        ("What does git reset --soft HEAD~1 do?", {"--soft", "HEAD~1"}),
        ("Clone with --depth 1.", {"--depth", "1"}),
        ("What does `json_extract()` return?", {"json_extract()"}),
        ("What does .import --csv do in sqlite3?", {".import", "--csv", "sqlite3"}),
        ("What is git log --since=2.weeks?", {"--since=2.weeks"}),
        ("Which commits does git blame -L 10,20 show?", {"-L", "10,20"}),
        ("How do I push to origin/main?", {"origin/main"}),
        ("What's the way to create a branch?", set()),
    ],
)
def test_exact_names_are_the_code_like_names_and_numbers_as_written(
    text: str, names: set[str]
) -> None:
    assert matching.exact_names(text) == names


def test_an_options_case_is_part_of_its_name() -> None:
    assert matching.exact_names("git branch -d") != matching.exact_names("git branch -D")
    assert matching.exact_names("HEAD~2") != matching.exact_names("head~2")


def test_a_flipped_option_is_not_served_however_similar_the_questions() -> None:
    # The hashing embedder lower-cases its words: the two questions embed the same
    # (cosine 1.0), so only the exact names keep -D's visitor from -d's answer.
    embedder = HashingEmbedder()
    rule = MatchRule(threshold=0.5, synonym=0.5)
    flipped = "What does git branch -D do?"
    vectors = embedder.embed([QUESTION, flipped])
    similarity = float(vectors[0] @ vectors[1])
    assert similarity > 0.99

    judged = matching.judge(flipped, QUESTION, ANSWER, similarity, rule, embedder)

    assert not judged.same_names
    assert not judged.served(rule)


def test_another_version_is_not_served() -> None:
    rule = MatchRule(threshold=0.5, synonym=0.5)
    judged = matching.judge(
        "What does git branch -d do in Git 1.5?", QUESTION, ANSWER, 0.95, rule, HashingEmbedder()
    )
    assert not judged.served(rule)


def test_framing_words_ask_nothing_new() -> None:
    assert matching.new_words("Explain what happens when I run git branch -d.", QUESTION) == []
    assert matching.new_words("What's git branch -d used for?", QUESTION) == []


def test_a_word_neither_the_question_nor_the_answer_uses_is_new() -> None:
    visitor = "How do I recover a branch I deleted with git branch -d?"
    assert matching.new_words(visitor, f"{QUESTION}\n{ANSWER}") == ["recover"]


def test_why_asks_something_what_does_not() -> None:
    assert matching.new_words("Why does git branch -d do that?", QUESTION) == ["why"]


def test_a_new_word_without_a_near_synonym_fails_the_match() -> None:
    rule = MatchRule(threshold=0.5, synonym=0.99)
    visitor = "How do I recover a branch with git branch -d?"

    judged = matching.judge(visitor, QUESTION, ANSWER, 0.9, rule, HashingEmbedder())

    assert judged.checked_words
    assert judged.unexplained == ("recover",)
    assert not judged.served(rule)


def test_too_many_new_words_are_not_looked_up() -> None:
    # Words of letters only (digits would make them names, which rule 1 compares).
    words = " ".join(
        "".join(chr(ord("a") + (n * 7 + i) % 26) for i in range(6))
        for n in range(matching.MAX_NEW_WORDS + 1)
    )
    visitor = f"What does git branch -d do to {words}?"
    rule = MatchRule(threshold=0.5, synonym=0.0)  # any word would pass as a synonym

    judged = matching.judge(visitor, QUESTION, ANSWER, 0.9, rule, HashingEmbedder())

    assert not judged.checked_words
    assert not judged.served(rule)


def test_the_local_embedders_rule_is_measured_and_others_are_not() -> None:
    assert matching.measured_rule("all-MiniLM-L6-v2-int8-matmul-7b268cd91cdd") is not None
    assert matching.measured_rule("text-embedding-3-small") is None
    assert matching.measured_rule("hashing-384") is None


@pytest.mark.parametrize(
    "word",
    [
        "-d",
        "-D",
        "--Depth",
        "HEAD~2",
        "v1.0",
        "SQLITE_BUSY",
        "gc.auto",
        ".headers",
        "10,20",
        "$HOME",
    ],
)
def test_every_word_whose_case_the_answer_cache_keeps_is_an_exact_name(word: str) -> None:
    # The answer cache keys -d and -D apart (candor.guards.normalise); the curated match
    # must not serve one's answer to the other either.
    assert guards.normalise(word) == word
    assert matching.is_name(word)


def test_a_hyphenated_word_is_a_word_to_the_match_though_the_cache_keeps_its_case() -> None:
    assert guards.normalise("Remote-Tracking") == "Remote-Tracking"
    assert not matching.is_name("remote-tracking")
    assert matching.content_words("list remote-tracking branches") == [
        "list",
        "remote-tracking",
        "branches",
    ]
