"""Stored traces: what each answered request did, kept for feedback and for the owner.

`candor.service.ask` calls `record` on every path that returns an answer. A trace
holds the time, the session, the question (unless CANDOR_STORE_QUESTIONS=false),
the queries tried, the passages shown (their ids, and the prompt that showed them
to the model), the answer with its decision and citations, what the checks
outside the model did (how the message was screened, each grade with the
grounding gate's findings, and the support check of the answer: the specifics it
could not find and the sentences it removed), each node's milliseconds, tokens
(prompt tokens sent and evaluated, tokens generated) and cost, the model names,
the corpus version and whether the cache answered. It expires after
CANDOR_TRACE_TTL_DAYS. Storing it never
fails the answer: a failure is logged and counted.

Feedback (`POST /feedback`, `candor.rating.rate`) attaches to a stored trace: only the session
that asked may rate it, and a second rating replaces the first. What a visitor writes
(a comment, a better answer) is untrusted text: it waits for the owner's review
(`candor feedback review`, candor.review) before `candor export-dpo` may use it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, get_args

from candor import observability
from candor.curated.records import CITATION_PREFIX
from candor.graph import nodes, prompts
from candor.graph.state import (
    Citation,
    Decision,
    GradeRecord,
    GraphState,
    GroundingCheck,
    ScreeningRecord,
    SupportCheck,
    TraceStep,
)
from candor.ports import StateStore, StoredTrace
from candor.settings import Settings
from candor.types import Message
from candor.withheld import type_name, withheld

if TYPE_CHECKING:
    from candor.deps import Deps
    from candor.results import AskResult

logger = logging.getLogger(__name__)

Score = Literal[-1, 1]
Reason = Literal["wrong", "not_found", "incomplete", "other"]
REASONS: tuple[Reason, ...] = get_args(Reason)
# The owner's decision on what a visitor wrote; a new rating starts "pending" again.
Review = Literal["pending", "approved", "rejected"]
COMMENT_MAX_CHARS = 1000
BETTER_ANSWER_MAX_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Feedback:
    """A visitor's rating of one answer."""

    score: Score
    reason: Reason | None = None
    comment: str | None = None
    better_answer: str | None = None
    rated_at: float = 0.0
    # Ratings stored before reviews were recorded have none: they read as pending.
    review: Review = "pending"

    @property
    def has_text(self) -> bool:
        """Whether the visitor wrote anything (which then needs the owner's review)."""
        return bool(self.comment or self.better_answer)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Feedback:
        return cls(**json.loads(text))


@dataclass(frozen=True, slots=True)
class Trace:
    """One request as it ran. `prompt` is the answer prompt with the passages shown,
    as the model received it (empty when no passages were retrieved)."""

    trace_id: str
    session_id: str
    created_at: float
    decision: Decision
    answer: str
    question: str | None
    queries: tuple[str, ...] = ()
    passage_ids: tuple[str, ...] = ()
    prompt: tuple[Message, ...] = ()
    citations: tuple[Citation, ...] = ()
    steps: tuple[TraceStep, ...] = ()
    seconds: float = 0.0
    attempts: int = 0
    cached: bool = False
    chat_model: str = ""
    embedder: str = ""
    index_name: str = ""
    corpus_version: int | None = None
    grades: tuple[GradeRecord, ...] = ()
    support: SupportCheck | None = None
    # How moderate judged the message (None: the answer cache answered, or the
    # trace was stored before screening was recorded).
    screening: ScreeningRecord | None = None
    # The owner's curated answer that answered it (candor.curated), if one did.
    curated_id: str | None = None
    # Each cited document with the version (its ingest fingerprint) the answer read, so
    # that insights can tell which answers cited what has since changed or gone.
    cited_versions: tuple[tuple[str, str], ...] = ()
    feedback: Feedback | None = field(default=None, compare=False)

    @property
    def tokens_in(self) -> int:
        return sum(step.tokens_in for step in self.steps)

    @property
    def tokens_evaluated(self) -> int:
        return sum(step.tokens_evaluated for step in self.steps)

    @property
    def tokens_out(self) -> int:
        return sum(step.tokens_out for step in self.steps)

    @property
    def cost_usd(self) -> float:
        return sum(step.cost_usd for step in self.steps)

    def body(self) -> str:
        """The JSON a store keeps (feedback is stored beside it, not in it)."""
        data = asdict(self)
        del data["feedback"]
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def from_stored(cls, stored: StoredTrace) -> Trace:
        data: dict[str, Any] = json.loads(stored.body)
        return cls(
            **data
            | {
                "queries": tuple(data["queries"]),
                "passage_ids": tuple(data["passage_ids"]),
                "prompt": tuple(data["prompt"]),
                "citations": tuple(Citation(**c) for c in data["citations"]),
                "steps": tuple(TraceStep(**s) for s in data["steps"]),
                # Traces stored before the checks were recorded have neither.
                "grades": tuple(_grade(g) for g in data.get("grades", ())),
                "support": _support(data["support"]) if data.get("support") else None,
                "screening": ScreeningRecord(**data["screening"])
                if data.get("screening")
                else None,
                "cited_versions": tuple(tuple(v) for v in data.get("cited_versions", ())),
                "feedback": Feedback.from_json(stored.feedback) if stored.feedback else None,
            }
        )

    def stored(self, settings: Settings) -> StoredTrace:
        return StoredTrace(
            trace_id=self.trace_id,
            session_id=self.session_id,
            created_at=self.created_at,
            expires_at=int(self.created_at) + settings.trace_ttl_days * 86_400,
            body=self.body(),
        )


