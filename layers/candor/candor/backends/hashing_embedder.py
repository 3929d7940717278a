"""A deterministic offline embedder: signed feature hashing of words and trigrams.

It is a real backend, not a mock: texts that share words or word fragments get
close vectors, so tests and benchmarks can exercise retrieval without model
weights. Quality is far below a trained model; never pick it for production.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from candor.ports import Vectors
from candor.text import words

# Trigrams carry less weight than whole words: they exist to bring inflections
# and compounds ("rebase" / "rebasing") together, not to dominate the vector.
_TRIGRAM_WEIGHT = 0.5


@lru_cache(maxsize=1 << 16)
def _slot(feature: str, dimensions: int) -> tuple[int, float]:
    # blake2b, not hash(): hash() is salted per process, and vectors written to
    # an index by one process are queried by another.
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    # The low bits pick the slot; the top bit picks the sign, so collisions
    # cancel out on average instead of piling up.
    return value % dimensions, -1.0 if value >> 63 else 1.0


def _features(text: str) -> list[tuple[str, float]]:
    features: list[tuple[str, float]] = []
    for word in words(text):
        features.append(("w:" + word, 1.0))
        padded = f"^{word}$"
        features.extend(("t:" + padded[i : i + 3], _TRIGRAM_WEIGHT) for i in range(len(padded) - 2))
    return features


class HashingEmbedder:
    """Hashed word and character-trigram projections, L2-normalised."""

    def __init__(self, dimensions: int = 384) -> None:
        if dimensions < 2:
            raise ValueError(f"dimensions must be at least 2, not {dimensions}")
        self.dimensions = dimensions
        self.name = f"hashing-{dimensions}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            features = _features(text)
            if not features:
                # Nothing to hash: a zero row, which is similar to nothing.
                continue
            slots = np.empty(len(features), dtype=np.int64)
            weights = np.empty(len(features), dtype=np.float64)
            for i, (feature, weight) in enumerate(features):
                slot, sign = _slot(feature, self.dimensions)
                slots[i] = slot
                weights[i] = sign * weight
            vector = np.bincount(slots, weights=weights, minlength=self.dimensions)
            norm = float(np.linalg.norm(vector))
            if norm > 0.0:
                out[row] = vector / norm
        return out
