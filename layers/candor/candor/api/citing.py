"""An answer for clients that read text (assistants, chat tools): the answer, then its sources.

The widget shows citations as chips; an assistant calling MCP and a tool reading
OpenAI's chat format get text. The answer keeps its markers ([1], [2]) and a
numbered list of sources follows it, each with its title, address and the quote
that backs it, so that the reader (a person or a model) can check every claim.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from candor.graph.state import Citation


class SourceOut(BaseModel):
    """One source of an answer, numbered as the answer's markers name it."""

    number: int = Field(ge=1, description="The marker that cites it: [number].")
    title: str
    url: str | None = Field(
        default=None, description="The document's public http(s) address, when it has one."
    )
    source: str = Field(description="The document's path or key in the index.")
    page: int | None = Field(default=None, description="For a PDF, the page the passage is on.")
    quote: str = Field(description="The sentence or two of the document that back the answer.")


def sources(citations: Sequence[Citation]) -> list[SourceOut]:
    return [
        SourceOut(
            number=number,
            title=c.title or c.source,
            url=c.url,
            source=c.source,
            page=c.page,
            quote=c.quote,
        )
        for number, c in enumerate(citations, start=1)
    ]


def source_line(source: SourceOut) -> str:
    where = source.url or source.source
    page = f", page {source.page}" if source.page is not None else ""
    line = f"[{source.number}] {source.title} ({where}{page})"
    return f'{line}\n    "{source.quote}"' if source.quote else line


def with_sources(answer: str, cited: Sequence[SourceOut]) -> str:
    """`answer`, and when it cites, a blank line and its numbered sources."""
    if not cited:
        return answer
    lines = "\n".join(source_line(source) for source in cited)
    return f"{answer}\n\nSources:\n{lines}"
