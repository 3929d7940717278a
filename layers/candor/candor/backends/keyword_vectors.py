"""Keyword (sparse) vectors for an index that ranks by dot product, such as a Pinecone
sparse index: BM25's document side computed here, so that no service embeds text.

BM25 scores a chunk as the sum over the query's terms of IDF(term) times a
saturated, length-normalised term frequency. A dot product can carry that split
exactly: the chunk's vector holds the term-frequency part, the query's vector the
IDF part. candor fills the chunk side fully; the query side weighs every term
the same, because IDF needs the number of chunks that contain each term, and an
index filled one S3 object at a time by concurrent functions has no consistent
place to keep those counts. What IDF would do for the keyword ranking, which
exists to find exact identifiers (`--force-with-lease`, `rerere.enabled`, `125`),
the rest of the design does: stopwords are dropped from queries, and an
identifier made of several parts is also a feature of its own ("rerere enabled"),
which only the chunks that name it have. Fusion with the dense ranking (RRF in
candor.retrieval) settles the rest.

Terms are hashed to 32-bit indices (blake2b, stable across processes), so there
is no vocabulary to store or ship. Words get a light suffix stemming ("exits" and
"exit" meet), like the Porter stemmer behind the local index's FTS5 table.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from candor.text import FIELD_WEIGHTS, phrase, query_terms, token_parts

# BM25's usual constants. A chunk's length is compared with a fixed average: the
# chunker bounds passages (800 characters, about 120 words), so the corpus
# average barely moves and needs no bookkeeping.
K1 = 1.2
B = 0.75
AVERAGE_WORDS = 120.0
# Pinecone accepts at most 1000 non-zero values in a sparse vector.
MAX_TERMS = 1000


@dataclass(frozen=True, slots=True)
class SparseVector:
    indices: list[int]
    values: list[float]

    def __bool__(self) -> bool:
        return bool(self.indices)

    def to_json(self) -> dict[str, list[int] | list[float]]:
        return {"indices": self.indices, "values": self.values}


@lru_cache(maxsize=1 << 16)
def term_index(term: str) -> int:
    """A term's dimension: 32 bits of blake2b (hash() is salted per process)."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "little")


def stem(word: str) -> str:
    """Strip the commonest English inflections; identifiers and numbers pass unchanged."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "ches", "shes", "xes", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    if word.endswith("ing") and len(word) > 5:
        return word[:-3]
    if word.endswith("ed") and len(word) > 4:
        return word[:-2]
    return word


def features(text: str) -> list[str]:
    """The terms of `text` in order: stemmed words, and for a token that punctuation
    splits into parts (`rerere.enabled`, `--force-with-lease`) also the phrase of
    its parts (candor.text.token_parts)."""
    found: list[str] = []
    for parts in token_parts(text):
        if len(parts) > 1:
            found.append(phrase(parts))
        found.extend(stem(part) for part in parts)
    return found


def document_vector(
    *,
    title: str,
    heading: str,
    text: str,
    weights: tuple[float, float, float] = FIELD_WEIGHTS,
) -> SparseVector:
    """BM25's saturated, length-normalised term frequency of each term of a chunk,
    a match in each field counting its weight (title, heading, text), as locally."""
    weighted: defaultdict[str, float] = defaultdict(float)
    words = 0
    for field, weight in zip((title, heading, text), weights, strict=True):
        terms = features(field)
        words += len(terms)
        for term in terms:
            weighted[term] += weight
    if not weighted:
        return SparseVector([], [])
    norm = K1 * (1 - B + B * words / AVERAGE_WORDS)
    scored = {term: tf * (K1 + 1) / (tf + norm) for term, tf in weighted.items()}
    kept = sorted(scored.items(), key=lambda item: -item[1])[:MAX_TERMS]
    return _vector(kept)


def query_vector(text: str) -> SparseVector:
    """One unit weight per distinct term of candor.text.query_terms, stemmed as the
    chunks' words are: the terms the local index searches by."""
    terms = dict.fromkeys(term if " " in term else stem(term) for term in query_terms(text))
    return _vector((term, 1.0) for term in terms)


def _vector(weights: Iterable[tuple[str, float]]) -> SparseVector:
    # Two terms may hash to one index; their weights add up, as a collision would
    # in the index itself.
    merged: dict[int, float] = {}
    for term, weight in weights:
        index = term_index(term)
        merged[index] = merged.get(index, 0.0) + weight
    indices = sorted(merged)
    return SparseVector(indices, [merged[i] for i in indices])
