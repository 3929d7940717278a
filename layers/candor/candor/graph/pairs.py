"""Pairs that belong together: a code and its name, a setting and its default.

Each specific of an answer standing somewhere in a cited passage does not make
the answer true. A table of error codes holds every code and every name, so "the
condition name for error code 55P03 is lock_not_available [1]" passes a check of
specifics one by one when lock_not_available is the name of the code two rows
down. The same goes for a command given another command's lock mode, or a setting
given the default of the setting above it in a list.

So the specifics of one answer sentence that name each other, two written side by
side with a link between them ("is", "=", "defaults to", "takes", a colon, a
parenthesis), must stand together in one block of one passage shown: a table
row, a list item, a definition entry (a term and its text), a paragraph; or one
in the passage's label (its page and section: a definition entry's section is
named by its term) and the other in its text. Specifics merely listed together
("`--soft` and `--hard`", "`git log --oneline --graph`") are not a pair: a
command put together from a page's options is the page's use.

Blocks are read from the passage as the model was shown it. Packing joins the
sentences it keeps with " … " where it skipped text and keeps line breaks, so a
table row or a list item is still a line of its own, and prose on either side of
a skip is read as one paragraph: of the two errors, binding too little is the one
that only lets a wrong pair through, where binding too much removes a sentence
that was right.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from candor.graph.citations import ENUMERATOR, MARKER
from candor.graph.specifics import PASSAGE_REFERENCE, Specific, read_specifics

# What links two specifics into one statement about them, as the whole text between
# them: a verb that assigns, a default, a lock or mode taken, or punctuation that
# names ("55P03: lock_not_available", "SQLITE_BUSY (5)", "gc.auto = 0").
_LINK_WORDS = re.compile(
    r"\b(?:is|are|was|were|be|means|meaning|named|called|default|defaults|equals?"
    r"|takes|take|acquires?|holds?|requires?|gets|corresponds|stands|maps|returns)\b",
    re.IGNORECASE,
)
_LINK_MARKS = re.compile(r"^[\s`'\"*]*(?:[:=(]|->|→)[\s`'\"*]*$")
# "Set gc.auto to 0": "to" links a setting to its value after "set".
_SET_BEFORE = re.compile(
    r"\b(?:set|sets|setting|change|changes|changing)\s+(?:the\s+)?[`'\"]*$", re.IGNORECASE
)
_TO = re.compile(r"^[\s`'\"*]*to[\s`'\"*]*$", re.IGNORECASE)
# Specifics listed side by side, or two statements: not one pair.
_COORDINATION = re.compile(
    r"[,;/]|\b(?:and|or|but|while|whereas|nor|than|versus|vs|instead|unlike|like|not)\b",
    re.IGNORECASE,
)
# A link is short: "is the default for", "has a default value of".
LINK_WORDS = 5
# Lock and mode names, which the answer may write without backticks: "an ACCESS
# EXCLUSIVE lock", "WAL mode"; and commands of capitals: "ALTER TABLE", "CREATE INDEX".
_MODE = re.compile(r"(?<![\w`])([A-Z][A-Z_]+(?:[ \t]+[A-Z][A-Z_]+)*)[ \t]+(?:lock|mode)s?\b")
_CODE_SPAN = re.compile(r"`[^`\n]+`")
_CAPITAL_COMMAND = re.compile(r"(?<![\w`])[A-Z]{2,}(?:[ \t]+[A-Z]{2,})+(?![\w`])")


@dataclass(frozen=True, slots=True)
class Member:
    """A specific of a sentence and where it stands in it."""

    specific: Specific
    start: int
    end: int

    @property
    def text(self) -> str:
        return self.specific.text


@dataclass(frozen=True, slots=True)
class Pair:
    first: Member
    second: Member

    def __str__(self) -> str:
        return f"{self.first.text} + {self.second.text}"


def _plain(sentence: str) -> str:
    # The same text read_specifics reads, each cut replaced by as many spaces, so that
    # what stands between two specifics is what the sentence says between them.
    def blank(match: re.Match[str]) -> str:
        return " " * len(match.group(0))

    return PASSAGE_REFERENCE.sub(blank, MARKER.sub(blank, ENUMERATOR.sub(blank, sentence)))


def members(sentence: str) -> list[Member]:
    """The specifics of `sentence` (and its lock or mode names and commands in
    capitals), each where it first stands, in order; overlapping ones once."""
    text = _plain(sentence)
    found: list[Member] = []
    for specific in read_specifics(sentence):
        start = text.find(specific.text)
        if start >= 0:
            found.append(Member(specific, start, start + len(specific.text)))
    for match in _MODE.finditer(text):
        found.append(Member(Specific(match.group(1), "name"), match.start(1), match.end(1)))
    for match in _CAPITAL_COMMAND.finditer(text):
        found.append(Member(Specific(match.group(0), "name"), match.start(), match.end()))
    found.sort(key=lambda m: (m.start, -(m.end - m.start)))
    kept: list[Member] = []
    for member in found:
        if not kept or member.start >= kept[-1].end:
            kept.append(member)
    return kept


def _linked(text: str, first: Member, second: Member) -> bool:
    gap = text[first.end : second.start]
    if _TO.match(gap):
        return _SET_BEFORE.search(text[: first.start]) is not None
    if _LINK_MARKS.match(gap):
        return True
    if _COORDINATION.search(gap) or len(gap.split()) > LINK_WORDS:
        return False
    return _LINK_WORDS.search(gap) is not None


def _kind(member: Member) -> str:
    text = member.text
    if text.startswith("-"):
        return "option"
    if " " in text and text == text.casefold():
        return "command"  # git reset, git stash: words of a command line
    return "value"


def linked_pairs(sentence: str) -> list[Pair]:
    """The specifics of `sentence` that name each other: neighbours with a link between.

    Two options, or two commands, are not one's value of the other: "--force is
    safer with --force-with-lease" compares them. Nor is code a statement about a
    pair: `git clone --depth=1` is an example with a value of its own choosing.
    """
    text = _plain(sentence)
    found = members(sentence)
    spans = [match.span() for match in _CODE_SPAN.finditer(text)]
    pairs: list[Pair] = []
    for first, second in itertools.pairwise(found):
        if _kind(first) != "value" and _kind(first) == _kind(second):
            continue
        if first.text.casefold() == second.text.casefold():
            continue
        if any(start <= first.start and second.end <= end for start, end in spans):
            continue  # one piece of code: `--depth=1`, `x = 10`, an example's own values
        if _linked(text, first, second):
            pairs.append(Pair(first, second))
    return pairs


# -- a passage's blocks ---------------------------------------------------------------

_GAP = re.compile(r"(?:^|[ \t])…(?:[ \t]|$)")
_FENCE = re.compile(r"^\s{0,3}(?:`{3,}|~{3,})")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_MARKDOWN_ROW = re.compile(r"^\s*\|.*\|\s*$")
_ENDS_SENTENCE = re.compile(r"[.,;:!?)\]]$")
# A term line: a definition list's term or a heading above its text.
TERM_CHARS = 60


def _is_row(line: str) -> bool:
    if _MARKDOWN_ROW.match(line):
        return True
    cells = [cell.strip() for cell in line.split(" | ")]
    return len(cells) > 1 and all(cells)


def blocks(text: str) -> list[str]:
    """The blocks of a passage's text: table rows, list items, definition entries and
    paragraphs (lines of code each on their own), in order."""
    found: list[str] = []
    current: list[str] = []
    prose = False  # the current block takes the prose lines that follow it

    def end() -> None:
        nonlocal prose
        if current:
            found.append("\n".join(current))
            current.clear()
        prose = False

    lines = text.split("\n")
    code = False
    for number, line in enumerate(lines):
        if _FENCE.match(line):
            end()
            code = not code
            continue
        if code:
            end()
            current.append(line)
            end()
            continue
        if not line.strip():
            end()
            continue
        for piece in _GAP.split(line):
            piece = piece.strip()
            if not piece:
                continue
            if _is_row(piece):
                end()
                found.append(piece)
            elif _BULLET.match(piece) or not prose or _is_term(piece, lines, number):
                end()
                current.append(piece)
                prose = True
            else:
                current.append(piece)
    end()
    return found


def _is_term(piece: str, lines: Sequence[str], number: int) -> bool:
    """Whether a line names the text under it: short, no sentence's end, text after."""
    if len(piece) > TERM_CHARS or _ENDS_SENTENCE.search(piece) or piece != lines[number].strip():
        return False
    following = lines[number + 1].strip() if number + 1 < len(lines) else ""
    return bool(following) and not _is_row(following) and not _BULLET.match(following)


