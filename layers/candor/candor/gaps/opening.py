"""Gaps from the traces: what `candor insights` reports as missing becomes a gap with an id.

A question counts as missing from the documents when it was declined, or when its
answer was rated down with a reason. Each is counted once (by its trace id). It
joins the gap one of whose questions it repeats (the answer cache's normalisation)
or means (embedding cosine at least SIMILAR, as `candor insights` groups
them); the others are grouped the same way into new gaps. A question that joins a
closed gap and was asked after the gap closed opens it again: the documents no
longer answer it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from candor.gaps.records import Gap, GapQuestion, GapStore, gap_id
from candor.guards import normalise
from candor.ports import Embedder
from candor.traces import Trace

# Cosine similarity at which two declined questions count as one, here and in
# `candor insights` (which the Lambda layer leaves out, so it is defined here). On
# five paraphrase pairs all-MiniLM-L6-v2 gave 0.60-0.95, on five pairs of different
# questions 0.25-0.80 (README, "What visitors asked"): 0.75 merges most rewordings
# and few distinct questions, not all of either.
SIMILAR = 0.75
# A gap's questions its newcomers are compared with (the most recent), and the rounds
# of re-reading a gap another writer saved first.
COMPARED_PER_GAP = 10
SAVE_ATTEMPTS = 5


def missing_questions(traces: Sequence[Trace]) -> list[GapQuestion]:
    """The questions the documents missed, oldest first: declined, or rated down with a
    reason. A question not stored (CANDOR_STORE_QUESTIONS=false) cannot make a gap."""
    found: list[GapQuestion] = []
    for trace in sorted(traces, key=lambda t: t.created_at):
        if trace.question is None or not trace.question.strip():
            continue
        feedback = trace.feedback
        if trace.decision == "declined":
            found.append(GapQuestion(trace.question, trace.trace_id, trace.created_at, "declined"))
        elif feedback is not None and feedback.score < 0 and feedback.reason is not None:
            found.append(
                GapQuestion(
                    trace.question,
                    trace.trace_id,
                    trace.created_at,
                    "rated_down",
                    rated_answer=trace.answer,
                    reason=feedback.reason,
                )
            )
    return found


@dataclass
class Refreshed:
    """What a refresh changed: gap ids opened, grown and opened again."""

    opened: list[str] = field(default_factory=list)
    grown: list[str] = field(default_factory=list)
    reopened: list[str] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)  # every gap of the index, after


def refresh(
    store: GapStore,
    traces: Sequence[Trace],
    embedder: Embedder | None,
    index_name: str,
    *,
    now: float,
) -> Refreshed:
    """Count the traces' missing questions into the index's gaps, opening new ones."""
    done = Refreshed()
    for _ in range(SAVE_ATTEMPTS):
        if _refresh_once(store, traces, embedder, index_name, now, done):
            done.gaps = store.list_gaps(index_name)
            return done
    raise RuntimeError("the gaps kept changing under this refresh; run it again")


def _refresh_once(
    store: GapStore,
    traces: Sequence[Trace],
    embedder: Embedder | None,
    index_name: str,
    now: float,
    done: Refreshed,
) -> bool:
    gaps = store.list_gaps(index_name)
    counted = {trace_id for gap in gaps for trace_id in gap.trace_ids}
    new = [q for q in missing_questions(traces) if q.trace_id not in counted]
    if not new:
        return True
    homes = _homes(gaps, new, embedder)
    joined: dict[int, list[GapQuestion]] = {}
    homeless: list[GapQuestion] = []
    for question, home in zip(new, homes, strict=True):
        if home is None:
            homeless.append(question)
        else:
            joined.setdefault(home, []).append(question)
    for home, questions in joined.items():
        gap = gaps[home]
        grown = dataclasses.replace(gap.with_questions(questions), version=gap.version + 1)
        if gap.status == "closed" and any(q.asked_at > (gap.closed_at or 0) for q in questions):
            grown = dataclasses.replace(grown, status="open", reopened_at=now, closed_by=())
            reopening = True
        else:
            reopening = False
        if not store.save_gap(grown):
            return False
        (done.reopened if reopening else done.grown).append(gap.id)
    for group in _groups(homeless, embedder):
        first = group[0]
        opened = Gap(
            id=gap_id(index_name, normalise(first.question)),
            index_name=index_name,
            status="open",
            opened_at=first.asked_at,
            questions=(),
            asked=0,
        ).with_questions(group)
        if not store.save_gap(opened):
            return False
        done.opened.append(opened.id)
    return True


def _homes(
    gaps: Sequence[Gap], new: Sequence[GapQuestion], embedder: Embedder | None
) -> list[int | None]:
    """For each new question, the gap it repeats or means (its index in `gaps`), or None."""
    by_text = {normalise(q.question): n for n, gap in enumerate(gaps) for q in gap.questions}
    homes: list[int | None] = [by_text.get(normalise(q.question)) for q in new]
    unplaced = [n for n, home in enumerate(homes) if home is None]
    if embedder is None or not gaps or not unplaced:
        return homes
    members = [
        (n, q.question) for n, gap in enumerate(gaps) for q in gap.questions[-COMPARED_PER_GAP:]
    ]
    vectors = embedder.embed([new[n].question for n in unplaced] + [text for _, text in members])
    ours, theirs = vectors[: len(unplaced)], vectors[len(unplaced) :]
    similarity = ours @ theirs.T
    for row, n in enumerate(unplaced):
        best = int(np.argmax(similarity[row]))
        if float(similarity[row, best]) >= SIMILAR:
            homes[n] = members[best][0]
    return homes


def _groups(questions: Sequence[GapQuestion], embedder: Embedder | None) -> list[list[GapQuestion]]:
    """New questions grouped as candor.insights groups declined ones: by normalised text,
    then greedily by meaning; each group in the order its questions were asked."""
    by_text: dict[str, list[GapQuestion]] = {}
    for question in questions:
        by_text.setdefault(normalise(question.question), []).append(question)
    groups = list(by_text.values())
    if embedder is None or len(groups) < 2:
        return groups
    vectors = embedder.embed([group[0].question for group in groups])
    merged: list[tuple[list[GapQuestion], list[int]]] = []
    for n, group in enumerate(groups):
        home = next(
            (
                m
                for m, (_, members) in enumerate(merged)
                if float(np.max(vectors[members] @ vectors[n])) >= SIMILAR
            ),
            None,
        )
        if home is None:
            merged.append((list(group), [n]))
        else:
            merged[home][0].extend(group)
            merged[home][1].append(n)
    return [sorted(group, key=lambda q: q.asked_at) for group, _ in merged]
