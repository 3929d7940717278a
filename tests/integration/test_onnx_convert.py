"""The embedding model's install-time int8 conversion, on the real shipped file.

Each conversion takes a few seconds, so the module converts once through
`candor models` (as `make install` does) and once more to compare bytes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import local_models

# The conversion tools are install-time extras: without them this module skips.
local_models.require(*local_models.EMBEDDER, *local_models.CONVERTER)

import onnx  # noqa: E402

from candor.backends import onnx_convert  # noqa: E402
from candor.backends.model_files import (  # noqa: E402
    CONVERTED_EMBEDDER_FILE,
    SHIPPED_EMBEDDER,
    EmbeddingModel,
    local_embedding_model,
    prepare_embedding_model,
    shipped_embedding_model,
)
from candor.backends.onnx_embedder import OnnxEmbedder, embedder_of  # noqa: E402
from candor.backends.sqlite_index import SqliteVectorIndex  # noqa: E402
from candor.cli import main  # noqa: E402
from candor.errors import ConfigurationError  # noqa: E402
from candor.settings import Settings  # noqa: E402
from tests.conftest import clear_candor_env  # noqa: E402

pytestmark = pytest.mark.integration


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A model cache in which `candor models` has converted the embedding model."""
    root = tmp_path_factory.mktemp("models")
    # A chat model file of our own, so that the 1.1 GB join is not part of this.
    chat = root / "chat.gguf"
    chat.write_bytes(b"GGUF")
    with pytest.MonkeyPatch.context() as env:
        clear_candor_env(env)
        env.setenv("CANDOR_MODEL_CACHE_DIR", str(root / "cache"))
        env.setenv("CANDOR_LOCAL_MODEL_PATH", str(chat))
        assert main(["models"]) == 0
    yield root / "cache"


@pytest.fixture(scope="module")
def converted(cache: Path) -> EmbeddingModel:
    return local_embedding_model(cache)


