"""The text rules: the local index, the sparse vectors and the citation check agree."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from candor.backends.keyword_vectors import document_vector, query_vector
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.text import content_words, meta_talk, query_terms, without_meta_opening
from candor.types import Chunk

pytestmark = pytest.mark.unit

CHUNKS = [
    Chunk("c-0", "The winch does the lifting.", "winch.md"),
    Chunk("c-1", "Set rerere.enabled to reuse recorded resolutions.", "rerere.md"),
    Chunk("c-2", "Our merges use the ort strategy.", "merge.md"),
    Chunk("c-3", "Exit code 128 means a fatal error.", "exit.md"),
    # Filler, so that no searched word is in half the chunks (the local index
    # would drop it as uninformative; the sparse vectors have no such rule).
    *(Chunk(f"f-{n}", f"Unrelated filler paragraph number {n}.", f"f{n}.md") for n in range(6)),
]
QUESTIONS = [
    "how does rerere work",
    "Which merges are used by our team?",
    "Did it exit with code 128?",
    "What does rerere.enabled do?",
]


def sparse_matches(question: str) -> set[str]:
    query = query_vector(question)
    found = set()
    for chunk in CHUNKS:
        doc = document_vector(title=chunk.title, heading=chunk.heading, text=chunk.text)
        if set(query.indices) & set(doc.indices):
            found.add(chunk.id)
    return found


@pytest.mark.parametrize("question", QUESTIONS)
def test_the_local_index_and_the_sparse_vectors_match_the_same_chunks(
    tmp_path: Path, question: str
) -> None:
    # Given the same chunks in the local index and as sparse vectors
    with SqliteVectorIndex(tmp_path / "i.sqlite3", 4) as index:
        index.upsert(CHUNKS, np.ones((len(CHUNKS), 4), dtype=np.float32))

        # When both are searched by one question
        local = {hit.chunk.id for hit in index.keyword(question, top_k=len(CHUNKS))}

    # Then they find the same chunks: BM25 locally and on Pinecone see the same terms
    assert local == sparse_matches(question)


def test_a_stopword_that_stems_to_another_word_is_still_dropped_from_sparse_queries() -> None:
    # "does" stems to "doe"; dropping stopwords after stemming kept it as a term.
    assert query_vector("how does the winch work") == query_vector("winch work")


def test_the_citation_check_skips_every_word_the_searches_skip_and_common_ones() -> None:
    question = "Could our merges be used after the rebase?"
    assert query_terms(question) == ["merges", "used", "after", "rebase"]
    assert content_words(question) == {"merges", "rebase"}


def test_identifiers_stay_whole_for_citations_and_are_split_for_search() -> None:
    assert content_words("Set rerere.enabled to true") == {"set", "rerere.enabled", "true"}
    assert query_terms("Set rerere.enabled") == ["set", "rerere enabled", "rerere", "enabled"]


def test_a_question_of_stopwords_only_still_searches_by_them() -> None:
    assert query_terms("what is it") == ["what", "is", "it"]
    assert query_terms("?! ...") == []


@pytest.mark.parametrize(
    "answer",
    [
        "The passage in <passage 1> states that 0 disables it [1].",
        "Passage 2 says the default is 6700.",
        "According to the excerpts, it skips the commit.",
        "The provided context does not mention Litestream.",
        "Based on the provided passages, run git gc.",
        "In the passage, gc.auto is described.",
    ],
)
def test_an_answer_that_talks_about_its_sources_is_counted(answer: str) -> None:
    assert meta_talk(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "Exit code 125 skips the commit [1].",
        "The documentation of git gc lists gc.auto [2].",
        "This is done by default when the rr-cache directory exists [1].",
        "Run git commit --amend to change the last commit message [1].",
    ],
)
def test_an_answer_in_prose_is_not_counted(answer: str) -> None:
    assert meta_talk(answer) == []


def test_a_sentence_pasted_from_the_instructions_is_counted() -> None:
    instructions = "Answer the question in 2 to 4 short sentences, using only the excerpts."
    answer = "gc.auto defaults to 6700 [1]. Answer the question in 2 to 4 short sentences."
    pasted = "Answer the question in 2 to 4 short sentences."
    assert meta_talk(answer, instructions) == [pasted]
    assert meta_talk("gc.auto defaults to 6700 [1].", instructions) == []


@pytest.mark.parametrize(
    ("sentence", "kept"),
    [
        ("The passage states that the default is 50 [1].", "The default is 50 [1]."),
        ("According to [1], gc.auto defaults to 6700.", "gc.auto defaults to 6700."),
        ("The document states: run it.", "Run it."),
        ("The exit code is 125 [1].", "The exit code is 125 [1]."),
    ],
)
def test_an_opening_about_the_sources_is_dropped_and_the_sentence_kept(
    sentence: str, kept: str
) -> None:
    assert without_meta_opening(sentence) == kept
