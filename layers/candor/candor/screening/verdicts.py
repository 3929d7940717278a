"""The verdict cache: the triage call's verdict on a message, kept in the state store.

A message the classifier is unsure of costs one triage call; the same message
again (after guards.normalise: spacing, closing punctuation and the case of plain
words aside; a code-like name keeps its case, as for the answer cache) costs
none while its verdict lives (CANDOR_CACHE_TTL_SECONDS; CANDOR_CACHE_ENABLED=false
keeps none). What is kept, and what is not:

- only a verdict that nothing flagged as abusive, neither the classifier nor the
  triage call: a flagged message is judged afresh every time, and a warning
  always comes from the focused moderation call, never from a stored verdict;
- only a kind that the message decides alone (greeting, contact, code request,
  question, catalogue): not a follow-up, whose meaning ("and for tags?") is the
  conversation it continues, which the next visitor sending it does not share.

The key holds the chat model's name and the triage prompt, so a verdict is never
served to another model or after the prompt changes; without stored questions it
is an HMAC under the deployment's secret, as the answer cache's is. Verdicts do not depend on
the documents: an ingest does not retire them.
"""

from __future__ import annotations

import json

from candor import question_keys
from candor.graph import limits, prompts
from candor.graph.state import Intent
from candor.guards import normalise

CACHED_KINDS: frozenset[Intent] = frozenset(
    {"greeting", "contact", "code_request", "question", "catalogue"}
)


def digest(message: str, *, chat_model: str, secret: bytes | None = None) -> str:
    """The key of a message's verdict: the normalised message, model and triage prompt;
    an HMAC under `secret` when questions are not stored (candor.question_keys)."""
    shaping = json.dumps(
        [chat_model, prompts.TRIAGE_SYSTEM, limits.STRUCTURED_MAX_TOKENS, normalise(message)]
    )
    return question_keys.digest(shaping, secret)


def cacheable(kind: Intent) -> bool:
    """Whether a triage verdict of this kind is kept (moderate keeps none that was flagged)."""
    return kind in CACHED_KINDS


def to_json(kind: Intent) -> str:
    return json.dumps({"kind": kind})


def from_json(text: str) -> Intent | None:
    """The kind a stored verdict holds; None for one this code does not read."""
    try:
        kind = json.loads(text).get("kind")
    except (ValueError, AttributeError):
        return None
    return kind if kind in CACHED_KINDS else None
