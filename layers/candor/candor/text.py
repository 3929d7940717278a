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
