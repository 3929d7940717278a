"""Courtesies: messages that are only a hello, thanks or goodbye.

The small model sometimes calls a farewell ("thanks, that's all I needed, bye")
a question, and the graph then searches the documents and answers it with
citations. A message made only of courtesy words has no topic to search for, and
that can be checked without a model: such a message is small talk whatever the
model said. Anything else in the message (a topic, a question) leaves the
decision to the model.
"""

from __future__ import annotations

import re

from candor.graph.citations import MARKER, ascii_markers

# Greetings, thanks and farewells; a courtesy holds at least one of these.
_COURTESY_LIST = (
    "hi hello hey hiya howdy greetings thanks thank thx cheers appreciated bye goodbye "
    "farewell ciao"
)
_COURTESIES = frozenset(_COURTESY_LIST.split())
# The words that come with them ("thanks a lot, that's all I needed, have a nice day").
_FILLER_LIST = (
    "morning afternoon evening day night weekend good great nice lovely wonderful much lot "
    "lots so very see you soon later take care ok okay alright fine perfect awesome cool "
    "excellent brilliant that that's thats it it's is was all i i'm im needed wanted for "
    "the a your help have and again too just really there everyone"
)
_FILLER = frozenset(_FILLER_LIST.split())
_WORD = re.compile(r"[a-z']+")


def is_courtesy(message: str) -> bool:
    """Whether `message` is a greeting, thanks or farewell and nothing else.

    A question mark, a digit or a sign of code means there is more to it: the
    model decides.
    """
    text = message.casefold().replace("’", "'")
    if re.search(r"\d|[`/\\{}<>=]", text):
        return False
    words = _WORD.findall(text)
    if not words or len(words) > 16:
        return False
    if "?" in text:
        return False
    return any(w in _COURTESIES for w in words) and all(
        w in _COURTESIES or w in _FILLER for w in words
    )


def without_markers(reply: str) -> str:
    """A conversational reply with no passage markers: it cites nothing."""
    return re.sub(r"[ \t]*" + MARKER.pattern, "", ascii_markers(reply)).strip()
