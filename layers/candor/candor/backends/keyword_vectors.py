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
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

# The same runs of letters and digits that FTS5's unicode61 tokenizer finds.
_WORD = re.compile(r"[^\W_]+")
_STOPWORD_TEXT = """
    a an and are as at be but by can could do does did for from had has have how i
    if in into is it its me my no not of on or our should so than that the their
    them then there these this those to was we were what when where which who why
    will with would you your
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

# BM25's usual constants. A chunk's length is compared with a fixed average: the
# chunker bounds passages (800 characters, about 120 words), so the corpus
# average barely moves and needs no bookkeeping.
K1 = 1.2
B = 0.75
AVERAGE_WORDS = 120.0
# As in the local index: a title or heading match says more than one in the body.
TITLE_WEIGHT, HEADING_WEIGHT, TEXT_WEIGHT = 2.0, 1.5, 1.0
# Pinecone accepts at most 1000 non-zero values in a sparse vector.
MAX_TERMS = 1000
_MAX_QUERY_TERMS = 64


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
    its parts, which holds a space and so never equals a word."""
    found: list[str] = []
    for token in text.lower().split():
        parts = _WORD.findall(token)
        if len(parts) > 1:
            found.append(" ".join(parts))
        found.extend(stem(part) for part in parts)
    return found


def document_vector(*, title: str, heading: str, text: str) -> SparseVector:
    """BM25's saturated, length-normalised term frequency of each term of a chunk."""
    weighted: defaultdict[str, float] = defaultdict(float)
    words = 0
    for field, weight in ((title, TITLE_WEIGHT), (heading, HEADING_WEIGHT), (text, TEXT_WEIGHT)):
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
    """One unit weight per distinct term; stopwords only when nothing else is left."""
    terms = features(text)
    kept = [t for t in terms if t not in STOPWORDS] or terms
    distinct = list(dict.fromkeys(kept))[:_MAX_QUERY_TERMS]
    return _vector((term, 1.0) for term in distinct)


def _vector(weights: Iterable[tuple[str, float]]) -> SparseVector:
    # Two terms may hash to one index; their weights add up, as a collision would
    # in the index itself.
    merged: dict[int, float] = {}
    for term, weight in weights:
        index = term_index(term)
        merged[index] = merged.get(index, 0.0) + weight
    indices = sorted(merged)
    return SparseVector(indices, [merged[i] for i in indices])
