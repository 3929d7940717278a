"""Hybrid retrieval: dense and keyword rankings fused into one, then what the model sees.

Every index backend returns the two rankings separately so that the fusion is
the same code whatever the backend. Fusion is Reciprocal Rank Fusion by default,
optionally weighted, or a sum of min-max normalised scores (`fuse`). The passages
the model is shown can be widened with their neighbours in the same section
(`widen`): small passages find the answer, their neighbours give it context.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from candor import packing
from candor.ingest.chunking import chunk_id, doc_prefix
from candor.ports import Embedder, Reranker, VectorIndex, Vectors
from candor.settings import Settings
from candor.types import Chunk, Hit, Metadata, Rankings

Strategy = str  # "dense" | "keyword" | "hybrid" | "hybrid_rerank"
STRATEGIES: tuple[str, ...] = ("dense", "keyword", "hybrid", "hybrid_rerank")
Fusion = Literal["rrf", "score"]
FUSIONS: tuple[Fusion, ...] = ("rrf", "score")


def rrf_fuse(
    rankings: Sequence[Sequence[Hit]], *, k: int = 60, weights: Sequence[float] | None = None
) -> list[Hit]:
    """Fuse rankings by Reciprocal Rank Fusion: score = sum of weight / (k + rank).

    Ranks start at 1; every weight is 1 unless `weights` (one per ranking) says
    otherwise. Ties keep the order in which chunks were first seen, so the result
    is deterministic.
    """
    weights = [1.0] * len(rankings) if weights is None else weights
    scores: dict[str, float] = {}
    first: dict[str, Hit] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, hit in enumerate(ranking, start=1):
            cid = hit.chunk.id
            scores[cid] = scores.get(cid, 0.0) + weight / (k + rank)
            first.setdefault(cid, hit)
    order = sorted(first, key=lambda cid: -scores[cid])
    return [Hit(first[cid].chunk, scores[cid]) for cid in order]


def score_fuse(rankings: Sequence[Sequence[Hit]], *, weights: Sequence[float]) -> list[Hit]:
    """Fuse rankings by their scores: each min-max normalised to [0, 1] within its
    ranking, weighted, and summed; a chunk absent from a ranking gets 0 from it.

    Unlike RRF this keeps how far apart the scores are: a keyword ranking whose
    first chunk is far ahead of its second (an exact identifier) says so. A
    ranking whose scores are all equal gives each of its chunks 1.
    """
    scores: dict[str, float] = {}
    first: dict[str, Hit] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        if not ranking:
            continue
        low = min(hit.score for hit in ranking)
        spread = max(hit.score for hit in ranking) - low
        for hit in ranking:
            cid = hit.chunk.id
            share = (hit.score - low) / spread if spread > 0 else 1.0
            scores[cid] = scores.get(cid, 0.0) + weight * share
            first.setdefault(cid, hit)
    order = sorted(first, key=lambda cid: -scores[cid])
    return [Hit(first[cid].chunk, scores[cid]) for cid in order]


def fuse(
    rankings: Rankings, *, fusion: Fusion = "rrf", rrf_k: int = 60, keyword_weight: float = 1.0
) -> list[Hit]:
    """The dense and keyword rankings as one; the dense ranking weighs 1."""
    pair = [rankings.dense, rankings.keyword]
    weights = [1.0, keyword_weight]
    if fusion == "rrf":
        return rrf_fuse(pair, k=rrf_k, weights=weights)
    if fusion == "score":
        return score_fuse(pair, weights=weights)
    raise ValueError(f"unknown fusion {fusion!r}; expected one of {FUSIONS}")


def diversify(hits: Sequence[Hit], per_source: int) -> list[Hit]:
    """At most `per_source` hits of one document before every other document has its turn.

    A long page (a configuration reference, a manual) matches many questions with
    many passages; without a cap it fills the top ranks and pushes out the page
    that answers. Hits over the cap are not dropped: they follow, in order.
    `per_source` 0 means no cap.
    """
    if per_source == 0:
        return list(hits)
    kept: list[Hit] = []
    deferred: list[Hit] = []
    seen: dict[str, int] = {}
    for hit in hits:
        count = seen.get(hit.chunk.source, 0)
        seen[hit.chunk.source] = count + 1
        (kept if count < per_source else deferred).append(hit)
    return kept + deferred


def search(
    query: str,
    *,
    embedder: Embedder,
    index: VectorIndex,
    reranker: Reranker | None,
    top_k: int,
    candidates: int,
    rrf_k: int = 60,
    strategy: Strategy = "hybrid_rerank",
    where: Metadata | None = None,
    per_source: int = 0,
    fusion: Fusion = "rrf",
    keyword_weight: float = 1.0,
    vector: Vectors | None = None,
) -> list[Hit]:
    """Return the top_k hits for `query` by the given strategy.

    `vector` is the query's embedding when the caller has it already.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown retrieval strategy {strategy!r}; expected one of {STRATEGIES}")
    wants_dense = strategy != "keyword"
    wants_keyword = strategy != "dense"
    if wants_dense and vector is None:
        vector = embedder.embed([query])[0]
    if not wants_dense:
        vector = None
    rankings: Rankings = index.query(
        vector=vector,
        keywords=query if wants_keyword else None,
        top_k=candidates,
        where=where,
    )
    if strategy == "dense":
        return diversify(rankings.dense, per_source)[:top_k]
    if strategy == "keyword":
        return diversify(rankings.keyword, per_source)[:top_k]
    fused = fuse(rankings, fusion=fusion, rrf_k=rrf_k, keyword_weight=keyword_weight)
    if strategy == "hybrid" or reranker is None or not fused:
        return diversify(fused, per_source)[:top_k]
    scores = reranker.rerank(query, [hit.chunk for hit in fused]).scores
    reranked = sorted(zip(fused, scores, strict=True), key=lambda pair: -pair[1])
    return diversify([Hit(hit.chunk, score) for hit, score in reranked], per_source)[:top_k]


