"""What moderate does with the classifier's screen: act on it, or ask the model.

- flagged: the classifier finds the message likely abusive. It never warns on its
  own: the focused moderation call decides, as it does for what triage flags.
- sure: the kind is at least `confidence` likely, abuse at most ABUSE_CLEAR, and
  the message holds no insult or threat of the lists in candor.screening.features
  (whatever the weights say: the examples cannot hold every insult). moderate
  takes the verdict and makes no model call.
- unsure: anything else goes to the triage call, as every message did before.
"""

from __future__ import annotations

from typing import Literal

from candor.screening.classifier import Screen

# At or above: likely abusive, for the focused moderation call to judge.
ABUSE_FLAG = 0.5
# At or below: clear of abuse without the model. Set so low because an insult
# cleared here reaches no model at all: on the training examples' cross-validated
# probabilities, no abusive message fell this low (scripts/train_screening.py).
ABUSE_CLEAR = 0.05

Outcome = Literal["sure", "flagged", "unsure"]


def outcome(screen: Screen, confidence: float) -> Outcome:
    if screen.abusive >= ABUSE_FLAG:
        return "flagged"
    if screen.abusive <= ABUSE_CLEAR and screen.confidence >= confidence and not screen.offensive:
        return "sure"
    return "unsure"
