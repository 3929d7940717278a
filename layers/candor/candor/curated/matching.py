"""When a visitor's question asks what a curated question asks.

A curated answer is served with no model call and no check of its text against
any passage, so the rule errs towards the graph: a near miss (same topic, another
question; an option's case flipped; another version) must never be served. A
visitor's question matches a curated one when all three hold:

1. The same exact names. Code-like names (`-d`, `--depth`, `HEAD~2`, `v1.0`,
   `gc.auto`, `.import`, `json_extract()`) and numbers are compared as written, case
   kept: `-d` is not `-D`, `HEAD~2` is not `HEAD~3`, `Git 2.0` is not the question
   that named no version. They are what a visitor cannot paraphrase.
2. The same meaning: the cosine of the two questions' embeddings is at least the
   rule's threshold, chosen per embedder on data/eval/curated (`candor answers
   measure`).
3. Nothing new asked: every word of the visitor's question that carries content
   is said by the curated question or its answer (the same stem), is a near synonym
   of a word there (the cosine of the two words' embeddings is at least the rule's
   `synonym`), or only frames a question ("explain", "what happens", "the way to").
   "How do I push the annotated tag I created with git tag -a?" shares every name
   and most words with "How do I create an annotated tag with git tag -a?" (cosine
   0.93 with the local embedder) but asks about pushing, which the owner's answer
   never mentions.

Embeddings differ between models, so a rule is measured for one: the local model's
is shipped; with another embedder CANDOR_CURATED_THRESHOLD must be set (measure it
on your own set), and until then curated answers are kept but never served.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import snowballstemmer

from candor.ports import Embedder
from candor.text import STOPWORDS


@dataclass(frozen=True, slots=True)
class MatchRule:
    """The two similarities a match needs, for one embedder."""

    threshold: float  # the two questions' cosine
    synonym: float  # a new word's cosine with its nearest word of the curated text


# Chosen on data/eval/curated/git-curated-answers.jsonl (the dev set: 34 curated
# answers, 102 paraphrases, 102 near misses) as the lowest threshold that serves no
# near miss; docs/curated-answers.md gives the sweep and the validation set's figures.
# Keyed by the start of the embedder's name (the converted file's name adds a digest).
MEASURED_RULES: dict[str, MatchRule] = {
    "all-MiniLM-L6-v2": MatchRule(threshold=0.82, synonym=0.55),
}

# Bounds on what one match embeds (candor.graph.limits counts them for the budget):
# the visitor's new words past these are not looked at, and the match fails, which
# errs towards the graph; the curated words past them are not synonym candidates.
MAX_NEW_WORDS = 12
MAX_CURATED_WORDS = 48
WORD_CHARS = 32


def measured_rule(embedder: str) -> MatchRule | None:
    return next((rule for name, rule in MEASURED_RULES.items() if embedder.startswith(name)), None)


# -- exact names ------------------------------------------------------------------

# What surrounds a word without being part of it.
_EDGES = "?!,;:()[]{}\"'`“”‘’<>«»"
_CAMEL = re.compile(r"[a-z][A-Z]")
_HYPHENATED = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)+")
_CALLED = re.compile(r"[A-Za-z_][\w.]*\(\)")


def _word(raw: str) -> str:
    # A sentence's full stop is not part of the name before it ("--depth 1.").
    return raw.strip(_EDGES).rstrip(".").strip(_EDGES)


def is_name(word: str) -> bool:
    """A code-like name or a number: what a paraphrase keeps as it is.

    The answer cache's rule (candor.guards.normalise) with two more: a word of letters
    is a plain word, unless it is camelCase; and a hyphenated word of letters
    ("remote-tracking", "read-only") is a plain word here too, since a paraphrase may
    say it otherwise. Anything else (an option, a number, a version, a path, a setting,
    a dot-command) is a name.
    """
    letters = word.replace("'", "").replace("’", "")
    if letters.isalpha():
        return bool(_CAMEL.search(letters))
    return bool(letters) and not _HYPHENATED.fullmatch(letters)


def exact_names(text: str) -> frozenset[str]:
    """The code-like names and numbers of `text`, as written (case kept)."""
    names = set()
    for raw in text.split():
        # `json_extract()` is the name with its parentheses, in quotes or not.
        calls = [m.group(0) for m in _CALLED.finditer(raw)]
        word = _word(raw)
        if calls:
            names.update(calls)
        elif word and is_name(word):
            names.add(word)
    return frozenset(names)


# -- words that carry content --------------------------------------------------------

# English function words: they change no question's subject. "why", "where" and
# "who" are left out on purpose: a question that asks why something happens is
# another question than one that asks what it does.
_FUNCTION_TEXT = """
    about above after again against all also am among an any anybody anyone anything
    around because been before being below between both cannot could doing down during
    each either else even ever every everything few further hence her here hers herself
    him himself his how however i'd i'm i've itself just let lets like me mine more much
    myself neither nor now off once one ones only onto other otherwise ours ourselves out
    over own per please same she should since so some somebody someone something still
    stuff such them themselves thing things though through thus till too under unless
    until up upon us very via whatever whenever whether while within without yet yours
    yourself
