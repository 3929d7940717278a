"""A catalogue listing as the visitor reads it: a template, filled with what the
documents hold, and the places each part comes from.

The answer is written by these templates, not by a model: every title, heading and
entry in it is read from the catalogue, so it can hold nothing the documents do
not (there is nothing for the support check to remove). A list longer than
functions.MAX_LISTED says how many there are, shows the first ones and names the
page that holds them all. Each `[n]` marks the page or section it follows; `marks`
says which (the node turns them into citations of the passages there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from candor.catalogue.asks import Ask
from candor.catalogue.functions import Item, Listing, top_headings
from candor.catalogue.records import DocumentRecord

# The most citations one answer carries; items past them are listed unmarked.
MAX_CITATIONS = 10
# An entry that reads as a name (no spaces between words, or a list of such names)
# is shown as code: `--force-with-lease`, `CANDOR_TOP_K`, `-n, --dry-run`.
_CODE_LIKE = re.compile(r"[^\s,]+(?:, [^\s,]+)*")


@dataclass(frozen=True, slots=True)
class Mark:
    """What the answer's marker `[number]` cites: a page, at one of its headings."""

    number: int
    record: DocumentRecord
    heading: int  # -1: the page itself
    quote: str


@dataclass(frozen=True, slots=True)
class Written:
    text: str
    marks: tuple[Mark, ...]


class _Marker:
    def __init__(self) -> None:
        self.marks: list[Mark] = []
        self._numbers: dict[tuple[str, int], int] = {}

    def __call__(self, record: DocumentRecord, heading: int, quote: str) -> str:
        key = (record.source, heading)
        if key not in self._numbers:
            if len(self.marks) >= MAX_CITATIONS:
                return ""
            self._numbers[key] = len(self.marks) + 1
            self.marks.append(Mark(self._numbers[key], record, heading, quote))
        return f" [{self._numbers[key]}]"


def write(listing: Listing, ask: Ask, site_name: str) -> Written:
    mark = _Marker()
    match listing.function:
        case "overview" | "count":
            text = _overview(listing, ask, site_name, mark)
        case "recent":
            text = _recent(listing, mark)
        case "pages":
            text = _pages(listing, ask, mark)
        case "outline":
            text = _outline(listing, mark)
        case _:
            text = _entries(listing, mark)
    return Written(text, tuple(mark.marks))


def plural(noun: str) -> str:
    """The noun as a count of several reads it: "every term" lists "87 terms"."""
    if noun.endswith("s"):
        return noun
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def shown(term: str) -> str:
    return f"`{term}`" if _CODE_LIKE.fullmatch(term) and "`" not in term else term


def _overview(listing: Listing, ask: Ask, site_name: str, mark: _Marker) -> str:
    pages = listing.total
    opening = (
        f"I answer questions from the documents of {site_name}."
        if ask.greeting
        else f"The documents of {site_name} hold {_count(pages, 'page')}."
    )
    if pages <= len(listing.items):
        intro = f"They cover {_count(pages, 'page')}:" if ask.greeting else "They cover:"
        lines = []
        for item in listing.items:
            headings = top_headings(item.record)
            topics = f": {'; '.join(headings)}" if headings else ""
            lines.append(f"- {item.text}{mark(item.record, -1, item.text)}{topics}")
        return "\n".join([opening, intro, *lines])
    named = ", ".join(f"{item.text}{mark(item.record, -1, item.text)}" for item in listing.items)
    most = f"the {len(listing.items)} with the most text are: {named}."
    if ask.greeting:
        most = f"They hold {_count(pages, 'page')}; {most}"
    else:
        most = most[:1].upper() + most[1:]
    return f"{opening} {most} Ask me which pages are about a topic to see more of them."


def _recent(listing: Listing, mark: _Marker) -> str:
    lines = [
        f"- {item.text}{mark(item.record, -1, item.text)}, changed on {_day(item.record)}"
        for item in listing.items
    ]
    return "\n".join(["The pages that changed most recently, newest first:", *lines])


def _pages(listing: Listing, ask: Ask, mark: _Marker) -> str:
    lines = []
    for item in listing.items:
        where = f" (under {item.group})" if item.group else ""
        cited = mark(item.record, item.heading, item.group or item.text)
        lines.append(f"- {item.text}{cited}{where}")
    verb = "is" if listing.total == 1 else "are"
    head = f"{_count(listing.total, 'page')} of the documents {verb} about {ask.subject}:"
    return "\n".join([head, *lines, *_more(listing)])


def _outline(listing: Listing, mark: _Marker) -> str:
    scope = listing.scope
    assert scope is not None
    lines: list[str] = []
    groups: dict[str, list[str]] = {}
    order: list[str] = []
    for item in listing.items:
        if item.group:
            groups.setdefault(item.group, []).append(item.text)
        else:
            order.append(item.text)
            groups.setdefault(item.text, [])
    for top in order:
        below = groups.get(top, [])
        lines.append(f"- {top}: {'; '.join(below)}" if below else f"- {top}")
    head = f"{scope.text} has these sections{mark(scope.record, scope.heading, scope.text)}:"
    return "\n".join([head, *lines, *_more(listing)])


def _entries(listing: Listing, mark: _Marker) -> str:
    scope = listing.scope
    assert scope is not None
    record = scope.record
    noun = plural(listing.noun) if listing.noun else "entries"
    where = f" under {scope.text}" if scope.heading >= 0 else ""
    head = (
        f"{record.title} lists {listing.total} {noun}{where}"
        f"{mark(record, scope.heading, scope.text)}:"
    )
    groups: dict[str, list[Item]] = {}
    for item in listing.items:
        groups.setdefault(item.group, []).append(item)
    if len(groups) == 1:
        body = [", ".join(shown(item.text) for item in listing.items) + "."]
    else:
        body = []
        for group, items in groups.items():
            first = items[0]
            cited = mark(record, first.heading, group) if group else ""
            label = f"{group}{cited}: " if group else ""
            body.append(f"- {label}{', '.join(shown(item.text) for item in items)}")
    return "\n".join([head, *body, *_more(listing)])


def _more(listing: Listing) -> list[str]:
    shown_count = len(listing.items)
    if listing.total <= shown_count:
        return []
    holder = listing.scope.record if listing.scope else None
    where = ""
    if holder is not None:
        where = f" {holder.title} has them all" + (f": {holder.url}" if holder.url else ".")
    return [f"These are the first {shown_count} of {listing.total}.{where}".rstrip()]


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number:,} {noun}s"


def _day(record: DocumentRecord) -> str:
    return datetime.fromtimestamp(record.changed_at, UTC).strftime("%Y-%m-%d")
