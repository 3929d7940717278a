"""Document-level retrieval metrics on ranked chunk lists.

A hit is a retrieved chunk whose source is an expected source; k counts chunks.
A question about one PDF may expect a page instead: `manual.pdf#page=41` is met by
a passage of manual.pdf that starts on page 41, or on page 40 (a passage of about
800 characters that starts near a page's end runs onto the next).
For a question where any expected source is enough, its rank is that of the first
such chunk. For a multi_hop question, which needs every expected source, its rank
is that of the chunk at which the last missing source first appears: Recall@k is 1
only when every source is in the top k, and the reciprocal rank is 1 / that rank.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from candor.types import Chunk

KS = (1, 5, 10)
PAGE_MARK = "#page="
_PAGED = re.compile(r"(?P<source>.+)#page=(?P<page>[1-9][0-9]*)")


def document_of(expected: str) -> str:
    """The document an expected source names: `manual.pdf#page=41` -> `manual.pdf`."""
    paged = _PAGED.fullmatch(expected)
    return paged["source"] if paged else expected


def places(chunk: Chunk) -> frozenset[str]:
    """What a passage can meet: its document, and for a paged one the page it starts
    on and the next, which it may run onto."""
    if chunk.page is None:
        return frozenset({chunk.source})
    return frozenset(
        {chunk.source, *(f"{chunk.source}{PAGE_MARK}{p}" for p in (chunk.page, chunk.page + 1))}
    )


def _rank(
    ranked: Iterable[Collection[str]], expected: Collection[str], all_needed: bool
) -> int | None:
    wanted = set(expected)
    if not wanted:
        raise ValueError("a question without expected sources has no retrieval rank")
    found: set[str] = set()
    for rank, met in enumerate(ranked, start=1):
        matched = wanted.intersection(met)
        if matched:
            if not all_needed:
                return rank
            found |= matched
            if found == wanted:
                return rank
    return None


def hit_rank(sources: Sequence[str], expected: Collection[str], *, all_needed: bool) -> int | None:
    """The 1-based rank at which the ranking satisfies the question, or None if never."""
    return _rank(([source] for source in sources), expected, all_needed)


def chunk_rank(
    chunks: Sequence[Chunk], expected: Collection[str], *, all_needed: bool
) -> int | None:
    """hit_rank of ranked passages, where an expected source may name a page (`places`)."""
    return _rank((places(chunk) for chunk in chunks), expected, all_needed)


def has_all_keywords(text: str, keywords: Collection[str]) -> bool:
    """Whether `text` contains every keyword, case-insensitively.

    The one test of both an answer (is it correct?) and of the passages the model
    was shown (could an answer from them be?): an answer can only contain a fact
    its passages show, so the second is the ceiling of the first.
    """
    folded = text.casefold()
    return all(keyword.casefold() in folded for keyword in keywords)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation between ranks; None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def summarise(ranks: Sequence[int | None], latencies_ms: Sequence[float]) -> dict[str, Any]:
    """n, Recall@1/5/10, MRR and latency p50/p95 of one strategy."""
    n = len(ranks)
    summary: dict[str, Any] = {"n": n}
    for k in KS:
        hits = sum(1 for r in ranks if r is not None and r <= k)
        summary[f"recall@{k}"] = _round(hits / n, 4) if n else None
    mrr = sum(1 / r for r in ranks if r is not None) / n if n else None
    summary["mrr"] = _round(mrr, 4)
    summary["p50_ms"] = _round(percentile(latencies_ms, 50), 2)
    summary["p95_ms"] = _round(percentile(latencies_ms, 95), 2)
    return summary
