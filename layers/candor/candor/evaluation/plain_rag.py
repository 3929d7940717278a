"""The `plain_rag` reference: the `plain` retrieval and one answer call, nothing else.

What a user could build in an afternoon with a RAG tutorial: retrieve the top
passages (the `plain` reference's chunks and search, candor.evaluation.plain),
show them at the same character budget candor's model reads, and ask the same
chat model once, with a plain prompt that allows it to say it does not know. No
router, no grade, no rewrite, no gate, no support check.

Every agent report runs it on the same questions as the graph (those that
retrieve: answerable and unanswerable), so that the graph's extra calls have to
earn their cost: it must beat this on declines and unsupported specifics and
match it on answers. Its answers go through candor's support check only to be
counted (`unsupported_left`), never trimmed.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Sequence

from candor import retrieval, text
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.evaluation import catalogue_metrics, plain
from candor.evaluation.agent_metrics import AgentRecord
from candor.evaluation.questions import ANSWERABLE_KINDS, CATALOGUE_KINDS, Question
from candor.graph import prompts, support
from candor.graph.citations import MARKER, citation
from candor.ports import ChatModel, Embedder, TextPiece, read_text
from candor.types import Hit, Message

KINDS = frozenset({*ANSWERABLE_KINDS, *CATALOGUE_KINDS, "unanswerable"})
MAX_PASSAGES = 10

SYSTEM = (
    "You are a helpful assistant. Answer the question using only the numbered context "
    "passages. Cite the passages you use by their number in square brackets, like [1]. "
    "If the context does not contain the answer, say that you don't know."
)

# How a plain RAG answer says it does not know: the phrase the prompt asks for, or
# a short reply that is only about the context lacking the answer.
_DONT_KNOW = re.compile(r"^\W*i\s+(?:don'?t|do\s+not)\s+know\b", re.IGNORECASE)
_LACKS = re.compile(
    r"\b(?:context|passages?|documents?|text)\s+(?:provided\s+)?(?:does|do)\s+not\s+"
    r"(?:contain|provide|mention|include|say|specify|cover|have)\b"
    r"|\bno\s+information\b|\bnot\s+(?:mentioned|provided|covered)\b",
    re.IGNORECASE,
)
_SHORT_WORDS = 40


def declines(answer: str) -> bool:
    """Whether a plain RAG answer is a decline (candor's own declines are fixed text)."""
    text = answer.strip()
    if not text or _DONT_KNOW.search(text):
        return True
    return len(text.split()) <= _SHORT_WORDS and _LACKS.search(text) is not None


def context_text(hits: Sequence[Hit], passage_chars: int) -> str:
    """The passages numbered as a tutorial numbers them, each cut at `passage_chars`."""
    return "\n\n".join(
        f"[{number}] {prompts.shown_text(hit.chunk.text, passage_chars)}"
        for number, hit in enumerate(hits, 1)
    )


def messages(hits: Sequence[Hit], question: str, passage_chars: int) -> list[Message]:
    return [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": f"Context:\n{context_text(hits, passage_chars)}\n\nQuestion: {question}",
        },
    ]


def _markers(answer: str) -> list[int]:
    return list(dict.fromkeys(int(m) for m in MARKER.findall(answer)))


async def answer_one(
    question: Question,
    *,
    chat: ChatModel,
    embedder: Embedder,
    index: SqliteVectorIndex,
    budget: int,
    candidates: int,
    passage_chars: int,
    max_tokens: int,
    corpus: str = "",
) -> AgentRecord:
    """One question through the plain reference: retrieve, one call, counted.

    It is shown its top passages, each cut at `passage_chars`, as long as they fit
    `budget` characters: the budget of candor's own context. The call streams, and
    the record keeps the seconds to its first visible piece (`first_token_s`).
    """
    started = time.perf_counter()
    ranked = await asyncio.to_thread(
        plain.search,
        question.question,
        embedder=embedder,
        index=index,
        top_k=MAX_PASSAGES,
        candidates=candidates,
    )
    hits = retrieval.within(ranked, budget=budget, passage_chars=passage_chars)
    first_token: list[float] = []

    async def timed(pieces: AsyncIterator[TextPiece]) -> AsyncIterator[TextPiece]:
        # Streamed as a tutorial's chat streams it: the reader sees each piece as it
        # comes, so its first token is the first piece with a visible character.
        async for piece in pieces:
            if not first_token and isinstance(piece, str) and piece.strip():
                first_token.append(time.perf_counter() - started)
            yield piece

    shown = messages(hits, question.question, passage_chars)
    reply = await read_text(timed(chat.stream(shown, max_tokens=max_tokens)))
    seconds = time.perf_counter() - started
    answer = reply.text.strip()
    declined = declines(answer)
    numbers = _markers(answer)
    valid = [n for n in numbers if 1 <= n <= len(hits)]
    # A marker naming no passage shown has no source: "" stands for it, so that it
    # counts against citation validity and never as an expected page.
    cited_sources = tuple(hits[n - 1].chunk.source if n in valid else "" for n in numbers)
    left: tuple[str, ...] = ()
    if not declined:
        # The same check candor applies, counted and never applied. An answer with no
        # valid marker is held to every passage shown, the most lenient reading.
        cited = [hits[n - 1] for n in valid] or list(hits)
        checked = support.verify(
            answer,
            tuple(citation(hit) for hit in cited),
            cited,
            question.question,
            passage_chars=passage_chars,
        )
        left = checked.check.unsupported
    return AgentRecord(
        id=question.id,
        kind=question.kind,
        seconds=seconds,
        decision="declined" if declined else "answered",
        answer=answer,
        cited_sources=cited_sources,
        citations_valid=len(valid),
        expected_sources=question.expected_sources,
        answer_keywords=question.answer_keywords,
        model_calls=1,
        tokens_in=reply.usage.tokens_in,
        tokens_out=reply.usage.tokens_out,
        tokens_evaluated=reply.usage.tokens_evaluated,
        cost_usd=reply.usage.cost_usd,
        attempts=1,
        unsupported_left=left,
        meta_talk=tuple(text.meta_talk(answer, SYSTEM)) if not declined else (),
        first_token_s=first_token[0] if first_token else None,
        entries=question.entries,
        present=catalogue_metrics.entries_present(answer, question.entries) if not declined else (),
        invented=catalogue_metrics.invented(answer, corpus) if corpus and not declined else (),
    )
