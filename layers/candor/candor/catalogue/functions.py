"""The catalogue's functions: facts about the whole corpus, read from its records.

Each takes the records of an index (candor.catalogue.records) and a few
parameters, and returns a Listing: the items found (each with the page and the
heading it comes from, for its citation), how many there are in all, and what
they are. None means the catalogue cannot answer: the question goes on to
retrieval as any other. Nothing here calls a model or invents an item: every
item is a title, a heading or an entry the documents hold.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

from candor.catalogue.asks import Ask
from candor.catalogue.records import DocumentRecord

# The most items one answer lists; past it the answer gives the count and the first
# MAX_LISTED, with a link to the page that holds them all.
MAX_LISTED = 150
# The most pages an overview names: past it, the count and the pages with most text.
OVERVIEW_PAGES = 15
# The headings shown under each page of an overview of a small site, and the longest
# one shown (a heading that is a sentence says little in a list of topics).
OVERVIEW_HEADINGS = 4
OVERVIEW_HEADING_CHARS = 60
RECENT_PAGES = 10

_WORD = re.compile(r"[^\W_]+")
# What a listed noun may be called in headings and titles (singular stems).
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "setting": ("configuration", "config", "variable", "option", "setting"),
    "config": ("configuration", "variable", "setting"),
    "configuration": ("config", "variable", "setting"),
    "variable": ("configuration", "config", "setting", "environment"),
    "option": ("flag", "switch", "argument", "parameter", "setting"),
    "flag": ("option", "switch"),
    "switch": ("option", "flag"),
    "argument": ("option", "parameter"),
    "parameter": ("option", "argument", "setting"),
    "subcommand": ("command",),
    "command": ("subcommand", "porcelain", "plumbing"),
    "function": ("func",),
    "key": ("variable", "setting", "configuration"),
    "term": ("glossary", "terminology", "definition"),
    "definition": ("glossary", "term"),
    "code": ("error", "result", "status", "exit"),
    "error": ("code", "result"),
}
# Nouns that list whatever a scope holds ("every entry of git-config"): any scope
# with entries answers them, whatever its headings say.
_GENERIC = frozenset({"entry", "item", "thing", "name", "element", "value"})


# Words that name the same thing in headings and titles, as one.
_ALIASES = {"configuration": "config", "configure": "config", "env": "environment"}


def stem(word: str) -> str:
    """A crude singular: enough that "options" meets OPTIONS and "strategies" STRATEGY."""
    word = word.casefold().removesuffix("'s")
    word = _ALIASES.get(word, word)
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def stems(text: str) -> list[str]:
    return [stem(word) for word in _WORD.findall(text)]


@dataclass(frozen=True, slots=True)
class Item:
    """One thing listed: its text, the page it is on and the heading it stands under
    there (-1: the page itself), and the heading's text it is grouped under."""

    text: str
    record: DocumentRecord
    heading: int = -1
    group: str = ""


@dataclass(frozen=True, slots=True)
class Listing:
    """What a function found: the items (at most MAX_LISTED), how many there are in
    all, the noun they are, and the scope they come from (None: the whole corpus)."""

    function: str
    items: tuple[Item, ...]
    total: int
    noun: str = ""
    scope: Item | None = None
    # Whether the items are cut: the record held fewer than the document has.
    truncated: bool = False


def documents(records: Sequence[DocumentRecord]) -> list[DocumentRecord]:
    """The records in a stable order: by source."""
    return sorted(records, key=lambda r: r.source)


def overview(records: Sequence[DocumentRecord]) -> Listing | None:
    """What the documents cover: every page, or the count and the pages with most text.

    A small site's pages come with their top headings (the group of each item is
    its page's title); a large one's are named alone.
    """
    if not records:
        return None
    ordered = sorted(records, key=lambda r: (-r.chars, r.source))
    shown = ordered[:OVERVIEW_PAGES]
    items = [Item(r.title, r, -1) for r in shown]
    return Listing("overview", tuple(items), len(records), noun="pages")


def top_headings(record: DocumentRecord, limit: int = OVERVIEW_HEADINGS) -> list[str]:
    """The page's highest-level headings, in order, at most `limit` of the short ones."""
    if not record.headings:
        return []
    top = min(h.level for h in record.headings)
    short = [h.text for h in record.headings if h.level == top]
    return [text for text in short if len(text) <= OVERVIEW_HEADING_CHARS][:limit]


def count(records: Sequence[DocumentRecord]) -> Listing | None:
    """How many pages there are, with what an overview names of them (a count alone
    would cite nothing)."""
    found = overview(records)
    return None if found is None else replace(found, function="count")


def recent(records: Sequence[DocumentRecord], limit: int = RECENT_PAGES) -> Listing | None:
    """The pages whose bytes changed last, newest first."""
    if not records:
        return None
    ordered = sorted(records, key=lambda r: (-r.changed_at, r.source))[:limit]
    return Listing("recent", tuple(Item(r.title, r) for r in ordered), len(records), "pages")


