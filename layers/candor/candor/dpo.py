"""`candor export-dpo`: preference pairs from rated answers, for DPO fine-tuning.

This is preference data for Direct Preference Optimization, not RLHF: there is no
reward model and no online learning; a trainer reads the file offline.

Each pair is a negatively rated answer (rejected) with a better one (chosen):
the visitor's `better_answer`, else the latest positively rated answer to the
same normalised question. The prompt is the answer prompt of the rejected trace,
its passages as the model saw them, so the pair is about the same input. A
rated trace with no stored prompt (no passages were retrieved, or
CANDOR_STORE_QUESTIONS=false) yields no pair.

The lines are TRL's conversational preference format:
    {"prompt": [{"role": "system", ...}, {"role": "user", ...}],
     "chosen": [{"role": "assistant", "content": ...}],
     "rejected": [{"role": "assistant", "content": ...}], "trace_id": ...}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from candor.guards import normalise
from candor.traces import Trace


@dataclass(frozen=True, slots=True)
class Export:
    pairs: list[dict[str, Any]]
    rated_down: int  # negatively rated traces seen
    without_prompt: int  # of those, how many had no stored prompt
    without_chosen: int  # of those, how many had no better answer to pair with


def preference_pairs(traces: Sequence[Trace]) -> Export:
    """Pairs from traces (oldest first, as candor.traces.traces_since returns them)."""
    liked: dict[str, str] = {}
    for trace in traces:
        feedback = trace.feedback
        if feedback and feedback.score > 0 and trace.question and trace.decision == "answered":
            liked[normalise(trace.question)] = trace.answer  # later answers win
    pairs: list[dict[str, Any]] = []
    rated_down = without_prompt = without_chosen = 0
    for trace in traces:
        feedback = trace.feedback
        if feedback is None or feedback.score > 0:
            continue
        rated_down += 1
        if not trace.prompt or not trace.question:
            without_prompt += 1
            continue
        chosen = feedback.better_answer or liked.get(normalise(trace.question))
        if not chosen or chosen == trace.answer:
            without_chosen += 1
            continue
        pairs.append(
            {
                "prompt": [dict(message) for message in trace.prompt],
                "chosen": [{"role": "assistant", "content": chosen}],
                "rejected": [{"role": "assistant", "content": trace.answer}],
                "trace_id": trace.trace_id,
            }
        )
    return Export(pairs, rated_down, without_prompt, without_chosen)
