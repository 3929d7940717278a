"""What a document's bytes become: its chunks, the text each is embedded by, and the
fingerprint of both. Pure functions of the bytes and the settings, so whatever fails
here is the document's fault (an IngestError) and is not retried: the same bytes
fail the same way. Writing them to an index is candor.ingest.pipeline.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass

from candor.errors import IngestError
from candor.ingest.chunking import chunk_document
from candor.ingest.document import Document
from candor.ingest.loaders import load_document
from candor.ports import Embedder
from candor.types import Chunk

logger = logging.getLogger(__name__)

# Part of every document fingerprint: bump it when the loaders or the chunker
# change what the same bytes become, so that the next ingest redoes every document.
# 2: titles and headings capped in bytes. 3: PDFs read with PDFium, their chunks
# carry their page. 4: HTML hidden from readers dropped.
PIPELINE_VERSION = "4"
# The most a chunk's stored fields (text, source, title, heading, metadata, as
# JSON) may take. Pinecone keeps them as metadata, at most 40 KB per vector, and
# adds its own keys; the other backends take more. The chunker's caps keep real
# chunks far below this; a larger one is refused as the document's fault before
# anything is embedded, rather than failing in the index on every delivery.
MAX_CHUNK_BYTES = 32 * 1024
# What one document may become before anything is embedded (the settings
# CANDOR_INGEST_MAX_PDF_PAGES and CANDOR_INGEST_MAX_CHUNKS, same defaults). Bytes alone
# do not bound the work: a PDF's pages can share one content stream, and a 384 KB
# file became 32,000 passages to embed. The largest documents of the evaluation
# corpora are far below: a 261-page PDF of 965 passages, an HTML page of 477.
# 10,000 passages is about 160 embedding calls of 64, inside the ingest function's
# five minutes; 2,000 pages is a long manual, refused before its text is extracted.
DEFAULT_MAX_PDF_PAGES = 2_000
DEFAULT_MAX_CHUNKS = 10_000


@dataclass(frozen=True, slots=True)
class Chunking:
    """How documents become chunks and vectors: part of every fingerprint."""

    max_chars: int = 800
    overlap: int = 100
    batch_size: int = 64  # texts per embedding call and chunks per upsert
    max_bytes: int | None = None  # a larger document is a failure, not read
    # A PDF of more pages, or a document of more chunks, is a failure, not embedded.
    max_pdf_pages: int | None = DEFAULT_MAX_PDF_PAGES
    max_chunks: int | None = DEFAULT_MAX_CHUNKS

    def __post_init__(self) -> None:
        # Checked here, once, so that a bad setting fails the run at its start
        # instead of failing every document as if each were at fault.
        if self.max_chars < 1:
            raise ValueError(f"max_chars must be positive, not {self.max_chars}")
        if not 0 <= self.overlap < self.max_chars:
            raise ValueError(f"overlap must be in [0, max_chars), not {self.overlap}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be positive, not {self.batch_size}")
        for name in ("max_pdf_pages", "max_chunks"):
            limit = getattr(self, name)
            if limit is not None and limit < 1:
                raise ValueError(f"{name} must be positive, not {limit}")


def embedding_text(chunk: Chunk) -> str:
    """What the embedder sees: "title — heading" on a line, then the passage.

    A passage often never names its subject ("Defaults to true."); the title and
    heading put "git-push(1) — OPTIONS > --force-with-lease" into its vector. On
    the Git dev set with the local MiniLM this found as many or more answer-bearing
    passages in the top 4 as the text alone (17 vs 15 dense, 20 vs 19 hybrid, of
    28 questions): within noise, so the reason above decides.
    """
    context = " — ".join(part for part in (chunk.title, chunk.heading) if part)
    return f"{context}\n{chunk.text}" if context else chunk.text


def fingerprint(
    data: bytes, *, embedder: Embedder, chunking: Chunking, media_type: str | None = None
) -> str:
    """What decides a document's chunks and vectors, hashed: same fingerprint, same index."""
    digest = hashlib.sha256()
    header = "\x00".join(
        (
            PIPELINE_VERSION,
            embedder.name,
            str(embedder.dimensions),
            str(chunking.max_chars),
            str(chunking.overlap),
            media_type or "",
        )
    )
    digest.update(header.encode())
    digest.update(b"\x00")
    digest.update(data)
    return digest.hexdigest()


def read_chunks(
    source: str, data: bytes, chunking: Chunking, media_type: str | None
) -> list[Chunk]:
    """The document's chunks. A pure function of the bytes: whatever fails here is
    the document's fault (an IngestError), since the same bytes fail the same way."""
    return read(source, data, chunking, media_type)[1]


def read(
    source: str, data: bytes, chunking: Chunking, media_type: str | None
) -> tuple[Document, list[Chunk]]:
    """The document as its loader made it (what the catalogue reads), and its chunks."""
    try:
        document = load_document(
            data, source, media_type=media_type, max_pdf_pages=chunking.max_pdf_pages
        )
        chunks = chunk_document(document, max_chars=chunking.max_chars, overlap=chunking.overlap)
    except IngestError:
        raise
    except Exception as e:
        # A loader's or the chunker's own exception: perhaps a bug, so with the
        # traceback, but retrying the same bytes cannot get past it.
        logger.exception("cannot read %s", source)
        raise IngestError(f"{source}: cannot be read ({type(e).__name__}: {e})") from e
    if not chunks:
        # Most likely a page whose text the loader stripped as furniture: say so
        # rather than silently dropping the document's old chunks.
        raise IngestError(f"{source}: no text to index")
    if chunking.max_chunks is not None and len(chunks) > chunking.max_chunks:
        raise IngestError(
            f"{source}: {len(chunks)} passages is over the limit of {chunking.max_chunks} "
            "(CANDOR_INGEST_MAX_CHUNKS); split the document or raise the limit"
        )
    for chunk in chunks:
        size = _stored_bytes(chunk)
        if size > MAX_CHUNK_BYTES:
            raise IngestError(
                f"{source}: passage {chunk.id} takes {size} bytes, over the {MAX_CHUNK_BYTES} "
                "an index can store per passage"
            )
    return document, chunks


def _stored_bytes(chunk: Chunk) -> int:
    fields = {
        "text": chunk.text,
        "source": chunk.source,
        "title": chunk.title,
        "heading": chunk.heading,
        **chunk.metadata,
    }
    return len(json.dumps(fields, ensure_ascii=False).encode("utf-8"))