# How far on each side of a passage `widen` looks: a section's neighbours past this
# would not fit a prompt budget of a few hundred characters anyway.
_REACH = 4
# The overlap the chunker carries from one passage into the next is about its
# `overlap` (100 characters by default): look for up to 300, and for no less than
# a few words, so that a chance match of a character or two is not taken for one.
_MAX_OVERLAP = 300
_MIN_OVERLAP = 12


def pool(
    query: str,
    settings: Settings,
    *,
    embedder: Embedder,
    index: VectorIndex,
    reranker: Reranker | None,
    strategy: Strategy,
    vector: Vectors | None,
) -> list[Hit]:
    """The candidates packing reads for `query`: the top `pack_candidates` of the
    ranking, with no per-page cap (the best page's other passages are often the
    one that answers). What packing shows can hold no more than they do."""
    return search(
        query,
        embedder=embedder,
        index=index,
        reranker=reranker,
        top_k=settings.pack_candidates,
        candidates=max(settings.candidates, settings.pack_candidates),
        rrf_k=settings.rrf_k,
        per_source=0,
        strategy=strategy,
        fusion=settings.fusion,
        keyword_weight=settings.keyword_weight,
        vector=vector,
    )


def shown(
    query: str,
    settings: Settings,
    *,
    embedder: Embedder,
    index: VectorIndex,
    reranker: Reranker | None,
    top_k: int,
    strategy: Strategy,
) -> list[Hit]:
    """The passages the model is shown for `query` when retrieval uses `strategy`.

    Packed (settings.pack_context, the default): the best sentences of the `pool`,
    in at most `context_chars` characters and `top_k` excerpts of at most
    `passage_chars` each (candor.packing); or, with pack_sentences false, the pool's
    first `top_k` passages whole (cut at `passage_chars`) in rank order, until
    `context_chars` (a hosted model's budget holds them: `whole_passages`). Otherwise
    the first `top_k` passages, per-page cap and small-to-big (widen) as the settings
    say, each cut at `passage_chars` when shown.
    """
    vector = embedder.embed([query])[0] if strategy != "keyword" else None
    if not settings.pack_context:
        hits = search(
            query,
            embedder=embedder,
            index=index,
            reranker=reranker,
            top_k=top_k,
            candidates=settings.candidates,
            rrf_k=settings.rrf_k,
            per_source=settings.max_per_source,
            strategy=strategy,
            fusion=settings.fusion,
            keyword_weight=settings.keyword_weight,
            vector=vector,
        )
        return widen(hits, index, chars=settings.passage_chars) if settings.widen_passages else hits
    hits = pool(
        query,
        settings,
        embedder=embedder,
        index=index,
        reranker=reranker,
        strategy=strategy,
        vector=vector,
    )
    if not settings.pack_sentences:
        return whole_passages(
            hits, budget=settings.context_chars, excerpts=top_k, chars=settings.passage_chars
        )
    return packing.pack(
        query,
        hits,
        embedder,
        budget=settings.context_chars,
        max_excerpts=top_k,
        excerpt_chars=settings.passage_chars,
        question_vector=vector,
    )


