"""Answers that cited what has since changed or gone, for `candor insights`.

From the traces' citations and the ingest completion records (candor.ingest.records,
written by every `candor ingest`, `candor forget` and S3 event, whatever brought the
change): a cited document whose record is gone (and whose chunks are too) was
removed; one whose record holds another fingerprint than the version the answer read
(the trace's `cited_versions`) changed. For an answer the cache gave, or a trace
stored before versions were kept, there is no version to compare: its document
counts as changed when the words the answer quoted are no longer in it.

Each row says whether the words the answer quoted are still in the document, so
the owner can tell "the page was edited elsewhere" from "the page no longer says
what the visitor was told". Reads one record per cited document, and for a changed
one, the document's chunks (one listing and one fetch): bounded by the distinct
documents the period's answers cited.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from candor.curated.records import CITATION_PREFIX
from candor.ingest.chunking import doc_prefix
from candor.ingest.records import PENDING, CompletionRecords
from candor.ports import VectorIndex
from candor.traces import Trace

Status = Literal["removed", "changed"]


@dataclass(frozen=True, slots=True)
class StaleCitation:
    trace_id: str
    day: str
    question: str | None
    source: str
    url: str | None
    title: str
    status: Status
    quote: str
    # Whether the quoted words are still in the document (None: nothing was quoted).
    still_quoted: bool | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _flat(text: str) -> str:
    return " ".join(text.split()).casefold()


@dataclass
class _Document:
    record: str | None
    text: str | None  # the document's chunks as the index holds them now, once read


class StaleCitations:
    """Looks documents up once each, however many answers cited them."""

    def __init__(self, index: VectorIndex, records: CompletionRecords) -> None:
        self.index = index
        self.records = records
        self._documents: dict[str, _Document] = {}

    def _document(self, source: str) -> _Document:
        if source not in self._documents:
            self._documents[source] = _Document(self.records.record(source), None)
        return self._documents[source]

    def _text(self, source: str) -> str:
        document = self._document(source)
        if document.text is None:
            ids = list(self.index.list_ids(doc_prefix(source)))
            chunks = self.index.fetch(ids) if ids else []
            document.text = _flat(" ".join(chunk.text for chunk in chunks))
        return document.text

    def status(self, source: str, version: str | None, quotes: Sequence[str]) -> Status | None:
        record = self._document(source).record
        if record is None:
            return "removed" if not self._text(source) else None
        if record == PENDING:
            return "changed"  # being written now: what it says is not settled
        if version is not None:
            return "changed" if record != version else None
        return "changed" if self.still_quoted(source, quotes) is False else None

    def still_quoted(self, source: str, quotes: Sequence[str]) -> bool | None:
        """Whether every quoted passage is still word for word in the document."""
        if not quotes:
            return None
        text = self._text(source)
        return all(_flat(quote) in text for quote in quotes)


def stale_citations(traces: Sequence[Trace], finder: StaleCitations) -> list[StaleCitation]:
    """The answers among `traces` that cited a document since changed or removed, one row
    per answer and document, oldest first."""
    rows: list[StaleCitation] = []
    for trace in sorted(traces, key=lambda t: t.created_at):
        if trace.decision != "answered":
            continue
        versions = dict(trace.cited_versions)
        day = datetime.fromtimestamp(trace.created_at, UTC).date().isoformat()
        by_source: dict[str, list[str]] = {}
        first: dict[str, tuple[str | None, str]] = {}
        for citation in trace.citations:
            if citation.id.startswith(CITATION_PREFIX):
                continue  # the owner's own answer: no document to change
            by_source.setdefault(citation.source, []).append(citation.quote)
            first.setdefault(citation.source, (citation.url, citation.title))
        for source, said in by_source.items():
            quotes = [q for q in dict.fromkeys(said) if q]
            status = finder.status(source, versions.get(source), quotes)
            if status is None:
                continue
            url, title = first[source]
            rows.append(
                StaleCitation(
                    trace_id=trace.trace_id,
                    day=day,
                    question=trace.question,
                    source=source,
                    url=url,
                    title=title,
                    status=status,
                    quote=" … ".join(quotes),
                    still_quoted=None
                    if status == "removed"
                    else finder.still_quoted(source, quotes),
                )
            )
    return rows
