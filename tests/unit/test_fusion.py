"""Fusion variants: weighted Reciprocal Rank Fusion, and min-max normalised scores."""

from __future__ import annotations

import pytest

from candor.retrieval import fuse, rrf_fuse, score_fuse
from candor.types import Chunk, Hit, Rankings

pytestmark = pytest.mark.unit


def hit(cid: str, score: float = 0.0) -> Hit:
    return Hit(Chunk(id=cid, text=f"text of {cid}", source=f"{cid}.md"), score)


def ids(hits: list[Hit]) -> list[str]:
    return [h.chunk.id for h in hits]


def test_a_heavier_keyword_ranking_wins_where_the_two_disagree() -> None:
    # Given rankings that each put a different chunk first
    rankings = Rankings(dense=[hit("d"), hit("k")], keyword=[hit("k"), hit("d")])

    # Then equal weights keep the dense order on the tie, and a heavier keyword side
    # puts the keyword ranking's first chunk first
    assert ids(fuse(rankings)) == ["d", "k"]
    assert ids(fuse(rankings, keyword_weight=1.5)) == ["k", "d"]
    assert ids(fuse(rankings, keyword_weight=0.5)) == ["d", "k"]


def test_weighted_rrf_scores_are_weighted_reciprocal_ranks() -> None:
    fused = rrf_fuse([[hit("a")], [hit("b"), hit("a")]], k=10, weights=[1.0, 2.0])
    scores = {h.chunk.id: h.score for h in fused}
    assert scores["a"] == pytest.approx(1 / 11 + 2 / 12)
    assert scores["b"] == pytest.approx(2 / 11)


def test_score_fusion_keeps_how_far_ahead_a_first_place_is() -> None:
    # Given a keyword ranking whose first chunk is far ahead (an exact identifier)
    # and a dense ranking whose scores are close together
    dense = [hit("d1", 0.52), hit("k1", 0.51), hit("d2", 0.50)]
    keyword = [hit("k1", 30.0), hit("d1", 2.0), hit("d2", 1.0)]

    # Then score fusion puts the identifier's chunk first, where RRF sees a tie of ranks
    assert ids(score_fuse([dense, keyword], weights=[1.0, 1.0]))[0] == "k1"
    assert ids(rrf_fuse([dense, keyword]))[0] == "d1"


def test_score_fusion_normalises_each_ranking_to_the_unit_range() -> None:
    fused = score_fuse([[hit("a", 9.0), hit("b", 5.0)], [hit("b", 0.3)]], weights=[1.0, 0.5])
    scores = {h.chunk.id: h.score for h in fused}
    # a: first of the dense ranking (1.0); b: last of it (0.0) plus the whole of a
    # one-hit keyword ranking, which counts as its top (0.5 x 1.0).
    assert scores == {"a": pytest.approx(1.0), "b": pytest.approx(0.5)}


def test_fusing_empty_rankings_gives_nothing() -> None:
    assert fuse(Rankings([], []), fusion="score") == []
    assert fuse(Rankings([], [])) == []


def test_an_unknown_fusion_is_refused() -> None:
    with pytest.raises(ValueError, match="borda"):
        fuse(Rankings([hit("a")], []), fusion="borda")  # type: ignore[arg-type]
