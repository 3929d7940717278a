"""Yes/no answers that agree with their passage.

Asked "Is the default enough for ...?", a small model may open with "Yes [1]"
where the passage it cites names a higher level than the default: every specific
of the answer stands in the passage, and the support check passes it. The words
that are wrong are "Yes" and "No", which no text check can read.

So, where the setting is on (`CANDOR_YES_NO_CHECK`), an answer to a question that
asks for a yes or a no, and that opens with one, is judged once more: the model
reads the same excerpts and question as the grade and the answer (the local
model's KV cache holds them, so it evaluates only the opening and the task) and
is asked whether they agree with the opening's yes or no. An answer they do not
agree with is declined. A reply that opens with neither "yes" nor "no" says
nothing: the answer stands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from candor.graph import prompts
from candor.graph.citations import sentences
from candor.ports import ChatModel

# A question that asks for a yes or a no opens with an auxiliary verb.
_ASKS = re.compile(
    r"^\W*(?:is|are|am|was|were|do|does|did|can|could|should|shall|will|would|has|have"
    r"|had|may|might|must|isn't|aren't|doesn't|don't|can't|won't)\b",
    re.IGNORECASE,
)
_OPENS = re.compile(r"^\W*(?:yes|no)\b(?!-)", re.IGNORECASE)
# The least probability of "yes" (they agree) that keeps the answer; and the least
# share of the reply's first token "yes" and "no" must hold for the verdict to count.
AGREE_THRESHOLD = 0.5
MIN_OPTION_MASS = 0.5


def asks_yes_or_no(question: str) -> bool:
    return _ASKS.match(question) is not None


def opening(answer: str) -> str | None:
    """The answer's first sentence when it opens with "Yes" or "No", else None."""
    first = next((s.strip() for s in sentences(answer) if s.strip()), "")
    return first if _OPENS.match(first) else None


@dataclass(frozen=True, slots=True)
class Agreement:
    opening: str
    agree: float  # the model's probability that the excerpts agree
    mass: float

    @property
    def disagrees(self) -> bool:
        return self.mass >= MIN_OPTION_MASS and self.agree < AGREE_THRESHOLD


async def judge(
    chat: ChatModel, passages_text: str, question: str, answer: str
) -> Agreement | None:
    """The excerpts' agreement with the answer's yes or no; None when the question does
    not ask for one or the answer does not open with one (no call is made)."""
    first = opening(answer) if asks_yes_or_no(question) else None
    if first is None:
        return None
    messages = prompts.yes_no(passages_text, question, first)
    verdict = await chat.judge(messages, prompts.GRADE_OPTIONS)
    return Agreement(first, round(verdict.probability(prompts.YES), 4), round(verdict.mass, 4))
