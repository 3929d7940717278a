"""What the model reads: the best parts of the top candidates, packed into one budget.

A passage of 800 characters that matches a question often holds its answer in one
sentence, and the passage ranked third may hold the sentence that matters most.
Showing the first few passages cut at a fixed length shows the model a lot of
text that answers nothing and cuts off some that does. Packing scores every
sentence (or line: a list item, a table row, a line of code) of the top
candidates against the question with two signals, the embedder's similarity and
the BM25 weight of the question's terms it holds, plus the candidate's own rank;
then takes the best sentences with their neighbours, until the character budget
is spent.

Each excerpt stays one passage of one page: it keeps its chunk's id, title and
heading, so a citation of it names the page it came from, and it never mixes
two chunks. Excerpts are grouped by page, the page of the best sentence first,
and within a page in document order, with " … " where sentences were skipped.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from candor.ports import Embedder, Vectors
from candor.text import query_terms, token_parts, words
from candor.types import Chunk, Hit

GAP = " … "
# A unit shorter than this is joined to the next: "Default:" and its value, a
# bullet's marker and its text, are read together.
MIN_UNIT_CHARS = 40
# A unit longer than this is cut at a word's end: one long line (a table row, a
# paragraph with no sentence ending) should not spend the whole budget alone.
MAX_UNIT_CHARS = 400
# The most units scored per question: the candidates are cut to fit it, so that
# the embedding work (and, with a hosted embedder, its cost) is bounded.
MAX_UNITS = 128
# A unit's text as the embedder sees it: the same bound as a query.
UNIT_EMBED_CHARS = 320

_UNIT_END = re.compile(r"(?<=[.!?:;])[\"')\]]*[ \t]+(?=\S)")
_LINE = re.compile(r"[^\n]+")
_TABLE_RULE = re.compile(r"\|[\s:|-]*")  # the |---|---| line under a table's header


@dataclass(frozen=True, slots=True)
class PackWeights:
    """How much each signal counts in a unit's score (each is scaled to [0, 1] first)."""

    dense: float = 1.0
    lexical: float = 1.0
    rank: float = 0.5


@dataclass(frozen=True, slots=True)
class Unit:
    """A sentence or line of one candidate: where it stands in its chunk's text."""

    candidate: int  # the candidate's rank, from 0
    position: int  # the unit's order within its chunk
    start: int
    end: int


