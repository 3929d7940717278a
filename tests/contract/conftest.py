"""Fixtures for the contract suites: every backend of a port behind one fixture."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

import pytest

from candor.backends.sqlite_state import SqliteStateStore
from candor.ports import Embedder, VectorIndex
from tests.support import dynamodb_local, local_models
from tests.support.indexes import BACKENDS, vector_index

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class _HasClose(Protocol):
    def close(self) -> None: ...


Closable = TypeVar("Closable", bound=_HasClose)


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


class StateBacking:
    """One state file (SQLite) or one table (DynamoDB Local) that a test opens stores on.

    Each store a test opens gets its own connection or client, as a separate process
    would, so that a race between two stores is a race between two writers.
    """

    def __init__(self, kind: str, path: Path, endpoint: str = "", table: str = "") -> None:
        self.kind = kind
        self.path = path
        self.table = table
        self._endpoint = endpoint
        self._closers: list[Callable[[], None]] = []

    def client(self) -> DynamoDBClient:
        return dynamodb_local.client(self._endpoint)

    def closing(self, store: Closable) -> Closable:
        """`store`, closed when the test ends."""
        self._closers.append(store.close)
        return store

    def close(self) -> None:
        for close in self._closers:
            close()


@pytest.fixture(params=["sqlite", "dynamodb"])
def state_backing(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateBacking]:
    """The state store's two backings; every store's contract runs on both."""
    path = tmp_path / "state.sqlite3"
    if request.param == "sqlite":
        # The state store shares the file: every schema must live beside its tables.
        SqliteStateStore(path).close()
        backing = StateBacking("sqlite", path)
        yield backing
        backing.close()
        return
    endpoint: str = request.getfixturevalue("dynamodb_endpoint")
    admin = dynamodb_local.client(endpoint)
    table = dynamodb_local.create_state_table(admin)
    yield StateBacking("dynamodb", path, endpoint, table)
    admin.delete_table(TableName=table)
