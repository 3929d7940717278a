"""Text rules shared by everything that reads words: one home, so that they agree.

The local index (FTS5), the sparse vectors of a Pinecone index, the citation check
and the hashing embedder all split text into words and skip the same common ones.
Keeping those rules here means that BM25 locally and on Pinecone search by the same
terms, and that a question's words count the same way wherever they are counted.
"""

from __future__ import annotations

import re

# Runs of letters and digits: the boundaries FTS5's unicode61 tokenizer uses.
WORD = re.compile(r"[^\W_]+")
# An identifier kept whole (`gc.auto`, `force-with-lease`, `sqlite_misuse`): the
# citation check compares an answer's words with a passage's, and splitting
# identifiers would let their common parts ("auto", "with") match anything.
IDENTIFIER = re.compile(r"[a-z0-9][a-z0-9_.\-]*[a-z0-9]|[a-z0-9]")

# Words too common to search by. Dropping them keeps an OR query from matching
# nearly every chunk, which is both slower and noisier. Short on purpose: words
# such as "most", "up" or "before" carry meaning in a question ("my most recent
# commit", "clean up"); adding them (and 28 others) cost the dev set's keyword
# ranking Recall@5 0.714 -> 0.679 and MRR 0.575 -> 0.552.
_STOPWORD_TEXT = """
    a an and are as at be but by can could did do does for from had has have how i if
    in into is it its me my no not of on or our should so than that the their them then
    there these this those to was we were what when where which who why will with would
    you your
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
# The citation check also skips words that every passage has plenty of: there they
# are not evidence that an answer came from one passage rather than another.
_COMMON_TEXT = """
    about after all also any been before being done each just may might more most must
    only other over some such they too under up use used uses using while yes
