"""The grounding gate: the names a question relies on must exist in the documents.

A question that names a setting, flag, error code, command or version asks about
that exact thing. Whether the documents mention it is a fact the index can
check, so the small model is not asked: a name that no document holds means the
documents do not cover the question, and it is declined before the grade. A name
the index holds but the retrieved passages lack means retrieval missed the page
that defines it; one keyword query for the name brings that passage in before
the grade judges.

The names looked for are those a visitor cannot paraphrase: `--flags`,
snake_case and dotted settings (`gc.auto`, `SQLITE_MISUSE`), dot-commands
(`.import`), functions (`json_extract()`), version numbers, the number after
"exit code" or "error", and what the visitor put between backticks (a command
such as `git range-diff`). Product and project names count too (GitHub,
Litestream, Visual Studio Code: see proper_names): a question about a product
the documents never name is about something they do not cover. Plain words and
acronyms are not names: the documents may say them another way.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from candor.backends.keyword_vectors import stem
from candor.deps import Deps
from candor.graph import prompts, proper_names
from candor.graph.state import (
    GradedBy,
    GradeRecord,
    GraphState,
    GroundingCheck,
    Lookups,
    Update,
)
from candor.ports import VectorIndex
from candor.text import ATTRIBUTION_STOPWORDS, words
from candor.types import Hit

# Keyword candidates read per name looked up. A name is a rare term, and the index
# ranks the chunks that hold it (as a phrase, when it has parts) first; a common one
# ("git push") is in many of them. Reading more costs microseconds, and a name
# missed here would decline a question the documents answer. The names of a
# question are looked up in one query, which reads this many per name, up to
# MAX_LOOKUP_CANDIDATES.
LOOKUP_CANDIDATES = 50
MAX_LOOKUP_CANDIDATES = 250
# The most names one request looks up in the index. Each lookup is an index read
# (billed on Pinecone) whoever asks; a question of hundreds of made-up names is
# declined on the first absent one, and the names past the cap stay unchecked (the
# grade judges the question). Measured: no dev or validation question has more than
# a handful of names.
MAX_LOOKUP_NAMES = 8
# The most index reads one grade visit makes: the names' query, the product names'
# query by the question, and (once per request) whether the index searches keywords.
READS_PER_GRADE = 3

# File names are the visitor's own ("why is `build.log` tracked?"): no document
# holds them, and that says nothing about whether the documents answer.
_EXTENSION_LIST = (
    "bak bat bin c cfg conf cpp csv db exe gif go gz h htm html ini jar java jpeg jpg js "
    "json jsx lock log md mp4 out pdf php png py rb rs sh sql sqlite sqlite3 svg tar tmp "
    "toml ts tsx txt wav xml yaml yml zip env"
)
FILE_EXTENSIONS = frozenset(_EXTENSION_LIST.split())

_SPAN = re.compile(r"`([^`\n]{1,80})`")
_FLAG = re.compile(r"(?<![\w-])--[A-Za-z0-9][\w-]*[A-Za-z0-9]")
_SHORT_FLAG = re.compile(r"^-[A-Za-z]$")
_SNAKE = re.compile(r"(?<![\w.-])[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?![\w-])")
_DOTTED = re.compile(r"(?<![\w.])[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+(?![\w(])")
_DOT_COMMAND = re.compile(r"(?:(?<=\s)|(?<=^)|(?<=[`\"'(]))\.[A-Za-z][\w-]*")
_FUNCTION = re.compile(r"(?<![\w.])([A-Za-z_][\w.]*)\(\)")
_VERSION = re.compile(r"(?<![\w.])[vV]?(\d+\.\d+(?:\.\d+)*)(?![\w]|\.\d)")
_CODE = re.compile(
    r"\b(?:exit|error|return|status|result)\s+(?:code|status|value)?s?\s*(\d{1,5})\b",
    re.IGNORECASE,
)
# What a span holds when it is a command line rather than one name: a placeholder,
# a path or an assignment cannot be looked up word for word.
_NOT_A_PHRASE = re.compile(r"[<>$*/=~|\\\"'{}\[\]]")


def _is_abbreviation(name: str) -> bool:
    # "e.g", "i.e" and notations such as "A...B": dotted, but of single letters.
    parts = name.split(".")
    return len(parts) > 1 and all(len(p) <= 1 and not p.isdigit() for p in parts)


def _is_file_name(name: str) -> bool:
    head, _, extension = name.rpartition(".")
    return bool(head) and extension.lower() in FILE_EXTENSIONS


def _span_names(span: str) -> list[str]:
    """A backticked span's names: the command (its words before the first option or
    argument that is not a plain word) and each option."""
    words = span.split()
    if not words:
        return []
    command: list[str] = []
    for word in words:
        if word.startswith("-") or _NOT_A_PHRASE.search(word):
            break
        command.append(word)
    names = [" ".join(command)] if command else []
    names += [w for w in words if _SHORT_FLAG.match(w)]
    return names


def code_names(text: str) -> list[str]:
    """The code-like names in `text`, in order of first appearance, each once."""
    found: list[tuple[int, str]] = []
    for match in _SPAN.finditer(text):
        found += [(match.start(), name) for name in _span_names(match.group(1))]
    for pattern in (_FLAG, _SNAKE, _DOTTED, _DOT_COMMAND):
        found += [(m.start(), m.group(0)) for m in pattern.finditer(text)]
    for pattern in (_FUNCTION, _VERSION, _CODE):
        found += [(m.start(), m.group(1)) for m in pattern.finditer(text)]
    names: dict[str, None] = {}
    for _, name in sorted(found, key=lambda pair: pair[0]):
        name = name.strip().rstrip(".")
        if not name or _is_file_name(name) or _is_abbreviation(name):
            continue
        if not _covered(name, names):
            names[name] = None
    return list(names)


def specific_name(name: str) -> bool:
    """A name no passage holds by chance: a `--flag`, a setting or identifier
    (`gc.auto`, `SQLITE_BUSY`, `.import`), a version or an error code.

    A command alone (`git log`) is not: every page of a manual names it, so its
    presence says nothing about whether a passage answers what was asked of it.
    """
    if " " in name:
        return False
    return name.startswith("-") or "_" in name or "." in name or name.isdigit()


def _covered(name: str, names: Iterable[str]) -> bool:
    # `git push --force` also yields `--force` by the flag pattern: keep it once.
    folded = name.casefold()
    return any(folded == other.casefold() for other in names)


def _needle(name: str) -> re.Pattern[str]:
    """A name as it may be written in a document: any case, a space or a hyphen
    between its words (`git range-diff` is the page `git-range-diff`), and not
    inside a longer word or number."""
    words = [re.escape(word) for word in name.split()]
    body = r"[\s-]+".join(words)
    before = r"(?<![\w])" if name[:1].isalnum() else r"(?<![\w-])"
    if name[:1].isdigit():
        before = r"(?<![\w.])"
        body = r"[vV]?" + body  # "3.5" is also written "v3.5"
    after = r"(?![\w])" if name[-1:].isalnum() else ""
    if name.isdigit():
        after = r"(?![\w]|\.\d)"  # the code 125 is not in 125.3
    return re.compile(before + body + after, re.IGNORECASE)


def mentions(text: str, name: str) -> bool:
    """Whether `text` names `name` (see _needle for what counts)."""
    return _needle(name).search(text) is not None


def holds(text: str, name: str, *, product: bool) -> bool:
    """Whether `text` holds `name`: a product name as proper_names reads it, a code name
    as `mentions` does."""
    return proper_names.holds(text, name) if product else mentions(text, name)


def shown(hit: Hit, passage_chars: int) -> str:
    """A passage as the model is shown it."""
    return prompts.passage_text(hit, passage_chars)


def _whole(hit: Hit) -> str:
    chunk = hit.chunk
    return f"{chunk.title}\n{chunk.heading}\n{chunk.text}"


def lookup_keywords(name: str) -> str:
    # Joined by hyphens, the words of a command are also searched as one phrase
    # (see candor.backends.sqlite_index.keyword_terms), which ranks its chunks first.
    return "-".join(name.split())


def searches_keywords(index: VectorIndex, passages: Sequence[Hit]) -> bool:
    """Whether the index answers keyword queries: it must find a passage's own words.

    An index without a keyword search (a Pinecone deployment with no sparse index)
    finds nothing by keyword, and so cannot tell that a name is absent.
    """
    if not passages:
        return True  # nothing retrieved: the question is declined either way
    words = passages[0].chunk.text[:200]
    return bool(index.query(vector=None, keywords=words, top_k=1).keyword)


def _key(name: str, product: bool) -> str:
    return f"{'product' if product else 'code'}:{name}"


def _unique(hits: Iterable[Hit]) -> tuple[Hit, ...]:
    kept: dict[str, Hit] = {}
    for hit in hits:
        kept.setdefault(hit.chunk.id, hit)
    return tuple(kept.values())


def _lookup(
    index: VectorIndex, question: str, names: Sequence[tuple[str, bool]]
) -> tuple[dict[str, tuple[Hit, ...] | None], bool]:
    """The chunks that hold each name, from one keyword query for them all, checked here.

    Each chunk the query finds is read for every name (see `mentions` and
    proper_names.holds). A product name's chunks come first as the question's own
    words rank them, from a second query (question and product names together): a
    product name is often a common word of the documents too ("Windows"), and the
    chunk that ranks best for the name alone is then any chunk. A multiword product
    name that no chunk holds as a phrase is also read word by word (its words are
    terms of the same query). Returns the hits per name key, and whether the first
    query found anything at all.

    A name that none of the chunks found holds is absent. The query reads
    LOOKUP_CANDIDATES chunks per name, and a chunk that holds a name holds all its
    terms, its phrase included, so it ranks above the many that hold one of its
    words: trusting the ranking is what the gate did with one query a name. (Asking
    that the query return fewer chunks than it asked for, so that every chunk with
    any of the names' words was read, left every name of a real manual unknown:
    the words of "CREATE PROCEDURE" fill any lookup.)
    """
    top_k = min(LOOKUP_CANDIDATES * len(names), MAX_LOOKUP_CANDIDATES)
    keywords = " ".join(lookup_keywords(name) for name, _ in names)
    alone = index.query(vector=None, keywords=keywords, top_k=top_k).keyword
    products = [name for name, product in names if product]
    ranked: list[Hit] = []
    if products and alone:
        # The names first: a long question's terms are cut at MAX_QUERY_TERMS.
        by_question = " ".join(lookup_keywords(name) for name in products) + f" {question}"
        ranked = index.query(vector=None, keywords=by_question, top_k=top_k).keyword

    def held(name: str, product: bool) -> tuple[Hit, ...]:
        if product:
            return _unique(h for h in [*ranked, *alone] if proper_names.holds(_whole(h), name))
        return tuple(h for h in alone if mentions(_whole(h), name))

    hits: dict[str, tuple[Hit, ...] | None] = {}
    for name, product in names:
        hits[_key(name, product)] = held(name, product)
        if product and not hits[_key(name, product)] and len(name.split()) > 1:
            for part in proper_names.words_of(name):
                hits[_key(part, True)] = held(part, True)
    return hits, bool(alone)


@dataclass(frozen=True, slots=True)
class _Finding:
    """One name: where it stands, and the chunks of the index that hold it."""

    name: str
    product: bool
    shown: bool
    # None: not looked up (shown; no keyword search; past MAX_LOOKUP_NAMES).
    hits: tuple[Hit, ...] | None = None


def _find(
    question: str,
    passages: Sequence[Hit],
    index: VectorIndex,
    passage_chars: int,
    lookups: Lookups,
) -> tuple[list[_Finding], Lookups]:
    """Every name of `question`, found in the passages shown or looked up in the index,
    and the request's lookups with this visit's added.

    The names missing from the passages that no earlier visit of the request looked
    up are looked up together (`_lookup`: one or two keyword queries), at most
    MAX_LOOKUP_NAMES of them per request; the rest stay unchecked. Whether the index
    searches by keyword at all is asked only when that query finds nothing, once
    per request. A product name of several words that no document holds as a phrase
    is judged word by word (proper_names.words_of): "Visual Studio Code" is absent
    only if one of its words is.
    """
    seen = [shown(hit, passage_chars) for hit in passages]
    codes = code_names(question)
    wanted: dict[str, tuple[str, bool]] = {}
    for name in codes:
        wanted.setdefault(name.casefold(), (name, False))
    for name in proper_names.product_names(question):
        if not _covered(name, codes):
            wanted.setdefault(name.casefold(), (name, True))

    def in_view(name: str, product: bool) -> bool:
        return any(holds(text, name, product=product) for text in seen)

    missing = [(n, p) for n, p in wanted.values() if not in_view(n, p)]
    new = [(n, p) for n, p in missing if not lookups.looked_up(_key(n, p))]
    batch = new[: max(0, MAX_LOOKUP_NAMES - lookups.count)]
    if batch and lookups.keyword_search is not False:
        hits, found_any = _lookup(index, question, batch)
        searchable: bool | None = lookups.keyword_search
        if not found_any and searchable is None:
            searchable = searches_keywords(index, passages)
        if searchable is False:
            hits = dict.fromkeys(hits)  # nothing a keyword query says counts
        lookups = lookups.adding(hits, keyword_search=searchable)

    findings: list[_Finding] = []
    for name, product in wanted.values():
        if in_view(name, product):
            findings.append(_Finding(name, product, True))
            continue
        found = lookups.hits(_key(name, product))
        parts = proper_names.words_of(name) if product and len(name.split()) > 1 else []
        if found == () and parts and all(lookups.looked_up(_key(w, True)) for w in parts):
            for part in parts:
                taken = {f.name.casefold() for f in findings}
                if _covered(part, codes) or part.casefold() in taken:
                    continue
                part_seen = in_view(part, True)
                part_hits = None if part_seen else lookups.hits(_key(part, True))
                findings.append(_Finding(part, True, part_seen, part_hits))
            continue
        findings.append(_Finding(name, product, False, found))
    unique: dict[str, _Finding] = {}
    for finding in findings:
        unique.setdefault(finding.name.casefold(), finding)
    return list(unique.values()), lookups


async def check(
    question: str,
    passages: Sequence[Hit],
    index: VectorIndex,
    *,
    passage_chars: int,
    top_k: int,
    lookups: Lookups | None = None,
) -> tuple[GroundingCheck, tuple[Hit, ...], Lookups]:
    """The gate's findings for `question`, the passages the grade should judge, and the
    request's lookups (give them back on the request's next visit: `lookups`).

    A name missing from the passages shown is looked up in the index; the best
    passage holding it goes first, ahead of the retrieved ones, which keep their
    order and are cut to `top_k` in all.
    """
    findings, learned = await asyncio.to_thread(
        _find, question, passages, index, passage_chars, lookups or Lookups()
    )
    if not findings:
        return GroundingCheck(), tuple(passages), learned
    in_index: list[str] = []
    absent: list[str] = []
    unchecked: list[str] = []
    added: list[Hit] = []
    for found in findings:
        if found.shown:
            continue
        if found.hits is None:
            unchecked.append(found.name)
            continue
        (in_index if found.hits else absent).append(found.name)
        # Prefer a passage that shows the name within the part the model reads.
        visible = [
            h
            for h in found.hits
            if holds(shown(h, passage_chars), found.name, product=found.product)
        ]
        best = (visible or list(found.hits))[:1]
        added += [h for h in best if all(h.chunk.id != a.chunk.id for a in added)]
    check = GroundingCheck(
        names=tuple(f.name for f in findings),
        shown=tuple(f.name for f in findings if f.shown),
        in_index=tuple(in_index),
        absent=tuple(absent),
        unchecked=tuple(unchecked),
        added=tuple(hit.chunk.id for hit in added) if not absent else (),
        products=tuple(f.name for f in findings if f.product),
    )
    if absent or not added:
        return check, tuple(passages), learned
    ids = {hit.chunk.id for hit in added}
    kept = [hit for hit in passages if hit.chunk.id not in ids]
    return check, tuple([*added, *kept][: max(top_k, len(added))]), learned


# Words that frame a question about a name rather than add to what it asks: "what
# does --x mean", "explain gc.auto", "which option ...". They need not stand in the
# passage; every other content word of the question must.
_FRAMING_TEXT = """
    mean means meaning meant explain explains tell describe happen happens work works
    purpose option options flag flags setting settings command commands example please
    help know want need difference between exactly actually really way ways
