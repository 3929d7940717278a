"""Fixtures for the contract suites: every backend of a port behind one fixture."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from candor.ports import Embedder, VectorIndex
from tests.support import local_models
from tests.support.indexes import BACKENDS, vector_index


@pytest.fixture(scope="session")
def onnx_embedder() -> Embedder:
    local_models.require(*local_models.EMBEDDER)
    from candor.backends.onnx_embedder import OnnxEmbedder

    return OnnxEmbedder()


# Every VectorIndex backend in tests/indexes.py (SQLite, and Pinecone against a
# loopback test server) must pass every contract test unchanged.
@pytest.fixture(params=BACKENDS)
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorIndex]:
    with vector_index(request.param, tmp_path) as backend:
        yield backend
