"""VectorIndex backends for integration tests: SQLite in a temporary folder, and
Pinecone against the loopback test server (tests/pinecone_server.py)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from candor.backends.sqlite_index import SqliteVectorIndex
from candor.ports import VectorIndex
from tests.support import pinecone_server

DIMENSIONS = 384
BACKENDS = ("sqlite", "pinecone")
_namespaces = itertools.count()


@contextmanager
def vector_index(backend: str, tmp_path: Path) -> Iterator[VectorIndex]:
    if backend == "sqlite":
        with SqliteVectorIndex(tmp_path / "index.sqlite3", DIMENSIONS) as local:
            yield local
        return
    from pinecone import Pinecone

    from candor.backends.pinecone_index import PineconeVectorIndex

    with (
        pinecone_server.serve("dense", DIMENSIONS) as dense,
        pinecone_server.serve("sparse") as sparse,
    ):
        client = Pinecone(api_key="test-key")
        dense_index, sparse_index = client.index(host=dense.url), client.index(host=sparse.url)
        index = PineconeVectorIndex(
            dense_index,
            sparse=sparse_index,
            dimensions=DIMENSIONS,
            namespace=f"site-{next(_namespaces)}",
        )
        try:
            yield index
        finally:
            index.close()
            dense_index.close()
            sparse_index.close()
