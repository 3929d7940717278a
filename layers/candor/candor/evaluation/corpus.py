"""The evaluation index: named by a hash of the corpus files, so identical files reuse it."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from candor.ingest.files import iter_paths
from candor.ingest.reading import PIPELINE_VERSION
from candor.ports import Embedder


def corpus_digest(
    documents: Sequence[tuple[str, bytes]], embedder: Embedder, *variant: object
) -> str:
    """A hash of every (source, bytes), the embedder, the pipeline version, and
    whatever else decides what an index holds (`variant`: its kind, its chunking).

    The same files and variant give the same name, so a rerun (or a run that was
    interrupted) reuses the index that is already built, and another variant
    builds its own beside it rather than overwriting it.
    """
    digest = hashlib.sha256()
    digest.update(f"{PIPELINE_VERSION}\x00{embedder.name}\x00{embedder.dimensions}\n".encode())
    digest.update(("\x00".join(map(str, variant)) + "\n").encode())
    for source, data in sorted(documents):
        digest.update(f"{source}\x00{hashlib.sha256(data).hexdigest()}\n".encode())
    return digest.hexdigest()


def index_name(
    documents: Sequence[tuple[str, bytes]], embedder: Embedder, chunking: tuple[int, int]
) -> str:
    """candor's own index of the corpus, cut into (characters, overlap) passages."""
    return f"eval-{corpus_digest(documents, embedder, 'chunking', *chunking)[:16]}"


def read_corpus(folder: Path) -> list[tuple[str, bytes]]:
    """The folder's supported documents as (path below the folder, bytes), sorted."""
    return list(iter_paths([folder]))
