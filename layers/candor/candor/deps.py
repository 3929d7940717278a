"""The dependency bundle the graph and the handlers receive."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from candor.ports import ChatModel, Embedder, Reranker, StateStore, VectorIndex
from candor.settings import Settings

if TYPE_CHECKING:
    from candor.catalogue.reader import Catalogue
    from candor.curated.library import Curation

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Deps:
    settings: Settings
    chat: ChatModel
    embedder: Embedder
    index: VectorIndex
    reranker: Reranker | None
    state: StateStore
    # The owner's curated answers (candor.curated); None: none are looked up.
    curated: Curation | None = None
    # The document catalogue (candor.catalogue); None: questions about the documents
    # themselves go to retrieval like any other.
    catalogue: Catalogue | None = None


def built_once(build: Callable[[], T]) -> Callable[[], T]:
    """`build`, run once per process however many threads ask at the same moment (the
    warm-up and a first request): the others wait for its result instead of building
    a second copy. A build that raises is tried again by the next call."""
    lock = threading.Lock()
    built: list[T] = []

    def provider() -> T:
        if built:  # built once, never replaced: no lock needed to read it
            return built[0]
        with lock:
            if not built:
                built.append(build())
            return built[0]

    return provider
