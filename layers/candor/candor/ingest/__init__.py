"""Ingestion: load documents, chunk them by headings, embed and index the chunks."""

from candor.ingest.chunking import chunk_document, chunk_id, doc_prefix
from candor.ingest.loaders import (
    SUPPORTED_EXTENSIONS,
    Document,
    Section,
    is_supported,
    load_document,
)
from candor.ingest.pipeline import IngestReport, embedding_text, ingest, iter_paths

__all__ = [
    "SUPPORTED_EXTENSIONS",
    "Document",
    "IngestReport",
    "Section",
    "chunk_document",
    "chunk_id",
    "doc_prefix",
    "embedding_text",
    "ingest",
    "is_supported",
    "iter_paths",
    "load_document",
]
