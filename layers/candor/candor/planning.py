"""The plan: a question with two or more asks, split into sub-questions and retrieved for each.

"How do I turn my commits into e-mail patches, and how does the maintainer apply
them?" needs two pages, and one search for the whole question tends to find one of
them: the passages that answer the first ask outrank those of the second. So such
a question is split by rules (`split`, no model call), each part is searched with
the same hybrid search and packed on its own share of the context (`shown`), and the
excerpts are put together, so that every part keeps at least one. The graph then
grades the whole once and answers it once (candor.graph.plan).

A question with one ask is not split, and takes today's path with no added call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from candor import retrieval
from candor.ports import Embedder, Reranker, VectorIndex
from candor.settings import Settings
from candor.text import STOPWORDS, words
from candor.types import Hit

# The most parts a question is split into: more asks than this share the last part.
MAX_PARTS = 3
# A part shorter than this many words is not an ask of its own ("and why?").
MIN_PART_WORDS = 3

_QUESTION_START = (
    r"(?:how|what|which|where|when|why|who|whose|is|are|can|could|do|does|did|should|would|"
    r"will|has|have)\b"
)
# ", and how ...", "; and what ...", ", and then how ...": a second ask begins. Without
# a comma only a wh-word starts one ("... and how does that relate ..."): "and is"
# is too often inside one ask ("tags that exist and are signed"). A comma alone starts
# none: "When using `git bisect run`, which exit code ..." is one ask.
_SECOND_ASK = re.compile(
    rf"\s*[,;]\s*and\s+(?:then\s+|also\s+)?(?={_QUESTION_START})"
    r"|\s+and\s+(?:then\s+|also\s+)?(?=(?:how|what|which|where|when|why|who)\b)",
    re.IGNORECASE,
)
# Sentences: after . ? ! and a space, before a capital or a backtick.
_SENTENCE = re.compile(r"(?<=[.?!])\s+(?=[A-Z`\"'(])")
# Words that point back to what an earlier part named.
_POINTING_TEXT = "it its it's they them their those these that this each one ones both either"
_POINTING = frozenset(_POINTING_TEXT.split())
_CODE = re.compile(r"`[^`]+`")


@dataclass(frozen=True, slots=True)
class Plan:
    """A question's asks: each part as written, and the query it is searched by (with
    the question's context sentences, and the names an earlier part gave "it")."""

    parts: tuple[str, ...]
    queries: tuple[str, ...]

    @property
    def multiple(self) -> bool:
        return len(self.parts) > 1


def split(question: str) -> Plan:
    """The question's asks. A single ask is one part, searched by the question itself."""
    text = " ".join(question.split())
    sentences = [s for s in _SENTENCE.split(text) if s.strip()]
    context = [s for s in sentences if not s.rstrip().endswith("?")]
    asks: list[str] = []
    for sentence in sentences:
        if not sentence.rstrip().endswith("?"):
            continue
        pieces = [p.strip() for p in _SECOND_ASK.split(sentence.rstrip(" ?")) if p.strip()]
        for piece in pieces:
            if asks and len(piece.split()) < MIN_PART_WORDS:
                asks[-1] = f"{asks[-1]}, and {piece}"
            else:
                asks.append(piece)
    if len(asks) < 2:
        return Plan((text,), (text,))
    if len(asks) > MAX_PARTS:
        asks = [*asks[: MAX_PARTS - 1], "? ".join(asks[MAX_PARTS - 1 :])]
    parts = tuple(_as_question(ask) for ask in asks)
    lead = " ".join(context)
    queries = []
    for number, part in enumerate(parts):
        query = f"{lead} {part}".strip()
        if number and _points_back(part):
            query = f"{query} {_named(parts[0])}".strip()
        queries.append(query)
    return Plan(parts, tuple(queries))


def _as_question(ask: str) -> str:
    ask = ask.strip().rstrip(",;")
    return ask[:1].upper() + ask[1:] + "?"


def _points_back(part: str) -> bool:
    return bool(_POINTING.intersection(words(part)))


def _named(part: str) -> str:
    """What a part names for a later one to point at: its code names, else its words."""
    code = _CODE.findall(part)
    if code:
        return " ".join(code)
    return " ".join(w for w in words(part) if w not in STOPWORDS)


def shown(
    plan: Plan,
    settings: Settings,
    *,
    embedder: Embedder,
    index: VectorIndex,
    reranker: Reranker | None,
    top_k: int,
    strategy: str,
) -> list[Hit]:
    """The excerpts the model reads for a planned question: each part's own, packed on
    an equal share of the characters and excerpts (at least one each), in part order.

    A passage two parts both chose appears once, under the first; a part whose every
    excerpt an earlier one holds is answered by those.
    """
    if not plan.multiple:
        return retrieval.shown(
            plan.queries[0],
            settings,
            embedder=embedder,
            index=index,
            reranker=reranker,
            top_k=top_k,
            strategy=strategy,
        )
    share = settings.model_copy(update={"context_chars": settings.context_chars // len(plan.parts)})
    excerpts = max(1, top_k // len(plan.parts))
    found: list[Hit] = []
    held: set[str] = set()
    for query in plan.queries:
        for hit in retrieval.shown(
            query,
            share,
            embedder=embedder,
            index=index,
            reranker=reranker,
            top_k=excerpts,
            strategy=strategy,
        ):
            if hit.chunk.id not in held:
                held.add(hit.chunk.id)
                found.append(hit)
    return found


def configured_shown(
    plan: Plan,
    settings: Settings,
    *,
    embedder: Embedder,
    index: VectorIndex,
    reranker: Reranker | None,
    top_k: int,
) -> list[Hit]:
    """`shown` with the strategy the graph uses (as retrieval.configured_search)."""
    return shown(
        plan,
        settings,
        embedder=embedder,
        index=index,
        reranker=reranker,
        top_k=top_k,
        strategy="hybrid_rerank" if reranker is not None else "hybrid",
    )
