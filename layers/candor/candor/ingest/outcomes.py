"""What an ingest run did: one Outcome per document, summed into an IngestReport."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from candor.errors import CandorError

Status = Literal["changed", "unchanged", "deleted", "absent", "failed"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one document.

    changed: a new version was embedded and written; unchanged: the index already
    held this version; deleted: its chunks were removed; absent: a delete found
    nothing to remove; failed: the document is not in the index as given, see
    `reason` (a failure in a backend may leave part of a new version written,
    which the next delivery completes). `retryable` marks failures of a backend
    (a model, the index, storage) rather than of the document, which a later
    attempt may get past.
    """

    source: str
    status: Status
    chunks: int = 0  # the chunks the document has in the index now
    embedded: int = 0
    upserted: int = 0
    deleted: int = 0
    reason: str = ""
    retryable: bool = False
    # The version written, and whether the index changed for it under a PENDING
    # completion record that the end of the run must complete (candor.ingest.records).
    fingerprint: str = ""
    unrecorded: bool = False

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "source": self.source,
            "status": self.status,
            "chunks": self.chunks,
            "embedded": self.embedded,
            "upserted": self.upserted,
            "deleted": self.deleted,
        }
        if self.status == "failed":
            data |= {"reason": self.reason, "retryable": self.retryable}
        return data

    def incomplete(self, reason: str) -> Outcome:
        """This outcome, written to the index but not completed: a retryable failure."""
        return dataclasses.replace(
            self, status="failed", reason=reason, retryable=True, unrecorded=False
        )


@dataclass
class IngestReport:
    """What one ingest run did, summed over its documents."""

    documents_seen: int = 0
    documents_changed: int = 0
    documents_unchanged: int = 0
    documents_deleted: int = 0
    chunks: int = 0  # the chunks the ingested (changed or unchanged) documents have
    chunks_embedded: int = 0
    chunks_upserted: int = 0
    chunks_deleted: int = 0  # stale tails and deleted documents
    failures: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    retryable: list[str] = field(default_factory=list)  # sources that failed in a backend
    corpus_version: int | None = None  # after the bump, when the run changed anything
    seconds: float = 0.0

    @classmethod
    def of(cls, outcomes: Iterable[Outcome], *, corpus_version: int | None = None) -> IngestReport:
        report = cls(corpus_version=corpus_version)
        for outcome in outcomes:
            report.add(outcome)
        return report

    @property
    def documents(self) -> int:
        """Documents that are in the index as they were given (changed or unchanged)."""
        return self.documents_changed + self.documents_unchanged

    @property
    def deleted(self) -> int:
        return self.chunks_deleted

    def add(self, outcome: Outcome) -> None:
        self.documents_seen += 1
        self.chunks_embedded += outcome.embedded
        self.chunks_upserted += outcome.upserted
        self.chunks_deleted += outcome.deleted
        match outcome.status:
            case "changed" | "unchanged":
                if outcome.status == "changed":
                    self.documents_changed += 1
                else:
                    self.documents_unchanged += 1
                self.chunks += outcome.chunks
            case "deleted":
                self.documents_deleted += 1
            case "failed":
                self.failures.append((outcome.source, outcome.reason))
                if outcome.retryable:
                    self.retryable.append(outcome.source)
            case "absent":
                pass

    def to_json(self) -> dict[str, Any]:
        return {
            # The first four keys predate the rest; scripts read them.
            "documents": self.documents,
            "chunks": self.chunks,
            "deleted": self.chunks_deleted,
            "failed": len(self.failures),
            "documents_seen": self.documents_seen,
            "documents_changed": self.documents_changed,
            "documents_unchanged": self.documents_unchanged,
            "documents_deleted": self.documents_deleted,
            "chunks_embedded": self.chunks_embedded,
            "chunks_upserted": self.chunks_upserted,
            "chunks_deleted": self.chunks_deleted,
            "failures": [{"source": s, "reason": r} for s, r in self.failures],
            "corpus_version": self.corpus_version,
            "seconds": round(self.seconds, 3),
        }


def describe(error: Exception) -> str:
    """An error as a failure's reason: candor's own say what they are."""
    return str(error) if isinstance(error, CandorError) else f"{type(error).__name__}: {error}"
