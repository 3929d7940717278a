"""The catalogue node: a question about the documents themselves, answered from their
catalogue (candor.catalogue) with no model call.

route sends it the messages screened as `catalogue` ("list every setting", "what do
your docs cover?") and the greetings that ask what candor can help with. The
question is read into one call of a catalogue function (candor.catalogue.asks);
its listing is written by a template (candor.catalogue.answers) and cited to the
passages where the listed pages and sections start. What the catalogue cannot
answer (no function reads the question, no page matches it, the store fails) goes
on to retrieval as any question, or, for a greeting, to small talk.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import Sequence

from candor.catalogue import answers, asks, functions
from candor.catalogue.answers import Mark
from candor.deps import Deps
from candor.errors import CandorError
from candor.graph.citations import citation
from candor.graph.state import Citation, GraphState, Update
from candor.ingest.chunking import chunk_id
from candor.ports import VectorIndex
from candor.types import Hit

logger = logging.getLogger(__name__)

_MARKER = re.compile(r" \[(\d+)\]")


async def catalogue(state: GraphState, deps: Deps) -> Update:
    ask = asks.parse(state.question)
    if ask is None or deps.catalogue is None:
        return _elsewhere(ask)
    # A question the screen took for a content question came here by route's rules
    # alone: only a page or section that matches it in every word will do.
    strict = state.screening is not None and state.screening.kind == "question"
    listing = None
    try:
        version = await asyncio.to_thread(deps.state.corpus_version, deps.settings.index_name)
        records = await asyncio.to_thread(deps.catalogue.documents, version)
        listing = functions.answer(records, ask, strict=strict)
        written = answers.write(listing, ask, deps.settings.site_name) if listing else None
        found = await asyncio.to_thread(_passages, written.marks, deps.index) if written else {}
    except CandorError:
        # The catalogue saves the visitor a worse answer; without it, retrieval answers.
        logger.warning("the catalogue could not be read", exc_info=True)
        return _elsewhere(ask)
    if written is None:
        return _elsewhere(ask)
    text, citations = _cited(written.text, written.marks, found)
    if not citations:
        return _elsewhere(ask)
    return {"decision": "answered", "answer": text, "citations": citations}


def _elsewhere(ask: asks.Ask | None) -> Update:
    """Where a question the catalogue did not answer goes: a greeting to small talk,
    anything else to retrieval (its query is set already)."""
    return {"decision": "smalltalk"} if ask is not None and ask.greeting else {}


def _passages(marks: Sequence[Mark], index: VectorIndex) -> dict[int, Hit]:
    """Per marker, the passage where its page or section starts (the page's first
    passage when the index no longer holds that one); absent when neither is held."""
    wanted: dict[int, list[str]] = {}
    for mark in marks:
        first = chunk_id(mark.record.source, 0)
        at = mark.record.headings[mark.heading].chunk if mark.heading >= 0 else 0
        wanted[mark.number] = [chunk_id(mark.record.source, at), first]
    ids = sorted({cid for options in wanted.values() for cid in options})
    held = {chunk.id: chunk for chunk in index.fetch(ids)} if ids else {}
    found: dict[int, Hit] = {}
    for number, options in wanted.items():
        chunk = next((held[cid] for cid in options if cid in held), None)
        if chunk is not None:
            found[number] = Hit(chunk, 0.0)
    return found


def _cited(
    text: str, marks: Sequence[Mark], found: dict[int, Hit]
) -> tuple[str, tuple[Citation, ...]]:
    """The answer with its markers numbered by the citations that exist, in order.

    Marks whose passages are missing lose their markers; marks of a passage cited
    already (two small sections in one passage) lose theirs too: the first says it.
    """
    numbers: dict[int, int] = {}
    by_chunk: dict[str, int] = {}
    citations: list[Citation] = []
    for mark in marks:
        hit = found.get(mark.number)
        if hit is None or hit.chunk.id in by_chunk:
            continue
        by_chunk[hit.chunk.id] = numbers[mark.number] = len(citations) + 1
        citations.append(dataclasses.replace(citation(hit), quote=mark.quote))

    def renumbered(match: re.Match[str]) -> str:
        new = numbers.get(int(match.group(1)))
        return f" [{new}]" if new else ""

    return _MARKER.sub(renumbered, text), tuple(citations)