"""
ATTRIBUTION_STOPWORDS = STOPWORDS | frozenset(_COMMON_TEXT.split())

MAX_QUERY_TERMS = 64

# How much a match in each field of a chunk counts in BM25, title, heading (the
# section path) and text, locally (FTS5's column weights) and in the sparse
# vectors: a title or heading match says more about a chunk than one word in its
# body; modest, because every chunk of a page shares its title.
FIELD_WEIGHTS: tuple[float, float, float] = (2.0, 1.5, 1.0)


def words(text: str) -> list[str]:
    """The lower-cased words of `text`, in order."""
    return WORD.findall(text.lower())


def token_parts(text: str) -> list[list[str]]:
    """Each whitespace-separated token of `text` as its lower-cased words.

    `--force-with-lease` is one token of three parts; punctuation alone gives none.
    """
    return [parts for token in text.lower().split() if (parts := WORD.findall(token))]


def phrase(parts: list[str]) -> str:
    """The parts of one token as a phrase; it holds a space, so it never equals a word."""
    return " ".join(parts)


def query_terms(text: str) -> list[str]:
    """The distinct terms to search free user text by, in order: words, and phrases.

    A token that punctuation splits into parts (`rerere.enabled`) also gives the
    phrase of its parts, which only the chunks naming that exact identifier have,
    and which, being rare, outweighs its common parts. Stopwords are dropped, unless
    the text has nothing else: "what is it" still deserves an answer.
    """
    terms: dict[str, None] = {}  # an ordered set: the same text, the same query
    stopwords: dict[str, None] = {}
    for parts in token_parts(text):
        if len(parts) > 1:
            terms[phrase(parts)] = None
        for part in parts:
            (stopwords if part in STOPWORDS else terms)[part] = None
    return list(terms or stopwords)[:MAX_QUERY_TERMS]


def content_words(text: str) -> set[str]:
    """Lower-cased words that carry meaning, for the citation check: not stopwords
    (ATTRIBUTION_STOPWORDS), and 3+ characters or a number. Identifiers stay whole.
    """
    return {
        word
        for word in IDENTIFIER.findall(text.casefold())
        if word not in ATTRIBUTION_STOPWORDS and (len(word) >= 3 or any(c.isdigit() for c in word))
    }


# -- answers that talk about their sources ---------------------------------------------
# A visitor asked a question, not for a reading of candor's prompt: an answer that
# names a passage ("The passage states ...", "<passage 1>", "excerpt 2 says") or
# pastes candor's own instructions does not read as an answer. The eval counts such
# answers (`meta_talk`); the answer clean-up removes what it safely can
# (`without_meta_opening`).
_SOURCE = r"(?:passage|excerpt|document|source|snippet|context|text)s?"
_META = re.compile(
    r"</?\s*(?:passage|excerpt|document)s?\b[^<>\n]{0,12}>"  # a tag: <passage 1>
    rf"|\b(?:passage|excerpt|snippet)s?\s*\[?\d{{1,2}}\]?"  # by number: passage 2
    rf"|\b(?:the|this|these|that|each|both)\s+(?:provided\s+|given\s+)?{_SOURCE}\s+"
    r"(?:\[?\d{1,2}\]?\s+)?(?:state|say|mention|describe|explain|provide|indicate|show|note|"
    r"suggest|specif|contain|refer|discuss|do(?:es)?\s+not)\w*"  # The passage states
    rf"|\baccording\s+to\s+(?:the\s+)?(?:provided\s+|given\s+)?(?:{_SOURCE}|\[\d{{1,2}}\])"
    rf"|\b(?:in|from)\s+the\s+(?:provided\s+|given\s+)?(?:passage|excerpt|snippet|context)s?\b"
    rf"|\bbased\s+on\s+the\s+(?:provided\s+|given\s+)?{_SOURCE}",
    re.IGNORECASE,
)
# What an answer's sentence may open with that only talks about the sources: dropped,
# and the rest of the sentence kept ("According to [1], gc.auto ..." -> "gc.auto ...").
_META_OPENING = re.compile(
    r"^\s*(?:"
    rf"(?:according\s+to|based\s+on|as\s+(?:stated|described|mentioned)\s+in)\s+(?:the\s+)?"
    rf"(?:provided\s+|given\s+)?(?:{_SOURCE}|documentation)?\s*(?:\(?\[?\d{{1,2}}\]?\)?)?\s*,\s*"
    rf"|(?:the|this)\s+(?:provided\s+|given\s+)?{_SOURCE}\s*(?:\[?\d{{1,2}}\]?\s*)?"
    r"(?:in\s+<\s*passage\s+\d{1,2}\s*>\s*)?"
    r"(?:states?|says?|mentions?|explains?|notes?|describes?|shows?|indicates?|suggests?)"
    r"(?:\s+that)?\s*[:,]?\s+"
    rf"|in\s+(?:the\s+)?(?:provided\s+|given\s+)?{_SOURCE}\s*(?:\[?\d{{1,2}}\]?)?\s*,\s*"
    r")",
    re.IGNORECASE,
)
_PLAIN_WORD = re.compile(r"[a-z]+(?![\w.\-(`])")
# Instructions shorter than this are not counted as pasted: a short phrase is chance.
_MIN_PASTED_CHARS = 30


def meta_talk(answer: str, instructions: str = "") -> list[str]:
    """What in `answer` talks about its sources or pastes `instructions`, each once."""
    found = [m.group(0) for m in _META.finditer(answer)]
    if instructions:
        folded = " ".join(instructions.casefold().split())
        for sentence in re.split(r"(?<=[.!?])\s+|\n+", answer):
            plain = " ".join(re.sub(r"\[\d{1,2}\]", " ", sentence).casefold().split())
            plain = plain.strip(" .,;:")
            if len(plain) >= _MIN_PASTED_CHARS and plain in folded:
                found.append(sentence.strip())
    return list(dict.fromkeys(found))


def without_meta_opening(sentence: str) -> str:
    """The sentence without an opening that only talks about its sources.

    The rest begins with a capital when its first word is a plain lower-case word
    ("that the default ..." -> "The default ..."); an identifier (`gc.auto`, a
    backticked command, --force) keeps its case.
    """
    match = _META_OPENING.match(sentence)
    if match is None or match.end() == len(sentence):
        return sentence
    rest = sentence[match.end() :]
    if _PLAIN_WORD.match(rest):
        rest = rest[0].upper() + rest[1:]
    lead = sentence[: len(sentence) - len(sentence.lstrip())]
    return lead + rest
