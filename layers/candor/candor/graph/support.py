"""The support check: every specific an answer states must be in what it cites.

A small model that is shown passages about `wal_autocheckpoint` and asked about
a setting the documents never mention will happily write "the default is 1000
[1]". The citation looks valid; the value is invented. Numbers, quoted values,
code-like names and product names are the words a reader acts on and the words
a model most often invents, and whether they occur in the cited passages (as the
model was shown them) or in the question is a plain text check.

Each is read as a reader reads it. A number written with what it counts ("5
years", "20 MB", "version 3") must stand with a word of the same family in the
evidence (see quantities), not merely as digits somewhere. A code of letters and
digits ("E4012", "sha256") is one token, found whole or not at all. A product
name (GitHub, Litestream) must be named by the evidence (see proper_names).

A sentence that states a specific found in neither is removed, with its
citation markers. An answer with no sentence left, or with no citation left,
is declined. The check runs on every answer, whatever the chat model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from candor.graph import proper_names, quantities
from candor.graph.citations import ENUMERATOR, MARKER, cite, sentences
from candor.graph.grounding import code_names, mentions, shown
from candor.graph.state import Citation, SupportCheck
from candor.types import Hit

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
# A code of letters and digits (E4012, sha256, 0x1F, FTS5): one token, not a number
# in a word. A lower-case word with one digit is a name or a placeholder the answer
# makes up for its example (branch1, utf8), not a code to look up.
_TOKEN = re.compile(r"(?<![\w.~^@{\[/\\-])[A-Za-z0-9]+(?![\w/\\-]|\.\w)")
_ORDINAL = re.compile(r"\d+(?:st|nd|rd|th)", re.IGNORECASE)


def _is_code(token: str) -> bool:
    digits = sum(c.isdigit() for c in token)
    if not digits or digits == len(token) or _ORDINAL.fullmatch(token):
        return False
    return digits >= 2 or any(c.isupper() for c in token)


SpecificKind = Literal["number", "quantity", "code", "quoted", "name", "product"]


@dataclass(frozen=True, slots=True)
class Specific:
    """One specific an answer states, and what kind it is: the kind says how the
    evidence must hold it."""

    text: str
    kind: SpecificKind
    quantity: quantities.Quantity | None = None

    def supported_by(self, evidence: str) -> bool:
        if self.quantity is not None:
            return quantities.states(evidence, self.quantity)
        if self.kind == "product":
            return proper_names.held(evidence, self.text)
        return mentions(evidence, self.text)


def _overlaps(span: tuple[int, int], taken: list[tuple[int, int]]) -> bool:
    return any(start < span[1] and span[0] < end for start, end in taken)


def read_specifics(sentence: str) -> list[Specific]:
    """The specifics a sentence states, each once: its numbers (with what they count)
    and codes in the order written, then quoted values, code-like names and product
    names."""
    # A list item's number ("2. Build it") is the list's, not a value the answer states.
    text = _PASSAGE_REFERENCE.sub(" ", MARKER.sub(" ", ENUMERATOR.sub(" ", sentence)))
    counted = quantities.quantities(text)
    taken = [q.span for q in counted]
    placed: list[tuple[int, Specific]] = [
        (q.span[0], Specific(q.text, "quantity", q)) for q in counted
    ]
    placed += [
        (m.start(), Specific(m.group(0), "number"))
        for m in _NUMBER.finditer(text)
        if not _overlaps(m.span(), taken)
    ]
    names = code_names(text)
    placed += [
        (m.start(), Specific(m.group(0), "code"))
        for m in _TOKEN.finditer(text)
        if _is_code(m.group(0)) and not _overlaps(m.span(), taken) and m.group(0) not in names
    ]
    found = [specific for _, specific in sorted(placed, key=lambda pair: pair[0])]
    for match in _QUOTED.finditer(text):
        value = next(g for g in match.groups() if g is not None).strip(" .,;:")
        if value:
            found.append(Specific(value, "quoted"))
    found += [Specific(name, "name") for name in names]
    found += [
        Specific(name, "product")
        for name in proper_names.product_names(text, clause_starts=False)
        if not any(name.casefold() == other.casefold() for other in names)
    ]
    unique: dict[str, Specific] = {}
    for specific in found:
        unique.setdefault(specific.text, specific)
    return list(unique.values())


def specifics(sentence: str) -> list[str]:
    """The numbers (with what they count), codes, quoted values, code-like names and
    product names a sentence states, each once."""
    return [specific.text for specific in read_specifics(sentence)]


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
    recited: list[str] = []
    trailing = _TRAILING_MARKERS.search(answer)
    body = answer[: trailing.start(1)] if trailing else answer
    kept: list[str] = []
    # Unmarked sentences with specifics: (position in kept, the specifics).
    unmarked: list[tuple[int, list[Specific]]] = []
    given_count = len(cited)
    removed: list[str] = []
    unsupported: list[str] = []
    checked = 0
    for sentence in sentences(body):
        found = read_specifics(sentence)
        checked += len(found)
        missing = [s.text for s in found if not s.supported_by(evidence)]
        holder = _holder(found, passages, question, passage_chars) if missing else None
        if holder is not None:
            # The model cited the wrong passage: another one it was shown holds every
            # specific of the sentence, so the sentence is kept and cited to that one.
            if all(hit.chunk.id != holder.chunk.id for hit in cited):
                cited.append(holder)
            number = 1 + next(i for i, hit in enumerate(cited) if hit.chunk.id == holder.chunk.id)
            kept.append(_cited_to(sentence, number))
            recited.append(sentence.strip())
        elif missing:
            removed.append(sentence.strip())
            unsupported += [s for s in missing if s not in unsupported]
        else:
            if found and trailing is None and not MARKER.search(sentence):
                unmarked.append((len(kept), found))
            kept.append(sentence)
    if removed or recited:
        # Renumbering keeps only the passages a marker names: an unmarked sentence's
        # specifics would lose the one citation that holds them, so it names it. (The
        # passages the answer cited hold them: those are the evidence it passed.)
        given = cited[:given_count]
        for position, found in unmarked:
            holder = _holder(found, given, question, passage_chars)
            if holder is not None:
                kept[position] = _cited_to(kept[position], 1 + given.index(holder))
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
        recited=tuple(recited),
    )
    if declined:
        return Verified("", (), check)
    if not removed and not recited:  # leave an answer with nothing to change exactly as it was
        return Verified(answer, tuple(citations), check)
    return Verified(renumbered, still_cited, check)


def _holder(
    found: Sequence[Specific], passages: Sequence[Hit], question: str, passage_chars: int
) -> Hit | None:
    """The first passage shown that, with the question, holds every specific found."""
    for hit in passages:
        evidence = f"{question}\n{shown(hit, passage_chars)}"
        if all(specific.supported_by(evidence) for specific in found):
            return hit
    return None


_SENTENCE_MARKERS = re.compile(r"[ \t]*\[\d{1,2}\]")


def _cited_to(sentence: str, number: int) -> str:
    """The sentence with its markers replaced by one for passage `number`, at its end."""
    body = _SENTENCE_MARKERS.sub("", sentence)
    stripped = body.rstrip()
    end = len(stripped.rstrip(".!?"))
    return f"{stripped[:end]} [{number}]{stripped[end:]}{body[len(stripped) :]}"
