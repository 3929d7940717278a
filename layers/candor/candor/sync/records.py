"""What a site sync remembers between runs, and the small port that keeps it.

Per page: its URL, its document's source, the validators its server gave (ETag,
Last-Modified) for the next conditional request, the hash of the bytes last
written (None: the page has no document), how many complete syncs in a row have
not listed it, whether it last answered 404/410, and for a crawled site its
on-site links (a 304 has no body to read them from).

Per site: its page count and the summary of its last sync (what `candor stats`
shows), and, on AWS, the sync in progress: its cursor (the pages still to fetch
and those seen, compressed) and a lease that keeps a second delivery of the same
message from working on it at the same time.

The records live beside the other state, in the SQLite state file locally
(candor.backends.sqlite_sync) and in the DynamoDB state table on AWS
(candor.backends.dynamodb_sync), under keys of their own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class PageRecord:
    url: str
    source: str
    etag: str | None = None
    last_modified: str | None = None
    content_hash: str | None = None
    missing: int = 0
    gone: bool = False
    links: tuple[str, ...] = ()

    @property
    def indexed(self) -> bool:
        """Whether the page has a document (written by a sync and not removed since)."""
        return self.content_hash is not None

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["links"] = list(self.links)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PageRecord:
        return cls(
            url=str(data["url"]),
            source=str(data["source"]),
            etag=data.get("etag"),
            last_modified=data.get("last_modified"),
            content_hash=data.get("content_hash"),
            missing=int(data.get("missing", 0)),
            gone=bool(data.get("gone", False)),
            links=tuple(str(link) for link in data.get("links", ())),
        )


@dataclass(frozen=True, slots=True)
class SiteRecord:
    """A site's page count and its last finished sync (`summary`: its counts)."""

    site: str
    pages: int = 0
    last_sync: float | None = None
    summary: dict[str, Any] = field(default_factory=dict)


class SyncStore(Protocol):
    """The sync's records of the sites of one index, in the state store."""

    def pages(self, index_name: str, site: str) -> list[PageRecord]:
        """Every page record of the site."""
        ...

    def put_pages(self, index_name: str, site: str, records: Sequence[PageRecord]) -> None:
        """Write each record whole (a new one or over the old)."""
        ...

    def delete_pages(self, index_name: str, site: str, urls: Sequence[str]) -> None: ...

    def site(self, index_name: str, site: str) -> SiteRecord | None: ...

    def sites(self, index_name: str) -> list[SiteRecord]:
        """Every site synced into the index, by URL."""
        ...

    def put_site(self, index_name: str, record: SiteRecord) -> None: ...

    def lease(self, index_name: str, site: str, holder: str, *, until: float, now: float) -> bool:
        """Hold the site's sync in progress until `until`, if no other holder does
        (a lease past its time is nobody's). False: another holder has it."""
        ...

    def release(self, index_name: str, site: str, holder: str) -> None:
        """Give the lease up (a no-op if `holder` no longer holds it)."""
        ...

    def cursor(self, index_name: str, site: str) -> bytes | None:
        """The sync in progress, as last saved; None when there is none."""
        ...

    def save_cursor(self, index_name: str, site: str, holder: str, cursor: bytes | None) -> bool:
        """Save (None: clear) the sync in progress, only while `holder` holds the
        lease. False: it does not, and nothing was saved."""
        ...