def pages_about(records: Sequence[DocumentRecord], subject: str) -> Listing | None:
    """The pages whose title or name holds every word of `subject`, then those with a
    heading that does; None when no page does."""
    wanted = _distinct(stems(subject))
    if not wanted:
        return None
    titled: list[Item] = []
    headed: list[Item] = []
    for record in documents(records):
        if all(_holds(_name_words(record), word) for word in wanted):
            titled.append(Item(record.title, record))
            continue
        for index, path in enumerate(record.paths):
            words = set(stems(" ".join(path))) | _name_words(record)
            if all(_holds(words, word) for word in wanted):
                headed.append(Item(record.title, record, index, " > ".join(path)))
                break
    found = titled + headed
    if not found:
        return None
    return Listing("pages", tuple(found[:MAX_LISTED]), len(found), noun="pages")


@dataclass(frozen=True, slots=True)
class Scope:
    record: DocumentRecord
    heading: int  # -1: the whole page
    score: float
    noun_matched: bool


def outline(
    records: Sequence[DocumentRecord], subject: str, *, strict: bool = False
) -> Listing | None:
    """The headings of the page `subject` names, in order (top levels first grouped)."""
    scope = find_scope(records, subject, "", need="headings", strict=strict)
    if scope is None:
        return None
    record = scope.record
    below = _descendants(record, scope.heading)
    headings = [i for i in below if i != scope.heading]
    if not headings:
        return None
    top = min(record.headings[i].level for i in headings)
    items = [
        Item(record.headings[i].text, record, i, _group(record, i, top))
        for i in headings
        if record.headings[i].level <= top + 1
    ]
    return Listing(
        "outline",
        tuple(items[:MAX_LISTED]),
        len(items),
        noun="sections",
        scope=_scope_item(scope),
        truncated=record.headings_total > len(record.headings),
    )


def entries(
    records: Sequence[DocumentRecord], subject: str, noun: str, *, strict: bool = False
) -> Listing | None:
    """The entries (definition terms, table rows) under the page or section that
    `subject` and `noun` name, grouped by the heading each stands under; or, where the
    section has more subsections than entries (githooks' HOOKS: a heading per hook),
    its subsections' headings."""
    scope = find_scope(records, subject, noun, need="entries", strict=strict)
    if scope is None:
        return None
    record = scope.record
    inside = set(_descendants(record, scope.heading))
    found = [e for e in record.entries if e.heading in inside or scope.heading < 0]
    children = [i for i in sorted(inside) if record.headings[i].parent == scope.heading]
    if scope.heading >= 0 and len(children) > len(found):
        items = [Item(record.headings[i].text, record, i) for i in children]
        return Listing(
            "entries", tuple(items[:MAX_LISTED]), len(items), noun=noun, scope=_scope_item(scope)
        )
    if not found:
        return None
    items = [Item(e.term, record, e.heading, _group_of(record, e.heading, scope)) for e in found]
    truncated = record.entries_total > len(record.entries)
    total = record.entries_total if truncated and scope.heading < 0 else len(items)
    return Listing(
        "entries",
        tuple(items[:MAX_LISTED]),
        total,
        noun=noun,
        scope=_scope_item(scope),
        truncated=truncated,
    )


def answer(records: Sequence[DocumentRecord], ask: Ask, *, strict: bool = False) -> Listing | None:
    """The listing `ask` calls for, or None when the catalogue cannot answer it.

    `strict`: a page or section must match every word of the subject (for a question
    the screen did not take for a catalogue question: better retrieval than a list of
    the wrong page).
    """
    match ask.function:
        case "overview":
            return overview(records)
        case "count":
            return count(records)
        case "recent":
            return recent(records)
        case "pages":
            return pages_about(records, ask.subject)
        case "outline":
            return outline(records, ask.subject, strict=strict)
        case "entries":
            return entries(records, ask.subject, ask.noun, strict=strict)


# -- finding the page or section a question names -----------------------------------


