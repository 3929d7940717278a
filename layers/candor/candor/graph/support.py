"""The support check: every specific an answer states must be in what it cites.

A small model that is shown passages about `wal_autocheckpoint` and asked about
a setting the documents never mention will happily write "the default is 1000
[1]". The citation looks valid; the value is invented. Numbers, quoted values
and code-like names are the words a reader acts on and the words a model most
often invents, and whether they occur in the cited passages (as the model was
shown them) or in the question is a plain text check.

A sentence that states a specific found in neither is removed, with its
citation markers. An answer with no sentence left, or with no citation left,
is declined. The check runs on every answer, whatever the chat model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from candor.graph.citations import MARKER, cite
from candor.graph.grounding import code_names, mentions, shown
from candor.graph.state import Citation, SupportCheck
from candor.types import Hit

# A sentence ends at . ! or ? before a space or the end (not inside `gc.auto` or
# 3.5), with the citation markers right after it; or at a line break.
_SENTENCE_END = re.compile(r"[.!?]+(?:[ \t]*\[\d{1,2}\])*(?=\s|$)|\n")
_TRAILING_MARKERS = re.compile(r"(?<=[.!?])((?:[ \t]*\[\d{1,2}\])+)\s*$")
# A number standing on its own: not part of an identifier (HEAD~1, sha256, x86_64),
# an option (-n5) or a citation marker.
_NUMBER = re.compile(r"(?<![\w.~^@{\-\[])\d+(?:[.,:]\d+)*(?![\w\]]|[.,:]\d)")
# The model naming a passage by its number ("<passage 2>", "passages 1 and 3"):
# the number is candor's, not a value the answer states.
_PASSAGE_REFERENCE = re.compile(
    r"</?\s*passages?\s+\d{1,2}\s*>|\bpassages?\s+\d{1,2}(?:(?:\s*,\s*|\s+(?:and|or)\s+)\d{1,2})*\b",
    re.IGNORECASE,
)
_QUOTED = re.compile(r"\"([^\"\n]{1,60})\"|“([^”\n]{1,60})”|(?<!\w)'([^'\n]{1,60})'(?!\w)")


def specifics(sentence: str) -> list[str]:
    """The numbers, quoted values and code-like names a sentence states, each once."""
    text = _PASSAGE_REFERENCE.sub(" ", MARKER.sub(" ", sentence))
    found = [m.group(0) for m in _NUMBER.finditer(text)]
    for match in _QUOTED.finditer(text):
        value = next(g for g in match.groups() if g is not None).strip(" .,;:")
        if value:
            found.append(value)
    found += code_names(text)
    return list(dict.fromkeys(found))


def sentences(text: str) -> list[str]:
    """`text` cut into sentences that join back into it exactly."""
    pieces: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        end = match.end()
        while end < len(text) and text[end] in " \t\n":
            end += 1
        pieces.append(text[start:end])
        start = end
    if start < len(text):
        pieces.append(text[start:])
    return [piece for piece in pieces if piece]


@dataclass(frozen=True, slots=True)
class Verified:
    answer: str
    citations: tuple[Citation, ...]
    check: SupportCheck


def verify(
    answer: str,
    citations: Sequence[Citation],
    passages: Sequence[Hit],
    question: str,
    *,
    passage_chars: int,
) -> Verified:
    """The answer without its unsupported sentences, and citations renumbered to match.

    `answer` carries markers [1]..[n] for `citations`, which name passages of
    `passages`. Evidence is what the cited passages showed the model, and the
    question. Markers after the answer's last sentence (where an unmarked answer's
    attribution puts them) stand for the whole answer and stay while any sentence
    does.
    """
    by_id = {hit.chunk.id: hit for hit in passages}
    cited = [by_id[c.id] for c in citations if c.id in by_id]
    evidence = "\n".join([question, *(shown(hit, passage_chars) for hit in cited)])
    trailing = _TRAILING_MARKERS.search(answer)
    body = answer[: trailing.start(1)] if trailing else answer
    kept: list[str] = []
    removed: list[str] = []
    unsupported: list[str] = []
    checked = 0
    for sentence in sentences(body):
        found = specifics(sentence)
        checked += len(found)
        missing = [s for s in found if not mentions(evidence, s)]
        if missing:
            removed.append(sentence.strip())
            unsupported += [s for s in missing if s not in unsupported]
        else:
            kept.append(sentence)
    text = "".join(kept).rstrip()
    if text and trailing:
        text += trailing.group(1)
    renumbered, still_cited = cite(text, cited) if text else ("", ())
    declined = not renumbered or not still_cited
    check = SupportCheck(
        specifics=checked,
        unsupported=tuple(unsupported),
        removed=tuple(removed),
        declined=declined,
    )
    if declined:
        return Verified("", (), check)
    if not removed:  # leave an answer with nothing to remove exactly as it was
        return Verified(answer, tuple(citations), check)
    return Verified(renumbered, still_cited, check)
