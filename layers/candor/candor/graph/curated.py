"""The curated node: after moderate and route, before retrieval, the owner's own answer.

A question that asks what a curated question asks (candor.curated.matching) is
answered with the owner's text, as written, with one citation: "From the site
owner", and its address when the owner gave one. No model call: the text is the
owner's, not generated, so nothing needs checking against passages.

The service usually finds the match itself before it reserves for the graph, when
moderate will need no model call (candor.service): then only the embedding was
reserved, and this node serves what it found. Otherwise (the screening classifier
was unsure, or screening is off) the budget was reserved for the whole graph, and
this node looks the question up itself. A lookup that fails (the store or the
curated index) is logged and the question goes on to retrieval: the owner's
answers are a shortcut, never a reason to fail a question.
"""

from __future__ import annotations

import asyncio
import logging
import re

from candor.curated import lookup
from candor.curated.records import CHIP_TITLE, CITATION_PREFIX, CuratedAnswer
from candor.deps import Deps
from candor.graph.state import Citation, GraphState, Update
from candor.withheld import type_name, withheld

logger = logging.getLogger(__name__)

# How the owner's text is streamed: a sentence or a line at a time, as an answer is.
_PIECE = re.compile(r".*?(?:[.!?](?=\s)|\n|$)\s*", re.DOTALL)


def citation(answer: CuratedAnswer) -> Citation:
    """The one chip a curated answer shows."""
    return Citation(
        id=f"{CITATION_PREFIX}{answer.id}",
        source=answer.url or f"{CITATION_PREFIX}{answer.id}",
        title=CHIP_TITLE,
        snippet="",
        url=answer.url,
    )


def served(answer: CuratedAnswer) -> Update:
    return {
        "decision": "answered",
        "answer": answer.answer,
        "citations": (citation(answer),),
        "curated_id": answer.id,
    }


def pieces(text: str) -> list[str]:
    """`text` in the pieces it is streamed in; joined, they are `text`."""
    return [piece for piece in _PIECE.findall(text) if piece]


async def curated(state: GraphState, deps: Deps) -> Update:
    if state.curated_found is not None:
        return served(state.curated_found)
    curation = deps.curated
    match_rule = lookup.rule(deps.settings, deps.embedder.name)
    if curation is None or match_rule is None:
        return {}
    try:
        match = await asyncio.to_thread(
            lookup.find, state.question, curation, deps.embedder, match_rule
        )
    except Exception as error:  # a shortcut lost, not the question
        logger.warning(
            "the curated answers could not be looked up; retrieving instead",
            exc_info=withheld(error),
            extra={"error_type": type_name(error)},
        )
        return {}
    return served(match.answer) if match is not None else {}
