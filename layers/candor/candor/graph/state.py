"""The state that flows through the graph, and the records it produces."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from candor.curated.records import CuratedAnswer
from candor.ports import Turn
from candor.types import NOT_REPORTED, Hit

Decision = Literal["answered", "declined", "smalltalk", "code_refused", "warned", "ended"]
Intent = Literal["greeting", "contact", "code_request", "question", "follow_up", "catalogue"]


@dataclass(frozen=True, slots=True)
class Citation:
    id: str
    source: str
    title: str
    snippet: str
    # The 1-based page of a PDF the passage starts on: a link opens `source#page=N`.
    page: int | None = None
    # The document's public http(s) address (candor.urls), when it has one.
    url: str | None = None
    # The sentence or two of the passage that back the answer's sentences citing it,
    # as plain text (candor.graph.quotes). Empty in records stored before quotes.
    quote: str = ""


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One node's visit: its milliseconds and what its calls consumed.

    `tokens_in` counts every prompt token sent, `tokens_evaluated` those the model
    actually computed (the rest came from a cache of an earlier prompt's beginning,
    candor.types.Usage). A trace stored before it was recorded reads it as all of
    `tokens_in`.
    """

    node: str
    ms: float
    tokens_in: int
    tokens_out: int
    cost_usd: float
    tokens_evaluated: int = NOT_REPORTED
    # Queries and fetches the step made of the index (0 in traces stored before they
    # were counted); on Pinecone each is billed, and its cost is in cost_usd.
    index_reads: int = 0

    def __post_init__(self) -> None:
        if self.tokens_evaluated == NOT_REPORTED:
            object.__setattr__(self, "tokens_evaluated", self.tokens_in)


GradedBy = Literal["model", "names", "gate", "no_passages"]
# Who decided what kind of message it is: the screening classifier alone, the
# triage call's verdict on the same message kept in the store, or the triage call.
ScreenedBy = Literal["classifier", "cache", "model"]


@dataclass(frozen=True, slots=True)
class ScreeningRecord:
    """How moderate judged the message. It was screened without the model when `by`
    is the classifier or the cache and `moderated` is false. The classifier's
    probabilities are None when screening is off."""

    by: ScreenedBy
    kind: Intent
    confidence: float | None = None  # the classifier's probability of its kind
    abusive: float | None = None  # the classifier's probability that it is abusive
    moderated: bool = False  # the focused moderation call judged whether it insults

    @property
    def without_model(self) -> bool:
        return self.by != "model" and not self.moderated


@dataclass(frozen=True, slots=True)
class GroundingCheck:
    """What the grounding gate found for the names a question relies on: code-like
    names, and product or project names (listed again in `products`).

    Every name is in exactly one group: in the passages shown, in the index only (a
    keyword retrieval then adds the passage that holds it), in no document at all
    (the question is about something the documents do not cover), or unchecked (the
    index has no keyword search to ask).
    """

    names: tuple[str, ...] = ()
    shown: tuple[str, ...] = ()
    in_index: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    unchecked: tuple[str, ...] = ()
    added: tuple[str, ...] = ()  # ids of the passages the keyword retrieval added
    # Which of the names are product or project names (GitHub, Litestream), not code.
    products: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Lookups:
    """What the grounding gate's index reads found in one request, kept for its later
    grade visits, so that no name is looked up twice (candor.graph.grounding).

    `found` holds, per name looked up ("code:--flag", "product:GitHub"), the chunks
    that hold it (empty: no document does; None: not known, the index has no
    keyword search). `keyword_search` is whether the index answers keyword queries
    (None: not asked yet).
    """

    found: tuple[tuple[str, tuple[Hit, ...] | None], ...] = ()
    keyword_search: bool | None = None

    @property
    def count(self) -> int:
        return len(self.found)

    def looked_up(self, key: str) -> bool:
        return any(name == key for name, _ in self.found)

    def hits(self, key: str) -> tuple[Hit, ...] | None:
        return next((hits for name, hits in self.found if name == key), None)

    def adding(
        self, hits: Mapping[str, tuple[Hit, ...] | None], *, keyword_search: bool | None
    ) -> Lookups:
        known = {name for name, _ in self.found}
        new = tuple((name, found) for name, found in hits.items() if name not in known)
        return Lookups((*self.found, *new), keyword_search)


@dataclass(frozen=True, slots=True)
class GradeRecord:
    """One grade: which passages it judged, what it said, and who decided."""

    attempt: int
    passage_ids: tuple[str, ...]
    answerable: bool
    by: GradedBy
    grounding: GroundingCheck = GroundingCheck()
    # The model's probability that the passages answer (None: no model judged).
    score: float | None = None
    # The share of the judge's first token on "yes" and "no" together: below
    # nodes.MIN_OPTION_MASS the grade failed and the question was declined.
    option_mass: float | None = None


@dataclass(frozen=True, slots=True)
class SupportCheck:
    """What the support check did to an answer: the specifics it could not find in
    the cited passages or the question, and the sentences it removed for them."""

    specifics: int = 0  # specifics checked
    unsupported: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    declined: bool = False  # nothing supported was left
    # Sentences whose specifics only another shown passage holds: cited to it instead.
    recited: tuple[str, ...] = ()
    # Specifics that name each other ("55P03 + lock_not_available") which the cited
    # passages hold only apart, in different blocks: their sentences were removed.
    unpaired: tuple[str, ...] = ()

    @property
    def verdict(self) -> Literal["supported", "trimmed", "declined"]:
        if self.declined:
            return "declined"
        return "trimmed" if self.removed else "supported"


@dataclass(frozen=True, slots=True)
class GraphState:
    """Everything a node may read. Nodes never mutate it; they return an Update."""

    question: str
    session_id: str
    top_k: int
    history: Sequence[Turn] = ()
    intent: Intent | None = None
    query: str = ""
    queries: tuple[str, ...] = ()
    # The sub-questions of a question with two or more asks (candor.planning).
    parts: tuple[str, ...] = ()
    attempts: int = 0
    passages: tuple[Hit, ...] = ()
    answerable: bool | None = None
    decision: Decision | None = None
    answer: str = ""
    citations: tuple[Citation, ...] = ()
    grades: tuple[GradeRecord, ...] = ()
    support: SupportCheck | None = None
    screening: ScreeningRecord | None = None
    # Curated answers (candor.graph.curated): look them up after route, or serve the
    # one the service found before it reserved for the graph; the id of the one served.
    curated_look: bool = False
    curated_found: CuratedAnswer | None = None
    curated_id: str | None = None
    lookups: Lookups = Lookups()
    trace: tuple[TraceStep, ...] = field(default=())


class Update(TypedDict, total=False):
    """The fields a node may change."""

    intent: Intent
    query: str
    queries: tuple[str, ...]
    parts: tuple[str, ...]
    attempts: int
    passages: tuple[Hit, ...]
    answerable: bool
    decision: Decision
    answer: str
    citations: tuple[Citation, ...]
    grades: tuple[GradeRecord, ...]
    support: SupportCheck
    screening: ScreeningRecord
    curated_id: str
    lookups: Lookups
