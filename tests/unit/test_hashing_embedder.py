"""The HashingEmbedder: a deterministic offline embedder that still carries meaning."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from candor.backends.hashing_embedder import HashingEmbedder
from candor.ports import Embedder

pytestmark = pytest.mark.unit


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def test_it_implements_the_embedder_port() -> None:
    assert isinstance(HashingEmbedder(), Embedder)


def test_embed_returns_one_float32_row_per_text() -> None:
    vectors = HashingEmbedder(64).embed(["one", "two words", "three words here"])
    assert vectors.shape == (3, 64)
    assert vectors.dtype == np.float32


def test_rows_are_unit_length() -> None:
    vectors = HashingEmbedder().embed(["git push --force-with-lease", "a", "x" * 5000])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_embedding_nothing_returns_an_empty_matrix_of_the_right_width() -> None:
    assert HashingEmbedder().embed([]).shape == (0, 384)


def test_a_text_without_words_embeds_to_a_zero_row() -> None:
    # Nothing to hash: a zero row is similar to nothing, which is the honest answer.
    vectors = HashingEmbedder().embed(["", "?!... --"])
    assert not vectors.any()


def test_the_same_text_gets_the_same_vector_in_another_process() -> None:
    # Given a vector computed here
    text = "rerere.enabled records conflict resolutions"
    here = HashingEmbedder().embed([text])[0]

    # When another interpreter, with its own hash() salt, embeds the same text
    code = (
        "import sys; from candor.backends.hashing_embedder import HashingEmbedder; "
        f"sys.stdout.buffer.write(HashingEmbedder().embed([{text!r}])[0].tobytes())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    ).stdout

    # Then the vectors are identical, so an index written by one process can be
    # queried by another
    assert np.array_equal(np.frombuffer(out, dtype=np.float32), here)


def test_similar_texts_are_closer_than_unrelated_ones() -> None:
    embed = HashingEmbedder().embed
    query, similar, unrelated = embed(
        [
            "how do I rebase my branch onto main",
            "rebasing a branch onto the main branch",
            "the spending budget is reserved before each model call",
        ]
    )
    assert cosine(query, similar) > cosine(query, unrelated) + 0.2


def test_inflected_words_share_similarity_through_trigrams() -> None:
    embed = HashingEmbedder().embed
    rebase, rebasing, merge = embed(["rebase", "rebasing", "merge"])
    assert cosine(rebase, rebasing) > cosine(rebase, merge)


def test_case_does_not_change_the_vector() -> None:
    upper, lower = HashingEmbedder().embed(["Git Push", "git push"])
    assert np.array_equal(upper, lower)


def test_name_says_the_width_so_indexes_of_different_widths_are_told_apart() -> None:
    assert HashingEmbedder(128).name != HashingEmbedder(384).name


def test_fewer_than_two_dimensions_are_refused() -> None:
    with pytest.raises(ValueError):
        HashingEmbedder(1)
