"""What the SQLite index does beyond the VectorIndex contract (see tests/contract)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex, keyword_terms
from candor.errors import ConfigurationError
from candor.types import Chunk

pytestmark = pytest.mark.unit

EMBEDDER = HashingEmbedder(384)


def chunk(n: int, text: str = "", source: str = "doc.md") -> Chunk:
    return Chunk(id=f"{'a' * 32}-{n}", text=text or f"passage number {n}", source=source)


def write(index: SqliteVectorIndex, chunks: list[Chunk]) -> None:
    index.upsert(chunks, EMBEDDER.embed([c.text for c in chunks]))


def test_chunks_survive_closing_and_reopening_the_file(tmp_path: Path) -> None:
    # Given an index with a chunk, closed
    path = tmp_path / "index.sqlite3"
    with SqliteVectorIndex(path, 384) as index:
        write(index, [chunk(0, "rerere.enabled records resolutions")])

    # When the file is opened again
    with SqliteVectorIndex(path, 384) as reopened:
        rankings = reopened.query(
            vector=EMBEDDER.embed(["rerere"])[0], keywords="rerere.enabled", top_k=1
        )

    # Then both rankings still find it
    assert [h.chunk.id for h in rankings.dense] == [chunk(0).id]
    assert [h.chunk.id for h in rankings.keyword] == [chunk(0).id]


def test_opening_with_another_width_is_a_configuration_error(tmp_path: Path) -> None:
    # Given an index written with 384-dimensional vectors
    path = tmp_path / "index.sqlite3"
    SqliteVectorIndex(path, 384, embedder="all-MiniLM-L6-v2-int8").close()

    # When it is opened for a 1536-dimensional embedder
    with pytest.raises(ConfigurationError) as raised:
        SqliteVectorIndex(path, 1536, embedder="text-embedding-3-small")

    # Then the error names both widths and the embedder that built the index
    assert "384" in str(raised.value)
    assert "1536" in str(raised.value)
    assert "all-MiniLM-L6-v2-int8" in str(raised.value)


def test_opening_with_another_embedder_of_the_same_width_is_a_configuration_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "index.sqlite3"
    SqliteVectorIndex(path, 384, embedder="all-MiniLM-L6-v2-int8").close()
    with pytest.raises(ConfigurationError, match="hashing-384"):
        SqliteVectorIndex(path, 384, embedder="hashing-384")


def test_a_write_from_another_connection_is_seen_by_the_next_dense_query(
    tmp_path: Path,
) -> None:
    # Given an index that has already loaded its vectors for a query
    path = tmp_path / "index.sqlite3"
    reader = SqliteVectorIndex(path, 384)
    write(reader, [chunk(0, "git stash saves local changes")])
    vector = EMBEDDER.embed(["git worktree adds working trees"])[0]
    assert len(reader.query(vector=vector, keywords=None, top_k=5).dense) == 1

    # When another connection (say, an ingest process) adds a chunk
    with SqliteVectorIndex(path, 384) as writer:
        write(writer, [chunk(1, "git worktree adds working trees")])

    # Then the reader's next dense query ranks it
    hits = reader.query(vector=vector, keywords=None, top_k=5).dense
    assert hits[0].chunk.id == chunk(1).id
    reader.close()


def test_listing_pages_through_more_ids_than_one_page(tmp_path: Path) -> None:
    with SqliteVectorIndex(tmp_path / "i.sqlite3", 384) as index:
        chunks = [chunk(n) for n in range(1234)]
        write(index, chunks)
        assert list(index.list_ids("a")) == sorted(c.id for c in chunks)


def test_deleting_while_listing_does_not_disturb_the_listing(tmp_path: Path) -> None:
    # Given more chunks than one page of the listing
    with SqliteVectorIndex(tmp_path / "i.sqlite3", 384) as index:
        chunks = [chunk(n) for n in range(600)]
        write(index, chunks)

        # When each listed id is deleted as it is listed (what re-ingestion does)
        listed = []
        for cid in index.list_ids(chunks[0].id[:32]):
            listed.append(cid)
            index.delete([cid])

        # Then every id was listed once and the index is empty
        assert sorted(listed) == sorted(c.id for c in chunks)
        assert index.count() == 0


def test_concurrent_queries_and_writes_from_threads_all_succeed(tmp_path: Path) -> None:
    # Given an index shared by several threads
    index = SqliteVectorIndex(tmp_path / "i.sqlite3", 384)
    write(index, [chunk(n) for n in range(50)])
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for n in range(20):
                write(index, [chunk(1000 + worker * 100 + n, f"worker {worker} wrote {n}")])
                index.query(
                    vector=EMBEDDER.embed([f"worker {worker}"])[0], keywords="wrote", top_k=3
                )
        except BaseException as e:  # reported by the assertion below
            errors.append(e)

    # When they write and query at the same time
    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    # Then nothing failed and every write landed
    assert errors == []
    assert index.count() == 50 + 4 * 20
    index.close()


def test_non_finite_vectors_are_refused(tmp_path: Path) -> None:
    with SqliteVectorIndex(tmp_path / "i.sqlite3", 384) as index:
        vectors = np.full((1, 384), np.nan, dtype=np.float32)
        with pytest.raises(ValueError, match="NaN"):
            index.upsert([chunk(0)], vectors)


def test_a_zero_query_vector_ranks_nothing(tmp_path: Path) -> None:
    with SqliteVectorIndex(tmp_path / "i.sqlite3", 384) as index:
        write(index, [chunk(0)])
        zero = np.zeros(384, dtype=np.float32)
        assert index.query(vector=zero, keywords=None, top_k=3).dense == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("--force-with-lease", ['"force with lease"', '"force"', '"lease"']),
        ("rerere.enabled", ['"rerere enabled"', '"rerere"', '"enabled"']),
        ("A...B", ['"a b"', '"b"']),
        ('say "hi" (now)', ['"say"', '"hi"', '"now"']),
        ("what is it", ['"what"', '"is"', '"it"']),
        ("?! -- ...", []),
    ],
)
def test_keyword_terms_are_quoted_and_identifiers_add_their_phrase(
    text: str, expected: list[str]
) -> None:
    assert keyword_terms(text) == expected


def test_a_word_in_most_chunks_neither_ranks_nor_hides_the_rarer_words(tmp_path: Path) -> None:
    # Given chunks that all say "git", one of which also says "rerere"
    with SqliteVectorIndex(tmp_path / "i.sqlite3", 384) as index:
        texts = ["git rerere reuses resolutions"] + [f"git command {n}" for n in range(9)]
        write(index, [chunk(n, text) for n, text in enumerate(texts)])

        # When the query pairs the common word with the rare one, or has it alone
        paired = index.query(vector=None, keywords="git rerere", top_k=10).keyword
        alone = index.query(vector=None, keywords="git", top_k=10).keyword

    # Then the rare word decides the ranking, and the common word alone still ranks
    assert [h.chunk.id for h in paired] == [chunk(0).id]
    assert len(alone) == 10


def test_update_metadata_sets_keys_in_place_and_keeps_text_vectors_and_other_keys(
    tmp_path: Path,
) -> None:
    # Given two chunks with metadata of their own, and a filter cached by a dense query
    with SqliteVectorIndex(tmp_path / "index.sqlite3", 384) as index:
        first = Chunk(f"{'a' * 32}-0", "rerere records resolutions", "doc.md", metadata={"page": 2})
        second = Chunk(f"{'a' * 32}-1", "gc.auto packs loose objects", "doc.md")
        write(index, [first, second])
        vector = EMBEDDER.embed(["rerere"])[0]
        url = "https://docs.example.com/doc.html"
        assert index.query(vector=vector, keywords=None, top_k=2, where={"url": url}).dense == []

        # When one key is set on both and on an id the index does not hold
        updated = index.update_metadata([first.id, second.id, f"{'b' * 32}-0"], {"url": url})

        # Then only the held chunks change, only in that key, and filters see it at once
        assert updated == 2
        assert [c.metadata for c in index.fetch([first.id, second.id])] == [
            {"page": 2, "url": url},
            {"url": url},
        ]
        hits = index.query(vector=vector, keywords="rerere", top_k=2, where={"url": url})
        assert hits.dense[0].chunk.id == first.id
        assert [h.chunk.id for h in hits.keyword] == [first.id]


def test_field_weights_decide_whether_a_title_match_outranks_a_body_match(
    tmp_path: Path,
) -> None:
    # Given a chunk that names "winch" in its title and one that names it in its text
    titled = Chunk(id=f"{'b' * 32}-0", text="It pulls the line in.", source="w.md", title="Winch")
    body = Chunk(id=f"{'c' * 32}-0", text="The winch pulls lines.", source="v.md", title="Tools")
    filler = [chunk(n) for n in range(4)]
    path = tmp_path / "i.sqlite3"
    with SqliteVectorIndex(path, 384) as index:
        write(index, [titled, body, *filler])
        by_default = index.keyword("winch", top_k=2)

    # When the same file is searched with the title and heading weighing nothing
    with SqliteVectorIndex(path, 384, field_weights=(0.0, 0.0, 1.0)) as text_only:
        by_text = text_only.keyword("winch", top_k=2)

    # Then the title match leads by default, and the body match without field weights
    assert by_default[0].chunk.id == titled.id
    assert by_text[0].chunk.id == body.id
