"""Product and project names as a visitor writes them: GitHub, Litestream, Visual Studio Code.

A question about a third-party product asks about that product; a small model
shown passages that never name it writes installation steps anyway. Such names
are not code-like (no dot, no underscore, no backticks), so they are read the way
a reader spots them: a word with capitals inside it (GitHub, SQLCipher, macOS), or
a capitalised word that does not open a sentence and is not a common English word
("set up Litestream", "in Bitbucket Cloud").

Adjacent such words are one name ("Visual Studio Code"), and so are an acronym or a
sentence's first word next to one ("AWS Lambda", "Bitbucket Cloud lets me..."); when
the documents do not hold the phrase, its words are judged one by one (`words_of`),
so that a phrase the documents write differently never counts as absent while each
of its words is there. An acronym alone is not a name: the documents may spell it
out ("LFS", "Large File Storage"). A sentence in title case ("How Do I Reset My
Branch?"), a Markdown heading or a bold span says nothing about names but the ones
with capitals inside.

Whether a text holds a name ignores case ("sqlite" holds SQLite) and lets digits or
punctuation follow it ("sqlite3", "git-push" hold SQLite and Git), but not letters
("githubusercontent" does not hold GitHub).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from candor.text import ATTRIBUTION_STOPWORDS

# Capitalised words that are not names: said at the start of a clause, out of
# courtesy or for emphasis, or calendar words. Compared case-insensitively, with
# text.py's stopwords. Short on purpose: a common word capitalised mid-sentence is
# looked up in any case, and the documents hold it in lower case, so missing one
# here costs a lookup, not an answer.
_COMMON_TEXT = """
    also always anyway because besides both dear either even every except first hello hey
    hi however indeed instead its last maybe meanwhile never next note now ok okay once
    otherwise please rather regards second sir sorry still thank thanks then therefore
    though thus today tomorrow unless until yesterday yet
    monday tuesday wednesday thursday friday saturday sunday
    january february march april may june july august september october november december
    mr mrs ms dr