def find_scope(
    records: Sequence[DocumentRecord], subject: str, noun: str, *, need: str, strict: bool = False
) -> Scope | None:
    """The page or section that `subject` names and `noun` describes, or None when no
    scope is named clearly (two pages score alike) or none holds what is `need`ed.

    Each word of the subject scores its rarity (the log of how few pages name it in
    their title, file name or headings) where the page's title or file name has it
    (less where a longer word holds it: "githooks" for "hook"), or the section's
    heading path does; a word found nowhere costs its rarity. The noun ("options",
    "settings") scores where the section's headings name it (a little less for a
    synonym, "variables" for "settings") or the page's title does, and a little more
    on every scope of a page whose name holds it. A scope
    must name the noun when one is asked for, and hold what is `need`ed
    (entries, or subsections). Ties within one page go to the section whose headings
    matched more words, then to the shallower. `strict`: every word must match.
    """
    words = _distinct(w for w in stems(subject) if w)
    noun_stem = stem(noun) if noun else ""
    kinds = {noun_stem, *_SYNONYMS.get(noun_stem, ())} - {""}
    if not words and not kinds:
        return None
    rarity = _rarity(records, words)
    scored: list[tuple[float, int, int, Scope]] = []
    for record in documents(records):
        names = _name_words(record)
        by_name = {w: _name_match(names, w) for w in words if _holds(names, w)}
        named_kind = any(_holds(names, k) for k in kinds)
        for heading in (-1, *range(len(record.headings))):
            if not _holds_needed(record, heading, need):
                continue
            path_words = set(stems(" ".join(record.path(heading))))
            by_path = {w for w in words if w not in by_name and _holds(path_words, w)}
            matched = set(by_name) | by_path
            if strict and len(matched) < len(words):
                continue
            noun_score = 0.0
            if noun_stem in _GENERIC:
                noun_score = NOUN_SCORE
            elif noun_stem in path_words:
                noun_score = NOUN_SCORE + EXACT_NOUN_SCORE
            elif kinds & path_words or named_kind:
                # A page named for the noun (Configuration, for "settings") lists it
                # in every section.
                noun_score = NOUN_SCORE
            if kinds and not noun_score:
                continue
            if not matched and not noun_score:
                continue
            score = (
                sum(rarity[w] * quality for w, quality in by_name.items())
                + sum(rarity[w] for w in by_path)
                - sum(rarity[w] for w in words if w not in matched)
                + noun_score
                + (NAMED_NOUN_SCORE if named_kind and noun_score else 0.0)
                # A tie-breaker: of git-push and git-http-push, "git push" names the first.
                - EXTRA_NAME_SCORE * len(_extra(names, matched))
            )
            depth = len(record.path(heading))
            scope = Scope(record, heading, score, bool(noun_score))
            scored.append((round(score, 6), len(by_path), -depth, scope))
    if not scored:
        return None
    top = max(item[0] for item in scored)
    best = [item for item in scored if item[0] == top]
    if len({item[3].record.source for item in best}) > 1:
        return None  # two pages score alike: which one the question means is unclear
    return max(best, key=lambda item: (item[1], item[2]))[3]


NOUN_SCORE = 2.0
EXACT_NOUN_SCORE = 0.5
NAMED_NOUN_SCORE = 0.5
EXTRA_NAME_SCORE = 0.1
# What a subject word found inside a longer word of a page's name counts, against 1
# for the word itself.
CONTAINED_SCORE = 0.6


def _name_match(names: set[str], word: str) -> float:
    return 1.0 if word in names else CONTAINED_SCORE


def _extra(names: set[str], matched: set[str]) -> set[str]:
    """The words of a page's name that no word of the question matched (digits aside)."""
    return {n for n in names if not n.isdigit() and not any(_holds({n}, w) for w in matched)}


def _holds_needed(record: DocumentRecord, heading: int, need: str) -> bool:
    inside = set(_descendants(record, heading))
    if need == "headings":
        return any(i != heading for i in inside)
    has_entries = any(e.heading in inside for e in record.entries) or (
        heading < 0 and bool(record.entries)
    )
    children = any(record.headings[i].parent == heading for i in inside if i != heading)
    return has_entries or (heading >= 0 and children)


def _descendants(record: DocumentRecord, heading: int) -> list[int]:
    """The heading and every heading below it (for -1: every heading), in order."""
    if heading < 0:
        return list(range(len(record.headings)))
    found = [heading]
    inside = {heading}
    for index in range(heading + 1, len(record.headings)):
        if record.headings[index].parent in inside:
            found.append(index)
            inside.add(index)
    return found


def _group(record: DocumentRecord, index: int, top: int) -> str:
    heading = record.headings[index]
    if heading.level <= top or heading.parent < 0:
        return ""
    return record.headings[heading.parent].text


def _group_of(record: DocumentRecord, heading: int, scope: Scope) -> str:
    """The heading an entry is grouped under in a listing: its own, below the scope."""
    if heading < 0 or heading == scope.heading:
        return ""
    return " > ".join(record.path(heading)[len(record.path(scope.heading)) :])


def _scope_item(scope: Scope) -> Item:
    record = scope.record
    text = " > ".join(record.path(scope.heading)) if scope.heading >= 0 else record.title
    return Item(text, record, scope.heading)


def _name_words(record: DocumentRecord) -> set[str]:
    stem_of_file = PurePosixPath(record.source).stem
    return set(stems(record.title)) | set(stems(stem_of_file))


def _holds(words: set[str], word: str) -> bool:
    """Whether `words` has `word`, or a word that starts with it (three letters or
    more) or contains it (four or more): "githooks" holds "git" and "hook"."""
    if word in words:
        return True
    longer = [other for other in words if len(other) > len(word)]
    if len(word) >= 3 and any(other.startswith(word) for other in longer):
        return True
    return len(word) >= 4 and any(word in other for other in longer)


def _distinct(words: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(words))


def _rarity(records: Sequence[DocumentRecord], words: Sequence[str]) -> dict[str, float]:
    """log(1 + pages / pages naming the word in their title, file name or headings)."""
    named: Counter[str] = Counter()
    for record in records:
        headed = {w for path in record.paths for w in stems(" ".join(path))}
        vocabulary = _name_words(record) | headed
        for word in words:
            if _holds(vocabulary, word):
                named[word] += 1
    total = max(1, len(records))
    return {word: math.log(1 + total / max(1, named[word])) for word in words}
