"""Hybrid retrieval: Reciprocal Rank Fusion, and search over a real embedded index."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from candor.backends.sqlite_index import SqliteVectorIndex
from candor.ports import Reranked
from candor.retrieval import diversify, rrf_fuse, search
from candor.types import NO_USAGE, Chunk, Hit
from tests.support.embedders import CountingEmbedder

pytestmark = pytest.mark.unit


def hit(cid: str, score: float = 0.0) -> Hit:
    return Hit(Chunk(id=cid, text=f"text of {cid}", source=f"{cid}.md"), score)


def ids(hits: Sequence[Hit]) -> list[str]:
    return [h.chunk.id for h in hits]


# -- rrf_fuse --------------------------------------------------------------------


def test_a_chunk_in_both_rankings_beats_chunks_ranked_first_in_only_one() -> None:
    # Given two rankings that agree on "b" but not on their first place
    dense = [hit("a"), hit("b")]
    keyword = [hit("c"), hit("b")]

    # When they are fused
    fused = rrf_fuse([dense, keyword])

    # Then "b", second in both, comes first
    assert ids(fused) == ["b", "a", "c"]


def test_the_fused_score_is_the_sum_of_reciprocal_ranks() -> None:
    fused = rrf_fuse([[hit("a"), hit("b")], [hit("b")]], k=10)
    scores = {h.chunk.id: h.score for h in fused}
    assert scores["b"] == pytest.approx(1 / 12 + 1 / 11)
    assert scores["a"] == pytest.approx(1 / 11)


def test_the_original_scores_do_not_affect_the_fusion() -> None:
    # Rankings from BM25 and cosine are on different scales; only ranks count.
    fused = rrf_fuse([[hit("a", 0.01), hit("b", 0.009)], [hit("c", 55.0)]])
    assert ids(fused) == ["a", "c", "b"]


def test_ties_keep_the_order_in_which_chunks_were_first_seen() -> None:
    fused = rrf_fuse([[hit("x"), hit("y")], [hit("y"), hit("x")]])
    assert ids(fused) == ["x", "y"]


def test_fusing_nothing_gives_nothing() -> None:
    assert rrf_fuse([]) == []
    assert rrf_fuse([[], []]) == []


def test_fusing_one_ranking_keeps_its_order() -> None:
    assert ids(rrf_fuse([[hit("c"), hit("a"), hit("b")]])) == ["c", "a", "b"]


# -- diversify -------------------------------------------------------------------


def on(source: str, cid: str) -> Hit:
    return Hit(Chunk(id=cid, text=f"text of {cid}", source=source), 0.0)


def test_a_document_gets_at_most_its_share_before_the_others_have_their_turn() -> None:
    # Given a long page whose passages fill the first three ranks
    hits = [on("config", "c1"), on("config", "c2"), on("config", "c3"), on("stash", "s1")]

    # Then with one passage per document, the stash page moves up to second place
    assert ids(diversify(hits, 1)) == ["c1", "s1", "c2", "c3"]
    assert ids(diversify(hits, 2)) == ["c1", "c2", "s1", "c3"]


def test_no_cap_keeps_the_order() -> None:
    hits = [on("config", "c1"), on("config", "c2"), on("stash", "s1")]
    assert ids(diversify(hits, 0)) == ["c1", "c2", "s1"]


def test_search_caps_the_passages_of_one_document(
    embedder: CountingEmbedder, index: SqliteVectorIndex
) -> None:
    # "push-lease" and "push-force" share push.html: capped, only one is in the top 2
    capped = find(embedder, index, "git push --force", top_k=2, per_source=1)
    uncapped = find(embedder, index, "git push --force", top_k=2)
    assert [h.chunk.source for h in uncapped] == ["push.html", "push.html"]
    first, second = (h.chunk.source for h in capped)
    assert first == "push.html" and second != "push.html"


# -- search ----------------------------------------------------------------------

PASSAGES = {
    "push-lease": "git push --force-with-lease only overwrites the remote branch when it is "
    "where your remote-tracking branch says it is.",
    "push-force": "A forced push with --force can discard commits other people pushed.",
    "rerere": "Setting rerere.enabled makes Git record and reuse conflict resolutions.",
    "stash": "git stash shelves uncommitted changes so you can switch branches.",
    "bisect": "git bisect run treats exit code 125 as a revision that cannot be tested.",
    "gc": "gc.auto is the number of loose objects that triggers automatic packing.",
}


class ShortestFirst:
    """A reranker with an obvious preference, to see that its scores decide the order."""

    name = "shortest-first"

    def rerank(self, query: str, passages: Sequence[Chunk]) -> Reranked:
        return Reranked([-float(len(p.text)) for p in passages], NO_USAGE)


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def index(tmp_path: Path, embedder: CountingEmbedder) -> Iterator[SqliteVectorIndex]:
    index = SqliteVectorIndex(tmp_path / "index.sqlite3", embedder.dimensions)
    chunks = [
        Chunk(id=cid, text=text, source=f"{cid.split('-')[0]}.html", metadata={"topic": cid})
        for cid, text in PASSAGES.items()
    ]
    index.upsert(chunks, embedder.embed([c.text for c in chunks]))
    embedder.reset()
    yield index
    index.close()


def find(
    embedder: CountingEmbedder, index: SqliteVectorIndex, query: str, **options: Any
) -> list[Hit]:
    """`search` with this module's defaults: hybrid, no reranker, 3 of 6 candidates."""
    settings: dict[str, Any] = {
        "reranker": None,
        "top_k": 3,
        "candidates": 6,
        "strategy": "hybrid",
    }
    return search(query, embedder=embedder, index=index, **(settings | options))


