"""The `plain` reference: the retrieval a user could set up in an afternoon.

Fixed 800-character chunks with 100 characters of overlap, cut like LangChain's
RecursiveCharacterTextSplitter (paragraphs, then lines, then words, then anywhere);
the chunk's text alone is embedded, by the same embedder candor uses; exact dense
search and SQLite FTS5 over the text, fused by RRF with k = 60, no cap per page.
No titles, no headings, no labels. It is built in the harness from the same
documents, read by the same loaders, so that a change to candor's chunking, fields
or fusion that loses to it shows in every report.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from candor.backends.sqlite_index import SqliteVectorIndex
from candor.errors import IngestError
from candor.evaluation.corpus import corpus_digest
from candor.ingest.chunking import chunk_id
from candor.ingest.document import Document
from candor.ingest.loaders import load_document
from candor.ingest.pages import with_pages
from candor.ports import Embedder
from candor.retrieval import rrf_fuse
from candor.types import Chunk, Hit

CHUNK_SIZE = 800
CHUNK_OVERLAP = 100
SEPARATORS = ("\n\n", "\n", " ", "")
RRF_K = 60
# In the index's name: a change to what plain stores (2: a PDF passage's page)
# builds a new index in place of reusing one that lacks it.
VERSION = 2
_BATCH = 64


def split_text(
    text: str,
    *,
    chunk_size: int = CHUNK_SIZE,
    chunk_overlap: int = CHUNK_OVERLAP,
    separators: Sequence[str] = SEPARATORS,
) -> list[str]:
    """LangChain's RecursiveCharacterTextSplitter with its defaults (separators kept
    at the start of the piece they precede, whitespace stripped), in plain Python."""
    separator = separators[-1]
    rest: Sequence[str] = ()
    for i, candidate in enumerate(separators):
        if candidate == "":
            separator = candidate
            break
        if candidate in text:
            separator, rest = candidate, separators[i + 1 :]
            break
    chunks: list[str] = []
    good: list[str] = []
    for piece in _split_keeping(text, separator):
        if len(piece) < chunk_size:
            good.append(piece)
            continue
        if good:
            chunks.extend(_merge(good, chunk_size, chunk_overlap))
            good = []
        if rest:
            chunks.extend(
                split_text(
                    piece, chunk_size=chunk_size, chunk_overlap=chunk_overlap, separators=rest
                )
            )
        else:
            chunks.append(piece)
    if good:
        chunks.extend(_merge(good, chunk_size, chunk_overlap))
    return chunks


def _split_keeping(text: str, separator: str) -> list[str]:
    if not separator:
        return [c for c in text if c]
    parts = re.split(f"({re.escape(separator)})", text)
    pieces = [parts[0]] + [parts[i] + parts[i + 1] for i in range(1, len(parts) - 1, 2)]
    return [p for p in pieces if p]


def _merge(splits: list[str], chunk_size: int, chunk_overlap: int) -> list[str]:
    # The separator stays in the pieces, so they are joined with nothing.
    docs: list[str] = []
    current: list[str] = []
    total = 0
    for piece in splits:
        size = len(piece)
        if total + size > chunk_size and current:
            joined = "".join(current).strip()
            if joined:
                docs.append(joined)
            while total > chunk_overlap or (total + size > chunk_size and total > 0):
                total -= len(current[0])
                current = current[1:]
        current.append(piece)
        total += size
    joined = "".join(current).strip()
    if joined:
        docs.append(joined)
    return docs


def document_text(document: Document) -> str:
    """The document as one text, each heading on a line above its section."""
    parts = [
        f"{section.heading}\n\n{section.text}" if section.heading else section.text
        for section in document.sections
    ]
    return "\n\n".join(part.strip() for part in parts if part.strip())


def chunks_of(documents: Sequence[tuple[str, bytes]]) -> list[Chunk]:
    chunks: list[Chunk] = []
    for source, data in documents:
        try:
            document = load_document(data, source)
        except IngestError:
            continue  # candor's own index leaves it out too
        pieces = [
            Chunk(id=chunk_id(source, number), text=text, source=source)
            for number, text in enumerate(split_text(document_text(document)))
        ]
        # A PDF's passages name the page they start on, as candor's do: a question
        # about a PDF expects a page, and plain must be able to meet it.
        chunks.extend(with_pages(pieces, document.pages) if document.pages else pieces)
    return chunks


def index_path(data_dir: Path, documents: Sequence[tuple[str, bytes]], embedder: Embedder) -> Path:
    digest = corpus_digest(documents, embedder, "plain", VERSION, CHUNK_SIZE, CHUNK_OVERLAP)
    return data_dir / "indexes" / f"plain-{digest[:16]}.sqlite3"


def open_index(path: Path, embedder: Embedder) -> SqliteVectorIndex:
    return SqliteVectorIndex(path, embedder.dimensions, embedder=embedder.name)


def missing(index: SqliteVectorIndex, chunks: Sequence[Chunk]) -> list[Chunk]:
    """The chunks the index does not hold yet, after deleting those it should not hold:
    an interrupted build resumes, and a rerun embeds nothing."""
    held = set(index.list_ids())
    wanted = {chunk.id for chunk in chunks}
    stale = [cid for cid in held if cid not in wanted]
    if stale:
        index.delete(stale)
    return [chunk for chunk in chunks if chunk.id not in held]


def fill(
    index: SqliteVectorIndex,
    chunks: Sequence[Chunk],
    embedder: Embedder,
    *,
    progress: Callable[[int], object] | None = None,
) -> None:
    """Embed each chunk's text alone and write it."""
    for start in range(0, len(chunks), _BATCH):
        batch = chunks[start : start + _BATCH]
        index.upsert(batch, embedder.embed([chunk.text for chunk in batch]))
        if progress is not None:
            progress(len(batch))


def search(
    query: str,
    *,
    embedder: Embedder,
    index: SqliteVectorIndex,
    top_k: int,
    candidates: int,
    strategy: str = "plain",
) -> list[Hit]:
    """`plain`: dense and keyword fused by RRF (k = 60), no cap; `plain_dense`: dense alone."""
    vector = embedder.embed([query])[0]
    if strategy == "plain_dense":
        return index.dense(vector, top_k=top_k)
    rankings = index.query(vector=vector, keywords=query, top_k=candidates)
    return rrf_fuse([rankings.dense, rankings.keyword], k=RRF_K)[:top_k]
