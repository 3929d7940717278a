"""The evaluation index: named by a hash of the corpus files, so identical files reuse it."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from candor.ingest.pipeline import PIPELINE_VERSION, iter_paths
from candor.ports import Embedder


def corpus_digest(documents: Sequence[tuple[str, bytes]], embedder: Embedder) -> str:
    """A hash of every (source, bytes), the embedder and the pipeline version.

    The same files with the same embedder give the same index name, so a rerun (or
    a run that was interrupted) reuses the index that is already built.
    """
    digest = hashlib.sha256()
    digest.update(f"{PIPELINE_VERSION}\x00{embedder.name}\x00{embedder.dimensions}\n".encode())
    for source, data in sorted(documents):
        digest.update(f"{source}\x00{hashlib.sha256(data).hexdigest()}\n".encode())
    return digest.hexdigest()


def index_name(documents: Sequence[tuple[str, bytes]], embedder: Embedder) -> str:
    return f"eval-{corpus_digest(documents, embedder)[:16]}"


def read_corpus(folder: Path) -> list[tuple[str, bytes]]:
    """The folder's supported documents as (path below the folder, bytes), sorted."""
    return list(iter_paths([folder]))
