"""Builds the dependency bundle from settings, importing each backend lazily.

A Lambda that never talks to a provider never imports its SDK (openai alone
costs about half a second of cold start).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from candor.deps import Deps
from candor.errors import ConfigurationError
from candor.ports import CatalogueStore, ChatModel, Embedder, Reranker, StateStore, VectorIndex
from candor.secrets import api_key
from candor.settings import Settings

if TYPE_CHECKING:
    from candor.catalogue.keeping import DocumentCatalogue
    from candor.catalogue.reader import Catalogue
    from candor.curated.library import Curation
    from candor.curated.records import CuratedAnswers
    from candor.gaps.records import GapStore
    from candor.handoffs.store import HandoffStore
    from candor.ingest.s3 import S3Ingestion


def openai_api_key(settings: Settings) -> str:
    return api_key(
        "openai",
        direct=settings.openai_api_key,
        parameter=settings.openai_api_key_parameter,
        environment="OPENAI_API_KEY",
        region=settings.aws_region,
    )


def build_embedder(settings: Settings) -> Embedder:
    match settings.embedder_backend:
        case "local":
            from candor.backends.model_files import local_embedding_model
            from candor.backends.onnx_embedder import OnnxEmbedder

            return OnnxEmbedder(model=local_embedding_model(settings.model_cache_dir))
        case "hashing":
            from candor.backends.hashing_embedder import HashingEmbedder

            return HashingEmbedder()
        case "openai":
            from candor.backends.openai_embedder import OpenAIEmbedder

            return OpenAIEmbedder(
                model=settings.embedding_model,
                api_key=openai_api_key(settings),
                price=settings.price(settings.embedding_model),
                dimensions=settings.embedding_dimensions,
                base_url=settings.openai_base_url,
                timeout=settings.openai_timeout_seconds,
                max_retries=settings.openai_max_retries,
            )
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
        case "openai":
            from candor.backends.openai_chat import OpenAIChatModel

            return OpenAIChatModel(
                model=settings.chat_model,
                api_key=openai_api_key(settings),
                price=settings.price(settings.chat_model),
                base_url=settings.openai_base_url,
                timeout=settings.openai_timeout_seconds,
                max_retries=settings.openai_max_retries,
            )
        case other:
            raise ConfigurationError(f"chat backend {other!r} is not available yet")


def build_index(settings: Settings, embedder: Embedder, *, curated: bool = False) -> VectorIndex:
    """The documents' index, or with `curated` the curated questions' own index: a
    SQLite file of its own, or a Pinecone namespace of its own ("<index name>#curated",
    which no index name can be), so that no ingest or sync touches it."""
    match settings.index_backend:
        case "sqlite":
            from candor.backends.sqlite_index import SqliteVectorIndex

            # The name check stops an index built by one 384-wide embedder from being
            # searched with another's vectors.
            return SqliteVectorIndex(
                settings.curated_index_path if curated else settings.index_path,
                embedder.dimensions,
                embedder=embedder.name,
            )
        case "pinecone":
            from candor.backends.pinecone_index import PineconeVectorIndex

            if not settings.pinecone_host:
                raise ConfigurationError("CANDOR_PINECONE_HOST must name the Pinecone index host")
            client = pinecone_client(settings)
            sparse_host = settings.pinecone_sparse_host
            return PineconeVectorIndex(
                client.index(host=settings.pinecone_host),
                sparse=client.index(host=sparse_host) if sparse_host else None,
                dimensions=embedder.dimensions,
                namespace=f"{settings.index_name}#curated" if curated else settings.index_name,
                attempt_timeout=settings.pinecone_timeout_seconds,
            )
        case other:
            raise ConfigurationError(f"index backend {other!r} is not available yet")


def build_state(settings: Settings) -> StateStore:
    match settings.state_backend:
        case "sqlite":
            from candor.backends.sqlite_state import SqliteStateStore

            return SqliteStateStore(settings.state_path)
        case "dynamodb":
            from candor.backends.dynamodb_state import DynamoDBStateStore

            if not settings.state_table:
                raise ConfigurationError("CANDOR_STATE_TABLE must name the DynamoDB table")
            # A session's record (its warned or ended status) must outlive its signed
            # id: were it to expire first, an ended session would answer again.
            return DynamoDBStateStore(
                settings.state_table,
                endpoint_url=settings.dynamodb_endpoint_url,
                region=settings.aws_region,
                session_ttl_seconds=settings.session_max_age_seconds,
            )
        case other:
            raise ConfigurationError(f"state backend {other!r} is not available yet")


def build_curated_answers(settings: Settings) -> CuratedAnswers:
    """The curated answers' store: in the state store's SQLite file or DynamoDB table."""
    match settings.state_backend:
        case "sqlite":
            from candor.backends.sqlite_curated import SqliteCuratedAnswers

            return SqliteCuratedAnswers(settings.state_path)
        case "dynamodb":
            from candor.backends.dynamodb_curated import DynamoDBCuratedAnswers

            if not settings.state_table:
                raise ConfigurationError("CANDOR_STATE_TABLE must name the DynamoDB table")
            return DynamoDBCuratedAnswers(
                settings.state_table,
                endpoint_url=settings.dynamodb_endpoint_url,
                region=settings.aws_region,
            )
        case other:
            raise ConfigurationError(f"state backend {other!r} is not available yet")


def build_gaps(settings: Settings) -> GapStore:
    """The gaps' store: in the state store's SQLite file or DynamoDB table."""
    match settings.state_backend:
        case "sqlite":
            from candor.backends.sqlite_gaps import SqliteGaps

            return SqliteGaps(settings.state_path)
        case "dynamodb":
            from candor.backends.dynamodb_gaps import DynamoDBGaps

            if not settings.state_table:
                raise ConfigurationError("CANDOR_STATE_TABLE must name the DynamoDB table")
            return DynamoDBGaps(
                settings.state_table,
                endpoint_url=settings.dynamodb_endpoint_url,
                region=settings.aws_region,
            )
        case other:
            raise ConfigurationError(f"state backend {other!r} is not available yet")


def build_curation(settings: Settings, embedder: Embedder) -> Curation:
    """The curated answers of the configured index: their store and their own index."""
    from candor.curated.library import Curation

    return Curation(
        store=build_curated_answers(settings),
        index=build_index(settings, embedder, curated=True),
        index_name=settings.index_name,
    )


def pinecone_client(settings: Settings, *, retries: bool = True) -> Any:
    """A Pinecone client with the configured key; it makes no call until used.

    `retries=False`: the SDK retries nothing itself, not even a timed-out request
    that may have been billed (candor.billing), which the budget would not see.
    """
    from pinecone import Pinecone, RetryConfig

    key = api_key(
        "pinecone",
        direct=settings.pinecone_api_key,
        parameter=settings.pinecone_api_key_parameter,
        environment="PINECONE_API_KEY",
        region=settings.aws_region,
    )
    # The timeout bounds each attempt; the SDK retries 5xx, 429 and lost connections itself.
    retry = None if retries else RetryConfig(max_retries=0)
    return Pinecone(api_key=key, timeout=settings.pinecone_timeout_seconds, retry_config=retry)


def build_reranker(settings: Settings) -> Reranker | None:
    match settings.reranker_backend:
        case "none":
            return None
        case "pinecone":
            from candor.backends.pinecone_reranker import PineconeReranker

            # One request per reranking, as the reservation counts: a busy or slow
            # reranker keeps the fused order rather than being retried.
            return PineconeReranker(
                pinecone_client(settings, retries=False).inference,
                model=settings.rerank_model,
                price_per_unit=settings.rerank_price(settings.rerank_model),
            )
        case other:
            raise ConfigurationError(f"reranker backend {other!r} is not available yet")


def build_catalogue_store(settings: Settings) -> CatalogueStore:
    """Where the document catalogue lives: beside the state store's records."""
    match settings.state_backend:
        case "sqlite":
            from candor.backends.sqlite_catalogue import SqliteCatalogueStore

            return SqliteCatalogueStore(settings.state_path)
        case "dynamodb":
            from candor.backends.dynamodb_catalogue import DynamoDBCatalogueStore

            if not settings.state_table:
                raise ConfigurationError("CANDOR_STATE_TABLE must name the DynamoDB table")
            return DynamoDBCatalogueStore(
                settings.state_table,
                endpoint_url=settings.dynamodb_endpoint_url,
                region=settings.aws_region,
            )
        case other:
            raise ConfigurationError(f"state backend {other!r} is not available yet")