def whole_passages(pool: Sequence[Hit], *, budget: int, excerpts: int, chars: int) -> list[Hit]:
    """The pool's first `excerpts` passages whole (each cut at `chars`), in rank order,
    until `budget` characters: what a budget that holds several passages whole shows.

    Sentence packing chooses sentences by their likeness to the question; a passage
    holds the rest of its answer in sentences that are not alike (a list of file
    extensions under "autoescaping is enabled for all templates ending in"). On the
    Flask set, at 3,600 characters, the first passages whole held every keyword for
    every question, packed sentences for 0.864 of them.
    """
    return within(pool[:excerpts], budget=budget, passage_chars=chars)


def configured_search(
    query: str,
    settings: Settings,
    *,
    embedder: Embedder,
    index: VectorIndex,
    reranker: Reranker | None,
    top_k: int,
) -> list[Hit]:
    """The passages the graph's retrieve step shows for `query` under `settings`:
    hybrid, reranked when a reranker is given (see `shown`). The graph and the
    evaluation's gate measurement both call it, so they cannot differ."""
    return shown(
        query,
        settings,
        embedder=embedder,
        index=index,
        reranker=reranker,
        top_k=top_k,
        strategy="hybrid_rerank" if reranker is not None else "hybrid",
    )


def within(hits: Sequence[Hit], *, budget: int, passage_chars: int) -> list[Hit]:
    """The first passages of a ranking that fit `budget` characters as the model is
    shown them (each cut at `passage_chars`): a reference that shows whole passages
    gets the same characters as candor's packed context."""
    kept: list[Hit] = []
    spent = 0
    for hit in hits:
        room = min(passage_chars, budget - spent)
        if room < _MIN_SHOWN:  # a few words of a passage say nothing
            break
        text = hit.chunk.text if len(hit.chunk.text) <= room else _cut(hit.chunk.text, room)
        kept.append(Hit(hit.chunk.with_text(text), hit.score))
        spent += len(text)
    return kept


_MIN_SHOWN = 100


def _cut(text: str, chars: int) -> str:
    cut = text[:chars]
    space = cut.rfind(" ")
    return (cut[:space] if space >= chars // 2 else cut).rstrip()


def widen(hits: Sequence[Hit], index: VectorIndex, *, chars: int) -> list[Hit]:
    """Each hit with the passages around it in the same section, up to `chars` characters.

    Small passages match a question precisely; the sentences around one often hold
    the rest of the answer (an option's name in one passage, its default in the
    next). The neighbours are read by id (`md5(source)-index`), added after the
    passage, then before it, in turn, while the text stays within `chars`; a
    neighbour under another heading, or one that is itself a hit, is left out.
    The overlap the chunker carried between neighbours appears once. Each hit
    keeps its id, score and fields: only its text grows.
    """
    positions = [_position(hit.chunk) for hit in hits]
    wanted = [
        chunk_id(hit.chunk.source, number + step)
        for hit, number in zip(hits, positions, strict=True)
        if number is not None
        for step in (*range(-_REACH, 0), *range(1, _REACH + 1))
        if number + step >= 0
    ]
    found = {chunk.id: chunk for chunk in index.fetch(wanted)} if wanted else {}
    taken = {hit.chunk.id for hit in hits}
    widened: list[Hit] = []
    for hit, number in zip(hits, positions, strict=True):
        chunk = hit.chunk
        if number is None or len(chunk.text) >= chars:
            widened.append(hit)
            continue

        def neighbour(step: int, chunk: Chunk = chunk, number: int = number) -> Chunk | None:
            found_chunk = found.get(chunk_id(chunk.source, number + step))
            if (
                found_chunk is None
                or found_chunk.id in taken
                or found_chunk.source != chunk.source
                or found_chunk.heading != chunk.heading
            ):
                return None
            return found_chunk

        text, after, before = chunk.text, 1, -1
        while after or before:
            if after:
                following = neighbour(after)
                grown = _join(text, following.text) if following else None
                if grown is not None and len(grown) <= chars:
                    text, after = grown, after + 1
                else:
                    after = 0
            if before:
                preceding = neighbour(before)
                grown = _join(preceding.text, text) if preceding else None
                if grown is not None and len(grown) <= chars:
                    text, before = grown, before - 1
                else:
                    before = 0
        widened.append(Hit(chunk.with_text(text), hit.score))
    return widened


def _position(chunk: Chunk) -> int | None:
    """The chunk's index within its document, when its id is `md5(source)-index`."""
    prefix = doc_prefix(chunk.source)
    number = chunk.id.removeprefix(prefix)
    if number == chunk.id or not number.isdigit():
        return None
    return int(number)


def _join(first: str, second: str) -> str:
    """Two consecutive passages as one text, the overlap the chunker carried written once."""
    longest = min(len(first), len(second), _MAX_OVERLAP)
    for size in range(longest, _MIN_OVERLAP - 1, -1):
        if first.endswith(second[:size]):
            return first + second[size:]
    return f"{first}\n\n{second}"
