"""The curated match as a request runs it: candidates from the curated index, the rule
(candor.curated.matching) on each, bounded embeddings.

One embedding of the question finds the candidates (the curated index's dense and
keyword rankings); a candidate only the keyword ranking found is scored by embedding
its question; the words step embeds a few words for at most WORD_CHECKS candidates.
candor.graph.limits counts all of it, so the budget reserves for the worst case.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from candor.curated import matching
from candor.curated.library import Curation
from candor.curated.matching import MatchRule
from candor.curated.records import QUESTION_MAX_CHARS, CuratedAnswer
from candor.graph.prompts import QUESTION_CHARS
from candor.ports import Embedder
from candor.settings import Settings

logger = logging.getLogger(__name__)

# Candidates read from each ranking, and candidates whose words are looked at.
CANDIDATES = 5
WORD_CHECKS = 2
# The question as it is searched with: as long as retrieval's query.
QUERY_CHARS = QUESTION_CHARS


@dataclass(frozen=True, slots=True)
class CuratedMatch:
    answer: CuratedAnswer
    similarity: float


def rule(settings: Settings, embedder: str) -> MatchRule | None:
    """The rule for this embedder: measured, or set (CANDOR_CURATED_THRESHOLD); None
    when neither, and then no curated answer is served."""
    measured = matching.measured_rule(embedder)
    threshold = settings.curated_threshold
    if threshold is None:
        return measured
    # An embedder nobody measured: its words must be as near as its questions.
    synonym = measured.synonym if measured is not None else threshold
    return MatchRule(threshold=threshold, synonym=synonym)


def embedding_bounds() -> tuple[int, ...]:
    """The most characters of each text one lookup embeds (candor.graph.limits)."""
    words = (matching.MAX_NEW_WORDS + matching.MAX_CURATED_WORDS) * WORD_CHECKS
    return (QUERY_CHARS,) + (QUESTION_MAX_CHARS,) * CANDIDATES + (matching.WORD_CHARS,) * words


def find(
    question: str, curation: Curation, embedder: Embedder, match_rule: MatchRule
) -> CuratedMatch | None:
    """The curated answer whose question `question` asks, or None."""
    text = question[:QUERY_CHARS]
    vector = embedder.embed([text])
    rankings = curation.index.query(vector=vector[0], keywords=text, top_k=CANDIDATES)
    similarity = {hit.chunk.id: hit.score for hit in rankings.dense}
    asked = {hit.chunk.id: hit.chunk.text for hit in (*rankings.dense, *rankings.keyword)}
    unscored = [cid for cid in asked if cid not in similarity]
    if unscored:
        # Found by its words alone: its cosine from its own vector, in one call.
        vectors = embedder.embed([asked[cid][:QUESTION_MAX_CHARS] for cid in unscored])
        for cid, row in zip(unscored, vectors @ vector[0], strict=True):
            similarity[cid] = float(row)
    checks = 0
    for cid in sorted(asked, key=lambda c: -similarity[c]):
        if similarity[cid] < match_rule.threshold:
            break
        if matching.exact_names(asked[cid]) != matching.exact_names(question):
            continue
        answer = curation.store.get_curated(curation.index_name, cid)
        if answer is None:
            continue  # removed from the store; its vector is left for `reindex`
        if checks == WORD_CHECKS:
            break
        if matching.new_words(question, f"{answer.question}\n{answer.answer}"):
            checks += 1
        judged = matching.judge(
            question, answer.question, answer.answer, similarity[cid], match_rule, embedder
        )
        if judged.served(match_rule):
            return CuratedMatch(answer, float(np.round(similarity[cid], 4)))
    return None