def test_candor_models_converts_once_and_names_the_file_by_its_digest(
    converted: EmbeddingModel, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the cache `candor models` filled, the converted file is what candor loads
    assert converted.path == cache / CONVERTED_EMBEDDER_FILE
    assert converted.name != SHIPPED_EMBEDDER
    assert converted.name.endswith(_sha256(converted.path)[:12])

    # When `candor models` runs again, it keeps the file it made (no second conversion)
    made = converted.path.stat().st_mtime_ns
    assert prepare_embedding_model(cache, embedder_of) == converted
    assert converted.path.stat().st_mtime_ns == made


def test_a_conversion_made_by_another_recipe_is_made_again(
    converted: EmbeddingModel, cache: Path, tmp_path: Path
) -> None:
    # Given a cache whose conversion an older recipe made
    old = tmp_path / "cache"
    shutil.copytree(cache, old)
    record_path = old / f"{CONVERTED_EMBEDDER_FILE}.json"
    record = json.loads(record_path.read_text())
    record_path.write_text(json.dumps({**record, "recipe": "an older recipe"}))
    calls: list[Path] = []

    def same_bytes(source: Path, target: Path) -> None:
        calls.append(source)
        shutil.copyfile(converted.path, target)

    # When the models are prepared
    model = prepare_embedding_model(old, embedder_of, convert=same_bytes)

    # Then the file is converted (and checked) again
    assert calls == [shipped_embedding_model().path]
    assert model.name == converted.name
    assert json.loads(record_path.read_text())["recipe"] != "an older recipe"


def test_conversion_is_deterministic(converted: EmbeddingModel, tmp_path: Path) -> None:
    # When the shipped file is converted again, elsewhere
    again = tmp_path / "again.onnx"
    onnx_convert.convert(shipped_embedding_model().path, again)

    # Then the bytes are the same, and so is the name the index records
    assert _sha256(again) == converted.sha256


def test_the_converted_model_agrees_with_the_shipped_one(converted: EmbeddingModel) -> None:
    shipped = OnnxEmbedder(model=shipped_embedding_model())
    ours = OnnxEmbedder(model=converted)
    assert ours.name == converted.name

    agreement = onnx_convert.min_cosine(shipped, ours, onnx_convert.GATE_TEXTS)

    assert agreement >= onnx_convert.MIN_COSINE
    record = json.loads(converted.path.with_name(f"{converted.path.name}.json").read_text())
    assert record["min_cosine"] == pytest.approx(agreement, abs=1e-5)


def test_the_fusions_alone_compute_what_the_shipped_model_computes(tmp_path: Path) -> None:
    # Given the shipped file with its dequantisation folded and its layers fused
    # (its own attention fusion included), but nothing quantized
    model = onnx.load(str(shipped_embedding_model().path))
    onnx_convert.fold_dequantization(model)
    fused = tmp_path / "fused.onnx"
    onnx_convert.fuse(model, fused)
    assert {"Attention", "SkipLayerNormalization"} <= {
        n.op_type for n in onnx.load(fused).graph.node
    }
    ours = OnnxEmbedder(
        model=EmbeddingModel(fused, "fused", _sha256(fused), fused.stat().st_size, remedy="-")
    )

    # When both embed texts of many lengths (so that batches are padded)
    agreement = onnx_convert.min_cosine(
        OnnxEmbedder(model=shipped_embedding_model()), ours, onnx_convert.GATE_TEXTS
    )

    # Then the vectors are the same up to float rounding
    assert agreement > 0.99999


def test_a_conversion_that_fails_the_cosine_gate_falls_back_to_the_shipped_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a worse recipe: one int8 scale per weight tensor, every MatMul in int8
    per_tensor = functools.partial(onnx_convert.convert, per_channel=False, fp32_layers=())

    # When it is the conversion `candor models` runs
    with caplog.at_level(logging.WARNING, logger="candor.backends.model_files"):
        model = prepare_embedding_model(tmp_path, embedder_of, convert=per_tensor)

    # Then the shipped file is used, a log line says why, and no converted file is kept
    assert model == shipped_embedding_model()
    assert "rejected" in caplog.text and "cosine as low as" in caplog.text
    assert not (tmp_path / CONVERTED_EMBEDDER_FILE).exists()
    assert [p.name for p in tmp_path.iterdir()] == [f"{CONVERTED_EMBEDDER_FILE}.lock"]
    assert local_embedding_model(tmp_path) == shipped_embedding_model()


def test_a_conversion_that_breaks_falls_back_to_the_shipped_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def garbage(source: Path, target: Path) -> None:
        target.write_bytes(b"not an onnx model")

    with caplog.at_level(logging.WARNING, logger="candor.backends.model_files"):
        model = prepare_embedding_model(tmp_path, embedder_of, convert=garbage)

    assert model == shipped_embedding_model()
    assert "conversion failed" in caplog.text
    assert local_embedding_model(tmp_path) == shipped_embedding_model()


def _ingest(capsys: pytest.CaptureFixture[str], folder: Path) -> dict[str, Any]:
    assert main(["ingest", str(folder), "--json"]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def test_the_index_records_the_converted_model_and_a_re_ingest_embeds_nothing(
    converted: EmbeddingModel,
    cache: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given the local embedder and a cache holding the converted model
    clear_candor_env(monkeypatch)
    monkeypatch.setenv("CANDOR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CANDOR_MODEL_CACHE_DIR", str(cache))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "kite.md").write_text("# Kites\n\nUnpack the kite and let out the line slowly.\n")
    (docs / "winch.md").write_text("# Winch\n\nThe winch coils loose lines.\n")

    # When the folder is ingested twice
    first = _ingest(capsys, docs)
    again = _ingest(capsys, docs)

    # Then the second run embeds nothing
    assert first["chunks_embedded"] == 2
    assert (again["chunks_embedded"], again["documents_unchanged"]) == (0, 2)
    # And the index was built with the converted file: opening it as the shipped
    # model's index is refused, naming the file's digest
    index_path = Settings().index_path
    with pytest.raises(ConfigurationError, match=converted.name):
        SqliteVectorIndex(index_path, 384, embedder=SHIPPED_EMBEDDER)
    SqliteVectorIndex(index_path, 384, embedder=converted.name).close()
