"""The support check: every specific an answer states must be in what it cites.

A small model that is shown passages about `wal_autocheckpoint` and asked about
a setting the documents never mention will happily write "the default is 1000
[1]". The citation looks valid; the value is invented. Numbers, quoted values,
code-like names and product names are the words a reader acts on and the words
a model most often invents, and whether they occur in the cited passages (as the
model was shown them) or in the question is a plain text check.

Each is read as a reader reads it (see candor.graph.specifics).

A sentence that states a specific found in neither is removed, with its
citation markers, unless the passages shown hold its specifics: one passage, or
two that each hold some of them whole, and then it cites those. A code block is
read line by line but goes whole: a command with a line taken out is not the
command, so an unsupported line removes the block, the sentence that introduces
it and one that then refers back to it ("This command ..."). Specifics of one
sentence that name each other (a code and its name, a setting and its default)
must stand together in one block of one passage (see candor.graph.pairs): a pair
the passages hold only apart is treated as an unsupported specific. An answer
with no sentence left, or with no citation left, is declined. The check runs on
every answer, whatever the chat model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from candor.graph import pairs
from candor.graph.citations import MARKER, cite, sentences
from candor.graph.grounding import shown
from candor.graph.specifics import Specific as Specific
from candor.graph.specifics import read_specifics as read_specifics
from candor.graph.specifics import specifics as specifics
from candor.graph.state import Citation, SupportCheck
from candor.types import Hit

_TRAILING_MARKERS = re.compile(r"(?<=[.!?])((?:[ \t]*\[\d{1,2}\])+)\s*$")
# The sentence after a code block that talks about it, gone with the block.
_REFERS_BACK = re.compile(
    r"^\s*(?:this|these|that|it|the\s+above|the\s+(?:command|query|statement|code|example|"
    r"script|output|result))\b",
    re.IGNORECASE,
)


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
    unmarked: list[tuple[int, _Read]] = []
    given_count = len(cited)
    removed: list[str] = []
    unsupported: list[str] = []
    unpaired: list[str] = []
    views = _Views(passage_chars)
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
        # A line of a code block is code, not a statement that pairs its values.
        read = _Read(found, pairs.linked_pairs(sentence) if block is None else [])
        checked += len(found)
        missing = [s.text for s in found if not s.supported_by(evidence)]
        # Specifics that name each other must stand together in one block (pairs).
        apart = [] if missing else pairs.apart(read.linked, views.of(cited[:given_count]))
        holders = _holders(read, passages, question, views) if missing or apart else ()
        if holders:
            # The model cited the wrong passage: others it was shown hold every specific
            # of the sentence, so the sentence is kept and cited to them.
            for holder in holders:
                if all(hit.chunk.id != holder.chunk.id for hit in cited):
                    cited.append(holder)
            kept.append(_cited_to(sentence, [_number(cited, holder) for holder in holders]))
            recited.append(sentence.strip())
        elif missing or apart:
            removed.append(sentence.strip())
            unsupported += [s for s in missing if s not in unsupported]
            unpaired += [str(pair) for pair in apart if str(pair) not in unpaired]
            if block is not None:
                block.broken = True
        else:
            if found and trailing is None and not MARKER.search(sentence):
                unmarked.append((len(kept), read))
            kept.append(sentence)
    if block is not None and block.broken:  # cut off before its closing fence
        _drop_block(block, kept, unmarked, removed)
    if removed or recited:
        # Renumbering keeps only the passages a marker names: an unmarked sentence's
        # specifics would lose the one citation that holds them, so it names it. (The
        # passages the answer cited hold them: those are the evidence it passed.)
        given = cited[:given_count]
        for position, read in unmarked:
            holders = _holders(read, given, question, views)
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
        unpaired=tuple(unpaired),
    )
    if declined:
        return Verified("", (), check)
    if not removed and not recited:  # leave an answer with nothing to change exactly as it was
        return Verified(answer, tuple(citations), check)
    return Verified(renumbered, still_cited, check)


@dataclass(frozen=True, slots=True)
class _Read:
    """A sentence's specifics, and those of them that name each other."""

    found: list[Specific]
    linked: list[pairs.Pair]


class _Views:
    """Each passage read into blocks once, as the model was shown it (pairs.View)."""

    def __init__(self, passage_chars: int) -> None:
        self._passage_chars = passage_chars
        self._views: dict[str, pairs.View] = {}

    def of(self, hits: Sequence[Hit]) -> list[pairs.View]:
        return [self._view(hit) for hit in hits]

    def _view(self, hit: Hit) -> pairs.View:
        view = self._views.get(hit.chunk.id)
        if view is None:
            view = self._views[hit.chunk.id] = pairs.View.of(shown(hit, self._passage_chars))
        return view


def _holders(read: _Read, passages: Sequence[Hit], question: str, views: _Views) -> tuple[Hit, ...]:
    """The first passage shown that, with the question, holds every specific found and
    each pair of them in one block; else the first two that do between them, each
    specific whole in one of them and each pair in one block of one (a sentence that
    joins a command from one page to an option from another); else ()."""
    seen = views.of(passages)
    evidence = [f"{question}\n{view.whole}" for view in seen]
    holds = [
        {position for position, text in enumerate(evidence) if specific.supported_by(text)}
        for specific in read.found
    ]
    for position, hit in enumerate(passages):
        if all(position in held for held in holds) and not pairs.apart(
            read.linked, seen[position : position + 1]
        ):
            return (hit,)
    for first in range(len(passages)):
        for second in range(first + 1, len(passages)):
            if all(first in held or second in held for held in holds) and not pairs.apart(
                read.linked, [seen[first], seen[second]]
            ):
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
    unmarked: list[tuple[int, _Read]],
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
