"""What the screening classifier reads of a message: hashed words, word pairs,
character n-grams and a few signs of shape (length, a question mark, code).

The features come from the text alone, not from the embedder: the same trained
weights serve every embedder candor can run with (the local MiniLM, OpenAI's
1536 dimensions, the hashing embedder of the tests), screening costs no
embedding call (no money, no round trip on Lambda), and the model file is
rebuilt offline with no embedder at all. Character n-grams carry what a short
message has little of: "idiot" and "idiotic", "thx" and "thanks" share them.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
import zlib
from collections.abc import Iterator
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from candor.graph import smalltalk

# Slots of the hashed feature vector. The examples hold about 18,000 features,
# which share 10,935 of these slots: signed hashing makes the collisions cancel on
# average, and the weights file stays under 250 KB.
DIMENSIONS = 1 << 14
# Bumped whenever the features change: weights trained on others no longer load.
VERSION = 1
CHAR_NGRAMS = (2, 3, 4)
# Each group is scaled to unit length, then weighted: a long message has many
# n-grams, and without this its words would count for little.
WEIGHTS = {"word": 1.0, "char": 1.0, "shape": 1.0}
# Past this many characters the rest of a message adds nothing a screen needs,
# and hashing it would cost time for a pasted log of any length.
MAX_CHARS = 600

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
# Signs of pasted code or output: code fences, tracebacks, braces, semicolons at
# a line's end, an indented line.
_CODE = re.compile(
    r"```|Traceback|\w+(?:Error|Exception)\b|\bat \S+:\d+|#!/|[{};]\s*$|\n[ \t]+\S",
    re.MULTILINE,
)
# Words that insult when aimed at someone, in English and French. The examples
# cannot hold every insult; this list carries the classifier's weight for one it
# has never seen ("imbecile", "abruti"), and a message that holds one is never
# cleared without the model (candor.screening.policy). Words about abuse
# ("abusive", "insult", "attack", "kill") are not insults: they are not here.
_INSULT_TEXT = """
    idiot idiots idiotic moron morons moronic stupid stupidest dumb dumber dumbest dumbass
    imbecile imbeciles retard retarded useless worthless pathetic loser losers clown clowns
    clueless braindead brainless halfwit incompetent scum scumbag scumbags jerk asshole
    bastard bitch dick fuck fucking fucked shit shitty crap crappy suck sucks stfu
    piss pissed disgust disgusting ignorant
    imbécile imbéciles abruti abrutis crétin crétins débile débiles connard connards
    incapables stupide stupides idiote idiotes
"""
INSULTS = frozenset(_INSULT_TEXT.split())
# Too common in technical questions to count: garbage (collection), trash, junk
# (mail), nul (the NUL byte). Phrases: threats, harm aimed at the reader ("I will
# hurt you", "I know where you live"; "kill them" is as often about processes),
# and insults made of plain words.
_HOSTILE = re.compile(
    r"\b(?:kill|hurt|destroy|smash|beat up|murder|stab|shoot|come for)\s+"
    r"(?:\w+\s+){0,2}?(?:you|yourself|u)\b"
    r"|\b(?:hurt|beat up|stab|shoot|murder)\s+(?:\w+\s+){0,2}?(?:them|him|her|someone|people)\b"
    r"|where you live|watch your back|regret (?:this|it)\b|\bgo die\b|\bdie,? bot\b"
    r"|go to hell|get bent|get lost|shut (?:up|your mouth)|piss off|screw you|drop dead|bite me"
    r"|you(?:'re| are) a (?:joke|disgrace)"
    r"|waste of (?:space|electricity|oxygen)|piece of (?:crap|shit|garbage|junk|trash)"
    r"|ferme[- ]la|ta gueule|va te faire|\bt'es (?:\w+ )?nule?s?\b",
)
# Words that aim an insult at the reader ("you idiot", "stupid bot").
_ADDRESSED_TEXT = "you you're youre your u bot assistant tu t'es es toi"
_ADDRESSED = frozenset(_ADDRESSED_TEXT.split())
_QUESTION_TEXT = """
    what how why when where which who whom whose is are can could does do did should would
    will may comment pourquoi quand quel quelle quels quelles où est