def document_catalogue(settings: Settings) -> DocumentCatalogue:
    """The catalogue records ingest keeps for the configured index."""
    from candor.catalogue.keeping import DocumentCatalogue

    return DocumentCatalogue(build_catalogue_store(settings), settings.index_name)


def build_catalogue(settings: Settings) -> Catalogue:
    """The document catalogue the graph reads (candor.catalogue.reader)."""
    from candor.catalogue.reader import Catalogue

    return Catalogue(build_catalogue_store(settings), settings.index_name)


def build_deps(settings: Settings) -> Deps:
    embedder = build_embedder(settings)
    return Deps(
        settings=settings,
        chat=build_chat(settings),
        embedder=embedder,
        index=build_index(settings, embedder),
        reranker=build_reranker(settings),
        state=build_state(settings),
        curated=build_curation(settings, embedder),
        catalogue=build_catalogue(settings),
    )


def build_s3_ingestion(settings: Settings) -> S3Ingestion:
    """What the S3 ingest function runs: the embedder and index, a reader of the
    documents bucket, and the completion records and corpus version in the state store."""
    from candor.ingest.reading import Chunking
    from candor.ingest.records import CompletionRecords
    from candor.ingest.s3 import S3Ingestion, S3Reader

    embedder = build_embedder(settings)
    return S3Ingestion(
        embedder=embedder,
        index=build_index(settings, embedder),
        reader=S3Reader(region=settings.aws_region, max_bytes=settings.ingest_max_bytes),
        chunking=Chunking(
            max_chars=settings.chunk_chars,
            overlap=settings.chunk_overlap,
            max_bytes=settings.ingest_max_bytes,
            max_pdf_pages=settings.ingest_max_pdf_pages,
            max_chunks=settings.ingest_max_chunks,
        ),
        records=CompletionRecords(build_state(settings), settings.index_name),
        catalogue=document_catalogue(settings),
    )


def build_handoff_store(settings: Settings) -> HandoffStore:
    """The hand-offs' store, beside the state store's records (their own table or prefix)."""
    match settings.state_backend:
        case "sqlite":
            from candor.backends.sqlite_handoffs import SqliteHandoffStore

            return SqliteHandoffStore(settings.state_path)
        case "dynamodb":
            from candor.backends.dynamodb_handoffs import DynamoDBHandoffStore

            if not settings.state_table:
                raise ConfigurationError("CANDOR_STATE_TABLE must name the DynamoDB table")
            return DynamoDBHandoffStore(
                settings.state_table,
                endpoint_url=settings.dynamodb_endpoint_url,
                region=settings.aws_region,
            )
        case other:
            raise ConfigurationError(f"state backend {other!r} is not available yet")
