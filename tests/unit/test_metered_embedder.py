"""The graph's embedder holds each node to the texts the budget reserved for."""

from __future__ import annotations

import pytest

from candor import packing
from candor.backends.hashing_embedder import HashingEmbedder
from candor.billing import Meter
from candor.graph.runner import MeteredEmbedder

pytestmark = pytest.mark.unit


def embedder(node: str) -> MeteredEmbedder:
    metered = MeteredEmbedder(HashingEmbedder(), Meter())
    metered.begin(node)
    return metered


def test_retrieve_may_embed_its_query_and_the_sentences_it_packs() -> None:
    metered = embedder("retrieve")
    metered.embed(["a question of some length " * 20])
    metered.embed(["a sentence"] * packing.MAX_UNITS)


def test_one_text_more_than_retrieve_reserved_for_is_refused_before_it_is_sent() -> None:
    metered = embedder("retrieve")
    metered.embed(["a question"])
    with pytest.raises(RuntimeError, match=r"beyond candor\.graph\.limits\.EMBEDDINGS"):
        metered.embed(["a sentence"] * (packing.MAX_UNITS + 1))


def test_a_sentence_longer_than_its_bound_is_refused() -> None:
    metered = embedder("retrieve")
    metered.embed(["q" * (4 * packing.UNIT_EMBED_CHARS + 1)])  # only the query slot holds it
    with pytest.raises(RuntimeError, match="beyond"):
        metered.embed(["x" * (4 * packing.UNIT_EMBED_CHARS + 100)])


def test_a_node_that_reserved_no_embedding_may_embed_nothing() -> None:
    with pytest.raises(RuntimeError, match="beyond"):
        embedder("grade").embed(["anything"])