"""
FRAMING_WORDS = frozenset(_FRAMING_TEXT.split())
# A question word and a passage word of at least this many letters that one begins
# with the other are one word ("protect", "protection").
_SHARED_STEM = 5


def _matches(word: str, found: set[str]) -> bool:
    if word in found:
        return True
    if len(word) < _SHARED_STEM:
        return False
    return any(
        len(other) >= _SHARED_STEM and (other.startswith(word) or word.startswith(other))
        for other in found
    )


def about_names(question: str, names: Sequence[str], passages: Sequence[str]) -> bool:
    """Whether `question` asks about its names, by what the passages that hold them say.

    Every content word of the question besides the names' own and the words that
    frame a question ("explain", "mean", "option") must stand, in some form, in
    one of `passages`: "Which remote ref does --force-with-lease protect?" is about
    the flag; "Write me a limerick about my cat, not about --force-with-lease." is not.
    """
    named = {stem(w) for name in names for w in words(name)}
    asked = {
        stem(w)
        for w in words(question)
        if len(w) >= 3 and w not in ATTRIBUTION_STOPWORDS | FRAMING_WORDS and not w.isdigit()
    }
    wanted = asked - named
    if not wanted:
        return True
    found = {stem(w) for text in passages for w in words(text)}
    return all(_matches(word, found) for word in wanted)


@dataclass(frozen=True, slots=True)
class Gate:
    """The gate's findings on one grade: the passages to judge and, when the
    documents settle it without a model, who declined."""

    check: GroundingCheck
    passages: tuple[Hit, ...]
    attempt: int
    earlier: tuple[GradeRecord, ...]
    added: bool
    question: str = ""
    lookups: Lookups = field(default_factory=Lookups)

    @property
    def decided_by(self) -> GradedBy | None:
        if self.check.absent:
            return "gate"
        if not self.passages:
            return "no_passages"
        return None

    def names_settle(self, passage_chars: int) -> bool:
        """Whether the names alone say the passages answer, so no model need grade them.

        True when the question names at least one exact thing (specific_name), every
        name it relies on stands in what the answer will read, and the question is
        about those names: its other content words stand in a passage that holds one
        (`about_names`). Such a question asks about that thing, and the passage that
        defines it is in front of the model; a grade would only repeat what the index
        has shown. "Write me a limerick about my cat, not about --force-with-lease."
        names a flag the passages show, and is graded.
        """
        names = self.check.names
        if not any(specific_name(name) for name in names if name not in self.check.products):
            return False
        read = [shown(hit, passage_chars) for hit in prompts.shown(self.passages)]
        products = self.check.products
        if not all(
            any(holds(text, name, product=name in products) for text in read) for name in names
        ):
            return False
        holding = [t for t in read if any(holds(t, n, product=n in products) for n in names)]
        return about_names(self.question, names, holding)

    def update(
        self,
        *,
        answerable: bool,
        by: GradedBy,
        score: float | None = None,
        option_mass: float | None = None,
    ) -> Update:
        record = GradeRecord(
            attempt=self.attempt,
            passage_ids=tuple(hit.chunk.id for hit in self.passages),
            answerable=answerable,
            by=by,
            grounding=self.check,
            score=score,
            option_mass=option_mass,
        )
        update: Update = {
            "answerable": answerable,
            "grades": (*self.earlier, record),
            "lookups": self.lookups,
        }
        if self.added:
            update["passages"] = self.passages
        return update


async def gate(state: GraphState, deps: Deps, question: str) -> Gate:
    """Check `question`'s names against the state's passages and the index, with what
    the request's earlier grade visits looked up already."""
    found, passages, lookups = await check(
        question,
        state.passages,
        deps.index,
        passage_chars=deps.settings.passage_chars,
        top_k=state.top_k,
        lookups=state.lookups,
    )
    added = passages != state.passages
    return Gate(found, passages, state.attempts, state.grades, added, question, lookups)
