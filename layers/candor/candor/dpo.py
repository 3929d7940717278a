"""`candor export-dpo`: preference pairs from rated answers, for DPO fine-tuning.

This is preference data for Direct Preference Optimization, not RLHF: there is no
reward model and no online learning; a trainer reads the file offline.

Each pair is a negatively rated answer (rejected) with a better one (chosen): the
visitor's `better_answer` once the owner approved it (`candor feedback review`),
else the latest positively rated answer to the same question as the answer cache keys
it (guards.normalise: `git branch -d` and `-D` are two questions). A
better_answer is text any visitor can write ("...send your API key to ..."), so an
unreviewed one is left out, and a rejected one is never used; `include_unreviewed`
(`--include-unreviewed`) writes the pending ones too, each marked as such. The
prompt is the answer prompt of the rejected trace, its passages as the model saw
them, so the pair is about the same input. A rated trace with no stored prompt (no
passages were retrieved, or CANDOR_STORE_QUESTIONS=false) yields no pair.

The lines are TRL's conversational preference format, with two columns of ours:
    {"prompt": [{"role": "system", ...}, {"role": "user", ...}],
     "chosen": [{"role": "assistant", "content": ...}],
     "rejected": [{"role": "assistant", "content": ...}], "trace_id": ...,
     "chosen_from": "approved_better_answer" | "unreviewed_better_answer" | "liked_answer"}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from candor.guards import normalise
from candor.traces import Feedback, Trace

ChosenFrom = Literal["approved_better_answer", "unreviewed_better_answer", "liked_answer"]


@dataclass(frozen=True, slots=True)
class Export:
    pairs: list[dict[str, Any]]
    rated_down: int  # negatively rated traces seen
    without_prompt: int  # of those, how many had no stored prompt
    without_chosen: int  # of those, how many had no better answer to pair with
    # Of those with a prompt, how many carried a better_answer still waiting for the
    # owner's review, left out (a liked answer may have stood in for it).
    awaiting_review: int = 0


def _visitor_answer(
    feedback: Feedback, *, include_unreviewed: bool
) -> tuple[str, ChosenFrom] | None:
    if not feedback.better_answer:
        return None
    if feedback.review == "approved":
        return feedback.better_answer, "approved_better_answer"
    if feedback.review == "pending" and include_unreviewed:
        return feedback.better_answer, "unreviewed_better_answer"
    return None


def preference_pairs(traces: Sequence[Trace], *, include_unreviewed: bool = False) -> Export:
    """Pairs from traces (oldest first, as candor.traces.traces_since returns them)."""
    liked: dict[str, str] = {}
    for trace in traces:
        feedback = trace.feedback
        if feedback and feedback.score > 0 and trace.question and trace.decision == "answered":
            liked[normalise(trace.question)] = trace.answer  # later answers win
    pairs: list[dict[str, Any]] = []
    rated_down = without_prompt = without_chosen = awaiting_review = 0
    for trace in traces:
        feedback = trace.feedback
        if feedback is None or feedback.score > 0:
            continue
        rated_down += 1
        if not trace.prompt or not trace.question:
            without_prompt += 1
            continue
        chosen = _visitor_answer(feedback, include_unreviewed=include_unreviewed)
        if chosen is None and feedback.better_answer and feedback.review == "pending":
            awaiting_review += 1
        if chosen is None and normalise(trace.question) in liked:
            chosen = liked[normalise(trace.question)], "liked_answer"
        if chosen is None or chosen[0] == trace.answer:
            without_chosen += 1
            continue
        text, source = chosen
        pairs.append(
            {
                "prompt": [dict(message) for message in trace.prompt],
                "chosen": [{"role": "assistant", "content": text}],
                "rejected": [{"role": "assistant", "content": trace.answer}],
                "trace_id": trace.trace_id,
                "chosen_from": source,
            }
        )
    return Export(pairs, rated_down, without_prompt, without_chosen, awaiting_review)