def _tuples(data: dict[str, Any]) -> dict[str, Any]:
    # JSON has lists where the dataclasses have tuples.
    return {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}


def _grade(data: dict[str, Any]) -> GradeRecord:
    grounding = GroundingCheck(**_tuples(data.get("grounding", {})))
    return GradeRecord(**_tuples(data) | {"grounding": grounding})


def _support(data: dict[str, Any]) -> SupportCheck:
    return SupportCheck(**_tuples(data))


def _without_names(grade: GradeRecord) -> GradeRecord:
    # The gate's names are words of the question: as private as the question.
    return replace(grade, grounding=GroundingCheck(added=grade.grounding.added))


def build(
    deps: Deps,
    result: AskResult,
    *,
    question: str,
    started: float,
    final: GraphState | None,
    corpus_version: int | None,
    now: float,
) -> Trace:
    settings = deps.settings
    keep = settings.store_questions
    prompt: tuple[Message, ...] = ()
    if final is not None and final.passages and keep:
        shown = prompts.format_passages(final.passages, settings.passage_chars)
        prompt = tuple(prompts.answer(shown, nodes.subject(final)))
    return Trace(
        trace_id=result.trace_id,
        session_id=result.session_id,
        created_at=started,
        decision=result.decision,
        answer=result.answer,
        question=question if keep else None,
        # The queries are the question and its rewrites: as private as the question.
        queries=final.queries if final is not None and keep else (),
        passage_ids=tuple(hit.chunk.id for hit in final.passages) if final else (),
        prompt=prompt,
        citations=result.citations,
        steps=result.trace,
        seconds=round(now - started, 3),
        attempts=result.attempts,
        cached=result.cached,
        chat_model=deps.chat.name,
        embedder=deps.embedder.name,
        index_name=settings.index_name,
        corpus_version=corpus_version,
        grades=result.grades if keep else tuple(_without_names(g) for g in result.grades),
        support=result.support,
        screening=final.screening if final is not None else None,
        curated_id=curated_id(result.citations),
        cited_versions=cited_versions(result.citations, final),
    )


# The chunk metadata key of its document's ingest fingerprint (candor.ingest.pipeline
# HASH_KEY; not imported, so that the ask function does not load the ingest modules).
DOC_HASH_KEY = "doc_hash"


def cited_versions(
    citations: tuple[Citation, ...], final: GraphState | None
) -> tuple[tuple[str, str], ...]:
    """(source, fingerprint) of each document the answer cited, from the passages it
    read; none when the cache answered (the passages are not at hand)."""
    if final is None:
        return ()
    cited = {c.id for c in citations}
    found: dict[str, str] = {}
    for hit in final.passages:
        version = hit.chunk.metadata.get(DOC_HASH_KEY)
        if hit.chunk.id in cited and isinstance(version, str):
            found.setdefault(hit.chunk.source, version)
    return tuple(sorted(found.items()))


def curated_id(citations: tuple[Citation, ...]) -> str | None:
    """The curated answer an answer's citations name (its one chip), or None."""
    return next(
        (c.id.removeprefix(CITATION_PREFIX) for c in citations if c.id.startswith(CITATION_PREFIX)),
        None,
    )


async def record(
    deps: Deps,
    result: AskResult,
    *,
    question: str,
    started: float,
    final: GraphState | None = None,
    corpus_version: int | None = None,
) -> None:
    """Store the trace of one answered request and count it. Never raises.

    `started` is the request's wall-clock start (time.time()); `final` the graph's
    final state (None when the cache answered); `corpus_version` the one the
    answer came from, when the caller knows it (read from the store otherwise).
    """
    observability.bind_trace(result.trace_id)
    trace: Trace | None = None
    try:
        if corpus_version is None:
            corpus_version = await asyncio.to_thread(
                deps.state.corpus_version, deps.settings.index_name
            )
        trace = build(
            deps,
            result,
            question=question,
            started=started,
            final=final,
            corpus_version=corpus_version,
            now=time.time(),
        )
        await asyncio.to_thread(deps.state.put_trace, trace.stored(deps.settings))
    except Exception as error:  # the visitor has the answer; a lost trace is only logged
        logger.warning(
            "trace %s was not stored",
            result.trace_id,
            exc_info=withheld(error),  # its message can quote the visitor
            extra={"error_type": type_name(error)},
        )
        observability.count("trace_write_failures")
    if trace is not None:
        logger.info(
            "request",
            extra={
                "decision": trace.decision,
                "cached": trace.cached,
                "seconds": trace.seconds,
                "cost_usd": trace.cost_usd,
            },
        )
        observability.record_request(trace)


def stored_since(state: StateStore, days: int, *, now: float | None = None) -> list[StoredTrace]:
    """Every live trace of the last `days` UTC days, today included, oldest first, as stored."""
    now = time.time() if now is None else now
    today = datetime.fromtimestamp(now, UTC).date()
    found: list[StoredTrace] = []
    for back in range(days - 1, -1, -1):
        day = (today - timedelta(days=back)).isoformat()
        found.extend(state.traces_on(day, now=now))
    return found


def traces_since(state: StateStore, days: int, *, now: float | None = None) -> list[Trace]:
    """Every live trace of the last `days` UTC days, today included, oldest first."""
    return [Trace.from_stored(stored) for stored in stored_since(state, days, now=now)]
