"""What an answer sentence states: its numbers, codes, quoted values and names.

Numbers, quoted values, code-like names and product names are the words a reader
acts on and the words a model most often invents. Each is read as a reader reads
it. A number written with what it counts ("5 years", "20 MB", "version 3") must
stand with a word of the same family in the evidence (see quantities), not merely
as digits somewhere. A code of letters and digits ("E4012", "sha256") is one
token, found whole or not at all. A product name (GitHub, Litestream) must be
named by the evidence (see proper_names). The support check (candor.graph.support)
and the pairs check (candor.graph.pairs) read them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from candor.graph import proper_names, quantities
from candor.graph.citations import ENUMERATOR, MARKER
from candor.graph.grounding import code_names, mentions

# A number standing on its own: not part of an identifier (HEAD~1, sha256, x86_64),
# an option (-n5) or a citation marker.
_NUMBER = re.compile(r"(?<![\w.~^@{\-\[])\d+(?:[.,:]\d+)*(?![\w\]]|[.,:]\d)")
# The model naming a passage by its number ("<passage 2>", "passages 1 and 3"):
# the number is candor's, not a value the answer states.
PASSAGE_REFERENCE = re.compile(
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
    text = PASSAGE_REFERENCE.sub(" ", MARKER.sub(" ", ENUMERATOR.sub(" ", sentence)))
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