"""
FUNCTION_WORDS = (STOPWORDS | frozenset(_FUNCTION_TEXT.split())) - {"why", "where", "who"}
# Words that frame what is asked without changing it: "what happens when I run X",
# "explain X", "what's the way to", "what is X for", "the -u flag".
_FRAMING_TEXT = """
    actually command commands describe display displays displayed effect effects exactly
    explain explained explanation get gets getting give gives got happen happened happens
    help know make makes mean meaning means need needs option options output outputs
    print prints printed purpose result results run running runs say says see show showing
    shown shows tell tells use used uses using want wants way ways wonder work works flag
    flags
"""
FRAMING_WORDS = frozenset(_FRAMING_TEXT.split())
_LETTERS = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*")
_CONTRACTION = re.compile(r"['’](?:s|re|ve|ll|d|m|t)$", re.IGNORECASE)


@lru_cache(maxsize=1)
def _stemmer() -> snowballstemmer.stemmer:
    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=8192)
def stem(word: str) -> str:
    stemmed: str = _stemmer().stemWord(word)
    return stemmed


def content_words(text: str) -> list[str]:
    """The lower-cased words of `text` that carry content, in order, each once: not
    names (rule 1 compares those), function words or framing words."""
    found: dict[str, None] = {}
    for raw in text.split():
        word = _word(raw)
        if not word or is_name(word):
            continue
        for part in _LETTERS.findall(_CONTRACTION.sub("", word)):
            lower = part.lower()
            if lower not in FUNCTION_WORDS and lower not in FRAMING_WORDS:
                found[lower] = None
    return list(found)


def new_words(visitor: str, curated: str) -> list[str]:
    """The visitor's content words whose stem the curated text (question and answer)
    never uses."""
    said = {stem(word) for word in content_words(curated)}
    return [word for word in content_words(visitor) if stem(word) not in said]


# -- the rule -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Judgement:
    """What the rule found for one visitor question and one curated answer."""

    similarity: float
    same_names: bool
    new: tuple[str, ...] = ()  # content words the curated text does not use
    unexplained: tuple[str, ...] = ()  # of those, the ones no near synonym accounts for
    checked_words: bool = False  # the synonym step ran
    names: tuple[tuple[str, ...], tuple[str, ...]] = field(default=((), ()))

    def served(self, rule: MatchRule) -> bool:
        return (
            self.same_names
            and self.similarity >= rule.threshold
            and (not self.new or (self.checked_words and not self.unexplained))
        )


def judge(
    visitor: str,
    question: str,
    answer: str,
    similarity: float,
    rule: MatchRule,
    embedder: Embedder,
) -> Judgement:
    """Apply the rule to one candidate whose questions' cosine is `similarity`.

    Embeds words only when rules 1 and 2 pass and the visitor adds content words:
    those and the curated text's, in one call (at most MAX_NEW_WORDS + MAX_CURATED_WORDS
    texts of WORD_CHARS characters).
    """
    visitor_names, curated_names = exact_names(visitor), exact_names(question)
    same = visitor_names == curated_names
    names = (tuple(sorted(visitor_names)), tuple(sorted(curated_names)))
    curated_text = f"{question}\n{answer}"
    new = tuple(new_words(visitor, curated_text))
    if not same or similarity < rule.threshold or not new:
        return Judgement(similarity, same, new, new, names=names)
    if len(new) > MAX_NEW_WORDS:
        return Judgement(similarity, same, new, new, names=names)
    candidates = content_words(curated_text)[:MAX_CURATED_WORDS]
    unexplained = unexplained_words(new, candidates, embedder, rule.synonym)
    return Judgement(similarity, same, new, tuple(unexplained), True, names)


def unexplained_words(
    new: Sequence[str], candidates: Sequence[str], embedder: Embedder, synonym: float
) -> list[str]:
    """The words of `new` with no word of `candidates` at least `synonym` similar."""
    if not candidates:
        return list(new)
    vectors = embedder.embed([w[:WORD_CHARS] for w in (*new, *candidates)])
    ours, theirs = vectors[: len(new)], vectors[len(new) :]
    nearest = np.max(ours @ theirs.T, axis=1)
    return [word for word, best in zip(new, nearest, strict=True) if float(best) < synonym]
