"""A number and what it counts: "5 years", "20 MB", "version 3".

A passage that says "since version 3" does not support an answer that says "kept
for 3 years": the digits are there, the fact is not. So a number written with a
unit or a counted noun after it, or with "version", "release", "level" or "port"
before it, is one specific, and a passage supports it only where the same number
stands with a word of the same family, next to it: "5 years", "5-year", "5 yr" and
"5 yrs" are one fact; "5 months" is another, and so is "5" alone. Bytes go with
their binary twins (MB and MiB are one family: a model that rounds one into the
other is not inventing a value). A number's words ("five years") are not read:
such an answer is judged by its other specifics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Each family's words, any case. Short forms only where they cannot be an ordinary
# word after a number ("us", "m", "b" are left out: "give 2 us", "5 m", "1 B-tree").
_AFTER_FAMILIES: dict[str, str] = {
    "nanosecond": "ns nanosecond nanoseconds",
    "microsecond": "µs microsecond microseconds",
    "millisecond": "ms msec msecs millisecond milliseconds",
    "second": "s sec secs second seconds",
    "minute": "min mins minute minutes",
    "hour": "h hr hrs hour hours",
    "day": "day days",
    "week": "wk wks week weeks",
    "month": "month months",
    "year": "yr yrs year years",
    "bit": "bit bits",
    "byte": "byte bytes",
    "kilobyte": "k kb kib kilobyte kilobytes kibibyte kibibytes",
    "megabyte": "mb mib megabyte megabytes mebibyte mebibytes",
    "gigabyte": "gb gib gigabyte gigabytes gibibyte gibibytes",
    "terabyte": "tb tib terabyte terabytes tebibyte tebibytes",
    "percent": "% percent pct",
    "character": "char chars character characters",
    "digit": "digit digits",
    "line": "line lines",
    "row": "row rows",
    "column": "column columns",
    "time": "time times",
}
_BEFORE_FAMILIES: dict[str, str] = {
    "version": "v ver version versions",
    "release": "release releases",
    "level": "level levels",
    "port": "port ports",
}


def _alternation(words: str) -> str:
    # Longest first, so that "ms" is not read as "m" and a trailing "s".
    return "|".join(re.escape(w) for w in sorted(words.split(), key=len, reverse=True))


_FAMILY_OF = {
    word: family
    for families in (_AFTER_FAMILIES, _BEFORE_FAMILIES)
    for family, words in families.items()
    for word in words.split()
}
# A number standing on its own, as specifics._NUMBER reads one: not inside an
# identifier (sha256), an option (-n5), a marker ([1]) or a name (HEAD~1).
_NUM = r"(?<![\w.~^@{\-\[])(?P<number>\d+(?:[.,]\d+)*)"
_AFTER = re.compile(
    _NUM
    + r"(?:[ \t]?-?[ \t]?)(?P<unit>"
    + _alternation(" ".join(_AFTER_FAMILIES.values()))
    + r")(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_BEFORE = re.compile(
    r"(?<![\w.\-])(?P<unit>"
    + _alternation(" ".join(_BEFORE_FAMILIES.values()))
    + r")(?:[ \t]?-?[ \t]?)(?P<number>\d+)(?![\w]|[.,]\d)",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Quantity:
    """A number and the family of the word that says what it counts."""

    text: str  # as the answer wrote it: "5 years", "v3"
    number: str
    family: str
    before: bool  # the word stands before the number ("version 3")
    span: tuple[int, int]


def quantities(text: str) -> list[Quantity]:
    """The numbers in `text` that are written with what they count, in order."""
    found: list[Quantity] = []
    for pattern, before in ((_AFTER, False), (_BEFORE, True)):
        for match in pattern.finditer(text):
            unit = match.group("unit").casefold()
            found.append(
                Quantity(
                    text=match.group(0),
                    number=match.group("number"),
                    family=_FAMILY_OF[unit],
                    before=before,
                    span=match.span(),
                )
            )
    found.sort(key=lambda q: q.span)
    kept: list[Quantity] = []
    for quantity in found:  # "version 5 years" is read once, by its first reading
        if not kept or quantity.span[0] >= kept[-1].span[1]:
            kept.append(quantity)
    return kept


def _needle(quantity: Quantity) -> re.Pattern[str]:
    families = _BEFORE_FAMILIES if quantity.before else _AFTER_FAMILIES
    unit = f"(?:{_alternation(families[quantity.family])})"
    number = re.escape(quantity.number)
    if quantity.before:
        body = rf"(?<![\w.\-]){unit}[ \t]?-?[ \t]?{number}(?![\w]|[.,]\d)"
    else:
        body = rf"(?<![\w.~^@{{\-\[]){number}[ \t]?-?[ \t]?{unit}(?![A-Za-z0-9])"
    return re.compile(body, re.IGNORECASE)


# How far apart, in words, a number and its unit may stand in one sentence of a
# passage: "Number of seconds to cache credentials (default: 900)" says 900 seconds.
NEAR_WORDS = 6
_PASSAGE_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_TOKEN = re.compile(r"\S+")


def states(text: str, quantity: Quantity) -> bool:
    """Whether `text` gives the same number with a word of the same family beside it,
    or near it in one sentence while no word of another family holds it."""
    if _needle(quantity).search(text) is not None:
        return True
    families = _BEFORE_FAMILIES if quantity.before else _AFTER_FAMILIES
    unit_words = set(families[quantity.family].split())
    for sentence in _PASSAGE_SENTENCE.split(text):
        tokens = [t.strip("()[]{},;:.!?\"'`").casefold() for t in _TOKEN.findall(sentence)]
        numbers = [i for i, t in enumerate(tokens) if t.rstrip(".") == quantity.number]
        units = [i for i, t in enumerate(tokens) if t.rstrip(".") in unit_words]
        for at in numbers:
            bound = [q for q in quantities(sentence) if q.number == quantity.number]
            if any(q.family != quantity.family for q in bound):
                continue  # "version 5" is not "5 years", however near a year stands
            if any(abs(at - unit) <= NEAR_WORDS for unit in units):
                return True
    return False