def test_hybrid_search_puts_the_chunk_naming_an_identifier_first(
    embedder: CountingEmbedder, index: SqliteVectorIndex
) -> None:
    hits = find(embedder, index, "is --force-with-lease safe?")
    assert ids(hits)[0] == "push-lease"


def test_search_returns_at_most_top_k_hits(
    embedder: CountingEmbedder, index: SqliteVectorIndex
) -> None:
    hits = find(embedder, index, "git push branch", top_k=2)
    assert len(hits) == 2


def test_keyword_search_does_not_embed_the_query(
    embedder: CountingEmbedder, index: SqliteVectorIndex
) -> None:
    # When the strategy is keyword-only
    hits = find(embedder, index, "rerere.enabled", top_k=1, candidates=5, strategy="keyword")

    # Then the answer comes from BM25 alone, and the embedder was never called
    assert ids(hits) == ["rerere"]
    assert embedder.calls == 0


def test_dense_search_ranks_by_vector_only(
    embedder: CountingEmbedder, index: SqliteVectorIndex
) -> None:
    # Given the exact text of a passage, which its own vector matches best
    hits = find(embedder, index, PASSAGES["stash"], top_k=1, candidates=5, strategy="dense")
    assert ids(hits) == ["stash"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-4)
    assert embedder.calls == 1


def test_hybrid_search_returns_the_fusion_of_both_rankings(
    embedder: CountingEmbedder, index: SqliteVectorIndex
) -> None:
    # Given the two rankings the index gives for a query
    query = "exit code 125 bisect"
    rankings = index.query(vector=embedder.embed([query])[0], keywords=query, top_k=6)

    # When hybrid search runs with the same candidates
    hits = find(embedder, index, query, top_k=6)

    # Then its hits are exactly the RRF fusion of those rankings
    assert ids(hits) == ids(rrf_fuse([rankings.dense, rankings.keyword]))


def test_hybrid_rerank_orders_the_fused_candidates_by_reranker_score(
    embedder: CountingEmbedder, index: SqliteVectorIndex
) -> None:
    hits = find(
        embedder,
        index,
        "git push force remote branch commits",
        reranker=ShortestFirst(),
        strategy="hybrid_rerank",
    )
    lengths = [len(h.chunk.text) for h in hits]
    assert lengths == sorted(lengths)
    assert [h.score for h in hits] == [-float(n) for n in lengths]


def test_hybrid_rerank_without_a_reranker_falls_back_to_the_fusion(
    embedder: CountingEmbedder, index: SqliteVectorIndex
) -> None:
    def run(strategy: str) -> list[Hit]:
        return find(embedder, index, "stash changes", strategy=strategy)

    without, hybrid = run("hybrid_rerank"), run("hybrid")
    assert ids(without) == ids(hybrid)


def test_search_passes_the_filter_to_both_rankings(
    embedder: CountingEmbedder, index: SqliteVectorIndex
) -> None:
    hits = find(embedder, index, "git push --force-with-lease", top_k=5, where={"topic": "gc"})
    assert ids(hits) == ["gc"]


def test_an_unknown_strategy_is_refused(
    embedder: CountingEmbedder, index: SqliteVectorIndex
) -> None:
    with pytest.raises(ValueError, match="bm42"):
        find(embedder, index, "anything", top_k=1, candidates=1, strategy="bm42")


# -- what the model is shown ----------------------------------------------------


def test_a_reference_gets_its_top_passages_up_to_the_same_characters() -> None:
    from candor.retrieval import within

    passages = [Hit(Chunk(f"p{n}", "word " * 160, f"p{n}.md"), 0.0) for n in range(5)]
    shown = within(passages, budget=1000, passage_chars=600)
    assert ids(shown) == ["p0", "p1"]
    assert len(shown[0].chunk.text) <= 600 and sum(len(h.chunk.text) for h in shown) <= 1000


def test_packed_or_not_the_graph_shows_what_the_settings_say(
    tmp_path: Path,
) -> None:
    from candor.backends.hashing_embedder import HashingEmbedder
    from candor.retrieval import configured_search
    from candor.settings import Settings

    embedder = HashingEmbedder()
    long = " ".join(f"Sentence {n} is about pushing with a lease." for n in range(40))
    chunks = [Chunk(f"c-{n}", long, f"p{n}.md", f"Page {n}") for n in range(4)]
    with SqliteVectorIndex(tmp_path / "i.sqlite3", embedder.dimensions) as index:
        index.upsert(chunks, embedder.embed([c.text for c in chunks]))
        packed_settings = Settings(data_dir=tmp_path, context_chars=700, top_k=3)
        packed = configured_search(
            "lease", packed_settings, embedder=embedder, index=index, reranker=None, top_k=3
        )
        unpacked = configured_search(
            "lease",
            packed_settings.model_copy(update={"pack_context": False}),
            embedder=embedder,
            index=index,
            reranker=None,
            top_k=3,
        )
    assert sum(len(h.chunk.text) for h in packed) <= 700 and len(packed) <= 3
    assert all(len(h.chunk.text) <= packed_settings.passage_chars for h in packed)
    assert len(unpacked) == 3 and all(h.chunk.text == long for h in unpacked)