@dataclass(frozen=True, slots=True)
class View:
    """A passage as the pairs check reads it: its label line, its blocks, its whole text."""

    label: str
    blocks: tuple[str, ...]
    whole: str

    @classmethod
    def of(cls, shown: str) -> View:
        """`shown` is a passage as the model was shown it: its label line, then its text."""
        label, _, text = shown.partition("\n")
        return cls(label, tuple(blocks(text)), shown)

    def holds(self, member: Member) -> bool:
        return member.specific.supported_by(self.whole)

    def binds(self, pair: Pair) -> bool:
        """Whether one block holds both of the pair, or the label one and a block the other."""
        first, second = pair.first.specific, pair.second.specific
        in_label = first.supported_by(self.label), second.supported_by(self.label)
        if all(in_label):
            return True
        return any(
            (in_label[0] or first.supported_by(block))
            and (in_label[1] or second.supported_by(block))
            for block in self.blocks
        )


def apart(linked: Sequence[Pair], views: Sequence[View]) -> list[Pair]:
    """The pairs whose two specifics `views` hold, but in no one block together.

    A pair with a specific that none of them holds (one only the question states)
    has nothing to be bound to here: the support check judges that specific alone.
    """
    return [
        pair
        for pair in linked
        if any(view.holds(pair.first) for view in views)
        and any(view.holds(pair.second) for view in views)
        and not any(view.binds(pair) for view in views)
    ]