"""
COMMON_WORDS = ATTRIBUTION_STOPWORDS | frozenset(_COMMON_TEXT.split())

# A token made of letters, with inner hyphens (Wi-Fi): a name as a reader spots it.
# Tokens with digits, dots, slashes or underscores are code-like (see grounding).
_LETTERS = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*")
_LOWER_PARTS = re.compile(r"^(?:[a-z]+-)+|(?:-[a-z]+)+$")
_OPENERS = "\"'“‘([{<*"
_QUOTES = "\"'“‘"
_CLOSERS = "\"'”’)]}>*"
_CLAUSE_END = ".!?:;"
_BULLET = re.compile(r"^(?:[-*•]|\d{1,2}[.)])$")
_SPAN = re.compile(r"`[^`\n]*`")
_POSSESSIVE = re.compile(r"['’]s$")
# Short words a title-case sentence leaves in lower case.
_TITLE_SMALL_TEXT = "a an and as at but by for in of on or the to vs via with"
_TITLE_SMALL = frozenset(_TITLE_SMALL_TEXT.split())


def _internal_capitals(word: str) -> bool:
    # GitHub, SQLite, macOS, iPhone: a capital after the first letter, and lower case.
    upper = any(c.isupper() for c in word[1:])
    return upper and any(c.islower() for c in word) and not _acronym(word)


def _capitalised(word: str) -> bool:
    return word[:1].isupper() and word[1:].islower() and len(word) > 1


_ACRONYM = re.compile(r"[A-Z]{2,}s?")  # SQL, and its plural: APIs, IDs, URLs


def _acronym(word: str) -> bool:
    return _ACRONYM.fullmatch(word) is not None


@dataclass(frozen=True, slots=True)
class _Token:
    word: str  # the letters, or "" when the token is not a word of letters
    starts_clause: bool
    ends_run: bool  # punctuation after it: the next word is not part of the same name
    heading: bool = False  # in a Markdown heading or bold span, written in title case


def _tokens(line: str) -> list[_Token]:
    tokens: list[_Token] = []
    clause_start = True
    # "# Create a Unique Index", "**Track Used IDs**:": headings capitalise words.
    heading = line.lstrip().startswith("#")
    bold = False
    for raw in line.split():
        core = raw.lstrip(_OPENERS)
        # A quoted message starts a sentence of its own ("Already up to date").
        opened = raw[:1] in _QUOTES
        if _BULLET.match(raw):
            clause_start = True
            continue
        bold = bold or raw.startswith(("**", "__"))
        stripped = core.rstrip(_CLOSERS + _CLAUSE_END + ",_")
        tail = core[len(stripped) :]
        owner = _POSSESSIVE.sub("", stripped)  # "GitHub's editor": the name ends there
        # "SQLCipher-encrypted", "non-GitHub": the name without its lower-case parts.
        word = _LOWER_PARTS.sub("", owner) if _LETTERS.fullmatch(owner) else ""
        ends = bool(tail) or not word or word != stripped
        tokens.append(_Token(word, clause_start or opened, ends, heading or bold))
        clause_start = any(c in _CLAUSE_END for c in tail)
        bold = bold and not ("**" in tail or "__" in tail)
    return tokens


def _title_case(clause: list[_Token]) -> bool:
    # "How Do I Reset My Branch To The Remote?": common words capitalised past the
    # first. Counting capitals alone would call "use AWS Lambda with Amazon" title case.
    common = [
        t.word
        for t in clause[1:]
        if _capitalised(t.word) and t.word.casefold() in COMMON_WORDS | _TITLE_SMALL
    ]
    return len(common) >= 2


def _clauses(tokens: list[_Token]) -> list[list[_Token]]:
    clauses: list[list[_Token]] = []
    for token in tokens:
        if token.starts_clause or not clauses:
            clauses.append([])
        clauses[-1].append(token)
    return clauses


def _is_name_word(token: _Token, title_case: bool) -> bool:
    word = token.word
    if not word or word.casefold() in COMMON_WORDS:
        return False
    if _internal_capitals(word):
        return True
    title = title_case or token.heading
    return _capitalised(word) and not token.starts_clause and not title


def _joins(token: _Token, *, clause_starts: bool) -> bool:
    # What may stand in a name beside a name word: an acronym (AWS Lambda), or a
    # capitalised first word of a clause (Bitbucket Cloud ...) when `clause_starts`.
    word = token.word
    if not word or word.casefold() in COMMON_WORDS:
        return False
    return _acronym(word) or (clause_starts and _capitalised(word) and token.starts_clause)


def _clause_names(clause: list[_Token], *, clause_starts: bool) -> list[str]:
    title_case = _title_case(clause)
    names: list[str] = []
    run: list[_Token] = []

    def close() -> None:
        while run and not _is_name_word(run[-1], title_case) and not _acronym(run[-1].word):
            run.pop()
        if any(_is_name_word(t, title_case) for t in run):
            names.append(" ".join(t.word for t in run))
        run.clear()

    for token in clause:
        joins = _joins(token, clause_starts=clause_starts) and not title_case and not token.heading
        if _is_name_word(token, title_case) or joins:
            run.append(token)
        else:
            close()
        if token.ends_run:
            close()
    close()
    return names


def product_names(text: str, *, clause_starts: bool = True) -> list[str]:
    """The product and project names in `text`, in order of first appearance, each once.

    What stands between backticks is code, not a name (grounding reads it). With
    `clause_starts` False, a clause's capitalised first word never joins a name: in
    an answer it is most often a verb or an adverb ("Since Git 2.20", "Run GitHub
    Actions"), which its passage need not hold.
    """
    names: dict[str, None] = {}
    for line in _SPAN.sub(" `` ", text).splitlines():
        for clause in _clauses(_tokens(line)):
            for name in _clause_names(clause, clause_starts=clause_starts):
                if name.casefold() not in {n.casefold() for n in names}:
                    names[name] = None
    return list(names)


def words_of(name: str) -> list[str]:
    """The words of a multiword name to judge one by one when the documents do not
    hold the phrase: all but its acronyms and common words."""
    return [w for w in name.split() if not _acronym(w) and w.casefold() not in COMMON_WORDS]


def _needle(name: str) -> re.Pattern[str]:
    body = r"[\s-]+".join(re.escape(word) for word in name.split())
    return re.compile(r"(?<![A-Za-z0-9])" + body + r"(?![A-Za-z])", re.IGNORECASE)


def holds(text: str, name: str) -> bool:
    """Whether `text` names `name`: any case, a space or hyphen between its words,
    digits or punctuation after it but no letter."""
    return _needle(name).search(text) is not None


def held(text: str, name: str) -> bool:
    """Whether `text` holds the name as a phrase, or else every word of it that counts."""
    if holds(text, name):
        return True
    parts = words_of(name)
    return len(name.split()) > 1 and bool(parts) and all(holds(text, w) for w in parts)