def units_of(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each sentence or line of `text`, short ones joined to the next."""
    spans: list[tuple[int, int]] = []
    for line in _LINE.finditer(text):
        row = line.group(0).strip()
        if row.startswith("|"):
            # A table row is read whole: its sentences mean nothing without the
            # cells before them (the setting a description is about).
            if not _TABLE_RULE.fullmatch(row):
                spans.append(line.span())
            continue
        start = line.start()
        for match in _UNIT_END.finditer(text, line.start(), line.end()):
            if match.start() > start:
                spans.append((start, match.start()))
            start = match.end()
        if start < line.end() and text[start : line.end()].strip():
            spans.append((start, line.end()))
    joined: list[tuple[int, int]] = []
    for span in spans:
        if joined and joined[-1][1] - joined[-1][0] < MIN_UNIT_CHARS:
            joined[-1] = (joined[-1][0], span[1])
        else:
            joined.append(span)
    if len(joined) > 1 and joined[-1][1] - joined[-1][0] < MIN_UNIT_CHARS:
        last = joined.pop()
        joined[-1] = (joined[-1][0], last[1])
    cut: list[tuple[int, int]] = []
    for begin, end in joined:
        while end - begin > MAX_UNIT_CHARS:
            space = text.rfind(" ", begin + MAX_UNIT_CHARS // 2, begin + MAX_UNIT_CHARS)
            split = space if space > begin else begin + MAX_UNIT_CHARS
            cut.append((begin, split))
            begin = split + (1 if space > begin else 0)
        cut.append((begin, end))
    return cut


def _term_weights(question: str, texts: Sequence[str]) -> list[dict[str, float]]:
    """Per text, the BM25-like weight of each question term it holds (IDF from the texts)."""
    terms = query_terms(question)
    bags: list[Counter[str]] = []
    for text in texts:
        bag: Counter[str] = Counter(words(text))
        for parts in token_parts(text):
            if len(parts) > 1:
                bag[" ".join(parts)] += 1
        bags.append(bag)
    n = len(texts)
    idf = {
        term: math.log(1 + (n - df + 0.5) / (df + 0.5))
        for term in terms
        if (df := sum(1 for bag in bags if term in bag))
    }
    return [
        {
            term: weight * bag[term] / (bag[term] + 1.2)
            for term, weight in idf.items()
            if term in bag
        }
        for bag in bags
    ]


def _scaled(values: Sequence[float]) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        return array
    low, high = float(array.min()), float(array.max())
    return (array - low) / (high - low) if high > low else np.zeros_like(array)


def _unit_text(chunk: Chunk, start: int, end: int) -> str:
    text = chunk.text[start:end]
    context = " - ".join(part for part in (chunk.title, chunk.heading) if part)
    return f"{context}: {text}"[:UNIT_EMBED_CHARS] if context else text[:UNIT_EMBED_CHARS]


@dataclass(frozen=True, slots=True)
class Scored:
    """The units of the candidates and what each signal says of them, scaled to [0, 1]."""

    units: list[Unit]
    dense: npt.NDArray[np.float64]
    rank: npt.NDArray[np.float64]
    terms: list[dict[str, float]]  # per unit: the weight of each question term it holds
    top_lexical: float  # the largest lexical weight of any unit, to scale by

    def scores(self, weights: PackWeights) -> npt.NDArray[np.float64]:
        """Each unit's score: the weighted sum of its signals."""
        lexical = np.asarray([sum(unit.values()) for unit in self.terms], dtype=np.float64)
        if self.top_lexical > 0:
            lexical = lexical / self.top_lexical
        return weights.dense * self.dense + weights.lexical * lexical + weights.rank * self.rank


def score_units(
    question: str,
    candidates: Sequence[Hit],
    embedder: Embedder,
    question_vector: Vectors | None = None,
) -> Scored:
    """Every unit of the candidates (at most MAX_UNITS), with its signals."""
    units: list[Unit] = []
    for number, hit in enumerate(candidates):
        spans = units_of(hit.chunk.text)
        if len(units) + len(spans) > MAX_UNITS:
            break
        units += [Unit(number, i, start, end) for i, (start, end) in enumerate(spans)]
    if not units:
        empty = np.zeros(0)
        return Scored([], empty, empty, [], 0.0)
    texts = [_unit_text(candidates[u.candidate].chunk, u.start, u.end) for u in units]
    if question_vector is None:
        vectors = embedder.embed([question, *texts])
        question_vector, vectors = vectors[0], vectors[1:]
    else:
        vectors = embedder.embed(texts)
    dense = _scaled((vectors @ question_vector).tolist())
    terms = _term_weights(
        question, [candidates[u.candidate].chunk.text[u.start : u.end] for u in units]
    )
    top = max((sum(t.values()) for t in terms), default=0.0)
    rank = _scaled([1.0 / (1 + u.candidate) for u in units])
    return Scored(units, dense, rank, terms, top)


def _excerpt(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """The chosen spans of one chunk's text, in order, with GAP where text was skipped.

    Spans that follow each other keep the whitespace between them (a line break
    stays a line break: list items, table rows and code keep their lines).
    """
    ordered = sorted(spans)
    parts: list[str] = []
    if ordered and text[: ordered[0][0]].strip():
        parts.append(GAP.lstrip())
    previous_end: int | None = None
    for start, end in ordered:
        if previous_end is not None:
            between = text[previous_end:start]
            if between.strip():
                parts.append(GAP)
            else:
                parts.append("\n" if "\n" in between else " ")
        parts.append(text[start:end].strip())
        previous_end = end
    if previous_end is not None and text[previous_end:].strip():
        parts.append(GAP.rstrip())
    return "".join(parts).strip()


def pack(
    question: str,
    candidates: Sequence[Hit],
    embedder: Embedder,
    *,
    budget: int,
    max_excerpts: int,
    excerpt_chars: int,
    neighbours: int = 1,
    weights: PackWeights | None = None,
    question_vector: Vectors | None = None,
    scored: Scored | None = None,
) -> list[Hit]:
    """The excerpts of `candidates` that best answer `question`, within `budget` characters.

    Greedy: the best unit not yet taken comes with `neighbours` units on each side
    (fewer when the budget or its chunk's `excerpt_chars` would be passed); at most
    `max_excerpts` chunks are used. Each excerpt is a Hit of its chunk with the
    packed text and the chunk's fused score. `scored` is `score_units` of the same
    question and candidates when the caller has it (one scoring, several budgets).
    """
    weights = weights or PackWeights()
    if scored is None:
        scored = score_units(question, candidates, embedder, question_vector)
    units = scored.units
    by_chunk: dict[int, list[Unit]] = {}
    for unit in units:
        by_chunk.setdefault(unit.candidate, []).append(unit)
    chosen: dict[int, frozenset[int]] = {}  # candidate -> positions of its units taken
    first_pick: dict[int, int] = {}  # candidate -> when it was first used
    spent = 0

    def length(candidate: int, positions: frozenset[int]) -> int:
        if not positions:
            return 0
        chunk_units = by_chunk[candidate]
        spans = [(chunk_units[p].start, chunk_units[p].end) for p in positions]
        return len(_excerpt(candidates[candidate].chunk.text, spans))

    for index in np.argsort(-scored.scores(weights), kind="stable"):
        best = units[int(index)]
        held = chosen.get(best.candidate, frozenset())
        if best.position in held or (not held and len(chosen) >= max_excerpts):
            continue
        others = spent - length(best.candidate, held)

        def fits(
            positions: frozenset[int], candidate: int = best.candidate, others: int = others
        ) -> bool:
            size = length(candidate, positions)
            return size <= excerpt_chars and others + size <= budget

        trial = held | {best.position}
        if not fits(trial):
            continue
        count = len(by_chunk[best.candidate])
        for step in range(1, neighbours + 1):
            for position in (best.position + step, best.position - step):
                if 0 <= position < count and fits(trial | {position}):
                    trial = trial | {position}
        chosen[best.candidate] = trial
        first_pick.setdefault(best.candidate, len(first_pick))
        spent = others + length(best.candidate, trial)
    # Pages in the order their first excerpt was picked; a page's excerpts in document order.
    page_order: dict[str, int] = {}
    for candidate in sorted(first_pick, key=first_pick.__getitem__):
        page_order.setdefault(candidates[candidate].chunk.source, len(page_order))
    ordered = sorted(
        chosen,
        key=lambda c: (
            page_order[candidates[c].chunk.source],
            _chunk_number(candidates[c].chunk),
            c,
        ),
    )
    packed: list[Hit] = []
    for candidate in ordered:
        hit = candidates[candidate]
        spans = [
            (by_chunk[candidate][p].start, by_chunk[candidate][p].end) for p in chosen[candidate]
        ]
        packed.append(Hit(hit.chunk.with_text(_excerpt(hit.chunk.text, spans)), hit.score))
    return packed


def _chunk_number(chunk: Chunk) -> int:
    tail = chunk.id.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0
