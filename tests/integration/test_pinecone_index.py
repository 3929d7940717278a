"""What the Pinecone VectorIndex does beyond the shared contract: Pinecone's request
limits, pagination, and its errors, against the loopback test server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.keyword_vectors import (
    MAX_TERMS,
    SparseVector,
    document_vector,
    query_vector,
    stem,
)
from candor.backends.pinecone_index import PineconeVectorIndex
from candor.errors import IndexError_
from candor.types import Chunk
from tests.support import pinecone_server

pytestmark = pytest.mark.integration

WIDE = 1536  # text-embedding-3-small


@pytest.fixture
def servers() -> Iterator[tuple[pinecone_server.RunningIndex, pinecone_server.RunningIndex]]:
    with (
        pinecone_server.serve("dense", WIDE) as dense,
        pinecone_server.serve("sparse") as sparse,
    ):
        yield dense, sparse


def make_index(
    servers: tuple[pinecone_server.RunningIndex, pinecone_server.RunningIndex],
    *,
    sparse: bool = True,
    **options: Any,
) -> PineconeVectorIndex:
    from pinecone import Pinecone

    client = Pinecone(api_key="test-key")
    dense_server, sparse_server = servers
    return PineconeVectorIndex(
        client.index(host=dense_server.url),
        sparse=client.index(host=sparse_server.url) if sparse else None,
        dimensions=WIDE,
        namespace="site",
        **options,
    )


def chunks(n: int, *, doc: str = "0123456789abcdef0123456789abcdef", text: str = "") -> list[Chunk]:
    return [
        Chunk(id=f"{doc}-{i}", text=text or f"passage {i} about the winch", source="doc.md")
        for i in range(n)
    ]


def vectors(n: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    return HashingEmbedder(WIDE).embed([f"passage {i}" for i in range(n)])


def upserts(server: pinecone_server.RunningIndex) -> list[pinecone_server.Call]:
    return [c for c in server.index.calls if c.path == "/vectors/upsert"]


def test_upserts_of_wide_vectors_are_split_under_two_megabytes(
    servers: tuple[pinecone_server.RunningIndex, pinecone_server.RunningIndex],
) -> None:
    # Given 300 chunks of 1536 dimensions: about 10 MB as JSON
    index = make_index(servers)

    written = index.upsert(chunks(300), vectors(300))

    # Then every request stayed within Pinecone's limits, and all were written
    dense, sparse = servers
    assert written == 300 == index.count()
    calls = upserts(dense)
    assert len(calls) > 4
    assert all(c.body_bytes <= 2 * 1024 * 1024 and c.items <= 1000 for c in calls)
    assert sum(c.items for c in calls) == 300
    assert sum(c.items for c in upserts(sparse)) == 300


def test_upserts_never_carry_more_than_the_configured_count(
    servers: tuple[pinecone_server.RunningIndex, pinecone_server.RunningIndex],
) -> None:
    index = make_index(servers, max_batch_vectors=40)

    index.upsert(chunks(100), vectors(100))

    assert [c.items for c in upserts(servers[0])] == [40, 40, 20]


def test_listing_pages_through_more_than_one_page_in_order(
    servers: tuple[pinecone_server.RunningIndex, pinecone_server.RunningIndex],
) -> None:
    index = make_index(servers)
    index.upsert(chunks(250), vectors(250))
    other = chunks(3, doc="f" * 32)
    index.upsert(other, vectors(3))

    listed = list(index.list_ids("0123456789abcdef0123456789abcdef-"))

    assert listed == sorted(f"0123456789abcdef0123456789abcdef-{i}" for i in range(250))
    pages = [c for c in servers[0].index.calls if c.path == "/vectors/list"]
    assert len(pages) == 3


def test_deleting_more_than_a_thousand_ids_is_batched(
    servers: tuple[pinecone_server.RunningIndex, pinecone_server.RunningIndex],
) -> None:
    index = make_index(servers, sparse=False)
    many = chunks(1100)
    index.upsert(many, np.tile(vectors(1), (1100, 1)))

    deleted = index.delete([c.id for c in many])

    assert deleted == 1100 and index.count() == 0
    deletes = [c for c in servers[0].index.calls if c.path == "/vectors/delete"]
    assert [c.items for c in deletes] == [1000, 100]


def test_metadata_over_forty_kilobytes_is_refused_before_any_request(
    servers: tuple[pinecone_server.RunningIndex, pinecone_server.RunningIndex],
) -> None:
    index = make_index(servers)

    with pytest.raises(IndexError_, match="40960"):
        index.upsert(chunks(1, text="x" * 41_000), vectors(1))

    assert upserts(servers[0]) == []


def test_reserved_metadata_keys_are_refused(
    servers: tuple[pinecone_server.RunningIndex, pinecone_server.RunningIndex],
) -> None:
    index = make_index(servers)
    chunk = Chunk(id="a" * 32 + "-0", text="t", source="s", metadata={"text": "clash"})

    with pytest.raises(ValueError, match="reserved"):
        index.upsert([chunk], vectors(1))


def test_an_error_from_pinecone_is_an_index_error(
    servers: tuple[pinecone_server.RunningIndex, pinecone_server.RunningIndex],
) -> None:
    index = make_index(servers)
    servers[0].index.failures.append(400)

    with pytest.raises(IndexError_, match="pinecone"):
        index.upsert(chunks(1), vectors(1))


def test_without_a_sparse_index_the_keyword_ranking_is_empty(
    servers: tuple[pinecone_server.RunningIndex, pinecone_server.RunningIndex],
) -> None:
    index = make_index(servers, sparse=False)
    index.upsert(chunks(3), vectors(3))

    rankings = index.query(vector=vectors(1)[0], keywords="winch", top_k=3)

    assert len(rankings.dense) == 3 and rankings.keyword == []


def test_a_chunk_without_words_is_kept_out_of_the_sparse_index(
    servers: tuple[pinecone_server.RunningIndex, pinecone_server.RunningIndex],
) -> None:
    index = make_index(servers)
    wordy = chunks(1)
    index.upsert(wordy, vectors(1))
    blank = [Chunk(id=wordy[0].id, text="--- ...", source="doc.md")]

    index.upsert(blank, vectors(1))

    assert index.fetch([blank[0].id]) == blank
    assert index.query(vector=None, keywords="winch", top_k=3).keyword == []
    assert servers[1].index.space("site") == {}


def test_the_keyword_vector_weighs_title_and_heading_above_the_text() -> None:
    in_title = document_vector(title="winch", heading="", text="other words here")
    in_text = document_vector(title="", heading="", text="winch other words here")
    query = query_vector("winch")

    def score(doc: SparseVector) -> float:
        weights = dict(zip(doc.indices, doc.values, strict=True))
        pairs = zip(query.indices, query.values, strict=True)
        return sum(w * weights.get(i, 0.0) for i, w in pairs)

    assert score(in_title) > score(in_text) > 0


def test_keyword_vectors_stay_within_pinecones_sparse_limit() -> None:
    text = " ".join(f"word{i}" for i in range(5000))

    vector = document_vector(title="", heading="", text=text)

    assert len(vector.indices) == MAX_TERMS
    assert json.dumps(vector.to_json())


def test_queries_drop_stopwords_unless_nothing_else_is_left() -> None:
    assert query_vector("what is the winch") == query_vector("winch")
    assert query_vector("what is it")
    assert not query_vector("?!")


@pytest.mark.parametrize(
    ("word", "stemmed"),
    [
        ("exits", "exit"),
        ("pushes", "push"),
        ("pushed", "push"),
        ("pushing", "push"),
        ("entries", "entry"),
        ("status", "status"),
        ("125", "125"),
        ("gc", "gc"),
    ],
)
def test_the_light_stemmer_brings_inflections_together(word: str, stemmed: str) -> None:
    assert stem(word) == stemmed