"""
_QUESTION_WORDS = frozenset(_QUESTION_TEXT.split())


def normalised(message: str) -> str:
    """The message as the features see it: NFKC, case folded, curly quotes made plain."""
    text = unicodedata.normalize("NFKC", message[:MAX_CHARS]).casefold()
    return text.replace("’", "'").replace("‘", "'")


def _length_bucket(count: int) -> str:
    for bound, name in ((1, "1"), (3, "2-3"), (6, "4-6"), (12, "7-12"), (25, "13-25")):
        if count <= bound:
            return name
    return "26+"


def _features(message: str) -> Iterator[tuple[str, str]]:
    """(group, feature) pairs; a feature may repeat (counted each time)."""
    text = normalised(message)
    words = _WORD.findall(text)
    for word in words:
        yield "word", "w:" + word
    for first, second in itertools.pairwise(words):
        yield "word", f"b:{first} {second}"
    if words:
        yield "word", "first:" + words[0]
        yield "word", "last:" + words[-1]
    flat = " " + " ".join(text.split()) + " "
    for n in CHAR_NGRAMS:
        for i in range(len(flat) - n + 1):
            yield "char", f"c{n}:{flat[i : i + n]}"
    yield "shape", "len:" + _length_bucket(len(words))
    if "?" in text:
        yield "shape", "has:question_mark"
    if "\n" in text.strip():
        yield "shape", "has:newline"
    if _CODE.search(message[:MAX_CHARS]):
        yield "shape", "has:code"
    if words and words[0] in _QUESTION_WORDS:
        yield "shape", "starts:question_word"
    if smalltalk.is_courtesy(message):
        yield "shape", "is:courtesy"
    if not words:
        yield "shape", "no:words"
    if _insults(text):
        yield "shape", "lex:insult"
        if _ADDRESSED.intersection(words):
            yield "shape", "lex:insult_addressed"
    if _HOSTILE.search(text):
        yield "shape", "lex:hostile"


def _insults(text: str) -> bool:
    # Split at apostrophes too, as French elides ("d'abruti", "d'incapables"), and
    # read hyphenated words joined as well ("brain-dead").
    parts = re.findall(r"[^\W_]+", text)
    joined = [w.replace("-", "") for w in re.findall(r"[^\W_]+(?:-[^\W_]+)+", text)]
    return not INSULTS.isdisjoint(parts + joined)


def offensive(message: str) -> bool:
    """Whether the message holds an insult or a hostile phrase of the lists above."""
    text = normalised(message)
    return _insults(text) or bool(_HOSTILE.search(text))


@lru_cache(maxsize=1 << 16)
def _slot(feature: str) -> tuple[int, float]:
    # crc32, not hash(): hash() is salted per process, and the weights were
    # trained in another one. The top bit signs the value, so that collisions
    # cancel on average instead of adding up.
    value = zlib.crc32(feature.encode("utf-8"))
    return value % DIMENSIONS, -1.0 if value >> 31 else 1.0


def vector(message: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """The message's features as sparse (slots, values), each group of unit length."""
    groups: dict[str, dict[int, float]] = {name: {} for name in WEIGHTS}
    for group, feature in _features(message):
        slot, sign = _slot(feature)
        values = groups[group]
        values[slot] = values.get(slot, 0.0) + sign
    slots: dict[int, float] = {}
    for group, values in groups.items():
        norm = float(np.sqrt(sum(v * v for v in values.values())))
        if not norm:
            continue
        for slot, value in values.items():
            slots[slot] = slots.get(slot, 0.0) + WEIGHTS[group] * value / norm
    index = np.fromiter(slots.keys(), dtype=np.int64, count=len(slots))
    weights = np.fromiter(slots.values(), dtype=np.float32, count=len(slots))
    return index, weights


def matrix(messages: list[str]) -> npt.NDArray[np.float32]:
    """Dense rows of features, one per message (for training and batch scoring)."""
    rows = np.zeros((len(messages), DIMENSIONS), dtype=np.float32)
    for row, message in enumerate(messages):
        index, values = vector(message)
        np.add.at(rows[row], index, values)
    return rows
