"""The OnnxEmbedder's refusals that need no weights: small files stand in for the model.

Loading the real model file is tests/integration/test_onnx_embedder.py; a unit test
that tried would fail (tests/unit/conftest.py).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.support import local_models

# The module imports onnxruntime and tokenizers; no weights package is needed.
local_models.require("onnxruntime", "tokenizers")

from candor.backends.model_files import EmbeddingModel  # noqa: E402
from candor.backends.onnx_embedder import OnnxEmbedder  # noqa: E402
from candor.errors import ConfigurationError  # noqa: E402

pytestmark = pytest.mark.unit


def stand_in(path: Path, recorded: bytes) -> EmbeddingModel:
    """A record of a converted model whose bytes are `recorded`, at `path`."""
    return EmbeddingModel(
        path=path,
        name="converted",
        sha256=hashlib.sha256(recorded).hexdigest(),
        size=len(recorded),
        remedy="run `candor models` again",
    )


def test_a_converted_file_whose_bytes_changed_is_refused_with_its_remedy(tmp_path: Path) -> None:
    # Given a record of one converted file, and other bytes of the same size on disk
    recorded = b"the converted model as checked"
    path = tmp_path / "converted.onnx"
    path.write_bytes(recorded.upper())

    # When / Then it is refused, with what to do about it
    with pytest.raises(ConfigurationError, match=r"sha256.*candor models"):
        OnnxEmbedder(model=stand_in(path, recorded))


def test_a_file_of_another_size_is_refused_with_its_remedy(tmp_path: Path) -> None:
    path = tmp_path / "converted.onnx"
    path.write_bytes(b"cut short")

    with pytest.raises(ConfigurationError, match=r"9 bytes, not 30.*candor models"):
        OnnxEmbedder(model=stand_in(path, b"the converted model as checked"))


def test_a_missing_model_file_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot be read"):
        OnnxEmbedder(model=stand_in(tmp_path / "absent.onnx", b"anything"))


def test_a_missing_tokenizer_is_a_configuration_error(tmp_path: Path) -> None:
    # Given a model file that matches its record, and no tokenizer where one is named
    path = tmp_path / "model.onnx"
    path.write_bytes(b"bytes as recorded")

    # When / Then the tokenizer is what is refused
    with pytest.raises(ConfigurationError, match="tokenizer"):
        OnnxEmbedder(
            model=stand_in(path, b"bytes as recorded"), tokenizer_path=tmp_path / "absent.json"
        )


def test_nonsense_tuning_is_refused() -> None:
    with pytest.raises(ValueError, match="threads"):
        OnnxEmbedder(threads=-1)
    with pytest.raises(ValueError, match="batch"):
        OnnxEmbedder(batch_texts=0)
    with pytest.raises(ValueError, match="batch"):
        OnnxEmbedder(batch_tokens=0)
