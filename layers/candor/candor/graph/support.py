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
citation markers, unless the passages shown hold its specifics: one passage, or
two that each hold some of them whole, and then it cites those. A code block is
read line by line but goes whole: a command with a line taken out is not the
command, so an unsupported line removes the block, the sentence that introduces
it and one that then refers back to it ("This command ..."). An answer with no
sentence left, or with no citation left, is declined. The check runs on every
answer, whatever the chat model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
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
# The sentence after a code block that talks about it, gone with the block.
_REFERS_BACK = re.compile(
    r"^\s*(?:this|these|that|it|the\s+above|the\s+(?:command|query|statement|code|example|"
    r"script|output|result))\b",
    re.IGNORECASE,
)


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
    block: _Block | None = None  # the code block being read
    after_block = False  # a block just went: blank lines and a reference to it go too
    for sentence in sentences(body):
        fence = sentence.lstrip().startswith("```")
        if after_block:
            if not sentence.strip():
                continue
            after_block = False
            if not fence and _REFERS_BACK.match(sentence):
                removed.append(sentence.strip())
                continue
        if fence and block is not None:
            if block.broken:
                block.lines.append(sentence.strip())
                _drop_block(block, kept, unmarked, removed)
                after_block = True
            else:
                kept.append(sentence)
            block = None
            continue
        if fence:
            block = _Block(start=len(kept), removed_at=len(removed))
        if block is not None and sentence.strip():
            block.lines.append(sentence.strip())
        found = read_specifics(sentence)
        checked += len(found)
        missing = [s.text for s in found if not s.supported_by(evidence)]
        holders = _holders(found, passages, question, passage_chars) if missing else ()
        if holders:
            # The model cited the wrong passage: others it was shown hold every specific
            # of the sentence, so the sentence is kept and cited to them.
            for holder in holders:
                if all(hit.chunk.id != holder.chunk.id for hit in cited):
                    cited.append(holder)
            kept.append(_cited_to(sentence, [_number(cited, holder) for holder in holders]))
            recited.append(sentence.strip())
        elif missing:
            removed.append(sentence.strip())
            unsupported += [s for s in missing if s not in unsupported]
            if block is not None:
                block.broken = True
        else:
            if found and trailing is None and not MARKER.search(sentence):
                unmarked.append((len(kept), found))
            kept.append(sentence)
    if block is not None and block.broken:  # cut off before its closing fence
        _drop_block(block, kept, unmarked, removed)
    if removed or recited:
        # Renumbering keeps only the passages a marker names: an unmarked sentence's
        # specifics would lose the one citation that holds them, so it names it. (The
        # passages the answer cited hold them: those are the evidence it passed.)
        given = cited[:given_count]
        for position, found in unmarked:
            holders = _holders(found, given, question, passage_chars)
            if holders:
                kept[position] = _cited_to(
                    kept[position], [1 + given.index(holder) for holder in holders]
                )
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


def _holders(
    found: Sequence[Specific], passages: Sequence[Hit], question: str, passage_chars: int
) -> tuple[Hit, ...]:
    """The first passage shown that, with the question, holds every specific found;
    else the first two that do between them, each specific whole in one of them (a
    sentence that joins a command from one page to an option from another); else ()."""
    evidence = [f"{question}\n{shown(hit, passage_chars)}" for hit in passages]
    holds = [
        {position for position, text in enumerate(evidence) if specific.supported_by(text)}
        for specific in found
    ]
    for position, hit in enumerate(passages):
        if all(position in held for held in holds):
            return (hit,)
    for first in range(len(passages)):
        for second in range(first + 1, len(passages)):
            if all(first in held or second in held for held in holds):
                return passages[first], passages[second]
    return ()


def _number(cited: Sequence[Hit], hit: Hit) -> int:
    return 1 + next(i for i, other in enumerate(cited) if other.chunk.id == hit.chunk.id)


@dataclass(slots=True)
class _Block:
    """A fenced code block being read: where it starts in the kept sentences and in
    the removed ones, its lines so far, and whether a line of it was removed."""

    start: int
    removed_at: int
    lines: list[str] = field(default_factory=list)
    broken: bool = False


def _drop_block(
    block: _Block,
    kept: list[str],
    unmarked: list[tuple[int, list[Specific]]],
    removed: list[str],
) -> None:
    """Take the block out of `kept`, with the sentence ending in ":" that introduces it.

    `removed` then lists the introduction and every line of the block in order, in
    place of the block's unsupported lines alone: the trace shows all that went.
    """
    start = block.start
    while start > 0 and not kept[start - 1].strip():
        start -= 1
    introduction: list[str] = []
    if start > 0 and _SENTENCE_MARKERS.sub("", kept[start - 1]).rstrip().endswith(":"):
        start -= 1
        introduction.append(kept[start].strip())
    removed[block.removed_at :] = [*introduction, *block.lines]
    del kept[start:]
    unmarked[:] = [(position, found) for position, found in unmarked if position < start]


_SENTENCE_MARKERS = re.compile(r"[ \t]*\[\d{1,2}\]")


def _cited_to(sentence: str, numbers: Sequence[int]) -> str:
    """The sentence with its markers replaced by those of passages `numbers`, at its end."""
    body = _SENTENCE_MARKERS.sub("", sentence)
    stripped = body.rstrip()
    end = len(stripped.rstrip(".!?"))
    markers = "".join(f"[{number}]" for number in numbers)
    return f"{stripped[:end]} {markers}{stripped[end:]}{body[len(stripped) :]}"
