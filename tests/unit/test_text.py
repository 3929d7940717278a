"""The text rules: the local index, the sparse vectors and the citation check agree."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from candor.backends.keyword_vectors import document_vector, query_vector
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.text import content_words, query_terms
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
