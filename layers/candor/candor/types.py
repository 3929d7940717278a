"""Value types shared by the ports, the graph and the API."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal, TypedDict

MetadataValue = str | int | float | bool
Metadata = Mapping[str, MetadataValue]

# The metadata key of the 1-based page a chunk of a paged document (PDF) starts on.
PAGE_KEY = "page"
# The metadata key of the public address of a chunk's document (candor.urls), which a
# citation links to; absent or "" when the document has none.
URL_KEY = "url"


class Message(TypedDict):
    """One chat message, as every chat model takes it."""

    role: Literal["system", "user", "assistant"]
    content: str


# What a record's `tokens_evaluated` holds when nobody reported it: a backend that
# cannot tell, or a trace stored before the field. It reads as all of `tokens_in`,
# so that sums over calls that did and did not report stay meaningful.
NOT_REPORTED = -1


@dataclass(frozen=True, slots=True)
class Usage:
    """What one model call consumed. cost_usd comes from the settings' price table.

    `tokens_evaluated` is how many of the `tokens_in` prompt tokens the model
    actually computed: a backend that keeps the evaluated state of a prompt's
    beginning (llama.cpp's KV cache, OpenAI's prompt caching) reads the rest from
    it. Left out, it is all of `tokens_in`.
    """

    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    calls: int = 1
    tokens_evaluated: int = NOT_REPORTED

    def __post_init__(self) -> None:
        if self.tokens_evaluated == NOT_REPORTED:
            object.__setattr__(self, "tokens_evaluated", self.tokens_in)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.tokens_in + other.tokens_in,
            self.tokens_out + other.tokens_out,
            self.cost_usd + other.cost_usd,
            self.calls + other.calls,
            self.tokens_evaluated + other.tokens_evaluated,
        )


NO_USAGE = Usage(calls=0)


@dataclass(frozen=True, slots=True)
class Chunk:
    """A passage of a document, the unit that is embedded, indexed and cited.

    `id` is `md5(source)-chunkIndex`, so that a document's chunks share a prefix.
    """

    id: str
    text: str
    source: str
    title: str = ""
    heading: str = ""
    metadata: Metadata = field(default_factory=dict)

    def with_text(self, text: str) -> Chunk:
        """The same passage showing `text`: an excerpt of it, or it with its neighbours.
        Its id, page and fields stay, so a citation of it names the same place."""
        return replace(self, text=text)

    @property
    def page(self) -> int | None:
        """The 1-based page the passage starts on, for a PDF (a link can open
        `source#page=N`); None for documents without pages.

        It lives in the metadata, which every index stores and gives back as it was.
        """
        value = self.metadata.get(PAGE_KEY)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def url(self) -> str | None:
        """The public http(s) address of the passage's document, checked when it was
        ingested (candor.urls); None when the document has none."""
        value = self.metadata.get(URL_KEY)
        return value if isinstance(value, str) and value else None


@dataclass(frozen=True, slots=True)
class Hit:
    """A chunk found by a search, with the score of the ranking that found it."""

    chunk: Chunk
    score: float


@dataclass(frozen=True, slots=True)
class Rankings:
    """The two rankings one index query returns; fusion happens in candor.retrieval.

    `read_units`: what the query was billed, as the index reported it (Pinecone's
    read units, candor.index_reads); None where nothing says (a local index bills
    nothing; a response without usage).
    """

    dense: list[Hit]
    keyword: list[Hit]
    read_units: float | None = None
