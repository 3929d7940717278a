"""The dependency bundle the graph and the handlers receive."""

from __future__ import annotations

from dataclasses import dataclass

from candor.ports import ChatModel, Embedder, Reranker, StateStore, VectorIndex
from candor.settings import Settings


@dataclass(frozen=True, slots=True)
class Deps:
    settings: Settings
    chat: ChatModel
    embedder: Embedder
    index: VectorIndex
    reranker: Reranker | None
    state: StateStore
