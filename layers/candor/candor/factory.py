"""Builds the dependency bundle from settings, importing each backend lazily.

A Lambda that never talks to a provider never imports its SDK (openai alone
costs about half a second of cold start).
"""

from __future__ import annotations

from candor.deps import Deps
from candor.errors import ConfigurationError
from candor.ports import ChatModel, Embedder, Reranker, StateStore, VectorIndex
from candor.settings import Settings


def build_embedder(settings: Settings) -> Embedder:
    match settings.embedder_backend:
        case "local":
            from candor.backends.onnx_embedder import OnnxEmbedder

            return OnnxEmbedder()
        case "hashing":
            from candor.backends.hashing_embedder import HashingEmbedder

            return HashingEmbedder()
        case other:
            raise ConfigurationError(f"embedder backend {other!r} is not available yet")


def build_chat(settings: Settings) -> ChatModel:
    match settings.chat_backend:
        case "local":
            from candor.backends.llama_chat import LlamaChatModel
            from candor.backends.model_files import default_model_path

            path = settings.local_model_path or default_model_path(settings.model_cache_dir)
            return LlamaChatModel(
                path,
                threads=settings.llm_threads,
                context_tokens=settings.llm_context_tokens,
                name="local",
                price=settings.price("local"),
            )
        case other:
            raise ConfigurationError(f"chat backend {other!r} is not available yet")


def build_index(settings: Settings, embedder: Embedder) -> VectorIndex:
    match settings.index_backend:
        case "sqlite":
            from candor.backends.sqlite_index import SqliteVectorIndex

            return SqliteVectorIndex(settings.index_path, embedder.dimensions)
        case other:
            raise ConfigurationError(f"index backend {other!r} is not available yet")


def build_state(settings: Settings) -> StateStore:
    match settings.state_backend:
        case "sqlite":
            from candor.backends.sqlite_state import SqliteStateStore

            return SqliteStateStore(settings.state_path)
        case other:
            raise ConfigurationError(f"state backend {other!r} is not available yet")


def build_reranker(settings: Settings, embedder: Embedder) -> Reranker | None:
    match settings.reranker_backend:
        case "none":
            return None
        case "embedder":
            from candor.backends.embedding_reranker import EmbeddingReranker

            return EmbeddingReranker(embedder)


def build_deps(settings: Settings) -> Deps:
    embedder = build_embedder(settings)
    return Deps(
        settings=settings,
        chat=build_chat(settings),
        embedder=embedder,
        index=build_index(settings, embedder),
        reranker=build_reranker(settings, embedder),
        state=build_state(settings),
    )
