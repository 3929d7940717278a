"""Ingestion: load documents, chunk them by headings, embed and index the chunks.

Keeping an index in step with an S3 bucket is candor.ingest.s3.
"""

from candor.ingest.chunking import chunk_document, chunk_id, doc_prefix
from candor.ingest.document import Document, Section
from candor.ingest.files import iter_paths
from candor.ingest.loaders import SUPPORTED_EXTENSIONS, is_supported, load_document
from candor.ingest.outcomes import IngestReport, Outcome
from candor.ingest.pipeline import (
    complete,
    count_documents,
    delete_document,
    ingest,
    ingest_document,
)
from candor.ingest.reading import Chunking, embedding_text
from candor.ingest.records import CompletionRecords

__all__ = [
    "SUPPORTED_EXTENSIONS",
    "Chunking",
    "CompletionRecords",
    "Document",
    "IngestReport",
    "Outcome",
    "Section",
    "chunk_document",
    "chunk_id",
    "complete",
    "count_documents",
    "delete_document",
    "doc_prefix",
    "embedding_text",
    "ingest",
    "ingest_document",
    "is_supported",
    "iter_paths",
    "load_document",
]
